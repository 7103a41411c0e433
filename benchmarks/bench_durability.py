"""Benchmark: durable recording against the disk's limit.

    .venv/bin/python benchmarks/bench_durability.py [--records 10000] [--postgres URL]

For each backend (SQLite file; PostgreSQL when --postgres or LEDGER_TEST_POSTGRES_URL
names a server), in the same run:

(a) recording N published releases one by one (one transaction each) against 20 caps
    through `operations.record` (validation, the budget check, the audit chain,
    running totals, accounting rows), with the ledger's default durability
    (SQLite WAL + synchronous=FULL; PostgreSQL synchronous_commit=on);
(b) the physical limit: a bare loop inserting one row of the same size and
    committing, N times, with the same durability settings on the same backend;
(c) the same N releases recorded from one file: one commit;
(d) the pipeline case: one `privacy-ledger record` process per release, for
    --processes releases (default 50: a process costs its start-up, see
    bench_startup.py), beside the bare loop's time for as many commits; (d') as many
    again from one pipeline process through the Python API (`ledger.api.open(url).record(path)`),
    which pays the imports once.

(e) --planned releases recorded one by one, none published (planned: the default status, a
    reservation every cap decides as it decides a published release), beside (b).

--planned-vs-published N: instead, N planned and N published releases (the same ones), each
one by one into a fresh ledger of its own by a process of its own (the accountants' memos are
per process), alternately (a planned record, then a published one), so both meet the same
load: the medians per record, wall and CPU, and their ratio (target: planned within 1.2x of
published).
(f) the very statements (a) executed, captured and replayed by the raw driver (sqlite3; psycopg,
    with their parameters) on a copy of the same fresh ledger, one transaction per release, same durability: the disk's limit
    for *this* transaction (a release row, its accounting and read rows, the audit event, the
    running totals and states, the stamps: more pages per commit than (b)'s one row).

Target: (a) within 1.5x of (b). Each figure is printed beside its baseline, with the
ratio and the load average (the machine is shared).

--profile N: instead, N records of (a) into a fresh ledger (after 200 to warm the caches) under
cProfile, on SQLite or (with --postgres) PostgreSQL: where the time per record goes.

(a) is also run, in the same run and right after, by another revision's code (--baseline REF,
default: the merge base with main; --no-baseline: not), in a process of its own with REF's
`ledger` package first on its path, into a fresh ledger of its own on the same backend. Per
record, the wall time and the thread's CPU time are kept: medians are printed (the CPU time
is the Python's work per record, the part of (a) over (f) that the disk does not explain; on a
shared machine it is also the steadier figure).

    .venv/bin/python benchmarks/bench_durability.py --records 10000 --processes 50
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
if os.environ.get("LEDGER_BENCH_CODE"):  # a baseline run: that revision's `ledger` package first
    sys.path.insert(0, os.environ["LEDGER_BENCH_CODE"])

from bench_scale import dataset_document, release_entry  # noqa: E402

if os.environ.get("LEDGER_BENCH_CODE"):  # (bench_scale puts this checkout first on the path again)
    sys.path.insert(0, os.environ["LEDGER_BENCH_CODE"])

from ledger.operations import transactions as operations  # noqa: E402
from ledger.store import cap_writes, dataset_writes, engines, schema_migrations, session_state, sessions
from ledger.input.datasets import build_caps, build_dataset  # noqa: E402
from ledger.input.documents import Document
from ledger.input.releases import build_releases
from ledger.store import identity  # noqa: E402

ACTOR = identity.os_user().name  # who a `privacy-ledger` process is, so its first admin (fresh_ledger)
PAYLOAD = "x" * 700  # about one release event's canonical JSON


def fresh_ledger(url: str) -> object:
    global ACTOR
    engine = engines.make_engine(url)
    schema_migrations.ensure_schema(engine)
    ACTOR = identity.authenticated(engine).name  # the OS user on SQLite, the database login on PostgreSQL
    # published by their recorder, one by one: the dataset waives separation of duties
    document = Document("bench.dataset.json", {**dataset_document(random.Random(13)), "self_approval": True})
    dataset, errors = build_dataset(document)
    caps, errors = build_caps(document, dataset)
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, ACTOR)
        for cap in caps:
            cap_writes.set_cap(session, cap, ACTOR)
    return engine


def builder(entries):
    def build(snapshot):
        return build_releases(Document("bench.json", {"dataset": "bench", "releases": entries}), snapshot,
                              recorded_by="bench", recorded_at=session_state.now())
    # the ids the file declares, as `release_builder` gives them (read with the write lock)
    build.release_ids = tuple(entry["id"] for entry in entries)
    return build


def record_one_by_one(engine, n: int, prefix: str = "one", published: bool = True) -> float:
    """n releases, one transaction each. Published releases (what a pipeline records as it
    publishes): every cap at a delta is decided by its filters (the adaptive case, docs/explanation/accounting.md).
    Planned ones, none published: reservations, every cap decided by the same filters."""
    rng = random.Random(5)
    entries = [release_entry(rng, f"{prefix}{k:06d}") for k in range(n)]
    if published:
        for entry in entries:
            entry.update(status="published", published_at="2026-01-01T00:00:00Z")
    start = time.perf_counter()
    for entry in entries:
        operations.record(engine, builder([entry]), ACTOR)
    return time.perf_counter() - start


def record_each_timed(engine, n: int, prefix: str = "one") -> tuple[list[float], list[float]]:
    """(a) as `record_one_by_one` (the same releases), with each record's wall time and the
    thread's CPU time, in seconds."""
    rng = random.Random(5)
    entries = [release_entry(rng, f"{prefix}{k:06d}") for k in range(n)]
    for entry in entries:
        entry.update(status="published", published_at="2026-01-01T00:00:00Z")
    walls, cpus = [], []
    for entry in entries:
        wall, cpu = time.perf_counter(), time.thread_time()
        operations.record(engine, builder([entry]), ACTOR)
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return walls, cpus


