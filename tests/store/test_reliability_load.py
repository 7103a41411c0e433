"""The ledger under load and faults, on a SQLite file
and on PostgreSQL. Marked `load`: scripts/test runs them in a step of their own.

- 200 `record` processes started at once against a cap that admits 150 of them: every
  process ends recorded (exit 0) or refused by the cap (exit 1); overruns 0 (the spend
  is exactly the cap), lost 0 (every acknowledged release is in the ledger), unclean 0
  (no other exit code, no traceback).
- `audit verify` in a loop while 20 writers record: zero false alarms.
- kill -9 at random moments of a process that records, approves, publishes and cancels:
  after every kill the chain verifies (no partial release, running totals equal to the
  totals recomputed from the releases).
- a full disk (a 1 MiB tmpfs the test mounts) and a read-only file system (the same
  mount, remounted read-only): exit 3 for writes, reads and reports still work.
The trial counts and outcomes are printed (pytest -s) for the closing note.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import cli_main

from ledger.store import audit_verify, engines, sessions

pytestmark = pytest.mark.load

WRITERS = 200
CAP = 150  # releases of epsilon 1 that fit

DATASET = f"""\
dataset: payroll
self_approval: true  # (writers record releases published: their own approval)
variables:
  - {{name: income}}
  - {{name: region}}
caps:
  - {{subset: [income], epsilon: {CAP}}}
