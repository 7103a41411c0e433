"""Benchmark: every command on ledgers of 10k, 100k and 1M releases.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 10000,100000,1000000] [--baseline REF]
                                               [--only subset,table] [--build-only] [--cache DIR]

Builds (once, cached under benchmarks/.cache/, git-ignored) SQLite ledgers of
100 variables and 20 caps holding 10k, 100k and 1M releases, each made from
the previous one by recording more: batches of 20,000 releases through the
real recording path (`operations.record`: validation, the budget check against
every cap, the audit chain, running totals), with documents built in code
rather than parsed from YAML. Releases read 1 to 6 variables; pure epsilon
(geometric, Laplace) and zCDP (Gaussian) mechanisms, every one published.

Then runs each command as a fresh process (`privacy-ledger --db ...`) and
prints its wall seconds and peak memory (the child's maximum resident set, by
wait4), and, with --baseline REF (default: the branch's merge base with main),
the same command on REF's code path (REF's `ledger` package extracted under
the cache, run against a copy of the ledger stamped with REF's schema version)
for the sizes up to --baseline-max (default 100,000: the old path needs about
12 KB of memory per release). A command is stopped after --timeout seconds.
Last, the growth order observed per command: the exponent k of (wall - start-up)
~ size^k between consecutive sizes (0: independent of the history; 1: linear).

`--cache DIR` runs on the ledgers in DIR (copies of the shared cache: `record` and a first
open's upgrade write into the ledger they run on). `table --json` prints every release row
(about 4 GB at 1M); its baseline is not run above --light-above (the old path held about
11 GB at 1M).

A ledger built by an earlier version is upgraded in place by its first command
("first open"): at schema 6 the accounting rows gain their accounting events
and lifecycle moments (accounting_migrations.add_event_columns), which that line times.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = ROOT / "benchmarks" / ".cache"
from baseline import baseline_package  # noqa: E402  (REF's code, for the baseline)
PYTHON = sys.executable
VARIABLES = [f"v{k:02d}" for k in range(100)]
EPSILONS = ["0.001", "0.002", "0.0005"]
BATCH = 20_000
SUBSET = ["v03", "v17", "v42", "v58", "v91"]
AS_OF = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())  # --as-of: when the run started (past every release)


def dataset_document(rng: random.Random) -> dict:
    caps = [{"subset": "all", "epsilon": 10**9, "delta": "1e-9"}]
    for k in range(19):  # half in rho, half in epsilon at a delta; large enough never to refuse
        cap = {"name": f"cap{k:02d}", "subset": rng.sample(VARIABLES, rng.randint(1, 4))}
        cap.update({"rho": 10**9} if k % 2 else {"epsilon": 10**9, "delta": "1e-9"})
        caps.append(cap)
    return {"dataset": "bench", "variables": [{"name": v} for v in VARIABLES], "caps": caps}


def release_entry(rng: random.Random, release_id: str) -> dict:
    reads = rng.sample(VARIABLES, rng.randint(1, 6))
    kind = rng.random()
    if kind < 0.45:
        mechanism = {"name": "geometric", "epsilon": rng.choice(EPSILONS)}
    elif kind < 0.9:
        mechanism = {"name": "laplace", "epsilon": rng.choice(EPSILONS)}
    else:
        mechanism = {"name": "gaussian", "sigma": 40, "sensitivity": 1}
    return {"id": release_id, "title": f"Table {release_id}", "reads": reads, "mechanism": mechanism}


def _record_batch(engine, entries: list[dict]) -> None:
    from ledger.operations import transactions as operations
    from ledger.store import session_state
    from ledger.input.documents import Document
    from ledger.input.releases import build_releases

    def build(snapshot):
        return build_releases(Document("bench.json", {"dataset": "bench", "releases": entries}), snapshot,
                              recorded_by="bench", recorded_at=session_state.now())

    operations.record(engine, build, "bench")


def _count(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT count(*) FROM releases").fetchone()[0]


def build(sizes: list[int]) -> dict[int, Path]:
    """The cached ledger of each size, built from the next smaller one when missing."""
    from ledger.store import cap_writes, dataset_writes, engines, schema_migrations, sessions
    from ledger.input.datasets import build_caps, build_dataset
    from ledger.input.documents import Document

    CACHE.mkdir(parents=True, exist_ok=True)
    paths = {}
    previous: Path | None = None
    for size in sorted(sizes):
        path = CACHE / f"ledger-{size}.db"
        paths[size] = path
        if path.exists() and _count(path) >= size:
            previous = path
            continue
        work = path.with_suffix(".building")
        resume = work.exists()  # an interrupted build goes on from what it committed
        url = f"sqlite:///{work}"
        if previous is not None and not resume:
            with sqlite3.connect(previous) as source, sqlite3.connect(work) as target:
                source.backup(target)
        engine = engines.make_engine(url)
        schema_migrations.ensure_schema(engine)
        if previous is None and not resume:
            rng = random.Random(13)
            document = Document("bench.dataset.json", dataset_document(rng))
            dataset, errors = build_dataset(document)
            assert not errors, errors
            caps, errors = build_caps(document, dataset)
            assert not errors, errors
            with sessions.write_session(engine) as session:
                dataset_writes.add_dataset(session, dataset, "bench")
                for cap in caps:
                    cap_writes.set_cap(session, cap, "bench")
        have = _count(work)
        rng = random.Random(1000 + have)
        start = time.perf_counter()
        while have < size:
            count = min(BATCH, size - have)
            _record_batch(engine, [release_entry(rng, f"r{k:07d}") for k in range(have, have + count)])
            have += count
            rate = (have - (_count(previous) if previous else 0)) / (time.perf_counter() - start)
            print(f"  building {size:,}: {have:,} releases ({rate:,.0f}/s)", file=sys.stderr, flush=True)
        engine.dispose()
        with sqlite3.connect(work) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        os.replace(work, path)
        for suffix in ("-wal", "-shm"):
            Path(f"{work}{suffix}").unlink(missing_ok=True)
        previous = path
    return paths


# --------------------------------------------------------------------------
# Running commands
# --------------------------------------------------------------------------


TIMEOUT = 900.0  # seconds a command may take before it is stopped (and shown as a timeout)


def run(argv: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak resident MB, exit code) of one fresh process; exit -9 past TIMEOUT."""
    start = time.perf_counter()
    # a session of its own, so a timeout stops the command and every process it started (the
    # report's workers would otherwise hold its stderr open)
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd,
                               start_new_session=True)

    def stop() -> None:
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass

    timer = threading.Timer(TIMEOUT, stop)
    timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode not in (0, 1):
        print(f"    ! {' '.join(argv[-4:])}: exit {process.returncode}: {stderr.strip()[-300:]}", file=sys.stderr)
    return wall, usage.ru_maxrss / 1024, process.returncode


