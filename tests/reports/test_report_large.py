"""The summarised report of a large ledger, computed from the accounting rows.

Past `summary_from()` releases the report is built by `gather_large` and
`build_large_report` (no Release decoded but the listed ones, the audit trail
counted by SQL, the register paged from the store) instead of `gather` and
`build_report` over every decoded release. Here a small ledger, built through the
real pipeline (bench_report.build_ledger: families, zCDP, Tan's consistent counts,
every lifecycle status, caps in epsilon and rho), is reported both ways and every
section must be the same: the risk table's total row, the headline, the caps, the
pairs, the timeline, the listed releases, the audit trail, and the complete
register row by row. The CLI, with the threshold lowered, takes the large path and
its CSV holds every release of the store.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_report import build_ledger  # noqa: E402

from ledger.operations import choices  # noqa: E402
from ledger.store import decoded_history, engines, schema_migrations, sessions, table_models
from ledger.operations.report_inputs import gather  # noqa: E402
from ledger.api import Ledger
from ledger.cli.report import gather_large  # noqa: E402
from ledger.cli.report_register import large_register_csv, large_register_entries, register_csv  # noqa: E402
from ledger.operations.report_inputs import ChainStatus  # noqa: E402
from ledger.reporting.report import SUMMARY_ENV, build_large_report, build_report  # noqa: E402
from support import cli_main, migrations  # noqa: E402

CHAIN = ChainStatus(True, 1, "head", ())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    directory = tmp_path_factory.mktemp("large")
    url = build_ledger(directory / "ledger.db", 12, 300, seed=3)
    return url, directory


def both(url: str, listed: int = 7):
    import ledger.reporting.report as report

    engine = engines.make_engine(url)
    with sessions.read_session(engine) as session:
        snapshot = decoded_history.snapshot(session, "survey")
        dataset = snapshot.datasets["survey"]
        delta = choices.parse_delta(None, dataset)
        inputs = gather(session, dataset, delta, None, chain=CHAIN)
        saved, report.LARGEST_LISTED = report.LARGEST_LISTED, listed
        try:
            small = build_report(inputs, charts=False, register_file="r.csv")
            large_inputs = gather_large(Ledger("ledger", engine), dataset, delta, chain=CHAIN, generated_at=inputs.generated_at)
        finally:
            report.LARGEST_LISTED = saved
    large = build_large_report(large_inputs, lambda: large_register_entries(Ledger("ledger", engine), large_inputs.reading), "r.csv",
                               charts=False)
    LARGE_INPUTS[id(large)] = large_inputs
    return snapshot, small, large


LARGE_INPUTS: dict = {}


def large_inputs_of(context):
    return LARGE_INPUTS[id(context)]


def watched_copy(url: str, tmp_path: Path):
    """(a copy of the built ledger, an engine on it, the list every statement it sends about the
    audit events goes to, with its parameters): what the audit trail's reads are checked on."""
    import shutil

    from sqlalchemy import event

    copy = tmp_path / "copy.db"
    shutil.copy(url.removeprefix("sqlite:///"), copy)
    engine = engines.make_engine(f"sqlite:///{copy}")
    seen: list[tuple[str, object]] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _seen(connection, cursor, statement, parameters, context, executemany):
        if "audit_events" in statement and "EXPLAIN" not in statement:
            seen.append((statement, parameters))

    return copy, engine, seen


