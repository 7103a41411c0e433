"""`table --as-of`, `subset --as-of` and `cap list --as-of` from the
accounting rows; the report's caps at --as-of and before --since over one index.

The ledger as it stood at a moment T (accounting.history: the releases recorded or
published by T, each with the status it had then, a release cancelled by T not counted)
used to be computed from every decoded release (`decoded_history.snapshot`). `index_from_rows.index_for(...,
when=T)` reads the charged and the cancelled accounting rows instead and keeps those
charged at T (store/as_of.py). Here both are computed on random ledgers, with releases
cancelled and retracted after T (their audit events dated), published after T, recorded
after T, and with no moments at all, and every figure must be equal, not close: the table's
total row and whole-dataset column by every accountant, a subset's figures, and each row's
release and status then. A dataset amended after T (a variable added) is checked through
the command line.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from dataclasses import replace
from datetime import timedelta
from fractions import Fraction as F

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session
from support import cli_main
from test_accounting_rows import DELTA, FAMILIES, T0, VARIABLES, dataset, ledgers, moment, record, same_events

from ledger.accounting import budget, cap_states, index_figures
from ledger.accounting.figure_validity import ACCOUNTANTS
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.ledger_index import LedgerIndex
from ledger.accounting.history import ended, releases_as_of
from ledger.core.records import CHARGED_STATUSES, Cap, Status
from ledger.input.utc_moments import parse_moment
from ledger.operations import cap_accounting, transactions
from ledger.store import audit_chain, cap_writes, decoded_history, engines, index_from_rows, running_totals, session_state, sessions


def printed_both_ways(monkeypatch, url: str, commands) -> dict[str, list[str]]:
    """What each command prints from the accounting rows ("rows": decoding a release is an
    error) and from the releases as they stood, decoded ("snapshot": the path before, the rows
    at a moment not read). Every patch of `monkeypatch` is undone after each path."""
    original = index_from_rows.index_for
    printed = {}
    for path in ("rows", "snapshot"):
        if path == "snapshot":
            monkeypatch.setattr(index_from_rows, "index_for", lambda *a, **k: None if k.get("when") else original(*a, **k))
        else:
            monkeypatch.setattr(decoded_history, "snapshot", lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
        printed[path] = [cli_main(url, *args).out for args in commands]
        monkeypatch.undo()
    return printed


def set_caps_before(url: str, caps, at) -> list:
    """The caps set in the ledger, their events dated `at` (the report at T shows the caps set by T);
    returns them as set (a cap at a delta with the filter the ledger gave it)."""
    engine = engines.make_engine(url)
    with pytest.MonkeyPatch.context() as clock:
        clock.setattr(session_state, "now", lambda: at)
        with sessions.write_session(engine) as session:
            caps = [cap_writes.set_cap(session, cap, "t") for cap in caps]
    engine.dispose()
    return caps


def both_indexes(url: str, when):
    """(the index from the accounting rows at `when`, the index of the releases as they stood then)."""
    engine = engines.make_engine(url)
    with Session(engine) as session:
        snapshot = decoded_history.snapshot(session, "t")
        families = {f.id: f for f in snapshot.families.values()}
        rows = index_from_rows.index_for(session, VARIABLES, "t", families, titles=True, when=when)
        endings = ended((kind, subject, parse_moment(at)) for _, kind, subject, at, _, _ in
                        audit_chain.lifecycle_events(session, ["release.retracted", "release.cancelled"]))
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
    # a release is cancelled or retracted after it was recorded, never before (a history no ledger
    # writes)
    endings = [end if end is None or recorded is None else max(end, recorded)
               for end, (_, recorded, _, _) in zip(endings, lifecycle)]
    when = moment(data.draw(st.integers(-1, 6)))
    subset = data.draw(st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3))
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle, endings)
        rows, heads, whole = both_indexes(url, when)
    # the releases charged then, in recording order, each with the status it had then
    assert heads == [(r.id, r.status) for r in whole.releases]
    same_events(rows, whole)
    objective = at_delta(DELTA)
    table = whole.table("t", objective)
    assert rows.table("t", objective).total == table.total
    assert rows.table("t", objective).total_dataset_wide == table.total_dataset_wide
    assert index_figures.table_figures(rows, rows.table("t", objective), DELTA, ACCOUNTANTS) == \
        index_figures.table_figures(whole, table, DELTA, ACCOUNTANTS)
    cost = whole.subset_cost(subset, objective)
    assert rows.subset_cost(subset, objective) == cost
    assert index_figures.subset_figures(rows, subset, DELTA, cost.spend) == \
        index_figures.subset_figures(whole, subset, DELTA, cost.spend)


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
    """`table --as-of` and `subset --as-of` take the accounting rows (no decoded_history.snapshot), print
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
    printed = printed_both_ways(monkeypatch, url, (
        ("table", "--as-of", when), ("table", "--as-of", when, "--json"),
        ("subset", "a", "b", "--as-of", when, "--json"), ("subset", "e", "d", "--as-of", when)))
    assert printed["rows"] == printed["snapshot"]
    assert all(f"r{i}" in printed["rows"][0] for i in range(4))  # r1 cancelled after T, counted then


