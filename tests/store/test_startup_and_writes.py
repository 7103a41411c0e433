"""What a command imports, and what one record writes.

A pipeline runs the CLI once per release, so `check` and `record` import only what
they use (not numpy, pandas, scipy, dp_accounting, jinja2, matplotlib,
networkx, nor the report's modules), and `--help` / `--version` not even the ORM.
A record is one transaction with one commit: the release row, its accounting rows,
the running totals, the caps' accountant state, the audit event and the ledger's
stamps all commit together (one fsync on SQLite's log, one WAL flush on PostgreSQL);
a file of many releases is one commit too, and a refused one commits nothing.
Commits are counted with SQLAlchemy's engine events; the figures are worked out
here by hand (a Laplace release of epsilon e costs rho = e^2/2 on a rho cap, Bun and
Steinke 2016 Prop 1.4; epsilons add on a pure cap, Tan Prop 3.4).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import event

from ledger.operations import transactions as operations
from ledger.store import engines, identity, process_caches, session_state
from support import cli_main

DATASET = """\
dataset: survey
self_approval: true  # (releases recorded as published by the one person writing)
variables:
  - {name: age}
  - {name: income}
caps:
  - {subset: [income], rho: 100}
  - {subset: [age], epsilon: 50}
"""

# what check and record never import (numpy comes in only for the Rényi filter of a cap
# stated at a delta; these caps are a rho and a pure-epsilon cap)
NOT_ON_THE_RECORDING_PATH = ("numpy", "pandas", "scipy", "dp_accounting", "jinja2", "matplotlib",
                             "networkx", "ledger.reporting.report", "ledger.reporting.charts", "ledger.reporting.chart_data", "multiprocessing")
NOT_FOR_HELP = ("sqlalchemy", "sqlmodel", "yaml", "jsonschema_rs", "ledger.store.sessions", "ledger.store.table_models", "ledger.operations.people") + \
    NOT_ON_THE_RECORDING_PATH


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def releases_file(directory: Path, name: str, count: int, epsilon: str = "1/10", start: int = 0) -> Path:
    lines = ["dataset: survey", "releases:"]
    for k in range(start, start + count):
        reads = "[age, income]" if k % 2 else "[income]"
        lines.append(f"  - {{id: {name}{k}, reads: {reads}, mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}}}")
    return write(directory, f"{name}.yaml", "\n".join(lines) + "\n")


class Transactions:
    """Begins, commits and rollbacks on an engine's connections."""

    def __init__(self, engine):
        self.seen: list[str] = []
        for name in ("begin", "commit", "rollback"):
            event.listen(engine, name, lambda _connection, name=name: self.seen.append(name))

    def count(self, name: str) -> int:
        return self.seen.count(name)