def test_the_large_path_gives_every_figure_of_the_small_path(built):
    url, _ = built
    snapshot, small, large = both(url)
    assert len(snapshot.releases) == 300 and snapshot.families  # families, cancelled releases, caps: all there
    # the risk table's total row and whole-dataset column, by variable, and its notes
    for field in ("variables", "layout", "total", "total_dataset_wide", "unprotected", "public", "total_wide_public",
                  "family_note", "rotate"):
        assert getattr(large.risk, field) == getattr(small.risk, field), field
    assert [(b.first, b.last, b.total) for b in large.risk.blocks] == [(b.first, b.last, b.total)
                                                                     for b in small.risk.blocks]
    # the certificate and its headline (the smallest valid figures), the caps as `cap list` decides them
    assert large.certificate == small.certificate
    assert large.certificate.headline == small.certificate.headline and small.certificate.headline is not None
    assert large.caps == small.caps and len(small.caps) == 20
    assert large.cap_history == small.cap_history
    # the pairs and the timeline
    assert large.pairs.highest == small.pairs.highest and large.pairs.unprotected == small.pairs.unprotected
    assert np.array_equal(large.pairs.colour, small.pairs.colour)
    assert large.timeline.x == small.timeline.x and large.timeline.labels == small.timeline.labels
    assert np.array_equal(large.timeline.y, small.timeline.y)
    assert large.timeline.highlighted == small.timeline.highlighted
    # the largest releases listed, the Pufferfish section, the audit trail
    assert large.register == small.register and len(small.register) == 7
    assert large.pufferfish == small.pufferfish
    assert large.audit == small.audit and small.audit.events > 300  # counted, not all listed
    assert large.summary.releases == small.summary.releases == 300


def test_the_large_register_holds_every_release_as_the_small_path_does(built, monkeypatch):
    url, _ = built
    monkeypatch.setattr("ledger.operations.large_register.REGISTER_PAGE", 37)  # several pages, one not full
    monkeypatch.setattr("ledger.cli.register_columns.REGISTER_CACHE", 40)  # the register's caches emptied on the way
    snapshot, small, large = both(url)
    entries = list(large.summary.entries())
    assert [e.id for e in entries] == list(snapshot.releases)  # every release, in recording order
    assert entries == list(small.summary.entries())  # cells, lifecycle, guarantees: row by row
    assert "".join(register_csv(large.summary)) == "".join(register_csv(small.summary))
    # the register the command writes: from the raw rows, the same text
    assert "".join(large_register_csv(Ledger.on_own_engine(url), large_inputs_of(large).reading, page=37)) == \
        "".join(register_csv(small.summary))


def test_the_command_past_the_threshold_writes_a_register_of_every_stored_release(built, monkeypatch):
    url, directory = built
    monkeypatch.setenv(SUMMARY_ENV, "100")
    called = []
    from ledger.operations import large_report

    original = large_report.read_large
    monkeypatch.setattr(large_report, "read_large", lambda *a, **k: called.append(1) or original(*a, **k))
    out = directory / "report.html"
    run = cli_main(url, "report", "--out", out)
    assert run.code == 0, run.err
    assert called  # the large path
    html = out.read_text(encoding="utf-8")
    assert 'href="./report.html.register.csv"' in html and "This dataset has 300 releases" in html
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        stored = [row[0] for row in db.execute("SELECT id FROM releases ORDER BY seq")]
    with (directory / "report.html.register.csv").open(newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["release"] for row in rows] == stored


def test_running_totals_a_chunk_at_a_time_equal_the_whole_cell_matrix(built, monkeypatch):
    """LedgerIndex.running_totals on an index past _CHUNK releases adds Table 1's cells a chunk at a
    time (the timeline of a million releases); the totals at every checkpoint are the same as
    from the whole matrix, families included, in any order of the releases."""
    from ledger.accounting import index_running_totals, ledger_index
    from ledger.accounting.charge_choice import at_delta
    from ledger.accounting.ledger_index import LedgerIndex
    from ledger.core.records import CHARGED_STATUSES

    url, _ = built
    with sessions.read_session(engines.make_engine(url)) as session:
        snapshot = decoded_history.snapshot(session, "survey")
    dataset = snapshot.datasets["survey"]
    objective = at_delta(choices.parse_delta(None, dataset))
    charged = [r for r in snapshot.releases.values() if r.status in CHARGED_STATUSES]
    index = LedgerIndex(dataset.variable_names, charged, snapshot.families.values())
    assert index.members  # family members: their cells are kept across chunks
    rng = np.random.default_rng(11)
    order = rng.permutation(len(charged))
    ends = sorted(set(rng.integers(1, len(charged) + 1, 30).tolist()) | {len(charged)})
    whole = index.running_totals(order, ends, objective)
    for module in (index_running_totals, ledger_index):  # (the modules whose passes read _CHUNK here)
        monkeypatch.setattr(module, "_CHUNK", 23)
    chunked = index.running_totals(order, ends, objective)
    assert all(whole.spend(i, j) == chunked.spend(i, j) for i in range(len(ends)) for j in range(12))