def plan_file(directory: Path, name: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text("dataset: bench\nreleases:\n"
                    f"  - {{id: {name}, reads: [v03, v17], mechanism: {{name: laplace, epsilon: 0.001}}}}\n")
    return path


def batch_file(directory: Path, name: str, count: int) -> Path:
    rng = random.Random(name)
    path = directory / f"{name}.yaml"
    lines = ["dataset: bench", "releases:"]
    for k in range(count):
        entry = release_entry(rng, f"{name}-{k:04d}")
        mechanism = ", ".join(f"{key}: {value}" for key, value in entry["mechanism"].items())
        lines.append(f"  - {{id: {entry['id']}, reads: [{', '.join(entry['reads'])}], mechanism: {{{mechanism}}}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


def set_checkpoint(path: Path) -> None:
    """The head as the verified checkpoint, as the builder made it (see --help: the incremental
    check is timed on the events appended after it)."""
    with sqlite3.connect(path) as connection:
        seq, digest = connection.execute("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").fetchone()
        connection.execute("INSERT OR REPLACE INTO ledger_meta (key, value) VALUES ('verified_head', ?)",
                           (f"{seq}:{digest}",))


def middle_moment(path: Path) -> str:
    """When the release halfway through the ledger was recorded: a `--since` (the last meeting) and
    an `--as-of` half of the history lies after."""
    with sqlite3.connect(path) as connection:
        (count,) = connection.execute("SELECT count(*) FROM releases").fetchone()
        (moment,) = connection.execute("SELECT recorded_at FROM releases ORDER BY seq LIMIT 1 OFFSET ?",
                                       (count // 2,)).fetchone()
    return moment


def commands(directory: Path, out: Path, label: str, middle: str = AS_OF) -> dict[str, list[str]]:
    stamp = f"{label}-{os.getpid()}-{time.time_ns()}"
    return {
        "first open (schema upgrade, if any)": ["cap", "list"],
        "--help": ["--help"],
        "--version": ["--version"],
        "check": ["check", str(plan_file(directory, f"plan-{stamp}"))],
        "record": ["record", str(plan_file(directory, f"rec-{stamp}"))],
        # writes that recompute from the history: the release just recorded (planned) cancelled, its
        # reservation freed (the lineage rule, the totals and accountant states of its caps); a cap
        # at a delta set (its running total and accountant state)
        "cancel": ["cancel", f"rec-{stamp}", "--reason", "bench"],
        "cap set (at a delta)": ["cap", "set", "v03", "v17", "--name", "bench-set", "--epsilon", "1000000000",
                                 "--delta", "1e-9"],
        "subset": ["subset", *SUBSET],
        "headroom": ["headroom", *SUBSET],
        "table": ["table"],
        "table --json": ["table", "--json"],
        "pairs": ["pairs"],
        "audit verify": ["audit", "verify"],
        "record a file (1,000 releases, one commit)": ["record", str(batch_file(directory, f"batch-{stamp}", 1000))],
        "audit verify --since-checkpoint (1,000 events)": ["audit", "verify", "--since-checkpoint"],
        "report html": ["report", "--format", "html", "--out", str(out)],
        # the ledger as it stood now: every release counted, the same figures
        "cap list --as-of": ["cap", "list", "--as-of", AS_OF],
        "report html --as-of": ["report", "--format", "html", "--out", str(out), "--as-of", AS_OF],
        # every release listed (output the size of the history; memory one page's), and the
        # registry record (figures from the rows, the releases' facts a page at a time)
        "releases": ["releases"],
        "releases --json": ["releases", "--json"],
        "export registry (tier 3)": ["export", "registry", "--tier", "3", "--out", str(out.with_suffix(".yaml"))],
        # the ledger halfway through its history, and the meeting pack of the second half
        "report html --as-of (midway)": ["report", "--format", "html", "--out", str(out), "--as-of", middle],
        "report html --since (midway)": ["report", "--format", "html", "--out", str(out), "--since", middle],
    }


def baseline_copy(path: Path, ref_root: Path) -> Path:
    """A copy of the ledger as REF's code reads it (REF's schema version; tables it does not know dropped),
    one per schema version (a copy another REF's code upgraded is refused by an older REF)."""
    text = next(p for p in (ref_root / "ledger" / "store" / "schema_migrations.py",
                            ref_root / "ledger" / "store" / "database.py", ref_root / "ledger" / "store.py")
                if p.exists()).read_text()  # the baseline commit may predate the store's modules
    version = int(text.split("SCHEMA_VERSION = ", 1)[1].split()[0])
    copy = path.with_name(path.stem + f"-baseline-v{version}.db")
    if copy.exists() and _count(copy) >= _count(path) - 100:
        return copy
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    with sqlite3.connect(copy) as connection:
        connection.execute("UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        known = {line.split('"')[1] for module in (ref_root / "ledger").rglob("*.py")
                 for line in module.read_text().splitlines() if "__tablename__ =" in line}
        for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            if name not in known:
                connection.execute(f'DROP TABLE "{name}"')
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--baseline", default=None, help="git ref of the old code path (default: merge base with main)")
    parser.add_argument("--baseline-max", type=int, default=100_000)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated command names; a name with a parenthesis is chosen by what precedes it (`audit verify --since-checkpoint`, `record a file`)")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--light-above", type=int, default=10**9,
                        help="above this size skip the full `audit verify` and the report (memory on a shared "
                             "machine); the incremental verify is still timed")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds before a command is stopped")
    parser.add_argument("--cache", default=None,
                        help="the directory of the ledgers (default benchmarks/.cache): a copy of the shared cache "
                             "to run on, since `record` and a first open's upgrade write into the ledger")
    args = parser.parse_args()
    if args.cache:
        globals()["CACHE"] = Path(args.cache).resolve()
        import baseline

        baseline.CACHE = CACHE  # (REF's package extracted there too)
    sizes = [int(s) for s in args.sizes.split(",")]
    globals()["TIMEOUT"] = args.timeout
    paths = build(sizes)
    if args.build_only:
        return
    ref_root = None
    if not args.no_baseline:
        ref = args.baseline or subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
                                              check=True, capture_output=True, text=True).stdout.strip()
        ref_root = baseline_package(ref)
    only = set(args.only.split(",")) if args.only else None
    work = CACHE / "runs"
    work.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="")  # (its builder, the operating-system user, is the ledger's admin)
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "ledger")], check=False, capture_output=True)
    print(f"load average before: {os.getloadavg()[0]:.1f}, {os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")
    print(f"{'size':>9}  {'command':<34} {'now: s':>8} {'MB':>7}   {'baseline: s':>11} {'MB':>7}")
    walls: dict[str, dict[int, float]] = {}
    for size in sorted(sizes):
        path = paths[size]
        middle = middle_moment(path)
        new = commands(work, work / f"report-{size}.html", "new", middle)
        old = None
        if ref_root is not None and size <= args.baseline_max:
            old_path = baseline_copy(path, ref_root)
            old = commands(work, work / f"report-{size}-old.html", "old", middle)
            old_env = dict(env, PYTHONPATH=str(ref_root))
            subprocess.run([PYTHON, "-m", "compileall", "-q", str(ref_root / "ledger")], capture_output=True)
        for name, argv in new.items():
            if only and name not in only and name.split(" (")[0] not in only:
                continue
            if size > args.light_above and (name == "audit verify" or name.startswith("report html")):
                continue
            if name.startswith("record a file"):
                set_checkpoint(path)  # the incremental verify below checks what this appends
            wall, mb, code = run([PYTHON, "-m", "ledger", "--db", f"sqlite:///{path}", *argv], env=env, cwd=work)
            if code in (0, 1):
                walls.setdefault(name, {})[size] = wall
            line = f"{size:>9,}  {name:<34} {wall:8.2f} {mb:7.0f}"
            heavy_old = size > args.light_above and name == "table --json"  # (the old path: ~11 GB at 1M)
            if old is not None and name in old and not heavy_old and not name.startswith((
                    "audit verify --since", "first open", "record a file")):
                o_wall, o_mb, o_code = run([PYTHON, "-m", "ledger", "--db", f"sqlite:///{old_path}", *old[name]],
                                           env=old_env, cwd=work)
                line += f"   {o_wall:11.2f} {o_mb:7.0f}"
            print(line + ("" if code == 0 else "   (timeout)" if code == -9 else f"   (exit {code})"), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}, {os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")
    print(growth(walls))


def growth(walls: dict[str, dict[int, float]]) -> str:
    """Per command, the observed growth order between consecutive sizes: the exponent k of
    wall ~ size^k, on the wall time above the start-up (`--help`) of the same size."""
    start = walls.get("--help", {})
    lines = ["growth order (exponent k in wall - start-up ~ size^k, between consecutive sizes):"]
    for name, found in walls.items():
        if name in ("--help", "--version"):
            continue
        sizes = sorted(found)
        steps = []
        for small, large in zip(sizes, sizes[1:]):
            a = max(found[small] - start.get(small, 0.0), 0.05)
            b = max(found[large] - start.get(large, 0.0), 0.05)
            steps.append(f"{small:,}->{large:,}: {math.log(b / a) / math.log(large / small):+.2f}")
        lines.append(f"  {name:<46} {'; '.join(steps)}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