"""

BIG_CAP = DATASET.replace(f"epsilon: {CAP}", "epsilon: 1000000")


def release_text(rid: str, epsilon: str = "1", status: str = "published") -> str:
    dates = '    published_at: "2026-01-05T10:00:00Z"\n' if status == "published" else ""  #
    return (f"dataset: payroll\nreleases:\n  - id: {rid}\n    reads: [income]\n"
            f"    mechanism: {{name: laplace, epsilon: {epsilon}}}\n    status: {status}\n" + dates)


def add_dataset(url: str, directory: Path, text_: str = DATASET) -> None:
    (directory / "payroll.yaml").write_text(text_, encoding="utf-8")
    result = cli_main(url, "dataset", "add", directory / "payroll.yaml")
    assert result.code == 0, result.err
    for person, role in (("k", "steward"), ("j", "approver")):  # the people of the lifecycle trials
        assert cli_main(url, "role", "grant", person, role).code == 0


def verify(url: str) -> audit_verify.Verification:
    engine = engines.make_engine(url)
    try:
        with sessions.read_session(engine) as session:
            return audit_verify.verify(session)
    finally:
        engine.dispose()


def scalar(url: str, sql: str):
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql)).scalar_one()
    finally:
        engine.dispose()


# --------------------------------------------------------------------------
# 2. Two hundred writers at once
# --------------------------------------------------------------------------


def test_two_hundred_writers_end_recorded_or_refused_and_nothing_is_lost(ledger_url, tmp_path):
    """On SQLite each writer is a fresh process that imports everything; on PostgreSQL each is a
    child forked from this process after the imports (as a pipeline that imports the ledger once
    runs its writers): 200 processes with their own connections and transactions racing for the
    same cap, without 200 imports of about 1 s of CPU each on a 2-core machine."""
    add_dataset(ledger_url, tmp_path)
    files = []
    for k in range(WRITERS):
        path = tmp_path / f"w{k}.yaml"
        path.write_text(release_text(f"w{k}"), encoding="utf-8")
        files.append(path)
    forked = not ledger_url.startswith("sqlite")
    started = time.monotonic()
    outcomes = forked_writers(ledger_url, files, tmp_path) if forked else process_writers(ledger_url, files, tmp_path)
    elapsed = time.monotonic() - started
    codes = [code for code, _ in outcomes]
    recorded = {f"w{k}" for k, code in enumerate(codes) if code == 0}
    in_ledger = set()
    engine = create_engine(ledger_url)
    with engine.connect() as connection:
        in_ledger = set(connection.execute(text("SELECT id FROM releases")).scalars())
    engine.dispose()
    unclean = [(code, err) for code, err in outcomes if code not in (0, 1) or "Traceback" in err]
    lost = recorded - in_ledger
    overrun = max(0, len(in_ledger) - CAP)
    print(f"\n{ledger_url.split(':')[0]}: {WRITERS} writers{' (forked after the imports)' if forked else ''} "
          f"in {elapsed:.0f} s: {codes.count(0)} recorded, "
          f"{codes.count(1)} refused by the cap, {len(unclean)} unclean, {len(lost)} lost, {overrun} over the cap")
    assert unclean == [], unclean[:3]
    assert lost == set() and in_ledger == recorded
    assert overrun == 0
    assert codes.count(0) == CAP and codes.count(1) == WRITERS - CAP
    assert verify(ledger_url).ok


def process_writers(ledger_url: str, files: list[Path], directory: Path) -> list[tuple[int, str]]:
    """`privacy-ledger record FILE` in one fresh process per file, all started at once."""
    command = [sys.executable, "-m", "ledger", "--db", ledger_url]
    processes = [subprocess.Popen([*command, "record", str(path)], cwd=directory, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for path in files]
    outcomes = []
    for process in processes:
        _out, err = process.communicate(timeout=1200)
        outcomes.append((process.returncode, err))
    return outcomes


def forked_writers(ledger_url: str, files: list[Path], directory: Path) -> list[tuple[int, str]]:
    """The command line's `record FILE` in one child per file, forked from this process (which has
    imported the ledger but opened no connection), all started before any is awaited."""
    from ledger.cli.app import main

    children = []
    for k, path in enumerate(files):
        err_path = directory / f"w{k}.err"
        pid = os.fork()
        if pid == 0:  # the child: its own engine, connection and transaction
            code = 4
            try:
                descriptor = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(descriptor, 2)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                sys.argv = ["privacy-ledger", "--db", ledger_url, "record", str(path)]
                try:
                    main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
            finally:
                os._exit(code)
        children.append((pid, err_path))
    outcomes = []
    for pid, err_path in children:
        _pid, status = os.waitpid(pid, 0)
        outcomes.append((os.waitstatus_to_exitcode(status), err_path.read_text(encoding="utf-8", errors="replace")))
    return outcomes


# --------------------------------------------------------------------------
# 3. Verification while twenty writers record
# --------------------------------------------------------------------------

WRITER = textwrap.dedent("""\
    import sys
    from pathlib import Path
    from ledger.operations import transactions as operations; from ledger.store import engines
    url, name, count, directory = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    engine = engines.make_engine(url)
    for i in range(count):
        path = directory / f"{name}-{i}.yaml"
        path.write_text(f"dataset: payroll\\nreleases:\\n  - id: {name}-{i}\\n    reads: [income]\\n"
                        f"    mechanism: {{name: laplace, epsilon: 1/100}}\\n", encoding="utf-8")
        operations.record(engine, operations.release_builder([path], "k"), "k")  # the steward
    """)


def test_verification_while_twenty_writers_record_never_cries_wolf(ledger_url, tmp_path):
    add_dataset(ledger_url, tmp_path, BIG_CAP)
    processes = [subprocess.Popen([sys.executable, "-c", WRITER, ledger_url, f"v{k}", "10", str(tmp_path)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for k in range(20)]
    runs = alarms = reports = 0
    try:
        while any(p.poll() is None for p in processes) or runs < 3:
            result = cli_main(ledger_url, "audit", "verify")
            runs += 1
            alarms += result.code != 0
            assert result.code == 0, result.err
            if runs % 4 == 0:
                out = tmp_path / f"report-{runs}.md"
                report = cli_main(ledger_url, "report", "--format", "md", "--out", out)
                assert report.code == 0, report.err
                assert "BROKEN" not in out.read_text(encoding="utf-8")
                reports += 1
    finally:
        for process in processes:
            _, err = process.communicate(timeout=600)
            assert process.returncode == 0, err
    print(f"\n{ledger_url.split(':')[0]}: {runs} verifications and {reports} reports during 200 records by 20 "
          f"writers: {alarms} false alarms")
    assert scalar(ledger_url, "SELECT count(*) FROM releases") == 200
    assert verify(ledger_url).ok


# --------------------------------------------------------------------------
# 7. kill -9 at random moments of record / approve / publish / cancel
# --------------------------------------------------------------------------

LIFECYCLE = textwrap.dedent("""\
    import random, sys
    from pathlib import Path
    from ledger.operations import transactions as operations; from ledger.store import engines
    url, directory, seed = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    engine = engines.make_engine(url)
    print("ready", flush=True)
    for i in range(100000):
        rid = f"k{seed}-{i}"
        path = directory / f"{rid}.yaml"
        path.write_text(f"dataset: payroll\\nreleases:\\n  - id: {rid}\\n    reads: [income]\\n"
                        f"    mechanism: {{name: laplace, epsilon: 1/10}}\\n    status: planned\\n", encoding="utf-8")
        operations.record(engine, operations.release_builder([path], "k"), "k")
        steps = rng.choice([["approve", "publish"], ["cancel"], ["approve", "cancel"], ["approve"], []])
        for action in steps:  # the recorder cancels; another person approves and publishes
            if action == "cancel":
                operations.change_status(engine, rid, action, "k", reason="trial")
            else:
                operations.change_status(engine, rid, action, "j")
    """)


@pytest.mark.parametrize("trials", [12])
def test_kill_9_at_random_moments_leaves_a_consistent_ledger(ledger_url, tmp_path, trials):
    add_dataset(ledger_url, tmp_path, BIG_CAP)
    rng = random.Random(10)
    if ledger_url.startswith("postgresql"):
        trials = 8
    outcomes = []
    for trial in range(trials):
        process = subprocess.Popen([sys.executable, "-c", LIFECYCLE, ledger_url, str(tmp_path), str(trial)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdout.readline().strip() == "ready", process.stderr.read()
        time.sleep(rng.uniform(0.05, 1.5))
        process.kill()  # SIGKILL
        process.communicate()
        result = verify(ledger_url)
        events = scalar(ledger_url, "SELECT count(*) FROM audit_events")
        outcomes.append((result.ok, events))
        assert result.ok, result.problems[:3]
    releases = scalar(ledger_url, "SELECT count(*) FROM releases")
    print(f"\n{ledger_url.split(':')[0]}: {trials} kill -9 trials, {releases} releases written between kills; "
          f"after every kill the chain verified, no partial release, running totals equal: "
          f"{sum(ok for ok, _ in outcomes)}/{trials}")
    assert cli_main(ledger_url, "audit", "verify").code == 0


# --------------------------------------------------------------------------
# 5, 7. A full disk and a read-only file system (a small tmpfs this test mounts)
# --------------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_ends_in_exit_3_and_the_ledger_survives(small_fs, tmp_path):
    url = f"sqlite:///{small_fs / 'ledger.db'}"
    add_dataset(url, tmp_path, BIG_CAP)
    (tmp_path / "r0.yaml").write_text(release_text("r0"), encoding="utf-8")
    assert cli_main(url, "record", tmp_path / "r0.yaml").code == 0
    filler = small_fs / "filler"
    with filler.open("wb", buffering=0) as stream:  # fill the file system to the last block
        try:
            while True:
                stream.write(b"\0" * 4096)
        except OSError:
            pass
    outcomes = []
    for k in range(1, 6):
        (tmp_path / f"r{k}.yaml").write_text(release_text(f"r{k}", status="planned") + "    title: " + "x" * 900 + "\n",
                                             encoding="utf-8")
        result = cli_main(url, "record", tmp_path / f"r{k}.yaml")
        outcomes.append(result.code)
        assert result.code in (0, 3), result.err
        assert "Traceback" not in result.err
        if result.code == 3:
            assert "the disk is full" in result.err and len(result.err.strip().splitlines()) == 1
    print(f"\ndisk full: record outcomes {outcomes}")
    assert 3 in outcomes
    assert cli_main(url, "releases").code == 0
    filler.unlink()
    assert cli_main(url, "audit", "verify").code == 0
    (tmp_path / "after.yaml").write_text(release_text("after"), encoding="utf-8")
    assert cli_main(url, "record", tmp_path / "after.yaml").code == 0
    assert cli_main(url, "audit", "verify").code == 0


def test_a_ledger_on_a_read_only_file_system_is_read_reported_and_verified(small_fs, tmp_path):
    source = f"sqlite:///{tmp_path / 'source.db'}"
    add_dataset(source, tmp_path)
    (tmp_path / "r0.yaml").write_text(release_text("r0"), encoding="utf-8")
    assert cli_main(source, "record", tmp_path / "r0.yaml").code == 0
    with sqlite3.connect(tmp_path / "source.db") as original, sqlite3.connect(small_fs / "ledger.db") as copy:
        original.backup(copy)  # the ledger handed over, in WAL mode, as a copy is
    copy.close()
    url = f"sqlite:///{small_fs / 'ledger.db'}"
    done = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True)
    assert done.returncode == 0, done.stderr
    for command in (["releases"], ["audit", "verify"], ["table"], ["cap", "list"],
                    ["report", "--format", "md", "--out", str(tmp_path / "r.md")]):
        result = subprocess.run([sys.executable, "-m", "ledger", "--db", url, *command], capture_output=True,
                                text=True, cwd=tmp_path)
        assert result.returncode == 0, (command, result.stderr)
    assert "r0" in (tmp_path / "r.md").read_text(encoding="utf-8")
    (tmp_path / "r1.yaml").write_text(release_text("r1"), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "ledger", "--db", url, "record", str(tmp_path / "r1.yaml")],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "read-only" in result.stderr and "Traceback" not in result.stderr


# --------------------------------------------------------------------------
# 1, 7. A PostgreSQL server restarted while writers record (a private server the test starts)
# --------------------------------------------------------------------------

RETRYING_WRITER = textwrap.dedent("""\
    import subprocess, sys, time
    from pathlib import Path
    url, name, count, directory = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    codes = []
    for i in range(count):
        path = directory / f"{name}-{i}.yaml"
        path.write_text(f"dataset: payroll\\nreleases:\\n  - id: {name}-{i}\\n    reads: [income]\\n"
                        f"    mechanism: {{name: laplace, epsilon: 1/100}}\\n    status: planned\\n", encoding="utf-8")
        for attempt in range(60):  # what a pipeline does with exit 3: retry later (a retry of the same id is a no-op)
            done = subprocess.run([sys.executable, "-m", "ledger", "--db", url, "record", str(path)],
                                  capture_output=True, text=True)
            codes.append(done.returncode)
            if "Traceback" in done.stderr or done.returncode not in (0, 3):
                print("UNCLEAN", done.returncode, done.stderr.strip()[-300:], flush=True)
            if done.returncode != 3:
                break
            time.sleep(0.5)
    print("CODES", " ".join(map(str, codes)), flush=True)
    """)


@pytest.fixture
def private_postgres():
    """A PostgreSQL server of our own (initdb in a scratch directory, port 5499), so that restarting it
    disturbs nobody else's tests. Skipped where the server binaries or root (to run as `postgres`) are missing."""
    import glob
    import shutil
    import tempfile

    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries or os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs the PostgreSQL server binaries and root")
    bindir = Path(binaries[-1]).parent
    data = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
    shutil.chown(data, "postgres", "postgres")
    port = 5499

    def as_postgres(*argv, check=True):
        return subprocess.run(["runuser", "-u", "postgres", "--", *map(str, argv)], capture_output=True, text=True,
                              check=check, timeout=120)

    as_postgres(bindir / "initdb", "-D", data / "db", "-A", "trust", "-U", "postgres")
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c max_connections=40"

    def pg_ctl(action, *more, check=True):
        return as_postgres(bindir / "pg_ctl", "-D", data / "db", "-o", options, "-l", data / "log", "-w", action,
                           *more, check=check)

    pg_ctl("start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", pg_ctl
    finally:
        pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(data, ignore_errors=True)


def test_a_postgresql_restart_under_load_ends_in_exit_3_and_retries_lose_nothing(private_postgres, tmp_path):
    url, pg_ctl = private_postgres
    add_dataset(url, tmp_path, BIG_CAP)
    writers, each = 4, 5
    processes = [subprocess.Popen([sys.executable, "-c", RETRYING_WRITER, url, f"p{k}", str(each), str(tmp_path)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for k in range(writers)]
    restarts = 0
    while any(p.poll() is None for p in processes):  # restart again and again until the writers are done
        time.sleep(1.5)
        # every connection is dropped, mid-transaction or not: "fast" rolls back cleanly, "immediate" as a crash
        done = pg_ctl("restart", "-m", ("fast", "immediate")[restarts % 2], check=False)
        restarts += done.returncode == 0
    outputs = [p.communicate(timeout=900) for p in processes]
    codes = [int(c) for out, _ in outputs for line in out.splitlines() if line.startswith("CODES")
             for c in line.split()[1:]]
    unclean = [line for out, _ in outputs for line in out.splitlines() if line.startswith("UNCLEAN")]
    released = {r for r in (scalar(url, "SELECT string_agg(id, ',') FROM releases") or "").split(",") if r}
    expected = {f"p{k}-{i}" for k in range(writers) for i in range(each)}
    print(f"\npostgresql restarted {restarts} times under {writers} writers: {len(codes)} record calls, "
          f"{codes.count(0)} recorded, {codes.count(3)} exit 3 (retried), {len(unclean)} unclean; "
          f"{len(released & expected)}/{len(expected)} in the ledger")
    assert all(p.returncode == 0 for p in processes), [err for _, err in outputs][:2]
    assert unclean == [], unclean[:3]
    assert restarts >= 1
    assert released == expected
    assert verify(url).ok


# --------------------------------------------------------------------------
# 5. Randomly mutated release files: bad input, never a crash, never a partial write
# --------------------------------------------------------------------------

SEED_FILES = [
    (Path(__file__).parents[2] / "examples" / "graduates.releases.yaml").read_text(encoding="utf-8"),
    textwrap.dedent("""\
        dataset: graduates
        families:
          - {id: split, partition: random}
        releases:
          - id: a1
            title: Income by sex
            reads: [income, sex]
            family: split
            part: a1
            mechanism: {name: laplace, epsilon: 1/2, sensitivity: 1}
            status: published
            published_at: "2026-01-05T10:00:00Z"
          - id: a2
            reads: [sex]
            family: split
            part: a2
            mechanism: {name: declared}
            guarantees: [{protects: [sex], epsilon: "0.25", delta: 1e-9, relation: replace}]
          - id: a3
            reads: [income]
            mechanism: {name: gaussian, sigma: 3, sensitivity: 1}
          - id: a4
            reads: [income]
            mechanism: {name: laplace, epsilon: 1, sample_size: 100, population: 1000}
        """),
]
TOKENS = ["", "~", "true", "-1", "0", "1e400", "-1e400", ".nan", ".inf", "1e999999999", '"1e999999999"',
          "9" * 5000, "1/0", "0/0", "1/" + "3" * 400, "!!int abc", "!!float x", "!!binary AAAA", "!!python/tuple [1]",
          "{1: 2}", "{[1]: 2}", "[1, [2, [3]]]", "[" * 200 + "]" * 200, "*nothing", "&a x", '"\\0"', '"\\e[31m"',
          '"a\\rb"', '"x|y\\nz"', "`$\\notacommand$`", "é" * 300, "x" * 100_000, "2026-13-45", "'2026-01-05T10:00:00'",
          '"2999-01-01T00:00:00Z"', "[income, income]", "[nosuch]", "{name: nosuch}", "{name: laplace}",
          "{name: gaussian, sigma: 0}", "{name: laplace, epsilon: 1, sample_size: 10, population: 5}", "published", "approved", "retracted"]


def mutate(text_: str, rng: random.Random) -> str:
    lines = text_.splitlines()
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        kind = rng.random()
        if kind < 0.55 and ":" in lines[k]:  # a value replaced by a hostile token
            head = lines[k][:lines[k].index(":") + 1]
            lines[k] = f"{head} {rng.choice(TOKENS)}"
        elif kind < 0.65:
            lines.insert(k, lines[k])  # a duplicate key (or entry)
        elif kind < 0.75:
            del lines[k]
        elif kind < 0.85:
            lines[k] = lines[k][: rng.randrange(len(lines[k]) + 1)]  # a cut line
        elif kind < 0.95:
            key = rng.choice(["epsilon", "delta", "rho", "status", "reads", "id", "title", "published_at",
                              "approved_by", "family", "derived_from", "sensitivity", 7, "null", "'x'"])
            lines.insert(k, " " * rng.choice([0, 2, 4, 6]) + f"{key}: {rng.choice(TOKENS)}")
        else:
            lines[k] = lines[k].replace(" ", "\t", 1)  # a tab in indentation
    return "\n".join(lines) + "\n"


def test_randomly_mutated_release_files_are_refused_cleanly_and_write_nothing(tmp_path):
    """LEDGER_FUZZ_FILES (default 1,000, so CI stays
    within its time; the closing note's run used 3,000) files, each mutated 1-3 times from two seeds, are
    recorded and checked: exit 0, 1 or 2, no traceback, and nothing written unless recorded."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    dataset = (Path(__file__).parents[2] / "examples" / "graduates.dataset.yaml").read_text(encoding="utf-8")
    (tmp_path / "graduates.yaml").write_text(dataset + "caps:\n  - {subset: [income], epsilon: 40, delta: 1e-6}\n",
                                             encoding="utf-8")
    assert cli_main(url, "dataset", "add", tmp_path / "graduates.yaml").code == 0
    rng = random.Random(2026)
    count = int(os.environ.get("LEDGER_FUZZ_FILES", "1000"))
    outcomes: dict[int, int] = {}
    crashes = []
    path = tmp_path / "mutated.yaml"
    # the audit events counted before and after each file on one connection (autocommit: each count sees
    # every commit; fetchall ends the read), not a new engine twice per file (20 s at 1,000 files)
    counter = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    for trial in range(count):
        text_ = mutate(re.sub(r"(?<![\w-])(income-by-degree|consistent-income|mean-income|a1|a2|a3|a4)(?![\w-])",
                              rf"\1-t{trial}", rng.choice(SEED_FILES)), rng)  # new ids every trial
        path.write_bytes(text_.encode("utf-8", "surrogatepass"))
        before = counter.execute("SELECT count(*) FROM audit_events").fetchall()[0][0]
        command = "record" if trial % 2 else "check"
        result = cli_main(url, command, path)
        outcomes[result.code] = outcomes.get(result.code, 0) + 1
        after = counter.execute("SELECT count(*) FROM audit_events").fetchall()[0][0]
        written = after != before
        if result.code not in (0, 1, 2) or "Traceback" in result.err or (written and (result.code or command == "check")):
            crashes.append((trial, result.code, result.err.strip()[-300:], text_[:300]))
        if result.code != 0:
            assert len(result.err) < 4000, result.err[:300]  # a short excerpt, never the whole file
    counter.close()
    print(f"\n{count} mutated release files (record and check): exit codes {dict(sorted(outcomes.items()))}, "
          f"{len(crashes)} crashes or partial writes")
    assert crashes == [], crashes[:3]
    assert cli_main(url, "audit", "verify").code == 0