def test_the_report_reads_audit_events_through_their_kind_index(built, tmp_path):
    """Every read of the audit events a large report makes by kind (publications,
    retractions, cancellations, cap changes, the listed releases' events, the counts by kind and
    actor) is an index search or a scan of the (kind, subject, actor) index alone, never a scan
    of the events themselves (their payloads: about 4 GB at a million releases). The only reads
    along the table are the last events, from its end (ORDER BY seq DESC ... LIMIT)."""
    import re

    url, _ = built
    _, engine, seen = watched_copy(url, tmp_path)
    with sessions.read_session(engine) as session:
        dataset = decoded_history.snapshot(session, "survey").datasets["survey"]
        large = gather_large(Ledger("ledger", engine), dataset, choices.parse_delta(None, dataset), chain=CHAIN)
        large.trail(CHAIN)
    "".join(large_register_csv(Ledger("ledger", engine), large.reading, page=100))
    assert len(seen) >= 6
    scans = []
    with engine.connect() as connection:
        for statement, parameters in seen:
            plan = [row[-1] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement,
                                                                  parameters).all()]
            from_the_end = re.search(r"ORDER BY (audit_events\.)?seq DESC\s+LIMIT", statement) is not None
            if from_the_end:
                continue
            if "kind" in statement.partition("WHERE")[2]:  # (a condition on the kind)
                assert any(table_models.EVENT_INDEX in step for step in plan), (statement, plan)
            scans += [(statement, step) for step in plan if step == "SCAN audit_events"]
    assert scans == []
    engine.dispose()


