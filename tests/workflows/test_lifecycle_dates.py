"""Lifecycle and dates: a release without status is
planned; a status other than planned carries who and when; `publish --at`; `run` planned by
default; and every time view by publication date (`--as-of`, the meeting pack, the chart).

The history used below, recorded with the store's clock set by the test (pure epsilons on
{income}, which add: Tan Prop 3.4):
- r2: planned 1 March (1/2), approved 1 April, published 1 May;
- r3: planned 15 March (1/4), cancelled 15 April;
- r1: published 1 February (1), recorded only on 1 June, as history.
So the loss on {income}, by publication date, is: 0 before 1 February; 1 from then;
1 + 1/2 + 1/4 = 7/4 from 15 March; 3/2 from 15 April (r3 cancelled) on.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import acting_as, cli_main, dump_tables
from test_report_helpers import clock, context_of

from ledger.accounting.history import charged_from, releases_as_of, status_at
from ledger.core.records import Mechanism, Release, Status

F = Fraction
T = lambda month, day, hour=9: datetime(2024, month, day, hour, 0, tzinfo=UTC)  # noqa: E731

DATASET = """\
dataset: survey
self_approval: true  # (history recorded as published by the person keeping the ledger)
variables:
  - {name: income}
  - {name: region}
caps:
  - {subset: [income], epsilon: 2}
