"""`privacy-ledger report`: what the report says, and what it refuses.

Ledgers are written here in the file formats and recorded through the command line
at times the test sets. Expected figures are worked out by hand beside each assertion
from the releases' parameters (docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction

import pytest
from test_report_helpers import clock, context_of, record, run_main, step

from ledger.reporting.write import render
from ledger.mechanisms.ppercent import PPercentGuarantee
from ledger.reporting.register_section import from_p_percent, pufferfish_entries
from ledger.reporting.risk_view import MATRIX_CELL_LIMIT

from support import acting_as

F = Fraction
T = lambda month, day, hour=9: datetime(2024, month, day, hour, 0, tzinfo=UTC)  # noqa: E731

GRADUATES = """\
dataset: graduates
description: Graduate survey (Tan, section 5.1)
self_approval: true  # (history recorded as published by its recorder)
delta: 1e-9
variables:
  - {name: degree, classification: public}
  - {name: income, classification: sensitive}
  - {name: sex, classification: identifying}
groups:
  personal: [income, sex]
caps:
  - {subset: [income], epsilon: 2}
  - {name: personal, epsilon: 3}
  - {subset: [sex], epsilon: 1/4}
"""

BEFORE_MEETING = """\
dataset: graduates
releases:
  - id: income-by-degree
    title: Graduates by degree and income band
    reads: [degree, income]
    mechanism: {name: geometric, epsilon: 1}
    status: published
    published_at: "2024-02-01T09:00:00Z"
  - id: mean-income
    title: Mean income band
    reads: [income]
    mechanism: {name: laplace, epsilon: 1/2}
    status: planned
"""

AFTER_MEETING = """\
dataset: graduates
releases:
  - id: sex-ratio
    title: Graduates by sex
    reads: [sex]
    mechanism: {name: geometric, epsilon: 1/4}
    status: published
    published_at: "2024-04-10T09:00:00Z"
  - id: income-deciles
    title: Income deciles
    reads: [income]
    mechanism: {name: laplace, epsilon: 1/4}
    status: planned