# --------------------------------------------------------------------------
# cap list --as-of and the report --as-of: the caps as the ledger stood, from the rows
# --------------------------------------------------------------------------


def caps_of(data, preferred=None) -> list[Cap]:
    """A pure cap, a cap at a delta and a rho cap, each on a drawn subset (the whole dataset
    among them; `preferred`, the subset many small releases read, often), with limits drawn
    so some are over and some under."""
    found = []
    subsets = st.frozensets(st.sampled_from(VARIABLES), min_size=1, max_size=4)
    for k, form in enumerate(("pure", "delta", "rho")):
        subset = data.draw(subsets if preferred is None else st.one_of(st.just(preferred), subsets))
        limit = data.draw(st.sampled_from([F(1, 2), F(1), F(3), F(6)]))
        found.append(Cap("t", f"c{k}", subset, epsilon=None if form == "rho" else limit,
                         delta=DELTA if form == "delta" else None, rho=limit if form == "rho" else None,
                         whole_dataset=len(subset) == len(VARIABLES)))
    return found


def with_many_small(entries, lifecycle, data):
    """The ledger and 120 Laplace releases of epsilon 1/40 on a drawn subset, recorded at a
    drawn moment and published (or not) at one: enough small charges that the Rényi filter
    decides a cap at a delta on that subset."""
    reads = sorted(data.draw(st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=2)))
    recorded = data.draw(st.integers(0, 5))
    published = data.draw(st.one_of(st.none(), st.integers(recorded, 5)))
    status = Status.PLANNED if published is None else Status.PUBLISHED
    small = [{"id": f"s{k}", "reads": reads, "mechanism": {"name": "laplace", "epsilon": "1/40"}} for k in range(120)]
    return entries + small, lifecycle + [(status, recorded, published, False)] * len(small), frozenset(reads)


def drawn_history(ledger, data):
    """(entries, lifecycle, the subset of the many small releases or None, when each release's
    retraction or cancellation event is dated: a second, or None): the ledger, with
    `with_many_small` drawn or not."""
    entries, lifecycle = ledger
    preferred = None
    if data.draw(st.booleans()):
        entries, lifecycle, preferred = with_many_small(entries, lifecycle, data)
    endings = [data.draw(st.one_of(st.none(), st.integers(0, 6))) for _ in entries]
    endings = [end if end is None or recorded is None else max(end, recorded)  # (never before its recording)
               for end, (_, recorded, _, _) in zip(endings, lifecycle)]
    return entries, lifecycle, preferred, endings


