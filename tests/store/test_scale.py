"""Accounting rows, the commands that read them, start-up imports.

The figures the CLI prints from the accounting rows are checked against the
reference rules written out release by release (`cost_rule.ledger_cost`,
docs/explanation/model.md) over releases built independently of the store.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import pytest
from sqlmodel import Session

from ledger.accounting import chunked_table
from ledger.store import decoded_history, engines, index_from_rows, schema_migrations, session_state
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.cost_rule import ledger_cost
from ledger.accounting.ledger_index import LedgerIndex
from ledger.input.datasets import build_dataset
from ledger.input.documents import read_document
from ledger.input.releases import load_releases
from ledger.input.snapshot import LedgerSnapshot
from ledger.core.numbers import figure_fields
from ledger.core.records import CHARGED_STATUSES
from support import cli_main, migrations

DATASET = """\
dataset: survey
self_approval: true  # (history recorded as published by its recorder)
variables:
  - {name: age}
  - {name: sex}
  - {name: income}
  - {name: region}
  - {name: degree}
caps:
  - {subset: [income], rho: 100}
"""

RELEASES = """\
dataset: survey
families:
  - {id: by-region, partition: [region]}
  - {id: random-split, partition: random}
releases:
  - {id: a, reads: [age, sex], mechanism: {name: laplace, epsilon: "1/3"}}
  - {id: b, reads: [income], mechanism: {name: gaussian, sigma: 4, sensitivity: 1}}
  - {id: c, reads: [income, region], mechanism: {name: tan-consistent-counts, epsilon: "1/2"},
     guarantees: [{protects: [income], epsilon: "1/2"}]}
  - {id: d, reads: [age, income, degree], mechanism: {name: geometric, epsilon: 0.1}}
  - {id: e, reads: [sex, income], mechanism: {name: declared},
     guarantees: [{protects: [sex, income], epsilon: 1}, {protects: [sex, income], rho: "1/50"}]}
  - {id: f, reads: [region, income], family: by-region, part: region=north,
     mechanism: {name: laplace, epsilon: "1/4"},
     guarantees: [{protects: [region, income], epsilon: "1/4", relation: add-remove}]}
  - {id: g, reads: [region, age], family: by-region, part: region=south, mechanism: {name: laplace, epsilon: "1/5"}}
  - {id: h, reads: [degree], family: random-split, part: half 1, mechanism: {name: laplace, epsilon: "1/7"}}
  - {id: i, reads: [degree, sex], family: random-split, part: half 2, mechanism: {name: laplace, epsilon: "1/9"}}
  - {id: j, reads: [age], mechanism: {name: laplace, epsilon: 2}, status: planned}
  - {id: k, reads: [sex, degree], mechanism: {name: declared},
     guarantees: [{protects: [sex, degree], epsilon: "1/11"}, {protects: [sex], epsilon: "1/20"}]}