"""

MEETING = T(4, 1)


@pytest.fixture(scope="module")
def meeting_ledger(tmp_path_factory):
    """Two releases before the meeting (one approved then), and after it: two recorded,
    one published, one cancelled, one retracted, and a cap set."""
    directory = tmp_path_factory.mktemp("meeting")
    url = f"sqlite:///{directory / 'ledger.db'}"
    with acting_as("ada"):
        record(url, directory, "graduates.yaml", GRADUATES, T(1, 10), command="dataset")
        step(url, T(1, 10), "role", "grant", "grace", "approver")
        step(url, T(1, 10), "role", "grant", "grace", "steward")
        step(url, T(1, 10), "role", "grant", "edsger", "approver")
        record(url, directory, "before.yaml", BEFORE_MEETING, T(2, 1))
    with acting_as("grace"):
        step(url, T(3, 1), "approve", "mean-income")
    with acting_as("ada"):
        record(url, directory, "after.yaml", AFTER_MEETING, T(4, 10))
    with acting_as("grace"):
        step(url, T(4, 12), "publish", "mean-income")
        step(url, T(4, 15), "cancel", "income-deciles", "--reason", "superseded by the mean")
    with acting_as("edsger"):
        step(url, T(4, 20), "retract", "income-by-degree", "--reason", "a coding error in degree")
    with acting_as("ada"):
        step(url, T(4, 21), "cap", "set", "degree", "--epsilon", "5")
    return url, directory


def test_the_meeting_pack_lists_what_changed_since_the_date(meeting_ledger):
    url, _ = meeting_ledger
    pack = context_of(url, "graduates", since=MEETING, charts=False).meeting
    by_release = lambda changes: [(c.release, c.actor, c.status) for c in changes]  # noqa: E731
    assert by_release(pack.recorded) == [("sex-ratio", "ada", "published"), ("income-deciles", "ada", "planned")]
    assert by_release(pack.approved) == []  # approved before the meeting
    # by publication date: sex-ratio was recorded as published on 10 April, mean-income published on 12 April
    assert by_release(pack.published) == [("sex-ratio", "ada", "published"), ("mean-income", "grace", "published")]
    assert by_release(pack.cancelled) == [("income-deciles", "grace", "cancelled")]
    assert by_release(pack.retracted) == [("income-by-degree", "edsger", "retracted")]


def test_the_meeting_pack_shows_how_each_cap_moved(meeting_ledger):
    url, _ = meeting_ledger
    moves = {m.name: m for m in context_of(url, "graduates", since=MEETING, charts=False).meeting.caps}
    # {income}: then income-by-degree 1 + mean-income (approved, reserving) 1/2; now the same:
    # the retracted release still counts and the cancelled one frees its reservation
    assert (moves["income"].before, moves["income"].now, moves["income"].change) == (F(3, 2), F(3, 2), 0)
    # personal = {income, sex}: sex-ratio's 1/4 was recorded since
    assert (moves["personal"].before, moves["personal"].now, moves["personal"].change) == (F(3, 2), F(7, 4), F(1, 4))
    # {sex}: 0 -> 1/4, the whole cap: ok -> warn (80% or more)
    assert (moves["sex"].before, moves["sex"].now) == (0, F(1, 4))
    assert (moves["sex"].status_before, moves["sex"].status_now) == ("ok", "warn")
    # degree's cap was set after the date: it did not exist then (new, no figure then), not "ok 0"
    assert (moves["degree"].before, moves["degree"].status_before) == (None, "new") and moves["degree"].now == 1
    assert not moves["income"].set_after


def test_the_meeting_pack_in_every_format(meeting_ledger, tmp_path):
    url, _ = meeting_ledger
    for fmt in ("md", "html", "tex"):
        out = tmp_path / f"pack.{fmt}"
        result = run_main(url, "report", "--format", fmt, "--out", out, "--since", "2024-04-01")
        assert result.code == 0, result.err
        text = out.read_text(encoding="utf-8")
        assert "Changes since 2024-04-01 00:00:00 UTC" in text
        assert "income-deciles" in text and "sex-ratio" in text
    md = (tmp_path / "pack.md").read_text(encoding="utf-8")
    assert "| personal | {income, sex} | epsilon | 3 | 1.5 | 1.75 | +0.25 | ok → ok |" in md


def test_the_cap_moves_at_an_as_of_name_it_in_every_format(meeting_ledger, tmp_path):
    """Under --as-of the cap moves' second figure is the ledger at that moment, not now: the
    header names it (the LaTeX one said Now)."""
    url, _ = meeting_ledger
    # (--since a date: its start; --as-of a date: its end, the whole day)
    for fmt, header in (("md", "| At 2024-04-01 00:00:00 UTC | At 2024-04-13 23:59:59 UTC |"),
                        ("html", '<th class="num">At 2024-04-13 23:59:59 UTC</th>'),
                        ("tex", "& Then & At 2024-04-13 23:59:59 UTC & Change")):
        out = tmp_path / f"pack.{fmt}"
        result = run_main(url, "report", "--format", fmt, "--out", out, "--since", "2024-04-01",
                          "--as-of", "2024-04-13")
        assert result.code == 0, result.err
        text = out.read_text(encoding="utf-8")
        assert header in text, fmt


def test_caps_show_spend_headroom_status_and_drivers(meeting_ledger):
    url, _ = meeting_ledger
    caps = {c.name: c for c in context_of(url, "graduates", charts=False).caps}
    assert (caps["sex"].current, caps["sex"].headroom, caps["sex"].status) == (F(1, 4), 0, "warn")
    assert (caps["personal"].current, caps["personal"].headroom) == (F(7, 4), F(5, 4))
    assert [rid for rid, _ in caps["personal"].drivers] == ["income-by-degree", "mean-income", "sex-ratio"]


def test_the_register_holds_every_release_with_its_lifecycle(meeting_ledger):
    url, _ = meeting_ledger
    register = {r.id: r for r in context_of(url, "graduates", charts=False).register}
    assert list(register) == ["income-by-degree", "mean-income", "sex-ratio", "income-deciles"]
    mean = register["mean-income"]
    assert (mean.status, mean.recorded_by, mean.approved_by) == ("published", "ada", "grace")
    assert (mean.recorded_at, mean.approved_at, mean.published_at) == (T(2, 1), T(3, 1), T(4, 12))
    assert mean.parameters == (("epsilon", F(1, 2)),) and mean.guarantees[0].epsilon == F(1, 2)
    assert not register["income-deciles"].charged and register["income-by-degree"].status == "retracted"


def test_the_audit_trail_lists_every_event_of_the_dataset(meeting_ledger):
    url, _ = meeting_ledger
    audit = context_of(url, "graduates", charts=False).audit
    assert audit.ok
    kinds = [e.kind for e in audit.listed]
    # ada, the first user, is granted every role (4 events) before the dataset is added
    assert kinds[:5] == ["role.granted"] * 4 + ["dataset.added"] and kinds[-1] == "cap.set"
    assert dict(audit.by_kind)["release.recorded"] == 4
    # ada: her 4 roles, 3 grants, the dataset, its three caps, four releases, one more cap;
    # grace: approve, publish, cancel; edsger: retract
    assert dict(audit.by_actor) == {"ada": 16, "edsger": 1, "grace": 3}
    # the reasons of the retraction and the cancellation, and the roles granted, are in the trail
    notes = {(e.kind, e.subject): e.note for e in audit.listed if e.note}
    assert notes[("release.retracted", "income-by-degree")] == "a coding error in degree"
    assert notes[("release.cancelled", "income-deciles")] == "superseded by the mean"
    assert [e.note for e in audit.listed if e.subject == "grace"] == ["approver", "steward"]


EXACT_INPUTS = """\
dataset: census
delta: 1e-10
variables:
  - {name: age}
  - {name: income}