def old_cap_checks(url: str, caps, when):
    """The caps as the old path decided them: the whole releases as they stood then
    (`history.releases_as_of`) through `cap_accounting.checks_from_history`."""
    engine = engines.make_engine(url)
    with Session(engine) as session:
        snapshot = decoded_history.snapshot(session, "t")
        endings = ended((kind, subject, parse_moment(at)) for _, kind, subject, at, _, _ in
                        audit_chain.lifecycle_events(session, ["release.retracted", "release.cancelled"]))
    engine.dispose()
    then = releases_as_of(list(snapshot.releases.values()), when, endings)
    return cap_accounting.checks_from_history(caps, then, snapshot.families)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_the_caps_at_a_moment_from_the_rows_are_the_caps_of_the_releases_as_they_stood(ledger, data):
    """Every cap's check (spend, headroom, status, drivers, the accountant that decided it and
    its case) from the rows at T equals the old path's, field for field; at T past the year
    2112 (`rows_then` gives None) the fallback is the old path itself."""
    entries, lifecycle = ledger
    preferred = None
    if data.draw(st.booleans()):
        entries, lifecycle, preferred = with_many_small(entries, lifecycle, data)
    endings = [data.draw(st.one_of(st.none(), st.integers(0, 6))) for _ in entries]
    # a release is cancelled or retracted after it was recorded, never before (a history no ledger
    # writes)
    endings = [end if end is None or recorded is None else max(end, recorded)
               for end, (_, recorded, _, _) in zip(endings, lifecycle)]
    when = moment(data.draw(st.integers(-1, 6)))
    caps = caps_of(data, preferred)
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle, endings)
        engine = engines.make_engine(url)
        with Session(engine) as session:
            rows = index_from_rows.index_for(session, VARIABLES, "t", {f.id: f for f in FAMILIES}, when=when)
            from_rows = cap_accounting.checks_from_index(caps, rows)
            assert transactions.cap_checks_as_of(session, "t", caps, when) == from_rows
            far = when.replace(year=2200)
            assert transactions.cap_checks_as_of(session, "t", caps, far) == old_cap_checks(url, caps, far)
        engine.dispose()
        assert from_rows == old_cap_checks(url, caps, when)


def cap_order(epsilon: float, delta: float) -> float:
    """The Rényi order at which the zCDP spend rho whose CKS 2020 Prop 12 conversion at `delta` is
    `epsilon` converts best: solved for rho, then the order minimising the conversion."""
    from scipy.optimize import brentq, minimize_scalar

    def conversion(order, rho):
        return order * rho + math.log1p(-1 / order) - (math.log(delta) + math.log(order)) / (order - 1)

    def best(rho):
        return minimize_scalar(lambda a: conversion(a, rho), bounds=(1 + 1e-6, 1e4), method="bounded",
                               options={"xatol": 1e-10})

    rho = brentq(lambda r: best(r).fun - epsilon, 1e-6, 100)
    return float(best(rho).x)