"""

VARIABLES = ("age", "sex", "income", "region", "degree")


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


@pytest.fixture
def ledger(tmp_path):
    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}"
    assert cli_main(url, "dataset", "add", write(tmp_path, "survey.yaml", DATASET)).code == 0
    run = cli_main(url, "record", write(tmp_path, "releases.yaml", RELEASES))
    assert run.code == 0, run.err
    assert cli_main(url, "cancel", "j", "--reason", "not run").code == 0
    return url, tmp_path


def reference(tmp_path: Path):
    """The charged releases and families, built from the files alone (no store)."""
    document, errors = read_document(write(tmp_path, "ref-survey.yaml", DATASET))
    dataset, errors = build_dataset(document)
    assert not errors
    releases, families, errors = load_releases([tmp_path / "releases.yaml"],
                                               LedgerSnapshot(datasets={"survey": dataset}),
                                               recorded_by="t", recorded_at=session_state.now())
    assert not errors, errors
    charged = [r for r in releases if r.id != "j" and r.status in CHARGED_STATUSES]
    return charged, families


def test_subset_and_pairs_from_accounting_rows_equal_the_reference_rules(ledger):
    url, tmp_path = ledger
    releases, families = reference(tmp_path)
    delta = Fraction(1, 10**9)
    for size in (1, 2, 3, 5):
        for subset in combinations(VARIABLES, size):
            run = cli_main(url, "subset", *subset, "--json", "--accountant", "basic")  # the reference rule
            assert run.code == 0, run.err
            expected = ledger_cost(releases, families, subset, at_delta(delta)).epsilon(delta)
            got = {k: run.json()[k] for k in ("epsilon", "epsilon_exact")}
            # the JSON figure shape: exact text where the figure is rational, else null
            assert got == figure_fields("epsilon", expected), (subset, got, expected)
    pairs = cli_main(url, "pairs", "--json", "--accountant", "basic").json()  # the reference rule
    assert len(pairs) == 10
    for entry in pairs:
        expected = ledger_cost(releases, families, entry["subset"], at_delta(delta)).epsilon(delta)
        assert entry["epsilon"] == ("inf" if expected == float("inf") else pytest.approx(float(expected))), entry


def test_the_index_from_accounting_rows_is_the_index_of_the_releases(ledger):
    url, tmp_path = ledger
    releases, families = reference(tmp_path)
    expected = LedgerIndex(VARIABLES, releases, families)
    engine = engines.make_engine(url)
    with Session(engine) as session:
        got = index_from_rows.index_for(session, VARIABLES, "survey", {f.id: f for f in families})
        assert list(got.release_ids) == [r.id for r in releases]  # (read while the session is open)
    assert (got.reads == expected.reads).all()
    assert (got.simple == expected.simple).all()
    assert got.ambiguous == expected.ambiguous
    assert got.members == expected.members
    table, reference_table = got.table("survey"), expected.table("survey")
    assert table.total == reference_table.total and table.total_dataset_wide == reference_table.total_dataset_wide
    assert [[table.cell(i, j) for j in range(5)] for i in range(len(releases))] == \
        [[reference_table.cell(i, j) for j in range(5)] for i in range(len(releases))]


def test_verify_names_an_accounting_row_changed_behind_the_ledger(ledger):
    url, tmp_path = ledger
    assert cli_main(url, "audit", "verify").code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("UPDATE release_accounting SET reads = x'01' WHERE release = 'd'")
    run = cli_main(url, "audit", "verify")
    assert run.code == 1
    assert "release d): the accounting row differs from the release (fields: reads)" in run.err
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DELETE FROM release_accounting WHERE release = 'a'")
    assert "release a): its accounting row is missing" in cli_main(url, "audit", "verify").err


def test_a_status_change_updates_the_accounting_row(ledger):
    url, _ = ledger
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        assert connection.execute("SELECT status FROM release_accounting WHERE release = 'j'").fetchone() == \
            ("cancelled",)
    assert "j" not in cli_main(url, "subset", "age", "--json").json()["releases"]


def test_a_ledger_of_schema_3_is_upgraded_once_with_an_audit_event_per_version(ledger):
    url, tmp_path = ledger
    path = url.removeprefix("sqlite:///")
    before = cli_main(url, "table", "--json").json()
    with sqlite3.connect(path) as connection:  # as schema 3 left it: no accounting tables
        connection.execute("DROP TABLE release_accounting")
        connection.execute("DROP TABLE guarantee_values")
        connection.execute("DROP TABLE release_reads")
        connection.execute("UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'")
        events = connection.execute("SELECT count(*) FROM audit_events").fetchone()[0]
    assert cli_main(url, "table", "--json").json() == before
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM release_accounting").fetchone()[0] == 11
        migrated = connection.execute("SELECT kind, subject, payload FROM audit_events WHERE seq > ?",
                                      (events,)).fetchall()
    # schema 4, schema 5 (the accounting rows), schema 6
    # (their events and moments: built with the rows by the schema 5 step, nothing left to add), schema 7
    # (subsampled releases keep their sampling event)
    assert migrated == migrations(4, schema_migrations.SCHEMA_VERSION)
    assert cli_main(url, "audit", "verify").code == 0
    cli_main(url, "table")
    with sqlite3.connect(path) as connection:  # once
        assert connection.execute("SELECT count(*) FROM audit_events").fetchone()[0] == events + len(migrations(4, schema_migrations.SCHEMA_VERSION))


def test_help_and_version_import_neither_the_orm_nor_numpy():
    code = ("import sys\nfrom ledger.cli import app as cli\nsys.argv = ['privacy-ledger', '--help']\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('sqlalchemy', 'sqlmodel', 'numpy', 'pandas', 'jinja2', 'matplotlib', 'rich')"
            " if m in sys.modules]\nprint('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


def test_check_imports_neither_numpy_nor_pandas(ledger, tmp_path):
    url, _ = ledger
    plan = write(tmp_path, "plan.yaml", "dataset: survey\nreleases:\n"
                 "  - {id: p, reads: [income], mechanism: {name: laplace, epsilon: 1}}\n")
    code = (f"import sys\nfrom ledger.cli import app as cli\nsys.argv = ['privacy-ledger', '--db', {url!r}, 'check', {str(plan)!r}]\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', [m for m in ('numpy', 'pandas', 'jinja2', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "every cap holds" in out and "HEAVY []" in out


def test_verify_since_checkpoint_checks_only_what_was_appended_and_catches_a_change(ledger):
    url, tmp_path = ledger
    path = url.removeprefix("sqlite:///")
    first = cli_main(url, "audit", "verify", "--since-checkpoint")  # no checkpoint yet: a full verification
    assert first.code == 0 and "since the last verified head" not in first.out
    more = write(tmp_path, "more.yaml", "dataset: survey\nreleases:\n"
                 "  - {id: m1, reads: [age], mechanism: {name: laplace, epsilon: 1}}\n"
                 "  - {id: m2, reads: [sex], mechanism: {name: laplace, epsilon: 1}}\n")
    assert cli_main(url, "record", more).code == 0
    with sqlite3.connect(path) as connection:
        events = connection.execute("SELECT count(*) FROM audit_events").fetchone()[0]
    run = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert run.code == 0, run.err
    assert f"events {events - 1}-{events} checked, appended since the last verified head" in run.out
    with sqlite3.connect(path) as connection:  # a row named by an event after the checkpoint
        assert cli_main(url, "record", write(tmp_path, "m3.yaml", "dataset: survey\nreleases:\n"
                        "  - {id: m3, reads: [age], mechanism: {name: laplace, epsilon: 1}}\n")).code == 0
        connection.execute("UPDATE releases SET title = 'edited' WHERE id = 'm3'")
        connection.execute("UPDATE release_accounting SET status = 'cancelled' WHERE release = 'm3'")
    run = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert run.code == 1
    assert "release m3): the release row was changed outside the ledger (fields: title)" in run.err
    assert "release m3): the accounting row differs from the release (fields: status" in run.err
    with sqlite3.connect(path) as connection:  # an event before the checkpoint, rewritten
        connection.execute("UPDATE releases SET title = 'x' WHERE id = 'm3'")
        connection.execute("UPDATE audit_events SET hash = 'f00' WHERE seq = ?", (events,))
    run = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "the verified checkpoint's hash changed" in run.err


def test_verify_since_checkpoint_finds_the_head_event_itself_rewritten_with_its_hash_kept(ledger):
    """The checkpoint's own event is checked as every later one is: its content edited behind the
    ledger's back (its stored hash kept) no longer hashes to that hash, and --since-checkpoint (which
    a report past a verified head also runs) says so, instead of only comparing the stored hash."""
    url, tmp_path = ledger
    path = url.removeprefix("sqlite:///")
    assert cli_main(url, "audit", "verify").code == 0  # keeps the head
    assert cli_main(url, "audit", "verify", "--since-checkpoint").code == 0  # nothing appended: it holds
    with sqlite3.connect(path) as connection:
        head = connection.execute("SELECT max(seq) FROM audit_events").fetchone()[0]
        connection.execute("UPDATE audit_events SET actor = 'mallory' WHERE seq = ?", (head,))
    run = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert run.code == 1
    assert f"event {head} (" in run.err and "the verified checkpoint's content does not match its hash" in run.err


def test_the_verified_head_keeps_when_it_was_verified_and_an_old_head_is_upgraded_in_place(ledger):
    """Brief h3: the verified head stores when it was verified and when the last full verification
    ran (an incremental run carries the latter forward); a head kept by schema 7 ("seq:hash", no
    time) is upgraded in place by the schema 8 migration, with its audit event; holding no digest of
    the derived rows (store/derived.py), the next --since-checkpoint verifies in full."""
    from datetime import datetime, timedelta

    from ledger.store import verified_head

    url, tmp_path = ledger
    path = url.removeprefix("sqlite:///")

    def kept():
        with sqlite3.connect(path) as connection:
            (value,), = connection.execute("SELECT value FROM ledger_meta WHERE key = 'verified_head'").fetchall()
        return value, verified_head.parse(value)

    before = session_state.now()
    assert cli_main(url, "audit", "verify").code == 0
    value, full = kept()
    with sqlite3.connect(path) as connection:
        events, digest = connection.execute("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").fetchone()
    assert json.loads(value)["seq"] == events and full.hash == digest
    assert before <= full.at <= session_state.now() and full.full_at == full.at
    assert cli_main(url, "record", write(tmp_path, "h1.yaml", "dataset: survey\nreleases:\n"
                    "  - {id: h1, reads: [age], mechanism: {name: laplace, epsilon: 1}}\n")).code == 0
    with sqlite3.connect(path) as connection:  # the full verification an hour ago, as a clock would have it
        connection.execute("UPDATE ledger_meta SET value = ? WHERE key = 'verified_head'",
                           (verified_head.VerifiedHead(full.seq, full.hash, full.at - timedelta(hours=1),
                                                       full.at - timedelta(hours=1), full.derived).to_value(),))
    assert cli_main(url, "audit", "verify", "--since-checkpoint").code == 0
    _, incremental = kept()
    assert incremental.seq == events + 1 and incremental.at >= full.at
    assert incremental.full_at == full.at - timedelta(hours=1)  # carried forward, not moved

    with sqlite3.connect(path) as connection:  # as schema 7 kept it
        connection.execute("UPDATE ledger_meta SET value = ? WHERE key = 'verified_head'",
                           (f"{incremental.seq}:{incremental.hash}",))
        connection.execute("UPDATE ledger_meta SET value = '7' WHERE key = 'schema_version'")
        count = connection.execute("SELECT count(*) FROM audit_events").fetchone()[0]
    assert cli_main(url, "releases").code == 0  # any command opening the ledger upgrades it
    value, upgraded = kept()
    assert json.loads(value) == {"seq": incremental.seq, "hash": incremental.hash, "at": None, "full_at": None}
    run = cli_main(url, "audit", "verify", "--since-checkpoint")  # the upgraded head: no digest of the
    assert run.code == 0, run.err                                  # derived rows, migrations since: in full
    upgrades = len(migrations(8, schema_migrations.SCHEMA_VERSION))  # (schemas 8 to the current one)
    assert "appended since the last verified head" not in run.out
    with sqlite3.connect(path) as connection:
        migrated = connection.execute("SELECT kind, subject, payload FROM audit_events WHERE seq > ?",
                                      (count,)).fetchall()
    assert migrated == migrations(8, schema_migrations.SCHEMA_VERSION)
    value, upgraded = kept()
    assert upgraded.seq == count + upgrades and isinstance(upgraded.at, datetime)
    assert upgraded.full_at == upgraded.at and upgraded.derived is not None  # verified in full, digest kept
    assert verified_head.parse(f"{incremental.seq}:{incremental.hash}") == verified_head.VerifiedHead(
        incremental.seq, incremental.hash)


def test_verify_names_a_changed_inverted_read(ledger):
    url, _ = ledger
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        seq = connection.execute("SELECT seq FROM release_accounting WHERE release = 'b'").fetchone()[0]
        connection.execute("DELETE FROM release_reads WHERE seq = ?", (seq,))
    run = cli_main(url, "audit", "verify")
    assert run.code == 1 and "release b): its release_reads rows are missing" in run.err


def test_the_table_in_chunks_keeps_the_totals_and_the_largest_rows(ledger):
    url, tmp_path = ledger
    releases, families = reference(tmp_path)
    delta = Fraction(1, 10**9)
    expected = LedgerIndex(VARIABLES, releases, families).table("survey", at_delta(delta))
    engine = engines.make_engine(url)
    with Session(engine) as session:
        index = index_from_rows.index_for(session, VARIABLES, "survey", {f.id: f for f in families}, titles=True)
    got = chunked_table.table_in_chunks(index, "survey", at_delta(delta), delta, shown=3, chunk=2)
    assert got.total == expected.total and got.total_dataset_wide == expected.total_dataset_wide
    wide = [expected.row_dataset_wide(i).epsilon(delta) for i in range(len(releases))]
    largest = sorted(sorted(range(len(releases)), key=lambda i: -wide[i])[:3])
    assert [r.id for r in got.releases] == [releases[i].id for i in largest]
    assert [[got.cell(k, j) for j in range(5)] for k in range(3)] == \
        [[expected.cell(i, j) for j in range(5)] for i in largest]


def test_table_json_of_a_large_table_is_written_a_chunk_at_a_time_as_the_whole_document(ledger, monkeypatch):
    """Past TABLE_CELL_LIMIT cells, `table --json` writes its rows a chunk of releases at a
    time (cli/table_json.py: at a million releases the whole document took more than
    10 GB); the text is the one the whole document gives, to the byte, with every row."""
    from ledger.cli import figure_commands, table_json

    url, tmp_path = ledger
    odd = write(tmp_path, "odd.yaml", 'dataset: survey\nreleases:\n  - {id: "z 1", title: "Tabl\\u00e9 \\"q\\" \\\\ x",'
                                     ' reads: [income, age], mechanism: {name: laplace, epsilon: "1/8"}}\n')
    assert cli_main(url, "record", odd).code == 0
    for delta in ((), ("--delta", "1e-6")):
        whole = cli_main(url, "table", "--json", *delta)
        assert whole.code == 0 and json.loads(whole.out)["rows"]
        written = []
        with monkeypatch.context() as patch:
            patch.setattr(figure_commands, "TABLE_CELL_LIMIT", 1)
            patch.setattr(table_json, "CHUNK", 3)  # several chunks, the last a short one
            real = table_json.write
            patch.setattr(table_json, "write", lambda *args, **kw: written.append(1) or real(*args, **kw))
            streamed = cli_main(url, "table", "--json", *delta)
        assert written and streamed.code == 0
        assert streamed.out == whole.out


def test_the_default_durability_keeps_every_acknowledged_record(tmp_path):
    """SQLite syncs its log at every commit (synchronous=FULL is 2); PostgreSQL flushes at commit."""
    import os

    engine = engines.make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    url = os.environ.get("LEDGER_TEST_POSTGRES_URL")
    if url:
        engine = engines.make_engine(url)
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SHOW synchronous_commit").scalar() == "on"


def test_version():
    from ledger import __version__

    run = cli_main("sqlite:///unused.db", "--version")
    assert run.code == 0 and run.out.strip() == f"privacy-ledger {__version__}"


def test_the_schema_7_upgrade_rebuilds_the_caps_accountant_states_once(tmp_path):
    """Schema 7 changes what a cap's accountant state holds (a subsampled release's sampling
    event): the upgrade rebuilds every state, so reads do not recompute them from the history."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", "examples/graduates.dataset.yaml").code == 0
    assert cli_main(url, "record", "examples/graduates.releases.yaml").code == 0
    assert cli_main(url, "cap", "set", "income", "--epsilon", "50", "--delta", "1e-9").code == 0
    before = cli_main(url, "cap", "list", "--json").json()
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:  # as schema 6 left it: states of the previous version
        connection.execute("DELETE FROM cap_accountant_state")
        connection.execute("UPDATE ledger_meta SET value = '6' WHERE key = 'schema_version'")
    assert cli_main(url, "cap", "list", "--json").json() == before
    with sqlite3.connect(path) as connection:
        states = [json.loads(text) for (text,) in connection.execute("SELECT state FROM cap_accountant_state")]
    from ledger.accounting import cap_states
    assert states and all(state["v"] == cap_states.STATE_VERSION for state in states)
    assert cli_main(url, "audit", "verify").code == 0