caps:
  - {subset: [income], epsilon: 3}
"""

EXACT_RELEASE = """\
dataset: census
releases:
  - id: mean-income
    title: Mean income
    reads: [income]
    mechanism: {name: laplace, epsilon: "293764/114921"}
"""


def test_exact_inputs_stay_exact_bounds_round_up_and_headroom_down(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "census.yaml", EXACT_INPUTS, T(1, 1), command="dataset")
    record(url, tmp_path, "release.yaml", EXACT_RELEASE, T(1, 2))
    out = tmp_path / "report.md"
    assert run_main(url, "report", "--format", "md", "--out", out).code == 0
    md = out.read_text(encoding="utf-8")
    # as the command line prints it (format_number): 4 decimals, 2.55622... up
    assert "| mean-income | 0 | 293764/114921 (≈ 2.5563) | 293764/114921 (≈ 2.5563) |" in md
    # headroom 3 - 293764/114921 = 50999/114921 = 0.44377..., rounded down
    assert ("| income | {income} | epsilon | 3 | 293764/114921 (≈ 2.5563) | 50999/114921 (≈ 0.4437) | warn | "
            "mean-income (293764/114921 (≈ 2.5563)) |") in md  # 2.556 >= 80% of 3: warn
    # the delta, an exact input too: a pure-only report has no figure at a delta, so it names neither the
    # zCDP conversion nor the delta (test_report_conversion.py); a cap at it shows it exactly (below)
    assert "Conversion" not in md and "10⁻¹⁰" not in md
    frame = list(csv.reader(io.StringIO(render(context_of(url, "census", charts=False), "csv").decode())))
    # numeric cells: a float column per variable and the whole dataset, each at or above
    # the exact loss, then the exact columns
    assert frame[0] == ["release", "{age}", "{income}", "whole dataset (ordinary DP)",
                        "{age} exact", "{income} exact", "whole dataset (ordinary DP) exact"]
    assert frame[1][0] == "mean-income" and float(frame[1][1]) == 0
    for text in frame[1][2:4]:
        assert Fraction(293764, 114921) <= Fraction(text) < Fraction(293764, 114921) + Fraction(1, 10**12)
    assert frame[1][4:] == ["0", "293764/114921", "293764/114921"]
    with clock(T(1, 3)):
        assert run_main(url, "cap", "set", "age", "--epsilon", "1", "--delta", "1e-10").code == 0
    assert run_main(url, "report", "--format", "md", "--out", out).code == 0
    assert "| age | {age} | epsilon at delta 1 × 10⁻¹⁰" in out.read_text(encoding="utf-8")


def test_pufferfish_guarantees_have_their_own_section_and_stay_out_of_the_totals(meeting_ledger):
    url, _ = meeting_ledger
    context = context_of(url, "graduates")
    guarantee = PPercentGuarantee(p=0.1, epsilon=1, laplace_scale=0.421, contributor="farm",
                                  linked_variables=("income",), protected_contributors=12)
    with_pufferfish = replace(context, pufferfish=(from_p_percent("mean-income", guarantee),))
    html = render(with_pufferfish, "html").decode("utf-8")
    section = html[html.index('id="pufferfish"'):html.index('id="audit"')]
    assert "p% protection (Bailie 2020)" in section and "x^S in [(1-p)x, (1+p)x] for every x" in section
    assert "linear relation" in section and "laplace_scale 0.421" in section
    # the DP figures are those of the context without it
    assert with_pufferfish.certificate == context.certificate and with_pufferfish.risk.total == context.risk.total
    for fmt in ("md", "tex"):
        assert "Bailie" in render(with_pufferfish, fmt).decode("utf-8")


def test_pufferfish_entries_come_from_what_releases_record():
    class Recorded:  # the shape recorded with a release (records.PufferfishGuarantee)
        kind, protects, secrets, assumptions = "perfect-sample-privacy", frozenset({"x"}), "each sample", "i.i.d."
        epsilon, delta, parameters = None, None, (("alphabet", 2),)

    class WithPufferfish:
        id, pufferfish = "xor", (Recorded(),)

    class Without:
        id = "plain"

    entries = pufferfish_entries([WithPufferfish(), Without()])
    assert [(e.release, e.kind, e.protects, e.parameters) for e in entries] == [
        ("xor", "perfect-sample-privacy", ("x",), (("alphabet", 2),))]
    assert entries[0].label == "perfect sample privacy (Rassouli, Rosas and Gündüz)"


# --------------------------------------------------------------------------
# Bad input: exit 2, a clear message, nothing written
# --------------------------------------------------------------------------


@pytest.mark.parametrize("args,message", [
    (["--dataset", "nope", "--format", "html"], "unknown dataset 'nope'"),
    (["--format", "docx"], "unknown format 'docx'; choose one of html, md, tex, csv, pdf"),
    (["--format", "html", "--since", "last tuesday"], "not a date: 'last tuesday'"),
    (["--format", "html", "--delta", "2"], "must be in (0, 1)"),
    (["--format", "csv", "--since", "2024-04-01"], "the CSV export is the release-by-variable table only"),
])
def test_bad_input_exits_2_and_writes_nothing(meeting_ledger, tmp_path, args, message):
    url, _ = meeting_ledger
    out = tmp_path / "report.out"
    result = run_main(url, "report", *args, "--out", out)
    assert result.code == 2, result.out
    assert message in result.err and "nothing was written" in result.err
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_out_exits_2_and_writes_nothing(meeting_ledger, tmp_path):
    url, _ = meeting_ledger
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out, message in [(tmp_path / "missing" / "r.html", "does not exist"),
                         (tmp_path, "is a directory"),
                         (a_file / "r.html", "does not exist")]:
        result = run_main(url, "report", "--format", "html", "--out", out)
        assert result.code == 2 and message in result.err, (out, result.err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a-file"]


def test_a_pdf_without_chromium_exits_2(meeting_ledger, tmp_path, monkeypatch):
    url, _ = meeting_ledger
    monkeypatch.setenv("LEDGER_CHROMIUM", str(tmp_path / "no-such-browser"))
    result = run_main(url, "report", "--format", "pdf", "--out", tmp_path / "r.pdf")
    assert result.code == 2 and "PDF needs Chromium" in result.err
    assert list(tmp_path.iterdir()) == []


def test_a_missing_ledger_exits_2(tmp_path):
    result = run_main(f"sqlite:///{tmp_path / 'none.db'}", "report", "--format", "md", "--out", tmp_path / "r.md")
    assert result.code == 2 and "no ledger at" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_report_is_written_whole(meeting_ledger, tmp_path):
    """A temporary file beside it, renamed into place: no partial file, no leftovers."""
    url, _ = meeting_ledger
    out = tmp_path / "report.csv"
    out.write_text("old")
    result = run_main(url, "report", "--format", "csv", "--out", out)
    assert result.code == 0 and "wrote the csv report of dataset graduates" in result.out
    assert out.read_text().startswith("release,{degree},{income},{sex},whole dataset (ordinary DP),{degree} exact,")
    assert [p.name for p in tmp_path.iterdir()] == ["report.csv"]


def test_the_html_is_self_contained(meeting_ledger):
    url, _ = meeting_ledger
    html = render(context_of(url, "graduates"), "html").decode("utf-8")
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"""(src|href)=["'](?!#|data:)""", html)  # nothing outside the file is referenced
    assert html.count('<svg id="heat-map"') == 1 and html.count('<svg id="timeline-chart"') == 1
    assert "<style>" in html and "@page" in html