"""


def releases(*lines: str) -> str:
    return "dataset: survey\nreleases:\n" + "".join(f"  - {line}\n" for line in lines)


def laplace(release_id: str, epsilon: str, extra: str = "") -> str:
    return f"{{id: {release_id}, reads: [income], mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}{extra}}}"


class Ledger:
    def __init__(self, url, directory):
        self.url, self.directory, self.count = url, directory, 0

    def __call__(self, *args, at: datetime | None = None):
        if at is None:
            return cli_main(self.url, *args)
        with clock(at):
            return cli_main(self.url, *args)

    def ok(self, *args, at: datetime | None = None):
        result = self(*args, at=at)
        assert result.code == 0, result.err
        return result

    def file(self, content: str):
        self.count += 1
        path = self.directory / f"f{self.count}.yaml"
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    def refused(self, *args, naming: str, at: datetime | None = None):
        before = dump_tables(self.url)
        result = self(*args, at=at)
        assert result.code == 2, (result.out, result.err)
        assert naming in result.err, result.err
        assert dump_tables(self.url) == before
        return result


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path)
    with acting_as("ana"):
        ledger.ok("dataset", "add", ledger.file(DATASET), at=T(1, 1))
        ledger.ok("role", "grant", "carol", "approver", at=T(1, 1))
        ledger.ok("role", "grant", "carol", "steward", at=T(1, 1))
    return ledger


@pytest.fixture
def history(ledger):
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace("r2", "1/2"))), at=T(3, 1))
        ledger.ok("record", ledger.file(releases(laplace("r3", "1/4"))), at=T(3, 15))
    with acting_as("carol"):
        ledger.ok("approve", "r2", at=T(4, 1))
        ledger.ok("cancel", "r3", "--reason", "dropped", at=T(4, 15))
        ledger.ok("publish", "r2", at=T(5, 1))
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace(
            "r1", "1", ", status: published, published_at: \"2024-02-01T09:00:00Z\""))), at=T(6, 1))
    return ledger


# --------------------------------------------------------------------------
# Statuses and their who and when
# --------------------------------------------------------------------------


def test_a_release_without_status_is_planned(ledger):
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace("p", "1/2"))))
    (release,) = ledger.ok("releases", "--json").json()
    assert (release["status"], release["published_at"], release["approved_by"]) == ("planned", None, None)


@pytest.mark.parametrize("extra, naming", [
    (", status: published", "releases[0].published_at: a release recorded as published needs published_at"),
    (", status: approved, approved_by: carol", "releases[0].approved_by: an approval is never stated"),
    (", status: approved, approved_at: \"2024-01-01\"", "releases[0].approved_at: an approval is never stated"),
    (", status: published, published_at: \"2099-01-01\"", "releases[0].published_at: '2099-01-01' is in the future"),
    (", published_at: \"2024-01-01\"", "releases[0].published_at: a planned release has no published_at"),
    (", status: published, published_at: \"yesterday\"", "releases[0].published_at: not an ISO date-time"),
    (", status: published, published_at: \"2024-01-01\", approved_by: carol",
     "releases[0].approved_by: an approval is never stated"),
])
def test_a_status_without_its_who_and_when_is_refused(ledger, extra, naming):
    with acting_as("ana"):
        ledger.refused("record", ledger.file(releases(laplace("p", "1/2", extra))), naming=naming,
                       at=T(6, 1))


def test_history_recorded_as_published_keeps_its_dates(ledger):
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace(
            "old", "1/2", ", status: published, published_at: \"2024-02-01T10:00:00+01:00\""))), at=T(6, 1))
    (release,) = ledger.ok("releases", "--json").json()
    assert release["status"] == "published" and release["recorded_by"] == "ana"
    assert datetime.fromisoformat(release["published_at"]) == T(2, 1)
    assert release["approved_by"] is None  # (its recorder's own publication: the register says who recorded it)


def test_dates_written_without_quotes_read_as_written(ledger):
    """YAML 1.1 makes `2024-02-01` a date object; the ledger reads it as the text written, as if
    quoted (it was refused with "datetime.date(2024, 2, 1) is not of type 'string'")."""
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace(
            "old", "1/2", ", status: published, published_at: 2024-02-01T10:00:00+01:00"))), at=T(6, 1))
    quoted = Ledger(ledger.url.replace("ledger.db", "quoted.db"), ledger.directory)
    with acting_as("ana"):
        quoted.ok("dataset", "add", quoted.file(DATASET), at=T(1, 1))
        quoted.ok("role", "grant", "carol", "approver", at=T(1, 1))
        quoted.ok("record", quoted.file(releases(laplace(
            "old", "1/2", ", status: published, published_at: \"2024-02-01T10:00:00+01:00\""))), at=T(6, 1))
    assert ledger.ok("releases", "--json").json() == quoted.ok("releases", "--json").json()
    (release,) = ledger.ok("releases", "--json").json()
    assert datetime.fromisoformat(release["published_at"]) == T(2, 1)
    with acting_as("ana"):
        ledger.refused("record", ledger.file(releases(laplace("p", "1/2", ", status: published, published_at: 2099-01-01"))),
                       naming="releases[0].published_at: '2099-01-01' is in the future", at=T(6, 1))


def test_publish_at_dates_a_publication_that_happened_elsewhere(ledger):
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace("p", "1/2"))), at=T(3, 1))
    with acting_as("carol"):
        ledger.ok("approve", "p", at=T(3, 2))
        ledger.refused("publish", "p", "--at", "2024-02-28", naming="--at: 2024-02-28T00:00:00+00:00 "
                       "is before release 'p' was planned", at=T(3, 5))
        ledger.refused("publish", "p", "--at", "2024-03-06", naming="--at: 2024-03-06 "
                       "is in the future (today is 2024-03-05, UTC)", at=T(3, 5))
        ledger.refused("publish", "p", "--at", "March", naming="--at: not a date", at=T(3, 5))
        no_date = ledger("approve", "p", "--at", "2024-03-03", at=T(3, 5))  # approve takes no --at
    assert no_date.code == 2 and "No such option: --at" in no_date.err
    with acting_as("carol"):
        said = ledger.ok("publish", "p", "--at", "2024-03-03T12:00", at=T(3, 5)).out
    assert said.strip() == "p: published (published at 2024-03-03T12:00:00+00:00)"
    (release,) = ledger.ok("releases", "--json").json()
    assert datetime.fromisoformat(release["published_at"]) == datetime(2024, 3, 3, 12, tzinfo=UTC)


def test_publish_without_at_stamps_now(ledger):
    with acting_as("ana"):
        ledger.ok("record", ledger.file(releases(laplace("p", "1/2"))), at=T(3, 1))
    with acting_as("carol"):
        ledger.ok("approve", "p", at=T(3, 2))
        ledger.ok("publish", "p", at=T(3, 7))
    (release,) = ledger.ok("releases", "--json").json()
    assert datetime.fromisoformat(release["published_at"]) == T(3, 7)


# --------------------------------------------------------------------------
# The ledger as it stood: --as-of
# --------------------------------------------------------------------------


@pytest.mark.parametrize("when, expected", [
    ("2024-01-15", 0),
    ("2024-02-15", 1),  # r1, published then though recorded in June
    ("2024-03-20", F(7, 4)),  # r1, and r2 and r3 planned
    ("2024-04-20", F(3, 2)),  # r3 cancelled
    ("2024-05-02", F(3, 2)),
])
def test_subset_table_and_cap_list_as_of_a_date(history, when, expected):
    subset = history.ok("subset", "income", "--as-of", when, "--json").json()
    assert F(subset["epsilon"]).limit_denominator(1000) == expected
    table = history.ok("table", "--as-of", when, "--json").json()
    assert F(table["total"]["values"]["income"]).limit_denominator(1000) == expected
    (cap,) = history.ok("cap", "list", "--as-of", when, "--json").json()
    assert F(cap["current"]).limit_denominator(1000) == expected
    assert F(cap["headroom"]).limit_denominator(1000) == 2 - expected
    (pair,) = history.ok("pairs", "--as-of", when, "--json").json()  # {income, region}: region unread
    assert (pair["subset"], F(pair["epsilon"]).limit_denominator(1000)) == (["income", "region"], expected)


def test_as_of_now_is_the_ledger_as_it_stands(history):
    now = history.ok("subset", "income", "--json").json()
    today = datetime.now(UTC).isoformat()
    then = history.ok("subset", "income", "--as-of", today, "--json").json()
    assert then.pop("as_of") == today and {k: then[k] for k in now} == now  # (and the moment it used)
    assert now["epsilon"] == 1.5


@pytest.mark.parametrize("args", [["subset", "income"], ["table"], ["cap", "list"],
                                  ["report", "--format", "md", "--out", "r.md"]])
@pytest.mark.parametrize("value, naming", [("soon", "--as-of: not a date"), ("2999-01-01", "is in the future")])
def test_a_bad_as_of_exits_2_naming_it(history, args, value, naming):
    args = [str(history.directory / a) if a == "r.md" else a for a in args]
    history.refused(*args, "--as-of", value, naming=naming)
    assert not (history.directory / "r.md").exists()


def test_the_report_as_of_a_date(history):
    context = context_of(history.url, "survey", charts=False, as_of=T(3, 20))
    assert context.certificate.as_of == T(3, 20)
    assert {r.id: r.status for r in context.register} == {"r1": "published", "r2": "planned", "r3": "planned"}
    (cap,) = context.caps
    assert cap.current == F(7, 4)


# --------------------------------------------------------------------------
# The meeting pack and the chart, by publication date
# --------------------------------------------------------------------------


def test_the_meeting_pack_dates_publications_by_when_they_happened(history):
    pack = context_of(history.url, "survey", since=T(4, 1, 0), charts=False).meeting
    assert [c.release for c in pack.published] == ["r2"]  # r1 was published in February, recorded in June
    assert [(c.release, c.actor) for c in pack.approved] == [("r2", "carol")]
    assert [c.release for c in pack.recorded] == ["r1"]
    assert [(c.release, c.actor) for c in pack.cancelled] == [("r3", "carol")]
    (move,) = pack.caps
    # before 1 April: r1 1 (published 1 Feb) + r2 1/2 + r3 1/4 (planned); now 3/2
    assert (move.before, move.now, move.change) == (F(7, 4), F(3, 2), F(-1, 4))


def test_the_chart_over_time_is_by_publication_date_with_the_caps(history):
    timeline = context_of(history.url, "survey", charts=False).timeline
    assert timeline.axis == "time"
    income = timeline.variables.index("income")
    points = {x: timeline.y[k, income] for k, x in enumerate(timeline.x)}
    # r1 enters on its publication date; r2 when it was planned (it reserved budget from then)
    assert list(points) == [T(2, 1), T(3, 1)]
    assert (points[T(2, 1)], points[T(3, 1)]) == (1.0, 1.5)
    assert timeline.caps == (("income", 2.0),)


def test_run_records_planned_unless_it_goes_straight_out(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path)
    (tmp_path / "data.csv").write_text("income,region\n10,N\n20,S\n30,N\n", encoding="utf-8")
    common = ["--data", tmp_path / "data.csv", "-p", "column=income", "-p", "lower=0", "-p", "upper=50",
              "-p", "epsilon=1/4", "--seed", "1"]
    with acting_as("ana"):
        ledger.ok("dataset", "add", ledger.file(DATASET))
        ledger.ok("run", "laplace-sum", "--id", "planned-run", *common)
        ledger.ok("run", "laplace-sum", "--id", "out-run", "--status", "published", *common)
        ledger.refused("run", "laplace-sum", "--id", "x", "--status", "approved", *common,
                       naming="--status: must be planned or published")
    by_id = {r["id"]: r for r in ledger.ok("releases", "--json").json()}
    assert (by_id["planned-run"]["status"], by_id["planned-run"]["published_at"]) == ("planned", None)
    assert by_id["out-run"]["status"] == "published"
    assert by_id["out-run"]["published_at"] == by_id["out-run"]["recorded_at"]


# --------------------------------------------------------------------------
# Properties of the ledger as it stood (ledger.accounting.history, pure)
# --------------------------------------------------------------------------

DAY = timedelta(days=1)
BASE = datetime(2024, 1, 1, tzinfo=UTC)


@st.composite
def lifecycles(draw):
    """A release with its dates: planned on day p; then approved, published, retracted or
    cancelled on later days (or recorded as published history, published before it was recorded)."""
    planned = BASE + draw(st.integers(0, 30)) * DAY
    path = draw(st.sampled_from(["planned", "approved", "published", "retracted", "cancelled", "history"]))
    gaps = [draw(st.integers(0, 10)) * DAY for _ in range(3)]
    release = Release(id="r", dataset="d", reads=frozenset({"x"}), mechanism=Mechanism("exact"),
                      recorded_at=planned, status=Status.PLANNED)
    ended = {}
    if path == "history":
        return Release(id="r", dataset="d", reads=frozenset({"x"}), mechanism=Mechanism("exact"),
                       recorded_at=planned, published_at=planned - gaps[0], status=Status.PUBLISHED), ended
    if path in ("approved", "published", "retracted"):
        release = Release(**{**_fields(release), "approved_at": planned + gaps[0], "status": Status.APPROVED})
    if path in ("published", "retracted"):
        release = Release(**{**_fields(release), "published_at": release.approved_at + gaps[1],
                             "status": Status.PUBLISHED})
    if path == "retracted":
        release = Release(**{**_fields(release), "status": Status.RETRACTED})
        ended["r"] = release.published_at + gaps[2]
    if path == "cancelled":
        release = Release(**{**_fields(release), "status": Status.CANCELLED})
        ended["r"] = planned + gaps[0]
    return release, ended


def _fields(release):
    return {name: getattr(release, name) for name in release.__slots__ if not name.startswith("__")}


@settings(max_examples=150, deadline=None)
@given(lifecycles(), st.integers(-40, 80))
def test_status_as_of_a_date_follows_the_lifecycle(case, day):
    release, ended = case
    when = BASE + day * DAY
    status = status_at(release, when, ended)
    far_past, far_future = BASE - 100 * DAY, BASE + 400 * DAY
    assert status_at(release, far_future, ended) is release.status  # as of now: as it stands
    assert status_at(release, far_past, ended) is None  # before anything: not in the ledger
    # in the ledger exactly from the day it started to count
    assert (status is None) == (when < charged_from(release))
    # published by `when` exactly when its publication date has come
    published = release.published_at is not None and release.published_at <= when
    assert (status in (Status.PUBLISHED, Status.RETRACTED)) == published
    # a release counted (charged) at `when` is never one cancelled by then
    if status is Status.CANCELLED:
        assert ended["r"] <= when and release.status is Status.CANCELLED
    assert releases_as_of([release], when, ended) == ([] if status is None else
                                                      [release if status is release.status else
                                                       Release(**{**_fields(release), "status": status})])