@pytest.mark.parametrize("change, message", [
    ("DELETE FROM release_reads WHERE seq = {seq} AND position = 0", "the release_reads rows differ from its reads"),
    ("INSERT INTO release_reads (dataset, position, seq) VALUES ('survey', 3, {seq})",
     "the release_reads rows differ from its reads"),
    ("INSERT INTO release_reads (dataset, position, seq) VALUES ('survey', 40, {seq})",
     "the release_reads rows differ from its reads"),  # a position past every variable
])
def test_verify_since_the_checkpoint_names_a_changed_inverted_read(ledger, change, message):
    """The incremental verification reads the appended releases' inverted reads by the primary
    key (dataset, position, seq range), and still sees a row deleted, added, or out of range."""
    url, directory = ledger
    assert cli_main(url, "audit", "verify").code == 0  # the checkpoint
    new = "dataset: survey\nreleases:\n  - {id: later, reads: [age, sex], mechanism: {name: laplace, epsilon: \"1/10\"}}\n"
    assert cli_main(url, "record", write(directory, "later.yaml", new)).code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        seq = connection.execute("SELECT seq FROM release_accounting WHERE release = 'later'").fetchone()[0]
        connection.execute(change.format(seq=seq))
    run = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert run.code == 1 and "release later): " + message in run.err, run.err