def test_large_ledgers_give_the_risk_table_sparsely():
    assert MATRIX_CELL_LIMIT >= 200 * 50  # a 200-variable dataset with 50 releases is still a matrix


def test_a_tampered_ledger_is_reported_broken(tmp_path):
    """A release row edited behind the ledger's back: the report says the chain is broken, and where."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "census.yaml", EXACT_INPUTS, T(1, 1), command="dataset")
    record(url, tmp_path, "release.yaml", EXACT_RELEASE, T(1, 2))
    connection = sqlite3.connect(tmp_path / "ledger.db")
    connection.execute("UPDATE releases SET title = 'Nothing to see' WHERE id = 'mean-income'")
    connection.commit()
    connection.close()
    context = context_of(url, "census", charts=False)
    assert not context.certificate.chain_ok and not context.audit.ok
    md = render(context, "md").decode("utf-8")
    # events 1-4: the first user's roles; then the dataset, its cap, and the release (7)
    assert "| Audit chain | BROKEN: 1 problem; first: event 7 (release mean-income): the release row was changed" in md


FIRMS = """\
dataset: firms
variables:
  - {name: region, classification: public, categories: [N, S]}
  - {name: firm}
  - {name: turnover, classification: sensitive}
  - {name: wages, classification: sensitive}
  - {name: bit}
  - {name: staff}
