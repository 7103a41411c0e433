"""Issue 13, section 1: `table --as-of` and `subset --as-of` from the accounting rows.

The ledger as it stood at a moment T (accounting.history: the releases recorded or
published by T, each with the status it had then, a release cancelled by T not counted)
used to be computed from every decoded release (`store.snapshot`). `columns.index_for(...,
when=T)` reads the charged and the cancelled accounting rows instead and keeps those
charged at T (store/as_of.py). Here both are computed on random ledgers, with releases
cancelled and retracted after T (their audit events dated), published after T, recorded
after T, and with no moments at all, and every figure must be equal, not close: the table's
total row and whole-dataset column by every accountant, a subset's figures, and each row's
release and status then. A dataset amended after T (a variable added) is checked through
the command line.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session
from support import cli_main
from test_accounting_rows import DELTA, FAMILIES, T0, VARIABLES, dataset, ledgers, moment

from ledger.accounting import accountants
from ledger.accounting.accountants import ACCOUNTANTS
from ledger.accounting.engine import LedgerIndex, at_delta
from ledger.accounting.history import ended, releases_as_of
from ledger.core.records import CHARGED_STATUSES, Status
from ledger.input.loader import Document, LedgerSnapshot, build_releases, parse_moment
from ledger.store import columns, database as store


def record(url: str, entries, lifecycle, endings) -> None:
    """The releases as the store writes them, then each retraction or cancellation as its
    audit event, dated (`endings`: a second, or None for a release ended with no event)."""
    engine = store.make_engine(url)
    store.ensure_schema(engine)
    chosen = dataset()
    releases, _, errors = build_releases(Document("r.json", {"dataset": "t", "releases": entries}),
                                         LedgerSnapshot(datasets={"t": chosen}, families={f.id: f for f in FAMILIES}),
                                         recorded_by="t", recorded_at=T0)
    assert not errors, errors
    stated = [replace(r, status=status, recorded_at=moment(recorded), published_at=moment(published))
              for r, (status, recorded, published, _) in zip(releases, lifecycle)]
    with store.write_session(engine) as session:
        store.add_dataset(session, chosen, "t")
        store.add_releases(session, stated, FAMILIES, "t")
    with store.write_session(engine) as session:
        for release, (_, _, _, later), end in zip(stated, lifecycle, endings):
            if later:  # published after it was planned: the row's publication moment is set later
                store.set_status(session, replace(release, status=Status.PUBLISHED, published_at=T0 + timedelta(
                    seconds=3)), "t", "release.published")
            kind = {Status.CANCELLED: "release.cancelled", Status.RETRACTED: "release.retracted"}.get(release.status)
            if kind is not None and end is not None:
                store.append_event(session, kind=kind, subject=release.id, actor="t", payload={"reason": "r"},
                                   at=moment(end))
    engine.dispose()


def both_indexes(url: str, when):
    """(the index from the accounting rows at `when`, the index of the releases as they stood then)."""
    engine = store.make_engine(url)
    with Session(engine) as session:
        snapshot = store.snapshot(session, "t")
        families = {f.id: f for f in snapshot.families.values()}
        rows = columns.index_for(session, VARIABLES, "t", families, titles=True, when=when)
        endings = ended((kind, subject, parse_moment(at)) for _, kind, subject, at, _, _ in
                        store.lifecycle_events(session, ["release.retracted", "release.cancelled"]))
        heads = [(r.id, r.status) for r in rows.releases]
    then = releases_as_of(list(snapshot.releases.values()), when, endings)
    whole = LedgerIndex(VARIABLES, [r for r in then if r.status in CHARGED_STATUSES], families.values())
    engine.dispose()
    return rows, heads, whole


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_the_rows_at_a_moment_give_the_figures_of_the_releases_as_they_stood(ledger, data):
    entries, lifecycle = ledger
    endings = [data.draw(st.one_of(st.none(), st.integers(0, 6))) for _ in entries]
    when = moment(data.draw(st.integers(-1, 6)))
    subset = data.draw(st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3))
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle, endings)
        rows, heads, whole = both_indexes(url, when)
    # the releases charged then, in recording order, each with the status it had then
    assert heads == [(r.id, r.status) for r in whole.releases]
    events, reference = accountants.index_events(rows), accountants.IndexEvents(whole)
    assert [events.events[k] if k >= 0 else None for k in events.mech] == \
        [reference.events[k] if k >= 0 else None for k in reference.mech]
    assert (events.recorded == reference.recorded).all() and (events.published == reference.published).all()
    assert (events.unknown == reference.unknown).all()
    objective = at_delta(DELTA)
    table = whole.table("t", objective)
    assert rows.table("t", objective).total == table.total
    assert rows.table("t", objective).total_dataset_wide == table.total_dataset_wide
    assert accountants.table_figures(rows, rows.table("t", objective), DELTA, ACCOUNTANTS) == \
        accountants.table_figures(whole, table, DELTA, ACCOUNTANTS)
    cost = whole.subset_cost(subset, objective)
    assert rows.subset_cost(subset, objective) == cost
    assert accountants.subset_figures(rows, subset, DELTA, cost.spend) == \
        accountants.subset_figures(whole, subset, DELTA, cost.spend)


def test_a_release_cancelled_after_the_moment_counted_then(tmp_path):
    """The case the charged rows alone miss: cancelled now, planned at T, so charged at T;
    and one cancelled before T, not charged."""
    entries = [{"id": "early", "reads": ["a"], "mechanism": {"name": "laplace", "epsilon": "1"}},
               {"id": "late", "reads": ["a", "b"], "mechanism": {"name": "laplace", "epsilon": "1/2"}}]
    lifecycle = [(Status.CANCELLED, 0, None, False), (Status.CANCELLED, 0, None, False)]
    url = f"sqlite:///{tmp_path}/l.db"
    record(url, entries, lifecycle, [1, 4])
    rows, heads, whole = both_indexes(url, moment(2))
    assert heads == [("late", Status.PLANNED)] == [(r.id, r.status) for r in whole.releases]
    assert rows.subset_cost({"a"}, at_delta(DELTA)) == whole.subset_cost({"a"}, at_delta(DELTA))


def test_the_commands_at_a_moment_read_no_whole_release_and_print_what_the_snapshot_printed(tmp_path, monkeypatch):
    """`table --as-of` and `subset --as-of` take the accounting rows (no store.snapshot), print
    what the releases as they stood printed, and on a dataset amended after T (a variable
    added: the rows written before hold shorter bitsets) too."""
    entries = [{"id": f"r{i}", "reads": reads, "mechanism": {"name": "laplace", "epsilon": e}}
               for i, (reads, e) in enumerate([(["a"], "1"), (["a", "b"], "1/2"), (["c"], "1/4"), (["b", "d"], "1")])]
    lifecycle = [(Status.PUBLISHED, 0, 1, False), (Status.CANCELLED, 0, None, False), (Status.PLANNED, 3, None, True),
                 (Status.RETRACTED, 0, 2, False)]
    url = f"sqlite:///{tmp_path}/l.db"
    record(url, entries, lifecycle, [None, 4, None, 5])
    (tmp_path / "t2.yaml").write_text("dataset: t\nvariables: [{name: a}, {name: b}, {name: c}, {name: d}, "
                                      "{name: e}]\n")
    run = cli_main(url, "dataset", "amend", tmp_path / "t2.yaml")
    assert run.code == 0, run.err
    when = moment(3).isoformat()
    printed = {}
    for path in ("rows", "snapshot"):
        if path == "snapshot":  # the releases as they stood, decoded (the path before)
            monkeypatch.setattr(columns, "index_for", lambda *a, **k: None if k.get("when") else original(*a, **k))
        else:
            original = columns.index_for
            monkeypatch.setattr(store, "snapshot", lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
        printed[path] = [cli_main(url, *args).out for args in (
            ("table", "--as-of", when), ("table", "--as-of", when, "--json"),
            ("subset", "a", "b", "--as-of", when, "--json"), ("subset", "e", "d", "--as-of", when))]
        monkeypatch.undo()
    assert printed["rows"] == printed["snapshot"]
    assert all(f"r{i}" in printed["rows"][0] for i in range(4))  # r1 cancelled after T, counted then