def baseline_run(ref: str, backend: str, n: int) -> dict:
    """(a) by REF's code, in a process of its own (`--only-a`), into a fresh ledger on `backend`
    ("sqlite" or a PostgreSQL URL): {"wall": [...], "cpu": [...]} per record, in seconds."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as directory:
        code = Path(directory) / "code"  # REF's package, extracted here (not into the shared cache)
        code.mkdir()
        archive = subprocess.run(["git", "-C", str(root), "archive", ref, "ledger", "reports", "schemas"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
        for data in ("reports", "schemas"):
            shutil.copytree(code / data, code / "ledger" / data, dirs_exist_ok=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "ledger")], check=True)
        out = Path(directory) / "times.json"
        subprocess.run([sys.executable, __file__, "--only-a", backend, "--records", str(n), "--times", str(out)],
                       check=True, env={**os.environ, "LEDGER_BENCH_CODE": str(code)},
                       cwd=Path(__file__).resolve().parents[1])
        return json.loads(out.read_text())


def only_a(backend: str, n: int, out: Path) -> None:
    """The baseline process: (a) into a fresh ledger, per-record times written to `out`."""
    drop = None
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as directory:
        if backend == "sqlite":
            url = f"sqlite:///{directory}/ledger.db"
        else:
            url, drop = postgres_database(backend)
        try:
            engine = fresh_ledger(url)
            walls, cpus = record_each_timed(engine, n)
            engine.dispose()
        finally:
            if drop is not None:
                drop()
    out.write_text(json.dumps({"wall": walls, "cpu": cpus, "code": operations.__file__}))


def profile_records(url: str, n: int) -> None:
    """--profile: n records of (a), warm, under cProfile; the recording path's functions by
    cumulative time, per record."""
    import cProfile
    import pstats

    engine = fresh_ledger(url)
    record_each_timed(engine, 200, "warm")
    profiler = cProfile.Profile()
    profiler.enable()
    walls, cpus = record_each_timed(engine, n)
    profiler.disable()
    engine.dispose()
    print(f"{engine.dialect.name}: {n} records under cProfile (its overhead included): median {ms(walls):.2f} ms, "
          f"CPU {ms(cpus):.2f} ms  [{load()}]")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"ledger/|commit|execute", 45)


def bare_each(bare_loop, *args) -> list[float]:
    """(b) with each commit timed (the loop's own per-commit times)."""
    return bare_loop(*args, each=True)


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def planned_case(url: str, n: int) -> tuple[int, float]:
    """n planned releases recorded one by one into a fresh ledger (the declared case)."""
    if not n:
        return 0, 0.0
    engine = fresh_ledger(url)
    try:
        return n, record_one_by_one(engine, n, "plan", published=False)
    finally:
        engine.dispose()


def _recorder(url: str, entries: list[dict], published: bool, channel) -> None:
    """In a process of its own (its own caches: the accountants memoise figures of states, and
    two ledgers fed the same releases in one process would share them): each release recorded
    one by one when the parent says so; its (wall, CPU) seconds sent back."""
    engine = fresh_ledger(url)
    for entry in entries:
        one = dict(entry)
        if published:
            one.update(status="published", published_at="2026-01-01T00:00:00Z")
        channel.recv()
        wall, cpu = time.perf_counter(), time.thread_time()
        operations.record(engine, builder([one]), ACTOR)
        channel.send((time.perf_counter() - wall, time.thread_time() - cpu))
    engine.dispose()
    channel.close()


def planned_vs_published(n: int) -> None:
    """--planned-vs-published: the same n releases recorded one by one as planned into one fresh
    ledger and as published into another, each by a process of its own, alternately (one record
    here, then one there); per-record medians and their ratio."""
    import multiprocessing

    rng = random.Random(5)
    entries = [release_entry(rng, f"one{k:06d}") for k in range(n)]
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as directory:
        channels, processes = {}, []
        for name in ("planned", "published"):
            here, there = context.Pipe()
            process = context.Process(target=_recorder, args=(f"sqlite:///{directory}/{name}.db", entries,
                                                               name == "published", there))
            process.start()
            channels[name] = here
            processes.append(process)
        walls: dict[str, list[float]] = {name: [] for name in channels}
        cpus: dict[str, list[float]] = {name: [] for name in channels}
        before = load()
        for _ in entries:
            for name, channel in channels.items():
                channel.send("go")
                wall, cpu = channel.recv()
                walls[name].append(wall)
                cpus[name].append(cpu)
        for process in processes:
            process.join()
    print(f"SQLite, {n:,} releases one by one against 20 caps, planned and published alternately, each into a "
          f"fresh ledger by a process of its own  [{before} before; {load()} after]")
    for name in channels:
        print(f"  {name:9}: per record median {ms(walls[name]):.2f} ms (mean {sum(walls[name]) / n * 1000:.2f}), "
              f"CPU {ms(cpus[name]):.2f} ms")
    wall = ms(walls["planned"]) / ms(walls["published"])
    cpu = ms(cpus["planned"]) / ms(cpus["published"])
    print(f"  planned / published: {wall:.2f}x wall, {cpu:.2f}x CPU  [target <= 1.2x: "
          f"{'met' if max(wall, cpu) <= 1.2 else 'MISSED'}]")


def record_as_one_file(engine, n: int) -> float:
    rng = random.Random(6)
    entries = [release_entry(rng, f"file{k:06d}") for k in range(n)]
    start = time.perf_counter()
    operations.record(engine, builder(entries), ACTOR)
    return time.perf_counter() - start


def release_files(n: int, directory: Path, name: str) -> list[Path]:
    """n release files of one release each, as a pipeline writes them."""
    rng = random.Random(7)
    paths = []
    for k in range(n):
        entry = release_entry(rng, f"{name}{k:06d}")
        mechanism = ", ".join(f"{key}: {value}" for key, value in entry["mechanism"].items())
        path = directory / f"{name}{k:06d}.yaml"
        path.write_text(f"dataset: bench\nreleases:\n  - {{id: {entry['id']}, reads: [{', '.join(entry['reads'])}], "
                        f"mechanism: {{{mechanism}}}}}\n")
        paths.append(path)
    return paths


def record_by_processes(url: str, n: int, directory: Path) -> float:
    """n releases, each recorded by its own `privacy-ledger record` process (the pipeline case)."""
    paths = release_files(n, directory, "proc")
    root = Path(__file__).resolve().parents[1]
    start = time.perf_counter()
    for path in paths:
        subprocess.run([sys.executable, "-m", "ledger", "--db", url, "record", str(path)],
                       check=True, stdout=subprocess.DEVNULL, cwd=root)
    return time.perf_counter() - start


def record_by_api(url: str, n: int, directory: Path) -> float:
    """The same n releases recorded one call each through the Python API, in this process."""
    from ledger import api

    paths = release_files(n, directory, "api")
    start = time.perf_counter()
    ledger = api.open(url)
    for path in paths:
        ledger.record(path)
    return time.perf_counter() - start


def by_processes(url: str, n: int, directory: Path) -> tuple[float, float]:
    """(d): fresh processes, then (d') the same number through the Python API."""
    if not n:
        return 0.0, 0.0
    return record_by_processes(url, n, directory), record_by_api(url, n, directory)


def bare_sqlite(path: Path, n: int, each: bool = False):
    """(b) on SQLite: the total seconds, or with `each` every commit's."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={engines.sqlite_synchronous()}")
    connection.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, payload TEXT)")
    times = []
    start = time.perf_counter()
    for k in range(n):
        one = time.perf_counter()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO t VALUES (?, ?)", (k, PAYLOAD))
        connection.execute("COMMIT")
        times.append(time.perf_counter() - one)
    elapsed = time.perf_counter() - start
    connection.close()
    return times if each else elapsed


def capture(engine) -> list[list[str]]:
    """Every statement the engine's SQLite connections run, grouped by transaction (started at
    each BEGIN), as SQLite ran it: its trace, with the values written into the text (the
    recording path runs its statements on the driver's cursor, not through SQLAlchemy's
    execution, so SQLite's own trace is what sees them all)."""
    from sqlalchemy import event

    transactions: list[list[str]] = []

    def trace(sql: str) -> None:
        if sql.startswith("BEGIN"):
            transactions.append([])
        elif sql not in ("COMMIT", "ROLLBACK") and transactions:
            transactions[-1].append(sql)

    @event.listens_for(engine, "connect")
    def connect(dbapi_connection, _record):
        dbapi_connection.set_trace_callback(trace)

    return transactions


def replay_sqlite(path: Path, transactions: list[list[str]]) -> float:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={engines.sqlite_synchronous()}")
    start = time.perf_counter()
    for statements in transactions:
        connection.execute("BEGIN IMMEDIATE")
        for sql in statements:
            connection.execute(sql)
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


def capture_postgres(engine) -> list[list[tuple]]:
    """Every statement the engine's psycopg connections run, with its parameters, grouped by
    committed transaction: a cursor class that notes each execute (SQLAlchemy's and the
    recording path's own driver cursors alike), a transaction closed at each commit and dropped
    at a rollback or a connection's reset (reads that wrote nothing)."""
    import psycopg
    from sqlalchemy import event

    transactions: list[list[tuple]] = [[]]

    class Noting(psycopg.Cursor):
        def execute(self, query, params=None, **options):
            transactions[-1].append(("execute", query, params, options))
            return super().execute(query, params, **options)

        def executemany(self, query, params_seq, **options):
            params_seq = list(params_seq)
            transactions[-1].append(("executemany", query, params_seq, options))
            return super().executemany(query, params_seq, **options)

    @event.listens_for(engine, "connect")
    def connect(dbapi_connection, _record):
        dbapi_connection.cursor_factory = Noting

    @event.listens_for(engine, "commit")
    def commit(_connection):
        transactions.append([])

    def discard(*_args):
        transactions[-1].clear()

    event.listen(engine, "rollback", discard)
    event.listen(engine.pool, "reset", discard)
    return transactions


def replay_postgres(url: str, transactions: list[list[tuple]]) -> float:
    """(f) on PostgreSQL: the captured transactions run again by raw psycopg on a copy of the
    fresh ledger, one commit each, same durability."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as connection:
        connection.execute("SET synchronous_commit TO on")
        connection.commit()
        cursor = connection.cursor()
        start = time.perf_counter()
        for statements in transactions:
            for how, query, params, options in statements:
                getattr(cursor, how)(query, params, **options)
            connection.commit()
        return time.perf_counter() - start


def bare_postgres(url: str, n: int, each: bool = False):
    """(b) on PostgreSQL: the total seconds, or with `each` every commit's."""
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as connection:
        connection.execute("SET synchronous_commit TO on")
        connection.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, payload TEXT)")
        connection.commit()
        times = []
        start = time.perf_counter()
        for k in range(n):
            one = time.perf_counter()
            connection.execute("INSERT INTO t VALUES (%s, %s)", (k, PAYLOAD))
            connection.commit()
            times.append(time.perf_counter() - one)
        elapsed = time.perf_counter() - start
        return times if each else elapsed