"""

FIRMS_RELEASE = """\
dataset: firms
releases:
  - {id: staff-by-region, reads: [region, staff], mechanism: {name: laplace, epsilon: 1/2},
     guarantees: [{protects: [staff], epsilon: 1/2}]}
"""


def test_pufferfish_guarantees_recorded_by_mechanisms_are_reported_apart(tmp_path):
    """Bailie's p% mechanism and a modular sum record Pufferfish guarantees: the report
    lists them with their secrets and assumptions, and the DP figures stay the engine's: the p%
    release has no DP guarantee, so it is ∞ (not protected) on what it reads, never its epsilon."""
    import pandas as pd

    from ledger.store import engines
    from ledger.operations.recording import run_and_record

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with acting_as("ada"):
        record(url, tmp_path, "firms.yaml", FIRMS, T(1, 1), command="dataset")
        record(url, tmp_path, "staff.yaml", FIRMS_RELEASE, T(1, 2))
    data = pd.DataFrame({"region": ["N", "N", "S", "S"], "firm": ["a", "b", "c", "d"],
                         "turnover": [100.0, 5.0, 3.0, 7.0], "wages": [10.0, 0.5, 0.3, 0.7],
                         "bit": [1, 1, 0, 1], "staff": [3, 4, 5, 6]})
    engine = engines.make_engine(url)
    run_and_record(engine, "p-percent", data, dataset="firms", release_id="pp", actor="ada", seed=1,
                   params={"contributor": "firm", "linked": "turnover,wages", "cells": "region", "p": "0.1",
                           "epsilon": "1"})
    run_and_record(engine, "modular-sum", data, dataset="firms", release_id="parity", actor="ada", seed=1,
                   params={"variable": "bit", "modulus": "2"})
    engine.dispose()

    context = context_of(url, "firms")
    entries = {e.release: e for e in context.pufferfish}
    assert set(entries) == {"pp", "parity"}
    assert (entries["pp"].kind, entries["pp"].protects, entries["pp"].epsilon) == ("p-percent", ("turnover", "wages"),
                                                                                   1)
    assert entries["parity"].label == "perfect sample privacy (Rassouli, Rosas and Gündüz)"
    totals = dict(zip(context.risk.variables, context.risk.total))
    assert totals["turnover"] == totals["wages"] == float("inf")  # Pufferfish epsilon 1 is never a DP figure
    assert totals["staff"] == F(1, 2)

    html = render(context, "html").decode("utf-8")
    section = html[html.index('<section id="pufferfish">'):html.index('<section id="audit"')]
    assert section.count("<tr>") == 3  # the header and two guarantees
    assert "p% protection (Bailie 2020)" in section and "(1-p)x" in section and "linear" in section
    md = render(context, "md").decode("utf-8")
    assert "| pp | p% protection (Bailie 2020) | {turnover, wages} |" in md


def _inputs_of(url: str):
    from sqlmodel import Session
    from test_report_helpers import GENERATED

    from ledger.store import decoded_history, engines
    from ledger.operations.report_inputs import gather

    engine = engines.make_engine(url)
    try:
        with Session(engine) as session:
            chosen = decoded_history.snapshot(session, "graduates").datasets["graduates"]
            return gather(session, chosen, chosen.delta, None, generated_at=GENERATED)
    finally:
        engine.dispose()


def test_charts_drawn_alongside_are_the_charts_drawn_here(meeting_ledger):
    from ledger.cli.forked_helpers import ChartsAlongside
    from ledger.reporting.report import build_report

    inputs = _inputs_of(meeting_ledger[0])
    here = build_report(inputs)
    alongside = ChartsAlongside()
    try:
        assert alongside.helper.process is not None  # Linux: a forked process draws
        elsewhere = build_report(inputs, draw=alongside)
    finally:
        alongside.close()
    assert here.pairs.svg and here.timeline.svg
    assert (elsewhere.pairs.svg, elsewhere.timeline.svg) == (here.pairs.svg, here.timeline.svg)


def test_charts_are_drawn_here_when_the_drawing_process_fails(meeting_ledger, monkeypatch):
    import os

    from ledger.reporting import charts
    from ledger.cli.forked_helpers import ChartsAlongside
    from ledger.reporting.report import build_report

    parent = os.getpid()
    drawn_here = charts.heat_map_svg

    def fails_in_the_child(pairs):
        if os.getpid() != parent:
            raise MemoryError("the child ran out of memory")
        return drawn_here(pairs)

    monkeypatch.setattr(charts, "heat_map_svg", fails_in_the_child)
    inputs = _inputs_of(meeting_ledger[0])
    alongside = ChartsAlongside()
    try:
        context = build_report(inputs, draw=alongside)
    finally:
        alongside.close()
    assert context.pairs.svg == drawn_here(context.pairs) and context.timeline.svg


def test_pairs_and_timeline_computed_in_a_forked_process_are_the_ones_computed_here(meeting_ledger):
    """The CLI computes the pairs panel and the timeline in a forked process
    (cli/forked_helpers.py, ForkedCall); the report is the same, figure for figure and byte for byte."""
    from ledger.cli.forked_helpers import ForkedCall
    from ledger.reporting.write import render
    from ledger.reporting.report import build_report, here

    inputs = _inputs_of(meeting_ledger[0])
    started = []

    def forked(function):
        call = ForkedCall(function)
        started.append(call.helper.process is not None)
        return call

    here_context = build_report(inputs, beside=here)
    forked_context = build_report(inputs, beside=forked)
    assert started == [True]  # Linux: a forked process computed them
    assert forked_context.pairs.highest == here_context.pairs.highest and forked_context.pairs.highest
    assert forked_context.pairs.matrix == here_context.pairs.matrix
    assert forked_context.timeline.svg == here_context.timeline.svg and forked_context.pairs.svg
    assert render(forked_context, "html") == render(here_context, "html")


def test_pairs_are_computed_here_when_the_forked_process_fails(meeting_ledger, monkeypatch):
    import os

    from ledger.reporting import report
    from ledger.cli.forked_helpers import ForkedCall
    from ledger.reporting.report import build_report, here

    parent = os.getpid()
    computed_here = report.pair_figures

    def fails_in_the_child(*args, **kwargs):
        if os.getpid() != parent:
            raise MemoryError("the child ran out of memory")
        return computed_here(*args, **kwargs)

    monkeypatch.setattr(report, "pair_figures", fails_in_the_child)
    inputs = _inputs_of(meeting_ledger[0])
    context = build_report(inputs, beside=ForkedCall)
    assert context.pairs.highest == build_report(inputs, beside=here).pairs.highest and context.pairs.svg
