"""The summarised report at --as-of and --since, from the accounting rows.

`report --as-of T` and `report --since S` of a large ledger used to go through `gather`,
which decodes every release (`decoded_history.snapshot`): 1.4 GB at 100,000 releases. `gather_large`
now reads them from the accounting rows at T (index_from_rows.index_for with the moment), the audit
trail by SQL dated by T, and the meeting pack by SQL and the rows just before S. Here small
ledgers are reported both ways, at moments across their history (before the first release,
while releases are recorded, while they are approved, published, cancelled and retracted,
after it all), and every section must be equal, number by number: the certificate, the risk
table's total row, the caps, the timeline, the largest releases with their status then, the
audit trail, the meeting pack (its counts, and its lists as the most recent of the small
path's), and the complete register row by row with each release's status then.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from test_accounting_rows import ledgers, moment
from test_accounting_rows import T0
from test_as_of_rows import caps_of, drawn_history, record, set_caps_before

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_report import build_ledger  # noqa: E402

from ledger.operations import large_report  # noqa: E402
import ledger.cli.report_register as report_register  # noqa: E402
import ledger.operations.large_register as large_register  # noqa: E402
from ledger.operations import large_meeting  # noqa: E402
from ledger.operations.report_inputs import gather  # noqa: E402
from ledger.api import Ledger
from ledger.cli.report import gather_large  # noqa: E402
from ledger.cli.report_register import large_register_csv, large_register_entries, register_csv  # noqa: E402
from ledger.operations import choices  # noqa: E402
from ledger.reporting import report  # noqa: E402
from ledger.operations.report_inputs import ChainStatus  # noqa: E402
from ledger.reporting.report import SUMMARY_ENV, build_large_report, build_report  # noqa: E402
from ledger.store import audit_chain, decoded_history, engines, sessions, table_models
from support import cli_main  # noqa: E402

CHAIN = ChainStatus(True, 1, "head", ())
LISTED = 7


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    directory = tmp_path_factory.mktemp("large-as-of")
    url = build_ledger(directory / "ledger.db", 12, 300, seed=5)
    return url, directory


def moments(url: str) -> list[datetime]:
    """Moments across the ledger's history: before its first event, at quantiles of its events'
    moments (recordings, then approvals, publications, cancellations, retractions, caps), and
    after its last; one exactly at an event (a moment compared with equality)."""
    engine = engines.make_engine(url)
    with sessions.read_session(engine) as session:
        table = table_models.AuditEventRow.__table__
        ats = sorted(datetime.fromisoformat(at) for (at,) in session.connection().execute(select(table.c.at)))
        releases = table_models.ReleaseRow.__table__
        published = sorted(datetime.fromisoformat(at).replace(tzinfo=UTC) for (at,) in session.connection().execute(
            select(releases.c.published_at).where(releases.c.published_at.is_not(None))))
    engine.dispose()
    picks = [ats[int(q * (len(ats) - 1))] for q in (0.2, 0.5, 0.8, 0.9, 0.97)]
    return sorted([ats[0] - timedelta(days=1), *(p + timedelta(microseconds=1) for p in picks[:-1]), picks[-1],
                   published[len(published) // 2], ats[-1] + timedelta(days=1)])


def caps_set_at(url: str) -> list[datetime]:
    """When each cap was set (build_ledger sets them after every release)."""
    engine = engines.make_engine(url)
    with sessions.read_session(engine) as session:
        table = table_models.AuditEventRow.__table__
        found = [datetime.fromisoformat(at) for (at,) in session.connection().execute(
            select(table.c.at).where(table.c.kind == "cap.set"))]
    engine.dispose()
    return found


def both(url: str, as_of: datetime | None, since: datetime | None, name: str = "survey"):
    """(the small path's context, the large path's context, the large inputs)."""
    engine = engines.make_engine(url)
    saved, report.LARGEST_LISTED = report.LARGEST_LISTED, LISTED
    try:
        with sessions.read_session(engine) as session:
            snapshot = decoded_history.snapshot(session, name)
            dataset = snapshot.datasets[name]
            delta = choices.parse_delta(None, dataset)
            inputs = replace(gather(session, dataset, delta, since, chain=CHAIN), as_of=as_of)
            small = build_report(inputs, charts=False, register_file="r.csv")
            large_inputs = gather_large(Ledger("ledger", engine), dataset, delta, chain=CHAIN, generated_at=inputs.generated_at,
                                        as_of=as_of, since=since)
    finally:
        report.LARGEST_LISTED = saved
    assert large_inputs is not None  # (the events' moments are UTC text: the rows say it exactly)
    large = build_large_report(large_inputs, lambda: large_register_entries(Ledger("ledger", engine), large_inputs.reading), "r.csv",
                               charts=False)
    return small, large, large_inputs


def assert_same_page(small, large, caps: int = 20) -> None:
    for field in ("variables", "layout", "total", "total_dataset_wide", "unprotected", "public", "total_wide_public",
                  "family_note", "rotate"):
        assert getattr(large.risk, field) == getattr(small.risk, field), field
    assert large.certificate == small.certificate
    assert large.caps == small.caps and len(small.caps) == caps
    assert large.cap_history == small.cap_history
    assert large.pairs.highest == small.pairs.highest and np.array_equal(large.pairs.colour, small.pairs.colour)
    if small.timeline is None:
        assert large.timeline is None
    else:
        assert large.timeline.x == small.timeline.x and large.timeline.labels == small.timeline.labels
        assert np.array_equal(large.timeline.y, small.timeline.y) and large.timeline.end == small.timeline.end
    assert large.register == small.register  # the largest releases, each with its status then
    assert large.pufferfish == small.pufferfish
    assert large.audit == small.audit
    assert large.summary.releases == small.summary.releases


def assert_same_meeting(small, large) -> None:
    if small is None:
        assert large is None
        return
    assert (large.since, large.events, large.caps) == (small.since, small.events, small.caps)
    assert large.dataset_total == small.dataset_total  # the dataset's own changes: the most recent listed
    assert large.dataset_changes == small.dataset_changes[-large_meeting.CHANGES_LISTED:]
    for (heading, listed, count), (heading_, every, count_) in zip(large.sections, small.sections):
        assert (heading, count) == (heading_, count_ or len(every))
        assert listed == every[-large_meeting.CHANGES_LISTED:], heading


def test_the_page_at_every_moment_is_the_page_of_every_release_decoded(built, monkeypatch):
    """--as-of T alone, --since S alone, and both: the same figures as `gather`'s path."""
    url, _ = built
    monkeypatch.setattr(large_meeting, "CHANGES_LISTED", 9)  # some sections longer than what is listed
    points = moments(url)
    seen_statuses, truncated = set(), False
    capped = caps_set_at(url)
    for k, when in enumerate(points):
        earlier = points[max(k - 2, 0)]
        for as_of, since in ((when, None), (None, when), (when, earlier)):
            small, large, _ = both(url, as_of, since)
            # (the caps are set last: at an earlier --as-of they did not exist yet)
            assert_same_page(small, large, caps=sum(1 for at in capped if as_of is None or at <= as_of))
            assert_same_meeting(small.meeting, large.meeting)
            seen_statuses |= {entry.status for entry in large.register}
            truncated |= large.meeting is not None and any(
                count > len(listed) for _, listed, count in large.meeting.sections)
    # the moments reach every lifecycle status, and some meeting pack lists only the most recent
    assert {"planned", "approved", "published"} <= seen_statuses and truncated


