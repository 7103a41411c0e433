"""The meeting pack (`report --since S`): the dataset's own changes, and each cap's move by the
figure the Caps section shows.

- "Changes since" lists the dataset's changes (a variable reclassified, added, a group set or
  removed), as the audit trail notes them: a variable reclassified public leaves the protected
  headline (docs/explanation/model.md#public-and-protected-variables), and a board reviewing what changed since its last meeting must see it.
- "How each cap moved" states each cap's figure then and now by the decided figure (the smallest
  valid one: cap_accounting), the figure the Caps section and `cap list` print, not the basic
  sum beside it. Here a cap at a delta over 60 and then 120 small Laplace releases: a Rényi filter
  at one order fixed when the cap was set, which keeps the pure sum (1.5) while that is smaller,
  then its own figure below the pure sum (3); the figure then must be what `cap list --as-of` (just
  before S) prints, and the figure now what `cap list` prints.
Both report paths (every release decoded, and the summarised page from the accounting rows).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from support import cli_main

from ledger.operations.report_inputs import gather
from ledger.api import Ledger
from ledger.cli.report import gather_large
from ledger.operations import choices
from ledger.operations.report_inputs import ChainStatus
from ledger.reporting.report import build_large_report, build_report
from ledger.store import decoded_history, engines, session_state, sessions

START = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
CHAIN = ChainStatus(True, 1, "head", ())

DATASET = """\
dataset: d
self_approval: true  # (history recorded as published by its recorder)
delta: 1e-6
variables:
  - {name: a, classification: sensitive}
  - {name: b, classification: sensitive}
groups:
  g: [a]
caps:
  - {name: small, subset: [b], epsilon: 4, delta: 1e-6, filter: renyi}
  - {name: pure, subset: [a, b], epsilon: 9}
