"""Every failure a clean refusal with an exit code a pipeline can act on.

Exit codes: 0 done, 1 refused by a cap, 2 bad input, 3 the ledger could not be reached,
locked or written (retry later), 4 unexpected (one line and a log). Here, on a SQLite
file and on PostgreSQL: a lock held too long, a full disk, a read-only file system, a
connection killed mid-transaction, hard links, files that are not ledgers, `--out` onto
the ledger, hostile YAML and JSON, emptied ledgers; reads that never wait for a writer.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import cli_main

from ledger.core import failures
from ledger.operations import transactions as operations
from ledger.store import decoded_history, engines, files, sessions

DATASET = """\
dataset: payroll
variables:
  - {name: income}
  - {name: region}
caps:
  - {subset: [income], epsilon: 100}
"""


def release_file(directory: Path, rid: str, epsilon: str = "1", extra: str = "") -> Path:
    path = directory / f"{rid}.yaml"
    path.write_text(f"dataset: payroll\nreleases:\n  - id: {rid}\n    reads: [income]\n"
                    f"    mechanism: {{name: laplace, epsilon: {epsilon}}}\n{extra}", encoding="utf-8")
    return path


@pytest.fixture
def payroll(ledger_url, tmp_path):
    (tmp_path / "payroll.yaml").write_text(DATASET, encoding="utf-8")
    result = cli_main(ledger_url, "dataset", "add", tmp_path / "payroll.yaml")
    assert result.code == 0, result.err
    return ledger_url


def one_clean_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def release_count(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text("SELECT count(*) FROM releases")).scalar_one()
    finally:
        engine.dispose()


@contextlib.contextmanager
def write_lock_held(url: str):
    """Another writer holding the ledger's write lock (SQLite: BEGIN IMMEDIATE;
    PostgreSQL: the advisory lock), until the block ends."""
    if url.startswith("sqlite"):
        connection = sqlite3.connect(files.sqlite_path(url), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    engine = create_engine(url)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": sessions.WRITE_LOCK_KEY})
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": sessions.WRITE_LOCK_KEY})
    engine.dispose()


# --------------------------------------------------------------------------
# 1. Exit code 3 for operational failures, one line, no traceback
# --------------------------------------------------------------------------


def test_a_lock_wait_is_bounded_and_ends_in_exit_3(payroll, tmp_path, monkeypatch):
    monkeypatch.setenv(engines.LOCK_TIMEOUT_ENV, "1")
    with write_lock_held(payroll):
        started = time.monotonic()
        result = cli_main(payroll, "record", release_file(tmp_path, "r1"))
        waited = time.monotonic() - started
        # reads never take the write lock, and never wait for the writer
        assert cli_main(payroll, "releases").code == 0
        assert cli_main(payroll, "audit", "verify").code == 0
        assert cli_main(payroll, "cap", "list").code == 0
        assert cli_main(payroll, "check", release_file(tmp_path, "plan")).code == 0
    assert result.code == 3, result.err
    line = one_clean_line(result.err)
    assert "nothing was recorded" in line and "retry later" in line and "lock" in line
    assert waited < 20
    assert release_count(payroll) == 0
    assert cli_main(payroll, "record", release_file(tmp_path, "r1")).code == 0  # retried: recorded


def test_a_connection_terminated_mid_transaction_ends_in_exit_3(ledger_url, tmp_path, monkeypatch):
    """PostgreSQL: the write transaction's backend is terminated by a second connection
    (pg_terminate_backend) while it holds the lock; SQLite has no server to lose, so the
    same test kills nothing there and the record goes through."""
    (tmp_path / "payroll.yaml").write_text(DATASET, encoding="utf-8")
    assert cli_main(ledger_url, "dataset", "add", tmp_path / "payroll.yaml").code == 0
    original = operations.load_releases
    killed = []

    def terminate_then_load(*args, **kwargs):
        if ledger_url.startswith("postgresql") and not killed:
            engine = create_engine(ledger_url)
            with engine.connect() as connection:
                killed.extend(connection.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND state = 'idle in transaction'")).scalars())
            engine.dispose()
        return original(*args, **kwargs)

    monkeypatch.setattr(operations, "load_releases", terminate_then_load)
    result = cli_main(ledger_url, "record", release_file(tmp_path, "r1"))
    if ledger_url.startswith("postgresql"):
        assert killed == [True]
        assert result.code == 3, result.err
        assert "connection" in one_clean_line(result.err)
        assert release_count(ledger_url) == 0
        monkeypatch.setattr(operations, "load_releases", original)
        assert cli_main(ledger_url, "record", release_file(tmp_path, "r1")).code == 0
    else:
        assert result.code == 0, result.err
    assert cli_main(ledger_url, "audit", "verify").code == 0
    assert release_count(ledger_url) == 1


def test_an_unexpected_failure_prints_one_line_and_the_path_of_a_log(payroll, tmp_path, monkeypatch):
    monkeypatch.setenv(failures.LOG_DIR_ENV, str(tmp_path / "logs"))

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a defect deep inside")

    monkeypatch.setattr(decoded_history, "release_pages", broken)  # (what `releases` reads the releases with)
    result = cli_main(payroll, "releases")
    assert result.code == 4
    line = one_clean_line(result.err)
    assert "ZeroDivisionError: a defect deep inside" in line
    log = Path(line.rsplit("details in ", 1)[1])
    assert log.parent == tmp_path / "logs" and "Traceback" in log.read_text() and "broken" in log.read_text()


def test_an_unreachable_server_is_exit_3():
    result = cli_main("postgresql+psycopg://nobody@127.0.0.1:1/none", "releases")
    assert result.code == 3, result.err
    assert "refused" in one_clean_line(result.err)


def test_the_exit_codes_are_in_the_help_and_the_reference_pages():
    help_text = subprocess.run([sys.executable, "-m", "ledger", "--help"], capture_output=True, text=True).stdout
    assert "3 the ledger could not be reached" in " ".join(help_text.split())
    docs = Path(__file__).parents[2] / "docs"
    assert "| 3 |" in (docs / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    assert "LEDGER_LOCK_TIMEOUT" in (docs / "reference" / "environment.md").read_text(encoding="utf-8")
    assert "local file system" in (docs / "explanation" / "performance.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------
# 4. No lost write: hard links, read-only commands on databases that are not ledgers
# --------------------------------------------------------------------------


def test_a_ledger_file_with_two_hard_links_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "payroll.yaml").write_text(DATASET, encoding="utf-8")
    assert cli_main(url, "dataset", "add", tmp_path / "payroll.yaml").code == 0
    os.link(tmp_path / "ledger.db", tmp_path / "other-name.db")
    for name in ("ledger.db", "other-name.db"):
        result = cli_main(f"sqlite:///{tmp_path / name}", "record", release_file(tmp_path, "r1"))
        assert result.code == 2 and "hard links" in result.err
    os.unlink(tmp_path / "other-name.db")
    assert cli_main(url, "record", release_file(tmp_path, "r1")).code == 0


def test_a_read_only_command_never_creates_a_schema(tmp_path):
    other = tmp_path / "app.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE customers (id INTEGER)")
    connection.commit()
    connection.close()
    before = other.read_bytes()
    for command in (["releases"], ["audit", "verify"], ["table"], ["cap", "list"]):
        result = cli_main(f"sqlite:///{other}", *command)
        assert result.code == 2 and "holds no ledger" in result.err, result.err
    tables = sqlite3.connect(other).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == [("customers",)]
    assert other.read_bytes() == before
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a database at all " * 100)
    result = cli_main(f"sqlite:///{garbage}", "releases")
    assert result.code == 2 and "not a privacy-ledger ledger" in result.err and "Traceback" not in result.err


def test_an_emptied_or_shortened_ledger_does_not_verify(payroll, tmp_path):
    for k in range(3):
        assert cli_main(payroll, "record", release_file(tmp_path, f"r{k}")).code == 0
    assert cli_main(payroll, "audit", "verify").code == 0
    engine = create_engine(payroll)
    with engine.begin() as connection:  # the newest event and its release, deleted behind the ledger's back
        if engine.dialect.name == "postgresql":  # by a superuser who switches the append-only triggers off
            connection.execute(text("SET LOCAL session_replication_role = replica"))
        connection.execute(text("DELETE FROM releases WHERE id = 'r2'"))
        connection.execute(text("DELETE FROM audit_events WHERE seq = (SELECT max(seq) FROM audit_events)"))
    result = cli_main(payroll, "audit", "verify")
    assert result.code == 1 and "only" in result.err and "deleted" in result.err
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SET LOCAL session_replication_role = replica"))
        for table in ("releases", "cap_totals", "caps", "families", "variables", "datasets", "audit_events",
                      "ledger_meta"):
            connection.execute(text(f"DELETE FROM {table}"))
    engine.dispose()
    result = cli_main(payroll, "audit", "verify")
    assert result.code == 1 and "no audit event" in result.err


# --------------------------------------------------------------------------
# 5. --out never destroys the ledger, never replaces what is not a regular file
# --------------------------------------------------------------------------


def test_out_never_writes_onto_the_ledger_or_a_special_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "payroll.yaml").write_text(DATASET, encoding="utf-8")
    assert cli_main(url, "dataset", "add", tmp_path / "payroll.yaml").code == 0
    assert cli_main(url, "record", release_file(tmp_path, "r1")).code == 0
    before = (tmp_path / "ledger.db").read_bytes()
    (tmp_path / "sub").mkdir()
    os.link(tmp_path / "ledger.db", tmp_path / "sub" / "alias.db")  # for --out only; removed below
    targets = [tmp_path / "ledger.db", Path(f"{tmp_path}/./sub/../ledger.db"), tmp_path / "ledger.db-wal",
               tmp_path / "ledger.db-shm", tmp_path / "ledger.db-journal", tmp_path / "sub" / "alias.db"]
    for target in targets:
        result = cli_main(url, "report", "--format", "csv", "--out", target)
        assert result.code == 2 and "ledger" in result.err, (target, result.err)
    os.unlink(tmp_path / "sub" / "alias.db")
    (tmp_path / "data.csv").write_text("income\n1\n2\n")
    result = cli_main(url, "run", "laplace-sum", "--data", tmp_path / "data.csv", "--id", "run1",
                      "-p", "epsilon=1", "-p", "columns=income", "-p", "bounds=0,10", "--out", tmp_path / "ledger.db")
    assert result.code == 2 and "ledger" in result.err
    assert (tmp_path / "ledger.db").read_bytes()[:16] == before[:16] == b"SQLite format 3\x00"
    assert release_count(url) == 1
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "sub" / "real.csv").write_text("keep")
    os.symlink(tmp_path / "sub" / "real.csv", tmp_path / "link.csv")  # a link out of its directory
    for target, why in ((tmp_path / "fifo", "not a regular file"), (tmp_path / "link.csv", "symbolic link"),
                        (Path("/dev/null"), "not a regular file")):
        result = cli_main(url, "report", "--format", "csv", "--out", target)
        assert result.code == 2 and why in result.err, result.err
    assert (tmp_path / "fifo").is_fifo() and (tmp_path / "link.csv").is_symlink()
    assert (tmp_path / "sub" / "real.csv").read_text() == "keep"
    assert cli_main(url, "audit", "verify").code == 0
    result = cli_main(url, "report", "--format", "csv", "--out", tmp_path / "new.csv")
    assert result.code == 0 and (tmp_path / "new.csv").read_text().startswith("release,")


# --------------------------------------------------------------------------
# 5. Hostile input files: refused quickly, as bad input, before any lock
# --------------------------------------------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + k)}: &{chr(98 + k)} [{', '.join(['*' + chr(97 + k)] * 9)}]\n" for k in range(8))


@pytest.mark.parametrize(("content", "message"), [
    (ALIAS_BOMB, "more than 200000 values"),
    ("dataset: payroll\nreleases:\n  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 100}}\n"
     "  - {id: a2, reads: [income], mechanism: {name: laplace, epsilon: 1, epsilon: 0.1}}\n", "duplicate key 'epsilon'"),
    ("dataset: payroll\nreleases: []\nreleases:\n  - {id: a, reads: [income], mechanism: {name: exact}}\n",
     ":3: refused YAML: duplicate key 'releases' (first at line 2)"),
    ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 64"),
    ("dataset: payroll\nreleases:\n  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: \"1e999999999\"}}\n",
     "exponent"),
    ("dataset: payroll\nreleases:\n  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 1" + "0" * 5000
     + "}}\n", "malformed YAML"),
    ("dataset: payroll\nreleases:\n  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 1e400}}\n",
     "at most 1e300"),
    ("dataset: payroll\nreleases:\n  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: !!int abc}}\n",
     "malformed YAML"),
    ("dataset: payroll\n1: x\nreleases: []\n", "a key that is not text"),
])
def test_hostile_yaml_is_bad_input_quickly_and_quoted_briefly(payroll, tmp_path, content, message):
    path = tmp_path / "hostile.yaml"
    path.write_text(content, encoding="utf-8")
    started = time.monotonic()
    result = cli_main(payroll, "record", path)
    assert time.monotonic() - started < 10
    assert result.code == 2, result.err
    assert message in result.err and "Traceback" not in result.err
    assert len(result.err) < 2000
    assert release_count(payroll) == 0


def test_hostile_json_is_bad_input(payroll, tmp_path):
    path = tmp_path / "hostile.json"
    path.write_text('{"dataset": "payroll", "releases": [], "releases": []}')
    result = cli_main(payroll, "record", path)
    assert result.code == 2 and "duplicate key 'releases'" in result.err
    path.write_text("[" * 100_000 + "]" * 100_000)
    result = cli_main(payroll, "record", path)
    assert result.code == 2 and "nested deeper" in result.err


def test_a_fifo_or_an_oversized_file_is_refused_without_blocking_anyone(payroll, tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    result = cli_main(payroll, "record", tmp_path / "pipe.yaml")
    assert result.code == 2 and "not a regular file" in result.err
    big = tmp_path / "big.yaml"
    with big.open("wb") as stream:
        stream.truncate(17 * 1024 * 1024)
    result = cli_main(payroll, "record", big)
    assert result.code == 2 and "the limit is" in result.err


def test_input_files_are_parsed_before_the_write_lock_is_taken(payroll, tmp_path, monkeypatch):
    """A file is read while another writer holds the lock: parsing does not wait for it,
    and the record, asked after the lock is freed, goes through."""
    from ledger.input import documents

    seen_locked = []
    original = documents.parse_document

    def parse(name, text_):
        # the write lock is free while the file is parsed: a writer could take it now
        monkeypatch.setenv(engines.LOCK_TIMEOUT_ENV, "0.5")
        probe = cli_main(payroll, "cap", "set", "region", "--epsilon", "7")
        seen_locked.append(probe.code)
        return original(name, text_)

    monkeypatch.setattr(documents, "parse_document", parse)
    result = cli_main(payroll, "record", release_file(tmp_path, "r1"))
    assert result.code == 0, result.err
    assert seen_locked == [0]


def test_input_files_are_checked_against_the_schema_before_the_write_lock_is_taken(payroll, tmp_path, monkeypatch):
    """Schema validation runs before the transaction too, once per file: while it runs another writer
    can take the lock, and a file the schema refuses never opens a write transaction."""
    from ledger.input import releases

    seen_locked, validated = [], []
    original = releases.schema_problems  # (validate's problems, each with its path: every problem in one pass)

    def validate(document, schema_name):
        monkeypatch.setenv(engines.LOCK_TIMEOUT_ENV, "0.5")
        seen_locked.append(cli_main(payroll, "cap", "set", "region", "--epsilon", str(7 + len(seen_locked))).code)
        validated.append(schema_name)
        return original(document, schema_name)

    monkeypatch.setattr(releases, "schema_problems", validate)
    result = cli_main(payroll, "record", release_file(tmp_path, "r1"))
    assert result.code == 0, result.err
    assert seen_locked == [0] and validated == [releases.RELEASE_SCHEMA]  # checked once, outside the lock

    opened = []
    monkeypatch.setattr(releases, "schema_problems", original)
    monkeypatch.setattr(sessions, "write_session", lambda *a, **k: opened.append(1) or (_ for _ in ()).throw(AssertionError))
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: payroll\nreleases:\n  - id: r2\n    reads: [income]\n    colour: red\n", encoding="utf-8")
    result = cli_main(payroll, "record", bad)
    assert result.code == 2 and "colour" in result.err
    assert opened == []


@pytest.mark.parametrize(("exc", "reason"), [
    ("psycopg.OperationalError('connection failed: FATAL:  sorry, too many clients already')", "too many clients"),
    ("psycopg.OperationalError('FATAL:  remaining connection slots are reserved')", "too many clients"),
    ("psycopg.errors.LockNotAvailable('canceling statement due to lock timeout')", "lock was not granted"),
    ("psycopg.errors.AdminShutdown('terminating connection due to administrator command')", "closed by the server"),
    ("sqlite3.OperationalError('database or disk is full')", "the disk is full"),
    ("sqlite3.OperationalError('attempt to write a readonly database')", "read-only"),
    ("sqlite3.OperationalError('database is locked')", "lock was not granted"),
    ("OSError(28, 'No space left on device')", "the disk is full"),
    ("OSError(30, 'Read-only file system')", "read-only file system"),
])
def test_every_operational_failure_is_exit_3_with_its_reason(exc, reason, capsys):
    import psycopg  # noqa: F401  (named in the parameters)
    import psycopg.errors  # noqa: F401
    from sqlalchemy.exc import OperationalError

    error = eval(exc)
    for raised in (error, OperationalError("INSERT ...", {}, error)):  # bare, and as SQLAlchemy wraps it
        assert failures.handle(raised) == 3
        line = one_clean_line(capsys.readouterr().err)
        assert reason in line and "nothing was recorded" in line and "retry later" in line


def test_too_many_clients_is_retried_until_the_lock_time_out(monkeypatch):
    """PostgreSQL refusing connections (too many clients) is retried with growing sleeps;
    when it lasts beyond the time-out the command ends with exit 3, naming it."""
    import psycopg

    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(time.monotonic())
        raise psycopg.OperationalError("connection failed: FATAL:  sorry, too many clients already")

    monkeypatch.setattr(psycopg, "connect", refuse)
    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(lambda cls, *a, **k: refuse()))
    monkeypatch.setenv(engines.LOCK_TIMEOUT_ENV, "1.5")
    started = time.monotonic()
    result = cli_main("postgresql+psycopg://postgres@127.0.0.1:5432/none", "releases")
    assert result.code == 3 and "too many clients" in one_clean_line(result.err)
    assert 3 <= len(attempts) and time.monotonic() - started < 10