def test_the_register_at_a_moment_gives_each_release_its_status_then(built, monkeypatch):
    url, _ = built
    monkeypatch.setattr(large_register, "REGISTER_PAGE", 37)
    points = moments(url)
    for when in (points[1], points[3], points[5]):
        small, large, large_inputs = both(url, when, None)
        entries = list(large.summary.entries())
        expected = list(small.summary.entries())
        assert entries == expected and 0 < len(entries)
        text = "".join(register_csv(small.summary))
        assert "".join(large_register_csv(Ledger.on_own_engine(url), large_inputs.reading, page=37)) == text
        # written in parts (RegisterAlongside's bounds), joined: the same text
        parts = report_register._register_parts(large_inputs.reading, 3)
        joined = "".join("".join(large_register_csv(Ledger.on_own_engine(url), large_inputs.reading, page=37, after=a, upto=b,
                                                    header=k == 0)) for k, (a, b) in enumerate(parts))
        assert joined == text
    # before every release: an empty register; at the end: every release, with its status now
    assert list(both(url, points[0], None)[1].summary.entries()) == []


def test_the_command_at_a_moment_reads_no_whole_release(built, monkeypatch, tmp_path):
    """`report --as-of T --since S` past the threshold takes the large path (decoded_history.snapshot
    forbidden), and its page and register are the ones the path before wrote."""
    url, _ = built
    monkeypatch.setenv(SUMMARY_ENV, "100")
    monkeypatch.setattr(large_meeting, "CHANGES_LISTED", 10**6)  # every change listed, as the small path lists them
    points = moments(url)
    as_of, since = points[4].isoformat(), points[2].isoformat()
    written = {}
    for path in ("rows", "decoded"):
        out = tmp_path / path / "report.html"
        out.parent.mkdir()
        with monkeypatch.context() as patch:
            if path == "rows":
                patch.setattr(decoded_history, "snapshot", lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
            else:  # the path before: every release decoded
                patch.setattr(large_report, "read_large", lambda *a, **k: None)
            run = cli_main(url, "report", "--out", out, "--as-of", as_of, "--since", since)
        assert run.code == 0, run.err
        with (out.parent / "report.html.register.csv").open(newline="", encoding="utf-8") as stream:
            written[path] = (out.read_text(encoding="utf-8"), list(csv.reader(stream)))
    page, register = written["rows"]
    old_page, old_register = written["decoded"]
    assert register == old_register and len(register) > 1
    assert "Changes since" in page and 'href="./report.html.register.csv"' in page
    import re

    def figures(html: str) -> str:  # the page without its generation time
        return re.sub(r"(Generated at</dt><dd>|Generated |verified at )[^<;]* UTC", "", html)

    assert figures(page) == figures(old_page)


def test_a_release_approved_after_the_moment_is_no_approval_since(tmp_path):
    """The meeting pack at --as-of T lists the approvals and publications dated between --since
    and T only (before, the small path listed a release approved after T, when it was still
    planned, among the approvals since S)."""
    url = build_ledger(tmp_path / "l.db", 12, 40, seed=11)
    engine = engines.make_engine(url)
    with sessions.read_session(engine) as session:
        releases = list(decoded_history.snapshot(session, "survey").releases.values())
    engine.dispose()
    approved = sorted(r.approved_at.replace(tzinfo=r.approved_at.tzinfo or UTC) for r in releases if r.approved_at)
    assert len(approved) >= 2
    since, as_of = approved[0] - timedelta(seconds=1), approved[0]
    small, large, _ = both(url, as_of, since)
    assert [c.at for c in small.meeting.approved] == [approved[0]] == [c.at for c in large.meeting.approved]


def test_every_row_charged_at_a_moment_has_the_status_it_had_then(built):
    """The index at T names each release charged then with its status then (as_of.Then's heads,
    read from the accounting rows and the approval moments of the releases not published by
    T): planned, approved (by T), published, retracted (by T), as the decoded releases say."""
    from ledger.core.records import CHARGED_STATUSES
    from ledger.store import index_from_rows

    url, _ = built
    engine = engines.make_engine(url)
    seen = set()
    with sessions.read_session(engine) as session:
        dataset = decoded_history.snapshot(session, "survey").datasets["survey"]
        inputs = gather(session, dataset, choices.parse_delta(None, dataset), None, chain=CHAIN)
        families = {f.id: f for f in inputs.families}
        for when in moments(url):
            stood = report.as_it_stood(replace(inputs, as_of=when))
            expected = [(r.id, r.status) for r in stood.releases if r.status in CHARGED_STATUSES]
            index = index_from_rows.index_for(session, dataset.variable_names, "survey", families, when=when)
            assert [(r.id, r.status) for r in index.releases] == expected
            seen |= {status.value for _, status in expected}
    engine.dispose()
    assert {"planned", "approved", "published", "retracted"} <= seen


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_random_histories_give_the_same_page_and_register_both_ways(ledger, data):
    """Random ledgers (test_accounting_rows.ledgers: families keyed and random, releases with no
    moment, published after they were planned, retracted and cancelled at drawn moments, many
    small Laplace releases deciding a cap at a delta by the Rényi filter or the PLD), a pure
    cap, a cap at a delta and a rho cap, --as-of and --since drawn (releases after T, ended
    after T): the page and the register of the rows are those of the decoded releases."""
    entries, lifecycle, preferred, endings = drawn_history(ledger, data)
    at = data.draw(st.integers(-1, 6))
    as_of = data.draw(st.sampled_from([None, moment(at)]))
    since = data.draw(st.sampled_from([None, moment(data.draw(st.integers(-1, at)))]))
    caps = caps_of(data, preferred)
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle, endings)
        set_caps_before(url, caps, T0 - timedelta(days=1))  # (set after T, a cap is not shown at T)
        small, large, large_inputs = both(url, as_of, since, "t")
        assert_same_page(small, large, caps=3)
        assert_same_meeting(small.meeting, large.meeting)
        assert list(large.summary.entries()) == list(small.summary.entries())
        assert "".join(large_register_csv(Ledger.on_own_engine(url), large_inputs.reading, page=3)) == \
            "".join(register_csv(small.summary))