"""


def releases(prefix: str, count: int, at: datetime) -> str:
    return "dataset: d\nreleases:\n" + "".join(
        f"  - {{id: {prefix}{k}, reads: [b], status: published, published_at: \"{at.isoformat()}\", "
        f"mechanism: {{name: laplace, epsilon: \"1/40\"}}}}\n" for k in range(count))


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    """The dataset; 60 releases before S, 60 after; x... after S: b reclassified public, a group
    set, a variable added."""
    clock = [START]
    monkeypatch.setattr(session_state, "now", lambda: clock[0])
    url = f"sqlite:///{tmp_path / 'l.db'}"

    def run(minute: int, *args):
        clock[0] = START + timedelta(minutes=minute)
        found = cli_main(url, *map(str, args))
        assert found.code == 0, (args, found.out, found.err)
        return found.out

    (tmp_path / "d.yaml").write_text(DATASET, encoding="utf-8")
    run(0, "dataset", "add", tmp_path / "d.yaml")
    (tmp_path / "r1.yaml").write_text(releases("early", 60, START + timedelta(minutes=1)), encoding="utf-8")
    run(1, "record", tmp_path / "r1.yaml")
    (tmp_path / "r2.yaml").write_text(releases("late", 60, START + timedelta(minutes=3)), encoding="utf-8")
    run(3, "record", tmp_path / "r2.yaml")
    run(4, "dataset", "reclassify", "b", "public", "--reason", "published in full")
    run(5, "group", "set", "g", "a", "b")
    (tmp_path / "d2.yaml").write_text(DATASET.replace("groups:", "  - {name: c, classification: sensitive}\ngroups:")
                                      .replace("{name: b, classification: sensitive}", "{name: b, classification: public}")
                                      .replace("g: [a]", "g: [a, b]").split("caps:")[0], encoding="utf-8")
    run(6, "dataset", "amend", tmp_path / "d2.yaml")
    clock[0] = START + timedelta(minutes=10)
    return url, run


SINCE = START + timedelta(minutes=2)


def contexts(url: str):
    """(the full path's context, the summarised path's) of the report --since SINCE."""
    engine = engines.make_engine(url)
    with sessions.read_session(engine) as session:
        dataset = decoded_history.snapshot(session, "d").datasets["d"]
        delta = choices.parse_delta(None, dataset)
        inputs = gather(session, dataset, delta, SINCE, chain=CHAIN)
        small = build_report(inputs, charts=False)
        large_inputs = gather_large(Ledger("ledger", engine), dataset, delta, chain=CHAIN, generated_at=inputs.generated_at,
                                    since=SINCE)
    large = build_large_report(large_inputs, lambda: iter(()), "r.csv", charts=False)
    engine.dispose()
    return small, large


def laplace_renyi(order: float, epsilon: float) -> float:
    """The Rényi divergence of order a of Laplace noise of scale 1/epsilon shifted by 1 (Mironov 2017,
    Prop 6): log(a/(2a-1) e^((a-1) eps) + (a-1)/(2a-1) e^(-a eps)) / (a - 1)."""
    return math.log(order / (2 * order - 1) * math.exp((order - 1) * epsilon)
                    + (order - 1) / (2 * order - 1) * math.exp(-order * epsilon)) / (order - 1)


def filter_order(epsilon: float, delta: float) -> float:
    """The order that admits the largest rho within `epsilon` by CKS 2020 Prop 12 at `delta`:
    argmax over a of (epsilon - ln(1 - 1/a) + (ln delta + ln a) / (a - 1)) / a."""
    from scipy.optimize import minimize_scalar

    room = minimize_scalar(lambda a: -(epsilon - math.log1p(-1 / a) + (math.log(delta) + math.log(a)) / (a - 1)) / a,
                           bounds=(1 + 1e-6, 1e4), method="bounded", options={"xatol": 1e-10})
    return float(room.x)


def test_each_cap_moves_by_the_figure_the_caps_section_and_cap_list_print(ledger):
    url, run = ledger
    now = {c["cap"]: c for c in json.loads(run(10, "cap", "list", "--json"))}
    then = {c["cap"]: c for c in json.loads(run(10, "cap", "list", "--json", "--as-of",
                                                (SINCE - timedelta(microseconds=1)).isoformat()))}
    # the filter's order A: where a zCDP spend of the cap's size (4 at 5e-7: half of 1e-6, the other
    # half is the allowance) converts best by CKS 2020 Prop 12; its statement for 120 Laplace releases of
    # 1/40: 120 D_A(Laplace) + ln(1 - 1/A) - (ln(5e-7) + ln A) / (A - 1) ≈ 2.057, below the pure sum 3
    order = filter_order(4, 5e-7)
    expected = 120 * laplace_renyi(order, 1 / 40) + math.log1p(-1 / order) \
        - (math.log(5e-7) + math.log(order)) / (order - 1)
    assert now["small"]["accountant"] == "rdp" and "Rényi filter at order" in now["small"]["theorem"]
    assert now["small"]["current"] == pytest.approx(expected, abs=2e-3) and expected < 3
    assert then["small"]["current"] == 1.5  # 60 x 1/40: the pure sum, below the filter's ≈ 1.918
    for context in contexts(url):
        moves = {m.name: m for m in context.meeting.caps}
        shown = {c.name: c for c in context.caps}
        for name in ("small", "pure"):
            assert moves[name].now == shown[name].current  # the Caps section's figure
            assert float(moves[name].now) == pytest.approx(now[name]["current"], rel=1e-12)
            assert float(moves[name].before) == pytest.approx(then[name]["current"], rel=1e-12)
            assert moves[name].status_now == now[name]["status"]
            assert moves[name].status_before == then[name]["status"]
        assert moves["pure"].now == 3 and moves["pure"].before == Fraction(3, 2)  # basic: pure sums
        assert moves["small"].now < 3  # not the basic sum


def test_the_changes_since_list_the_datasets_changes(ledger, tmp_path):
    url, run = ledger
    small, large = contexts(url)
    for context in (small, large):
        changes = [(c.kind, c.note) for c in context.meeting.dataset_changes]
        assert changes == [("variable.reclassified", "b: sensitive → public (published in full)"),
                           ("group.set", "group g"), ("variable.added", "c (sensitive)")], changes
        assert context.meeting.dataset_total == 3
    assert large.meeting.dataset_changes == small.meeting.dataset_changes
    for suffix, expected in (("md", "| variable.reclassified | b: sensitive → public (published in full) |"),
                             ("tex", r"b: sensitive $\rightarrow$ public (published in full)"),
                             ("html", "<td>variable.reclassified</td><td>b: sensitive → public (published in full)</td>")):
        out = tmp_path / f"report.{suffix}"
        run(10, "report", "--out", out, "--since", SINCE.isoformat())
        text = out.read_text(encoding="utf-8")
        assert "Dataset changed (3)" in text and expected in text, suffix
    # before the changes, none listed
    out = tmp_path / "early.md"
    run(10, "report", "--out", out, "--since", SINCE.isoformat(), "--as-of", (START + timedelta(minutes=3, seconds=30))
        .isoformat())
    text = out.read_text(encoding="utf-8")
    assert "### Dataset changed (0)\n\nnone" in text