def postgres_database(base: str, template: bool = False) -> tuple[str, callable]:
    """A new database on `base`'s server, and its drop; `template`: a copy of `base`'s own
    database (no connection to it may be open)."""
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = base.replace("postgresql+psycopg://", "postgresql://").rsplit("/", 1)[0] + "/postgres"
    copy = f' TEMPLATE "{base.rsplit("/", 1)[1]}"' if template else ""
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"{copy}')

    def drop():
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return base.rsplit("/", 1)[0] + "/" + name, drop


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(backend: str, n: int, walls: list[float], cpus: list[float], bare: list[float], batch: float,
           processes: int = 0, by_process: tuple[float, float] = (0.0, 0.0), planned: tuple[int, float] = (0, 0.0),
           replayed: float = 0.0, old: dict | None = None, ref: str = "") -> None:
    one, each, bare_each = sum(walls), ms(walls), ms(bare)
    print(f"{backend}  [{load()}]")
    print(f"  (a) in-process: {n:,} published releases recorded one by one against 20 caps: {one:8.2f} s; "
          f"per record median {each:.2f} ms (mean {one / n * 1000:.2f}), of which CPU {ms(cpus):.2f} ms")
    if old is not None:
        print(f"  (a) by {ref[:12]}'s code, same run, its own fresh ledger: {sum(old['wall']):8.2f} s; per record "
              f"median {ms(old['wall']):.2f} ms (mean {sum(old['wall']) / n * 1000:.2f}), of which CPU "
              f"{ms(old['cpu']):.2f} ms  [this code: {ms(walls) / ms(old['wall']):.2f}x its wall, "
              f"{ms(cpus) / ms(old['cpu']):.2f}x its CPU]")
    print(f"  (b) bare insert-and-commit loop, same durability, {n:,} commits: {sum(bare):8.2f} s; per commit "
          f"median {bare_each:.2f} ms (mean {sum(bare) / n * 1000:.2f})")
    print(f"  ratio (a) / (b), medians: {each / bare_each:.2f}x  [target <= 1.5x]"
          + (f"; {ref[:12]}'s: {ms(old['wall']) / bare_each:.2f}x" if old is not None else ""))
    if replayed:
        print(f"  (f) the same statements as (a), replayed by the raw driver, same durability: {replayed:8.2f} s "
              f"({replayed / n * 1000:.2f} ms each; {replayed / sum(bare):.2f}x the bare loop: this transaction's "
              f"floor; (a) is {one / replayed:.2f}x it)")
    if planned[0]:
        per = planned[1] / planned[0] * 1000
        print(f"  (e) planned releases one by one (reservations), {planned[0]:,}: {per:.2f} ms each; "
              f"{per / bare_each:.2f}x the bare loop; {per / (one / n * 1000):.2f}x (a)'s mean")
    print(f"  (c) the same number of releases from one file (one commit): {batch:8.2f} s "
          f"({batch / n * 1000:.3f} ms each; {batch / sum(bare):.2f}x the bare loop)")
    if processes:
        fresh, handed = by_process
        per = fresh / processes * 1000
        print(f"  (d) pipeline: {processes} releases, one `record` process each: {fresh:8.2f} s ({per:.0f} ms "
              f"each; {per / bare_each:.0f}x the bare loop's {bare_each:.2f} ms per commit: start-up, "
              "bench_startup.py)")
        per = handed / processes * 1000
        print(f"  (d') the same through the Python API in one process: {handed:8.2f} s ({per:.0f} ms each; "
              f"{per / bare_each:.0f}x the bare loop)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=50,
                        help="releases recorded one process each (the pipeline case); 0: none")
    parser.add_argument("--planned", type=int, default=300,
                        help="planned releases recorded one by one after the published ones (declared case)")
    parser.add_argument("--postgres", default=os.environ.get("LEDGER_TEST_POSTGRES_URL"))
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--baseline", default=None, help="git ref whose code runs (a) too (default: merge base "
                                                         "with main)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--profile", type=int, default=0, help="profile N records of (a) instead")
    parser.add_argument("--planned-vs-published", type=int, default=0,
                        help="instead, N planned and N published releases recorded alternately (target 2)")
    parser.add_argument("--only-a", default=None, help=argparse.SUPPRESS)  # (a baseline run: see baseline_run)
    parser.add_argument("--times", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.records
    if args.only_a:
        only_a(args.only_a, n, Path(args.times))
        return
    if args.planned_vs_published:
        planned_vs_published(args.planned_vs_published)
        return
    if args.profile:
        if args.postgres and args.no_sqlite:
            url, drop = postgres_database(args.postgres)
            try:
                profile_records(url, args.profile)
            finally:
                drop()
        else:
            with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as directory:
                profile_records(f"sqlite:///{directory}/ledger.db", args.profile)
        return
    ref = None
    if not args.no_baseline:
        root = Path(__file__).resolve().parents[1]
        ref = args.baseline or subprocess.run(["git", "-C", str(root), "merge-base", "HEAD", "main"], check=True,
                                              capture_output=True, text=True).stdout.strip()
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as directory:
            url = f"sqlite:///{directory}/ledger.db"
            fresh_ledger(url).dispose()  # (every connection closed: the file holds the whole ledger)
            shutil.copyfile(f"{directory}/ledger.db", f"{directory}/replay.db")
            engine = engines.make_engine(url)
            transactions = capture(engine)
            walls, cpus = record_each_timed(engine, n)
            recorded = [t for t in transactions if t]  # (a)'s transactions: one per release
            old = baseline_run(ref, "sqlite", n) if ref else None
            batch = record_as_one_file(engine, n)
            engine.dispose()
            replayed = replay_sqlite(Path(directory) / "replay.db", recorded[:n])
            by_process = by_processes(url, args.processes, Path(directory))
            bare = bare_each(bare_sqlite, Path(directory) / "bare.db", n)
            planned = planned_case(f"sqlite:///{directory}/planned.db", args.planned)
            report(f"SQLite (WAL, synchronous={engines.sqlite_synchronous()})", n, walls, cpus, bare, batch,
                   args.processes, by_process, planned, replayed, old, ref or "")
    if args.postgres:
        url, drop = postgres_database(args.postgres)
        bare_url, drop_bare = postgres_database(args.postgres)
        try:
            fresh_ledger(url).dispose()
            replay_url, drop_replay = postgres_database(url, template=True)
            engine = engines.make_engine(url)
            transactions = capture_postgres(engine)
            walls, cpus = record_each_timed(engine, n)
            recorded = [t for t in transactions if t]
            old = baseline_run(ref, args.postgres, n) if ref else None
            batch = record_as_one_file(engine, n)
            engine.dispose()
            with tempfile.TemporaryDirectory() as directory:
                by_process = by_processes(url, args.processes, Path(directory))
            bare = bare_each(bare_postgres, bare_url, n)
            planned_url, drop_planned = postgres_database(args.postgres)
            try:
                planned = planned_case(planned_url, args.planned)
            finally:
                drop_planned()
            try:
                replayed = replay_postgres(replay_url, recorded[:n])
            finally:
                drop_replay()
            report("PostgreSQL (synchronous_commit=on)", n, walls, cpus, bare, batch, args.processes, by_process,
                   planned, replayed, old, ref or "")
        finally:
            drop()
            drop_bare()


if __name__ == "__main__":
    main()