def test_an_event_moment_not_in_utc_text_sends_the_report_to_every_release(tmp_path):
    """The rows' path compares the events' moments as text, which orders them only in the UTC
    form `append_event` writes; an event stated at another offset (a cancellation at
    10:00+02:00) makes the summarised reading decline at --as-of and --since (the command then reads
    every release), and the report without them is unaffected (no moment compared)."""
    from datetime import timezone

    entries = [{"id": f"r{i}", "reads": ["a"], "mechanism": {"name": "laplace", "epsilon": "1"}} for i in range(3)]
    from ledger.core.records import Status

    url = f"sqlite:///{tmp_path}/l.db"
    record(url, entries, [(Status.PLANNED, 0, None, False), (Status.CANCELLED, 0, None, False),
                          (Status.PUBLISHED, 0, 1, False)], [None, None, None])
    engine = engines.make_engine(url)
    with sessions.write_session(engine) as session:
        audit_chain.append_event(session, kind="release.cancelled", subject="r1", actor="t", payload={"reason": "r"},
                           at=moment(2).astimezone(timezone(timedelta(hours=2))))
    with sessions.read_session(engine) as session:
        dataset = decoded_history.snapshot(session, "t").datasets["t"]
        delta = choices.parse_delta(None, dataset)
        for as_of, since in ((moment(3), None), (None, moment(1)), (moment(3), moment(1))):
            assert gather_large(Ledger("ledger", engine), dataset, delta, chain=CHAIN, as_of=as_of, since=since) is None
        assert gather_large(Ledger("ledger", engine), dataset, delta, chain=CHAIN) is not None
    engine.dispose()


def test_the_cap_moves_name_a_caps_subset_in_dataset_order_both_ways(tmp_path):
    """The summarised meeting pack sorted a cap's subset (the dataset's {sex, age} as {age, sex});
    every other view, the full report's cap moves among them, prints it in dataset order
    (records.in_dataset_order, through Cap.ordered_subset)."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text("dataset: survey\nvariables: [{name: sex}, {name: income}, {name: age}]\n"
                                     "caps:\n  - {name: c, subset: [age, sex], epsilon: 5}\n")
    (tmp_path / "r.yaml").write_text("dataset: survey\nreleases:\n"
                                     "  - {id: r, reads: [age], mechanism: {name: laplace, epsilon: 1}}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    small, large, _ = both(url, None, datetime(2000, 1, 1, tzinfo=UTC))
    assert [move.subset for move in small.meeting.caps] == [("sex", "age")]
    assert_same_meeting(small.meeting, large.meeting)