@pytest.fixture
def survey(ledger_url, tmp_path):
    assert cli_main(ledger_url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
    engine = engines.make_engine(ledger_url)
    yield engine, ledger_url, tmp_path
    engine.dispose()


def ledger_state(url: str) -> dict:
    caps = {c["cap"]: c for c in cli_main(url, "cap", "list", "--json").json()}
    verified = cli_main(url, "audit", "verify", "--json")
    assert verified.code == 0, verified.err
    return {"events": verified.json()["events"], "caps": caps}


def spent(cap: dict) -> Fraction:
    return Fraction(cap["current_exact"])


def test_recording_one_release_is_one_transaction_with_one_commit(survey):
    engine, url, tmp_path = survey
    before = ledger_state(url)
    path = releases_file(tmp_path, "one", 1, epsilon="1/2")  # reads income only
    actor = identity.authenticated(engine).name
    seen = Transactions(engine)
    recorded = operations.record(engine, operations.release_builder([path], actor), actor)
    assert recorded.ids == ("one0",)
    assert (seen.count("begin"), seen.count("commit"), seen.count("rollback")) == (1, 1, 0)
    after = ledger_state(url)  # every row that commit wrote agrees with the chain and the totals
    assert after["events"] == before["events"] + 1
    assert spent(after["caps"]["income"]) - spent(before["caps"]["income"]) == Fraction(1, 8)  # (1/2)^2 / 2
    assert spent(after["caps"]["age"]) == spent(before["caps"]["age"])  # reads no age: 0 (Tan Prop 3.3)


def test_recording_a_file_of_many_releases_commits_once(survey):
    engine, url, tmp_path = survey
    before = ledger_state(url)
    path = releases_file(tmp_path, "many", 40)
    actor = identity.authenticated(engine).name
    seen = Transactions(engine)
    recorded = operations.record(engine, operations.release_builder([path], actor), actor)
    assert len(recorded.ids) == 40
    assert (seen.count("begin"), seen.count("commit"), seen.count("rollback")) == (1, 1, 0)
    after = ledger_state(url)
    assert after["events"] == before["events"] + 40
    assert spent(after["caps"]["income"]) == 40 * Fraction(1, 200)  # 40 x (1/10)^2 / 2
    assert spent(after["caps"]["age"]) == 20 * Fraction(1, 10)  # the 20 that read age


def test_a_refused_file_commits_nothing(survey):
    engine, url, tmp_path = survey
    before = ledger_state(url)
    path = releases_file(tmp_path, "over", 12, epsilon="9")  # 6 read age: 54 > 50
    actor = identity.authenticated(engine).name
    seen = Transactions(engine)
    with pytest.raises(operations.BudgetRefused):
        operations.record(engine, operations.release_builder([path], actor), actor)
    assert seen.count("commit") == 0 and seen.count("rollback") == 1
    assert ledger_state(url) == before


def test_in_process_records_reuse_what_they_wrote_and_stay_right(survey):
    """Records one after another in one process read the totals, accountant states and
    roles they wrote themselves (cached by the audit head); a write by another process
    moves the head and is read back."""
    engine, url, tmp_path = survey
    actor = identity.authenticated(engine).name
    for k in range(3):
        operations.record(engine, operations.release_builder([releases_file(tmp_path, f"p{k}", 2, start=0)], actor),
                          actor)
    # another process (the CLI, its own engine) records in between
    assert cli_main(url, "record", releases_file(tmp_path, "other", 2, epsilon="1")).code == 0
    operations.record(engine, operations.release_builder([releases_file(tmp_path, "last", 2)], actor), actor)
    caps = ledger_state(url)["caps"]
    # income: 8 releases of 1/10 and 2 of 1: 8/200 + 2/2; age: p*1, last1 at 1/10 each, other1 at 1
    assert spent(caps["income"]) == Fraction(8, 200) + 1
    assert spent(caps["age"]) == 4 * Fraction(1, 10) + 1


def imported_after(argv: list[str], cwd: Path, names: tuple[str, ...], first: str = "") -> tuple[list[str], str]:
    code = (first + "import sys\nfrom ledger.cli import app as cli\n"
            f"sys.argv = ['privacy-ledger'] + {argv!r}\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            f"print('IMPORTED', [m for m in {names!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd).stdout
    line = next(line for line in out.splitlines() if line.startswith("IMPORTED"))
    return json.loads(line.removeprefix("IMPORTED ").replace("'", '"')), out


@pytest.mark.parametrize("command", ["check", "record"])
def test_check_and_record_import_only_what_they_use(tmp_path, command):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
    plan = releases_file(tmp_path, "plan", 2)
    imported, out = imported_after(["--db", url, command, str(plan)], tmp_path, NOT_ON_THE_RECORDING_PATH)
    assert imported == []
    assert ("every cap holds" if command == "check" else "recorded") in out


AT_A_DELTA = """\
dataset: survey
variables:
  - {name: age}
  - {name: income}
caps:
  - {subset: all, epsilon: 10, delta: 1e-9, filter: renyi}
"""
# scipy.special's and scipy.fft's packages (their __init__ imports scipy's array-API layer, which
# clones numpy), and dp_accounting's: a cap's figure at a delta is built without them
NOT_FOR_A_CAP_AT_A_DELTA = ("scipy.special", "scipy.fft", "scipy._lib._array_api", "scipy.stats", "scipy.signal",
                        "dp_accounting", "pandas", "matplotlib", "ledger.reporting.report")


@pytest.mark.parametrize("command", ["check", "record"])
def test_a_cap_at_a_delta_is_decided_without_scipys_packages_and_the_same_with_them(tmp_path, command):
    """A cap at a delta over Laplace, Gaussian and geometric releases, decided by its Rényi filter:
    the command imports none of the scipy.fft, scipy.special, scipy.stats packages nor dp_accounting;
    its output is the very text of the same command run after importing scipy's two packages."""
    outputs = []
    for imported_first in ("", "import scipy.special, scipy.fft\n"):
        directory = tmp_path / f"run{len(outputs)}"
        directory.mkdir()
        url = f"sqlite:///{directory / 'ledger.db'}"
        assert cli_main(url, "dataset", "add", write(directory, "survey.yaml", AT_A_DELTA)).code == 0
        history = write(directory, "history.yaml", "dataset: survey\nreleases:\n"
                        "  - {id: a1, reads: [age], mechanism: {name: laplace, epsilon: \"1/10\"}}\n"
                        "  - {id: a2, reads: [income], mechanism: {name: gaussian, sigma: 40, sensitivity: 1}}\n"
                        "  - {id: a3, reads: [age, income], mechanism: {name: geometric, epsilon: \"1/20\"}}\n")
        assert cli_main(url, "record", history).code == 0
        plan = write(directory, "plan.yaml", "dataset: survey\nreleases:\n"
                     "  - {id: p1, reads: [age], mechanism: {name: laplace, epsilon: \"1/10\"}}\n")
        imported, out = imported_after(["--db", url, command, str(plan)], directory, NOT_FOR_A_CAP_AT_A_DELTA,
                                       first=imported_first)
        assert "[ok] cap all (epsilon at delta" in out and "Rényi filter at order" in out
        if not imported_first:
            assert imported == []
        outputs.append([line for line in out.splitlines() if not line.startswith("IMPORTED")])
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("command, collector", [
    (["check", "plan.yaml"], False), (["record", "plan.yaml"], False), (["cap", "list"], True), (["table"], True),
    (["audit", "verify"], True), (["--help"], True),
])
@pytest.mark.parametrize("db_option", ["--db URL", "--db=URL"])
def test_a_fresh_check_or_record_runs_without_the_cyclic_collector(tmp_path, command, collector, db_option):
    """entry.main switches the cyclic garbage collector off for `check` and `record` alone (their
    collections cost more than the garbage they find, ledger/cli/entry.py); a check prints what it
    prints with the collector on."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
    plan = str(releases_file(tmp_path, "plan", 2))
    command = [plan if word == "plan.yaml" else word for word in command]
    argv = (["--db", url] if db_option == "--db URL" else [f"--db={url}"]) + command
    code = ("import gc, sys\nfrom ledger.cli.entry import main\n"
            f"sys.argv = ['privacy-ledger'] + {argv!r}\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('COLLECTOR', gc.isenabled())\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "LEDGER_RESIDENT": "0"})
    assert run.stdout.splitlines()[-1] == f"COLLECTOR {collector}", run.stdout + run.stderr
    if command[0] == "check":
        assert run.stdout.splitlines()[:-1] == cli_main(url, *command).out.splitlines()


@pytest.mark.parametrize("command", ["check", "record"])
def test_a_fresh_check_or_record_closes_its_ledger_and_freezes_what_is_left_before_the_teardown(tmp_path, command):
    """entry.main, once `check` or `record` has returned: the ledgers it opened are closed (SQLite's
    last close checkpoints the WAL: the file alone holds the record, no -wal file is left behind)
    and the objects alive are frozen, so the teardown's collections do not traverse them; what the
    command printed, its exit code and the exit handlers are those of an ordinary exit."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    # (added by a process of its own: this one then holds no connection that would keep the WAL)
    subprocess.run([sys.executable, "-m", "ledger", "--db", url, "dataset", "add",
                    str(write(tmp_path, "survey.yaml", DATASET))], check=True, capture_output=True, cwd=tmp_path)
    plan = str(releases_file(tmp_path, "plan", 2))
    code = ("import atexit, gc, sys\nfrom ledger.cli.entry import main\n"
            "atexit.register(lambda: print('EXIT HANDLER RAN', flush=True))\n"
            f"sys.argv = ['privacy-ledger', '--db', {url!r}, {command!r}, {plan!r}]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    print('EXIT', exc.code)\n"
            "print('FROZEN', gc.get_freeze_count() > 0)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "LEDGER_RESIDENT": "0"})
    lines = run.stdout.splitlines()
    assert lines[-3:] == ["EXIT 0", "FROZEN True", "EXIT HANDLER RAN"], run.stdout + run.stderr
    lines = lines[:-3]
    assert not (tmp_path / "ledger.db-wal").exists() and not (tmp_path / "ledger.db-shm").exists()
    if command == "record":
        assert "recorded 2 releases" in lines
        with sqlite3.connect(tmp_path / "ledger.db") as connection:  # the file alone, its WAL gone
            assert connection.execute("SELECT count(*) FROM releases").fetchone() == (2,)
    else:
        assert lines == cli_main(url, command, plan).out.splitlines()


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["record", "--help"]])
def test_help_and_version_import_no_database_library_and_no_report(tmp_path, argv):
    imported, out = imported_after(argv, tmp_path, NOT_FOR_HELP)
    assert imported == []
    assert out.strip()


def _shape(command) -> dict:
    """A click command as what a user can type and read: its options and arguments (names,
    help, defaults), its help text, and the same for each subcommand."""
    params = [(p.name, tuple(p.opts), tuple(p.secondary_opts), getattr(p, "help", None), repr(p.default),
               p.required, p.nargs) for p in command.params]
    subcommands = {name: _shape(sub) for name, sub in getattr(command, "commands", {}).items()}
    return {"params": params, "help": command.help, "subcommands": subcommands}


@pytest.mark.parametrize("argv, named", [
    (["--db", "sqlite:///x.db", "check", "plan.yaml"], "check"),
    (["--db=sqlite:///x.db", "record", "plan.yaml"], "record"),
    (["cap", "set", "--help"], "cap"),
    (["audit", "verify"], "audit"),
])
def test_a_fresh_process_builds_only_the_command_it_runs_and_the_same_one(argv, named, monkeypatch):
    """command_for builds the application with the named command alone:
    that command, its options, help and subcommands are exactly the whole application's."""
    from ledger.cli import app as cli

    monkeypatch.setattr(cli, "_COMMAND", [])
    monkeypatch.setattr(cli, "_ONE_COMMAND", {})
    alone = cli.command_for(argv)
    assert list(alone.commands) == [named]
    assert [p.name for p in alone.params] and _shape(alone)["params"] == _shape(cli.command())["params"]
    assert _shape(alone.commands[named]) == _shape(cli.command().commands[named])


@pytest.mark.parametrize("argv", [["--help"], ["--version"], [], ["--db", "sqlite:///x.db"],
                                  ["no-such-command"], ["--db", "sqlite:///x.db", "caps", "list"]])
def test_help_and_an_unknown_command_see_the_whole_application(argv, monkeypatch):
    """--help lists every command, and click's "Did you mean" for a misspelt command needs them all."""
    from ledger.cli import app as cli

    monkeypatch.setattr(cli, "_COMMAND", [])
    monkeypatch.setattr(cli, "_ONE_COMMAND", {})
    assert len(cli.command_for(argv).commands) > 20


def test_a_misspelt_command_is_still_offered_the_right_one(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ledger", "--db", f"sqlite:///{tmp_path / 'l.db'}", "caps"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "Did you mean 'cap'?" in result.stderr
    assert not (tmp_path / "l.db").exists()


# --------------------------------------------------------------------------
# The recording path's statements on the driver's cursor (store/driver.py)
# --------------------------------------------------------------------------

FIXED_MOMENT = session_state.now().replace(year=2026, month=3, day=1, hour=12, minute=0, second=0)


def _through_sqlalchemy(monkeypatch) -> None:
    """The reference: every statement of the driver's path run by SQLAlchemy's own execution."""
    from ledger.store import driver

    def execute(connection, statement, row=None, *, columns=False):
        connection.execute(statement, dict(row or {}))

    def execute_many(connection, statement, rows, *, columns=False):
        if rows:
            connection.execute(statement, [dict(row) for row in rows])

    def query(connection, statement, row=None):
        return connection.execute(statement, dict(row or {}))

    monkeypatch.setattr(driver, "execute", execute)
    monkeypatch.setattr(driver, "execute_many", execute_many)
    monkeypatch.setattr(driver, "query", query)
    monkeypatch.setattr(driver, "pipeline", lambda connection: None)


def _stored(url: str) -> dict[str, list[tuple]]:
    """Every table's rows as the database holds them (on PostgreSQL each column as text: a
    json column keeps the text it was given)."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    tables: dict[str, list[tuple]] = {}
    try:
        with engine.connect() as connection:
            for table in sorted(inspect(connection).get_table_names()):
                names = [c["name"] for c in inspect(connection).get_columns(table)]
                if url.startswith("postgresql"):
                    select = ", ".join(f'CAST("{name}" AS TEXT)' for name in names)
                else:
                    select = ", ".join(f'"{name}"' for name in names)
                rows = connection.execute(text(f'SELECT {select} FROM "{table}"')).all()
                tables[table] = sorted((tuple(row) for row in rows), key=repr)
    finally:
        engine.dispose()
    return tables


def _a_history(url: str, tmp_path: Path, name: str) -> None:
    """The same steps into a new ledger: a dataset with caps of every kind, releases recorded one
    by one (a new guarantee value and accounting event now and then), as a file, as published,
    approved and published, a cap set afterwards."""
    directory = tmp_path / name
    directory.mkdir()
    dataset = DATASET + "  - {subset: [age, income], epsilon: 40, delta: 1e-9}\n"
    assert cli_main(url, "dataset", "add", write(directory, "survey.yaml", dataset)).code == 0
    engine = engines.make_engine(url)
    try:
        actor = identity.authenticated(engine).name
        for k, epsilon in enumerate(["1/10", "1/10", "1/3", "1/10", "2/7"]):
            operations.record(engine, operations.release_builder(
                [releases_file(directory, f"one{k}-", 1, epsilon=epsilon)], actor), actor)
        operations.record(engine, operations.release_builder([releases_file(directory, "file", 6)], actor), actor)
        gaussian = write(directory, "g.yaml", "dataset: survey\nreleases:\n  - {id: g1, reads: [income], "
                                              "mechanism: {name: gaussian, sigma: 4, sensitivity: 1}}\n")
        operations.record(engine, operations.release_builder([gaussian], actor), actor)
        operations.change_status(engine, "file1", "approve", actor)
        operations.change_status(engine, "file1", "publish", actor)
        operations.add_caps(engine, "survey", [{"subset": ["age"], "rho": "7/2"}], actor, "test")
        operations.record(engine, operations.release_builder([releases_file(directory, "last", 2)], actor), actor)
    finally:
        engine.dispose()


def test_the_driver_writes_the_rows_sqlalchemy_would_write(ledger_url, other_ledger_url, tmp_path, monkeypatch):
    """The recording path runs its statements on the driver's cursor (PostgreSQL: pipelined),
    each value through its column type's own bind processor: the same steps at the same
    moments leave every table of the ledger, byte for byte, as SQLAlchemy's execution leaves it,
    and each ledger verifies."""
    monkeypatch.setattr(session_state, "now", lambda: FIXED_MOMENT)
    _a_history(ledger_url, tmp_path, "driver")
    with monkeypatch.context() as reference:
        _through_sqlalchemy(reference)
        process_caches.IDS_CACHE.clear()
        _a_history(other_ledger_url, tmp_path, "core")
    for url in (ledger_url, other_ledger_url):
        verified = cli_main(url, "audit", "verify")
        assert verified.code == 0, verified.err
    driven, reference_rows = _stored(ledger_url), _stored(other_ledger_url)
    assert driven.keys() == reference_rows.keys()
    for table in driven:
        assert driven[table] == reference_rows[table], table
    assert len(driven["audit_events"]) > 20 and len(driven["release_reads"]) > 10


def test_a_write_that_fails_in_the_pipeline_commits_nothing_and_the_next_record_works(survey, monkeypatch):
    """A pipelined write that fails (here: an accounting row written twice) is raised before the
    commit; the transaction is rolled back and the connection leaves pipeline mode, so the same
    engine's next record is written and the ledger verifies."""
    engine, url, tmp_path = survey
    before = ledger_state(url)
    actor = identity.authenticated(engine).name
    from ledger.store import accounting_writes

    insert_rows = accounting_writes.insert_rows

    def twice(connection, releases, variables, known=None):
        insert_rows(connection, releases, variables, known)
        insert_rows(connection, releases, variables, known)

    with monkeypatch.context() as patched:
        patched.setattr(accounting_writes, "insert_rows", twice)
        seen = Transactions(engine)
        with pytest.raises(Exception) as failure:
            operations.record(engine, operations.release_builder([releases_file(tmp_path, "bad", 1)], actor), actor)
        assert "release_accounting" in str(failure.value) or "UNIQUE" in str(failure.value).upper()
        assert seen.count("commit") == 0 and seen.count("rollback") == 1
    assert ledger_state(url) == before
    recorded = operations.record(engine, operations.release_builder([releases_file(tmp_path, "good", 2)], actor),
                                 actor)
    assert recorded.ids == ("good0", "good1")
    assert ledger_state(url)["events"] == before["events"] + 2


def test_ids_known_from_one_ledger_are_not_used_in_another_at_the_same_url(tmp_path):
    """The guarantee value ids a process knows are kept by the audit head: a new ledger made at
    the same path (another chain) gives its own ids, and its accounting rows verify."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    actor = identity.os_user().name
    for epsilons in (["1/10", "1/3"], ["1/3", "1/7", "1/10"]):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{tmp_path / 'ledger.db'}{suffix}").unlink(missing_ok=True)
        assert cli_main(url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
        engine = engines.make_engine(url)
        try:
            for k, epsilon in enumerate(epsilons):
                operations.record(engine, operations.release_builder(
                    [releases_file(tmp_path, f"r{k}-", 1, epsilon=epsilon)], actor), actor)
        finally:
            engine.dispose()
        verified = cli_main(url, "audit", "verify")
        assert verified.code == 0, verified.out + verified.err


def test_a_record_past_the_first_chunk_reads_where_the_chunks_end_once_per_process(survey, monkeypatch):
    """Once a ledger holds a complete range of seqs, every record seals the ranges it completes
    (sealed.py). Where a dataset's chunks end is read once, then kept with the ids (by the audit
    head): the records that complete no range read nothing more (on PostgreSQL the read was a
    round trip of its own, and ended the record's pipeline). The chunks are those a fresh
    sealing makes, and the ledger verifies."""
    from ledger.store import sealed

    engine, url, tmp_path = survey
    monkeypatch.setattr(sealed, "CHUNK_SEQS", 4)
    reads = []
    sealed_stop = sealed.sealed_stop
    monkeypatch.setattr(sealed, "sealed_stop", lambda connection, dataset: reads.append(dataset) or
                        sealed_stop(connection, dataset))
    actor = identity.authenticated(engine).name
    for k in range(15):
        operations.record(engine, operations.release_builder([releases_file(tmp_path, f"c{k}-", 1)], actor), actor)
    top = ledger_state(url)["events"]
    assert reads == ["survey"]  # (without the kept stop: one read per record past seq 3)
    from sqlalchemy import create_engine, text

    reader = create_engine(url)
    try:
        with reader.connect() as connection:
            chunks = connection.execute(text('SELECT "first", stop, count FROM accounting_chunks ORDER BY "first"')).all()
            rows = connection.execute(text("SELECT seq FROM release_accounting")).scalars().all()
    finally:
        reader.dispose()
    complete = (top + 1) // 4  # seqs 0 .. top: the complete ranges of 4
    assert [(first, stop) for first, stop, _ in chunks] == [(4 * k, 4 * k + 4) for k in range(complete)]
    assert [count for _, _, count in chunks] == [len([s for s in rows if 4 * k <= s < 4 * k + 4])
                                                 for k in range(complete)]
    assert cli_main(url, "audit", "verify").code == 0  # every chunk sealed afresh: the same


DELTA_DATASET = DATASET + "  - {subset: [age, income], epsilon: 40, delta: 1e-9}\n  - {name: income-at-delta, subset: [income], epsilon: 30, delta: 1e-6}\n"


def _planned_then_published(url: str, tmp_path: Path, name: str) -> list[dict]:
    """Releases recorded one by one into a ledger with caps at a delta: planned ones first, then
    published ones; the budget decisions of every recording event."""
    directory = tmp_path / name
    directory.mkdir()
    assert cli_main(url, "dataset", "add", write(directory, "survey.yaml", DELTA_DATASET)).code == 0
    engine = engines.make_engine(url)
    actor = identity.authenticated(engine).name
    try:
        for k in range(8):
            mechanism = "{name: gaussian, sigma: 3, sensitivity: 1}" if k % 3 == 2 else \
                f"{{name: laplace, epsilon: \"1/{k + 2}\"}}"
            status = ", status: published, published_at: '2026-01-01T00:00:00Z'" if k >= 4 else ""
            reads = "[income]" if k % 3 == 2 else "[age, income]"  # (a Gaussian: no pure-epsilon bound on age)
            path = write(directory, f"r{k}.yaml", f"dataset: survey\nreleases:\n  - {{id: r{k}, reads: {reads}, "
                                                  f"mechanism: {mechanism}{status}}}\n")
            operations.record(engine, operations.release_builder([path], actor), actor)
    finally:
        engine.dispose()
    verified = cli_main(url, "audit", "verify", "--json")
    assert verified.code == 0, verified.err
    rows = _stored(url)["audit_events"]
    return [row for row in rows if "budget_decisions" in str(row)]


def test_a_record_decides_each_cap_once_and_the_same_as_deciding_again(ledger_url, other_ledger_url, tmp_path,
                                                                       monkeypatch):
    """A cap's decision before a record's plan is the one the previous record made after its
    own, on the same running state and figure (cap_accounting._DECIDED): taken, not made again,
    so a record of one release makes one decision per cap at a delta. Every recording event's
    decisions (accountant, filter, figure) and every stored row
    are those of deciding both again each time, byte for byte."""
    from ledger.accounting import cap_decisions
    from ledger.operations import cap_accounting

    monkeypatch.setattr(session_state, "now", lambda: FIXED_MOMENT)
    made = []
    decide = cap_decisions.cap_decision
    monkeypatch.setattr(cap_decisions, "cap_decision", lambda cap, *rest: made.append(cap.name) or decide(cap, *rest))
    taken = _planned_then_published(ledger_url, tmp_path, "taken")
    per_record = len(made)
    with monkeypatch.context() as again:
        again.setattr(cap_accounting, "_decision_before",
                      lambda cap, value, state: cap_decisions.cap_decision(cap, value, None, state))
        process_caches.IDS_CACHE.clear()
        made.clear()
        decided = _planned_then_published(other_ledger_url, tmp_path, "decided")
    assert taken == decided
    assert _stored(ledger_url) == _stored(other_ledger_url)
    # made again: two decisions (before and after) per cap a record touches; taken, the decisions
    # before the plan of the 7 records after the first on the 2 caps at a delta are not made
    assert len(made) == 2 * (6 * 4 + 2 * 3)
    assert per_record == len(made) - 7 * 2


def test_a_record_on_postgresql_is_two_round_trips_its_writes_and_commit_one(survey, tmp_path):
    """On PostgreSQL a record (its caches warm) is two exchanges with the server, read from
    libpq's own trace of the protocol: BEGIN with the write lock, the stamps and which of the
    file's release ids the ledger holds; then every write and the COMMIT in one simple query,
    answered once the commit is done (its ReadyForQuery says idle) and followed by nothing
    (psycopg's commit finds the transaction ended). Before, the id was looked up in a round trip
    of its own, the writes were pipelined and the COMMIT was a fourth exchange. The record is
    there, the ledger verifies, and the same file recorded again is a retry (nothing written)."""
    from psycopg import pq

    engine, url, directory = survey
    if not url.startswith("postgresql"):
        pytest.skip("PostgreSQL's round trips")
    actor = identity.authenticated(engine).name
    operations.record(engine, operations.release_builder([releases_file(directory, "warm", 1)], actor), actor)
    events = ledger_state(url)["events"]
    trace = tmp_path / "libpq.trace"
    traced = releases_file(directory, "traced", 1)
    with engine.connect() as connection:  # the pool's one connection: the next record's
        raw = connection.connection.dbapi_connection
    with trace.open("w") as out:
        raw.pgconn.trace(out.fileno())
        raw.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            recorded = operations.record(engine, operations.release_builder([traced], actor), actor)
        finally:
            raw.pgconn.untrace()
    messages = [line.split("\t") for line in trace.read_text().splitlines()]
    ready = [m for m in messages if m[0] == "B" and m[2] == "ReadyForQuery"]
    assert len(ready) == 2, trace.read_text()
    assert ready[-1][3].strip() == "I" and messages[-1] == ready[-1]  # the last answer: committed, idle
    queries = [m[3].strip() for m in messages if m[0] == "F" and m[2] == "Query"]
    assert len(queries) == 2 and queries[0].startswith('"BEGIN;') and "'traced0'" in queries[0]
    assert queries[1].startswith('"INSERT INTO audit_events') and queries[1].endswith('COMMIT"')
    assert recorded.ids == ("traced0",)
    assert ledger_state(url)["events"] == events + 1
    again = operations.record(engine, operations.release_builder([traced], actor), actor)
    assert again.ids == () and [r.id for r in again.unchanged] == ["traced0"]
    assert ledger_state(url)["events"] == events + 1
    # the Python API's builder declares the ids it is given before the transaction too
    document = {"dataset": "survey", "releases": [{"id": "api0", "reads": ["age"],
                                                   "mechanism": {"name": "laplace", "epsilon": "1/10"}}]}
    build = operations.source_builder([document, traced], actor)
    assert build.release_ids == ("api0",)
    assert operations.record(engine, build, actor).ids == ("api0",)