def test_cap_list_and_the_report_at_a_moment_read_no_whole_release_and_print_what_the_snapshot_printed(
        tmp_path, monkeypatch):
    """`cap list --as-of` takes the accounting rows (no decoded_history.snapshot) and prints what the
    releases as they stood printed: a pure cap, caps at a delta (Rényi filters, one over 120 small
    Laplace releases), a rho cap, a family, a release cancelled after T (counted then) and one
    retracted after T."""
    entries = [{"id": f"r{i}", "reads": reads, "mechanism": {"name": "laplace", "epsilon": e}, **extra}
               for i, (reads, e, extra) in enumerate([
                   (["a"], "1", {}), (["a", "b"], "1/2", {}), (["c"], "1/4", {"family": "split", "part": "half 1"}),
                   (["c", "d"], "1/2", {"family": "split", "part": "half 2"}), (["b", "d"], "1", {})])]
    entries += [{"id": f"s{k}", "reads": ["b"], "mechanism": {"name": "laplace", "epsilon": "1/40"}}
                for k in range(120)]
    lifecycle = [(Status.PUBLISHED, 0, 1, False), (Status.CANCELLED, 0, None, False),
                 (Status.APPROVED, 1, None, False), (Status.PLANNED, 3, None, True),
                 (Status.RETRACTED, 0, 2, False)] + [(Status.PUBLISHED, 1, 2, False)] * 120
    url = f"sqlite:///{tmp_path}/l.db"
    record(url, entries, lifecycle, [None, 4, None, None, 5] + [None] * 120)
    with monkeypatch.context() as clock:  # the caps set before T: a cap set after T is not shown at T
        clock.setattr(session_state, "now", lambda: T0 - timedelta(days=1))
        for args in (("a", "b", "--epsilon", "9"), ("b", "--epsilon", "3", "--delta", "1e-6", "--filter", "renyi"),
                     ("c", "d", "--rho", "1/2"), ("all", "--epsilon", "4", "--delta", "1e-6", "--filter", "renyi")):
            assert cli_main(url, "cap", "set", *args).code == 0
    when = moment(3).isoformat()
    printed = printed_both_ways(monkeypatch, url, (("cap", "list", "--as-of", when),
                                                   ("cap", "list", "--as-of", when, "--json")))
    assert printed["rows"] == printed["snapshot"]
    decided = {cap["cap"]: (cap["accountant"], cap["theorem"]) for cap in json.loads(printed["rows"][1])}
    # every cap a filter fixed when set: the pure sum, the rho sum, and for the two at a delta the
    # Rényi filter (not every release Gaussian) at the order where a zCDP spend of the cap's size
    # converts best at half the cap's delta (the other half is the approximate allowance)
    assert decided["a,b"][0] == decided["c,d"][0] == "basic"
    assert "pure-epsilon filter" in decided["a,b"][1] and "zCDP filter" in decided["c,d"][1]
    for name, epsilon in (("b", 3), ("all", 4)):
        accountant, theorem = decided[name]
        order = float(re.search(r"Rényi filter at order ([0-9.]+),", theorem).group(1))
        assert accountant == "rdp" and order == pytest.approx(cap_order(epsilon, 5e-7), abs=0.1)
    assert "r1 (0.5)" in printed["rows"][0] and "family split (0.125, charged once)" in printed["rows"][0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_the_report_at_a_moment_checks_the_caps_over_its_index_as_the_releases_as_they_stood(ledger, data):
    """`report --as-of` (build_report): the caps' totals over the index of the releases charged
    then (`budget.total_from_index`) and their states from it (`state_from_index`), with no
    pass over the releases per cap (total_from_history, state_from_history forbidden), and
    the caps section is the one `cap_entries` gave over the releases as they stood; with
    --since, each cap's figure before the meeting date is the one checks_from_history decides."""
    from ledger.operations.report_inputs import gather
    from ledger.operations import meeting_pack
    from ledger.reporting import cap_section, report

    entries, lifecycle, preferred, endings = drawn_history(ledger, data)
    at = data.draw(st.integers(-1, 6))
    when, since = moment(at), moment(data.draw(st.integers(-1, at)))
    caps = caps_of(data, preferred)
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle, endings)
        caps = set_caps_before(url, caps, T0 - timedelta(days=1))  # (a cap set after T is not shown at T)
        engine = engines.make_engine(url)
        with Session(engine) as session:
            inputs = replace(gather(session, dataset(), DELTA, since), caps=tuple(caps), cap_checks=None, as_of=when)
        engine.dispose()
    endings_then = ended((e.kind, e.subject, e.at) for e in inputs.events)
    then = releases_as_of(list(inputs.releases), when, endings_then)
    families = {f.id: f for f in inputs.families}
    totals = {cap.name: budget.total_from_history(cap, then, families) for cap in caps}
    expected = cap_section.cap_entries(caps, totals, then, families)
    stood = meeting_pack.as_it_stood(inputs)  # the meeting pack's caps before --since, as it computed them
    before_since = meeting_pack.releases_as_of(stood.releases, meeting_pack.dataset_events(stood), since)
    # each cap's figure then is decided as the Caps section decides it (the smallest valid figure)
    befores = [c.current for c in cap_accounting.checks_from_history(
        caps, before_since, families)]

    def forbidden(*args, **kwargs):
        raise AssertionError("a pass over the releases per cap")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "total_from_history", forbidden, raising=False)
        patch.setattr(budget, "total_from_history", forbidden)
        patch.setattr(cap_states, "state_from_history", forbidden)
        context = report.build_report(inputs, charts=False)
    assert context.caps == expected
    assert context.certificate.as_of == when
    assert [move.before for move in context.meeting.caps] == befores


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_cap_set_and_a_stale_state_are_computed_from_the_rows_as_from_the_releases(ledger, data):
    """`cap set` of a cap at a delta stores the accountants' running state, and a decision that
    finds a state missing recomputes it (`cap_accounting.current_states`): both from the
    accounting rows (`state_from_index`), no release decoded (`decoded_history.snapshot` forbidden), and
    each state is the dict `state_from_history` gives over the charged releases."""
    entries, lifecycle = ledger
    preferred = None
    if data.draw(st.booleans()):
        entries, lifecycle, preferred = with_many_small(entries, lifecycle, data)
    caps = [cap for cap in caps_of(data, preferred) if cap.delta is not None]
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle, [None] * len(entries))
        engine = engines.make_engine(url)
        with sessions.read_session(engine) as session:
            snapshot = decoded_history.snapshot(session, "t")
        expected = {cap.name: cap_states.state_from_history(cap, list(snapshot.releases.values()), snapshot.families) for cap in caps}

        def decoded(*args, **kwargs):
            raise AssertionError("every release decoded")

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(decoded_history, "snapshot", decoded)
            with sessions.write_session(engine) as session:
                for cap in caps:
                    cap_writes.set_cap(session, cap, "t")
            with sessions.read_session(engine) as session:
                stored = running_totals.accountant_states(session, "t", [cap.name for cap in caps])
            with sessions.write_session(engine) as session:
                running_totals.drop_accountant_states(session, "t", [cap.name for cap in caps])
                recomputed = cap_accounting.current_states(session, "t", caps)
        engine.dispose()
    assert set(stored) == set(recomputed) == set(expected)
    for name, state in expected.items():  # field by field, as `audit verify` compares them
        assert cap_states.state_differences(stored[name], state) == []
        assert cap_states.state_differences(recomputed[name], state) == []