@pytest.mark.parametrize("moment", ["as_of", "since", "both"])
def test_the_report_at_a_moment_reads_no_event_after_it_and_sorts_no_event_whole(built, tmp_path, moment):
    """EVENT_INDEX holds the events' moments): at --as-of T the most recent
    events dated by T (the listed trail, the last event) are searched from the last event dated by
    T (found from the index alone), not by walking back over every event after T (half the table
    midway through a million releases); and --since's latest changes of a kind are picked from
    the index alone, not by reading every event of that kind whole to sort them."""
    import re
    import sqlite3
    from datetime import datetime

    url, _ = built
    copy, engine, seen = watched_copy(url, tmp_path)
    with sqlite3.connect(copy) as db:
        (count,), = db.execute("SELECT count(*) FROM audit_events").fetchall()
        (middle,), = db.execute("SELECT at FROM audit_events ORDER BY seq LIMIT 1 OFFSET ?", (count // 2,)).fetchall()
    when = datetime.fromisoformat(middle)
    with sessions.read_session(engine) as session:
        dataset = decoded_history.snapshot(session, "survey").datasets["survey"]
        large = gather_large(Ledger("ledger", engine), dataset, choices.parse_delta(None, dataset), chain=CHAIN,
                             as_of=when if moment != "since" else None, since=when if moment != "as_of" else None)
        large.trail(CHAIN)
    checked = 0
    with engine.connect() as connection:
        for statement, parameters in seen:
            if re.search(r"ORDER BY (audit_events\.)?seq DESC\s+LIMIT", statement) is None:
                continue
            plan = [row[-1] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement,
                                                                  parameters).all()]
            if "at <=" in statement and "at >=" not in statement:  # the most recent dated by T
                assert "SCAN audit_events" not in plan and any("rowid<" in step for step in plan), (statement, plan)
                checked += 1
            if "at >=" in statement and "kind =" in statement:  # the latest changes of a kind since
                assert any("COVERING INDEX" in step and table_models.EVENT_INDEX in step for step in plan), (statement, plan)
                checked += 1
    engine.dispose()
    assert checked >= (2 if moment == "as_of" else 3)


def test_a_ledger_of_schema_8_gains_the_event_index_once_with_an_audit_event(built, tmp_path):
    """The schema 9 upgrade builds the audit events' (kind, subject, actor) index in place, records
    it as an audit event like every upgrade, and the chain still verifies."""
    import shutil
    import sqlite3

    url, _ = built
    copy = tmp_path / "old.db"
    shutil.copy(url.removeprefix("sqlite:///"), copy)
    with sqlite3.connect(copy) as db:  # as schema 8 left it
        db.execute(f"DROP INDEX {table_models.EVENT_INDEX}")
        db.execute("UPDATE ledger_meta SET value = '8' WHERE key = 'schema_version'")
        (events,), = db.execute("SELECT count(*) FROM audit_events").fetchall()
    copied = f"sqlite:///{copy}"
    assert cli_main(copied, "releases").code == 0  # any command opening the ledger upgrades it
    with sqlite3.connect(copy) as db:
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                                "AND tbl_name = 'audit_events'")}
        migrated = db.execute("SELECT kind, subject, payload FROM audit_events WHERE seq > ?", (events,)).fetchall()
        plan = db.execute("EXPLAIN QUERY PLAN SELECT subject FROM audit_events WHERE kind = 'release.cancelled'"
                          ).fetchall()
    assert table_models.EVENT_INDEX in indexes and table_models.EVENT_INDEX in plan[0][-1]
    assert migrated == migrations(9, schema_migrations.SCHEMA_VERSION)
    assert cli_main(copied, "audit", "verify").code == 0
    assert cli_main(copied, "releases").code == 0
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT count(*) FROM audit_events").fetchone()[0] == events + len(migrations(9, schema_migrations.SCHEMA_VERSION))  # once each


def test_the_register_written_in_parts_by_forked_processes_is_the_register_written_whole(built, monkeypatch, tmp_path):
    """At a million releases one process writing the register took longer than the
    rest of the report; it is written in parts (seq ranges of about as many charged releases),
    each by a forked process, and joined: the same bytes as one process writing it whole, no
    part file left beside it."""
    import shutil

    import ledger.cli.report_register as report_register
    import ledger.operations.large_register as large_register

    url, _ = built
    monkeypatch.setenv(SUMMARY_ENV, "100")
    written = {}
    original = report_register._register_parts
    for parts in (1, 3):
        directory = tmp_path / f"parts{parts}"
        directory.mkdir()
        copy = directory / "ledger.db"
        shutil.copy(url.removeprefix("sqlite:///"), copy)
        monkeypatch.setattr(report_register, "REGISTER_PARTS", parts)
        monkeypatch.setattr(large_register, "REGISTER_PAGE", 37)  # (what a part holds at least)
        seen = []
        monkeypatch.setattr(report_register, "_register_parts", lambda *a: seen.append(original(*a)) or seen[-1])
        run = cli_main(f"sqlite:///{copy}", "report", "--out", directory / "r.html")
        assert run.code == 0, run.err
        assert len(seen[0]) == parts and seen[0][0][0] == -1 and seen[0][-1][1] is None
        written[parts] = (directory / "r.html.register.csv").read_bytes()
        assert not [p.name for p in directory.iterdir() if ".part" in p.name or p.name.endswith(".tmp")]
    assert written[3] == written[1] and written[1].count(b"\n") > 300
