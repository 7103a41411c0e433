"""The meeting pack (`report --since S`): the dataset's own changes, and each cap's move by the
figure the Caps section shows.

- "Changes since" lists the dataset's changes (a variable reclassified, added, a group set or
  removed), as the audit trail notes them: a variable reclassified public leaves the protected
  headline (DESIGN 2.11), and a board reviewing what changed since its last meeting must see it.
- "How each cap moved" states each cap's figure then and now by the decided figure (the smallest
  valid one: cap_accounting), the figure the Caps section and `cap list` print, not the basic
  sum beside it. Here a cap at a delta over 120 small Laplace releases, where the Rényi filter
  decides a figure below the basic sum (3), so the two differ; the figure then must be what
  `cap list --as-of` (just before S) prints, and the figure now what `cap list` prints.
Both report paths (every release decoded, and the summarised page from the accounting rows).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from support import cli_main

from ledger.cli.report import gather, gather_large
from ledger.operations import choices
from ledger.reporting.report import ChainStatus, build_large_report, build_report
from ledger.store import database as store

START = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
CHAIN = ChainStatus(True, 1, "head", ())

DATASET = """\
dataset: d
delta: 1e-6
variables:
  - {name: a, classification: sensitive}
  - {name: b, classification: sensitive}
groups:
  g: [a]
caps:
  - {name: small, subset: [b], epsilon: 4, delta: 1e-6}
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
    monkeypatch.setattr(store, "now", lambda: clock[0])
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
    engine = store.make_engine(url)
    with store.read_session(engine) as session:
        dataset = store.snapshot(session, "d").datasets["d"]
        delta = choices.parse_delta(None, dataset)
        inputs = gather(session, dataset, delta, SINCE, chain=CHAIN)
        small = build_report(inputs, charts=False)
        large_inputs = gather_large(session, dataset, delta, chain=CHAIN, generated_at=inputs.generated_at,
                                    since=SINCE)
    large = build_large_report(large_inputs, lambda: iter(()), "r.csv", charts=False)
    engine.dispose()
    return small, large


def test_each_cap_moves_by_the_figure_the_caps_section_and_cap_list_print(ledger):
    url, run = ledger
    now = {c["cap"]: c for c in json.loads(run(10, "cap", "list", "--json"))}
    then = {c["cap"]: c for c in json.loads(run(10, "cap", "list", "--json", "--as-of",
                                                (SINCE - timedelta(microseconds=1)).isoformat()))}
    assert now["small"]["accountant"] == "rdp"  # the case where the figures differ: 120 x 1/40 = 3 basic
    assert now["small"]["current"] < 3 and then["small"]["current"] < Fraction(3, 2)
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