def test_releases_are_listed_a_chunk_at_a_time_as_the_whole_list(ledger, monkeypatch):
    """`releases` reads, decodes and writes a chunk of releases at a time, with those releases'
    steps alone. The JSON is json.dumps of the whole list, to the byte, whatever the chunk; the
    text lists every release once, aligned, and the cancellation's reason after the table."""
    url, tmp_path = ledger
    odd = write(tmp_path, "odd.yaml", 'dataset: survey\nreleases:\n  - {id: "z 1", title: "Tabl\\u00e9 \\"q\\" \\u2028 x",'
                                     ' reads: [income, age], mechanism: {name: laplace, epsilon: "1/8"}}\n')
    assert cli_main(url, "record", odd).code == 0
    whole_json, whole_text = cli_main(url, "releases", "--json"), cli_main(url, "releases")
    listed = whole_json.json()
    assert whole_json.out == json.dumps(listed, indent=2, ensure_ascii=False) + "\n"
    assert [r["id"] for r in listed] == [*"abcdefghijk", "z 1"]
    assert next(r for r in listed if r["id"] == "j")["steps"][-1]["reason"] == "not run"
    with monkeypatch.context() as patch:
        patch.setattr(decoded_history, "RELEASE_PAGE", 5)  # three pages, the last a short one
        patch.setattr(decoded_history, "snapshot", lambda *a, **k: pytest.fail("releases decoded the whole history"))
        streamed_json, streamed_text = cli_main(url, "releases", "--json"), cli_main(url, "releases")
    assert streamed_json.code == 0 and streamed_json.out == whole_json.out
    lines = streamed_text.out.splitlines()
    assert lines[0].split() == ["id", "dataset", "status", "reads", "family", "charge", "recorded", "published"]
    table = [line for line in lines if not line.startswith("id ")]
    assert [line.split()[0] for line in table] == [*"abcdefghijk", "z", "j:"]
    assert table[-1].startswith("j: cancelled by ") and table[-1].endswith(": not run")
    import re

    def cells(text: str) -> list[list[str]]:  # each line's columns (two spaces or more between them)
        return [re.split(r"\s{2,}", line) for line in text.splitlines() if not line.startswith("id ")]

    assert cells(streamed_text.out) == cells(whole_text.out)
    header = lines[0]
    for line in lines[1:-1]:  # aligned: each column starts where the header above it says
        if line.startswith("id "):
            header = line
            continue
        starts = [m.start() for m in re.finditer(r"(?<=  )\S", header)]
        assert all(line[k - 2:k] == "  " for k in starts if k < len(line)), (header, line)