def test_a_cancelled_member_is_not_the_reason_for_a_cap_then(tmp_path):
    """A hypothesis case: (epsilon, delta) releases on {a} under a pure cap (∞: a pure cap cannot
    hold them) beside a keyed family's member cancelled at T. The fallback path at a moment
    (past the year 2112, where the rows cannot state it: cap_accounting.index_at) explained the ∞
    from every release as it stood, the cancelled member too, and named its family's move; it
    is not charged then, and the reason is the releases' (as every other path says)."""
    guarantee = [{"protects": ["a"], "epsilon": "1/10", "delta": "1e-8"}]
    entries = [{"id": f"r{i}", "reads": ["a"], "mechanism": {"name": "declared"}, "guarantees": guarantee}
               for i in range(2)]
    entries.append({"id": "m", "reads": ["a"], "mechanism": {"name": "declared"}, "guarantees": guarantee,
                    "family": "by-a", "part": "one"})
    lifecycle = [(Status.PLANNED, None, None, False)] * 2 + [(Status.CANCELLED, None, None, False)]
    url = f"sqlite:///{tmp_path}/l.db"
    record(url, entries, lifecycle, [None, None, 0])
    caps = [Cap(dataset="t", name="c0", subset=frozenset({"a"}), epsilon=F(1, 2))]
    far = moment(0).replace(year=2200)
    engine = engines.make_engine(url)
    with Session(engine) as session:
        found = transactions.cap_checks_as_of(session, "t", caps, far)
    engine.dispose()
    assert found == old_cap_checks(url, caps, far)
    assert "by-a" not in found[0].reason and "pure epsilon cap cannot hold" in found[0].reason
