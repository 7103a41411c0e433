"""No under-report through any workflow, the same figure in every command, every
check explained, figures that read right.

Each test is a defect of the issue, run as a steward runs it (the console entry point
in this process, on a SQLite file). Expected figures are worked out here by hand, by
the tests' own Canonne-Kamath-Steinke conversion (`reference_cks`, conftest.py), or by
Google's dp_accounting (the exact Gaussian delta of Balle and Wang 2018). "Nothing
written" is a dump of every table, compared before and after.
"""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest
from support import acting_as, Run, cli_main

F = Fraction

SURVEY = """\
dataset: survey
self_approval: true  # (history recorded as published by the one person keeping the ledger)
delta: 1e-9
variables:
  - {name: region, categories: [N, S]}
  - {name: sex, categories: [f, m]}
  - {name: income}
  - {name: a}
  - {name: b}
"""


@dataclass
class Ledger:
    path: Path
    directory: Path

    def __call__(self, *args) -> Run:
        return cli_main(f"sqlite:///{self.path}", *args)

    def write(self, name: str, text: str) -> Path:
        path = self.directory / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def record(self, text: str, name: str = "releases.yaml") -> Run:
        return self("record", self.write(name, text))

    def ok(self, *args) -> Run:
        result = self(*args)
        assert result.code == 0, (args, result.out, result.err)
        return result

    def dump(self) -> dict:
        with sqlite3.connect(self.path) as connection:
            tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return {t: sorted(map(repr, connection.execute(f'SELECT * FROM "{t}"'))) for t in tables}


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.db", tmp_path)
    ledger.ok("dataset", "add", ledger.write("survey.yaml", SURVEY))
    ledger.ok("role", "grant", "approver", "approver")  # separation of duties: another person approves
    return ledger


def releases(text: str) -> str:
    return "dataset: survey\n" + textwrap.dedent(text)


# --------------------------------------------------------------------------
# 1. The lineage rule (docs/explanation/model.md#post-processing-and-lineage)
# --------------------------------------------------------------------------

RAW_AND_ROUNDED = releases("""\
releases:
  - id: raw
    status: planned
    reads: [income]
    mechanism: {name: laplace, epsilon: 1}
  - id: rounded
    status: planned
    reads: []
    derived_from: [raw]
""")


def test_a_release_cannot_be_cancelled_while_a_charged_release_derives_from_it(ledger):
    ledger.ok("record", ledger.write("r.yaml", RAW_AND_ROUNDED))
    before = ledger.dump()
    refused = ledger("cancel", "raw", "--reason", "withdrawn")
    assert refused.code == 2
    assert "rounded" in refused.err and "raw" in refused.err
    assert ledger.dump() == before, "a refused cancel wrote something"
    # published after all, the loss on income would have dropped to 0 (the defect)
    assert ledger.ok("subset", "income", "--json").json()["epsilon"] == 1
    # once the derived release is cancelled, the parent may be
    ledger.ok("cancel", "rounded", "--reason", "withdrawn")
    ledger.ok("cancel", "raw", "--reason", "withdrawn")


def test_a_cancellation_reads_only_the_releases_that_name_it_and_the_caps_rows(ledger, monkeypatch):
    """The lineage rule reads the releases whose derived-from list names the release
    (row_reads.deriving_from), and the totals and accountant states it frees are recomputed from the
    accounting rows, never from every decoded release (decoded_history.snapshot: minutes at a million
    releases); `audit verify`, which recomputes both from the decoded releases, agrees."""
    from ledger.store import decoded_history

    ledger.ok("cap", "set", "income", "--epsilon", "5", "--delta", "1e-9")
    ledger.ok("cap", "set", "income", "sex", "--name", "pair", "--epsilon", "4")
    ledger.ok("record", ledger.write("r.yaml", RAW_AND_ROUNDED + """\
  - id: other
    status: planned
    reads: [income, sex]
    mechanism: {name: laplace, epsilon: 1/8}
  - id: twice
    status: planned
    reads: []
    derived_from: [other, raw]
"""))

    def decoded(*args, **kwargs):
        raise AssertionError("every release decoded")

    monkeypatch.setattr(decoded_history, "snapshot", decoded)
    refused = ledger("cancel", "raw", "--reason", "withdrawn")
    assert refused.code == 2
    assert "charged release(s) derive from it: rounded (planned), twice (planned)" in refused.err
    ledger.ok("cancel", "rounded", "--reason", "withdrawn")
    ledger.ok("cancel", "twice", "--reason", "withdrawn")
    ledger.ok("cancel", "raw", "--reason", "withdrawn")
    caps = {cap["cap"]: cap for cap in ledger.ok("cap", "list", "--json").json()}
    monkeypatch.undo()
    # what is left charged: `other`, epsilon 1/8 on income and sex
    assert (caps["income"]["current_exact"], caps["pair"]["current_exact"]) == ("1/8", "1/8")
    assert ledger.ok("audit", "verify").out.startswith("audit chain intact")  # totals and states recomputed agree


def test_a_derived_release_cannot_be_published_before_what_it_derives_from(ledger):
    ledger.ok("record", ledger.write("r.yaml", RAW_AND_ROUNDED))
    with acting_as("approver"):
        ledger.ok("approve", "rounded")
    before = ledger.dump()
    refused = ledger("publish", "rounded")
    assert refused.code == 2
    assert "raw (planned)" in refused.err
    assert ledger.dump() == before
    with acting_as("approver"):
        ledger.ok("approve", "raw")
    ledger.ok("publish", "raw")
    ledger.ok("publish", "rounded")
    # and now raw is published: it can no longer be cancelled at all
    assert ledger("cancel", "raw", "--reason", "withdrawn").code == 2


def test_a_derived_release_cannot_be_recorded_as_published_before_its_parent(ledger):
    ledger.ok("record", ledger.write("raw.yaml", releases("""\
        releases:
          - {id: raw, status: planned, reads: [income], mechanism: {name: laplace, epsilon: 1}}
        """)))
    before = ledger.dump()
    refused = ledger.record(releases("""\
        releases:
          - id: rounded
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: []
            derived_from: [raw]
        """))
    assert refused.code == 2, refused.err
    assert "rounded" in refused.err and "raw (planned)" in refused.err
    assert ledger.dump() == before


def test_a_derived_release_cannot_be_recorded_as_published_before_its_parents_publication_date(ledger):
    """Published (status) is not enough: the derived release's publication date must not come
    before its parent's, or the ledger as it stood in between (`--as-of`) shows a function of
    the parent's output out while the parent does not count: a loss of 0 where it was 1."""
    raw = ('  - {id: raw, status: published, published_at: "2025-06-01T00:00:00+00:00", reads: [income],'
           ' mechanism: {name: laplace, epsilon: 1}}\n')
    early = '  - {id: rounded, status: published, published_at: "2025-04-01T00:00:00+00:00", reads: [], derived_from: [raw]}\n'
    before = ledger.dump()
    refused = ledger.record(releases("releases:\n" + raw + early))
    assert refused.code == 2, refused.out + refused.err  # one batch: the parent in the same file
    assert "rounded" in refused.err and "raw (published 2025-06-01T00:00:00+00:00)" in refused.err
    assert ledger.dump() == before
    ledger.ok("record", ledger.write("raw.yaml", releases("releases:\n" + raw)))
    before = ledger.dump()
    refused = ledger.record(releases("releases:\n" + early))
    assert refused.code == 2, refused.out + refused.err  # the parent already recorded
    assert "raw (published 2025-06-01T00:00:00+00:00)" in refused.err
    assert ledger.dump() == before
    ledger.ok("record", ledger.write("late.yaml", releases("releases:\n" + early.replace("2025-04-01", "2025-06-01"))))
    assert ledger.ok("subset", "income", "--as-of", "2025-06-01T00:00:00Z", "--json").json()["epsilon"] == 1


def test_a_derived_release_cannot_be_published_at_a_date_before_its_parent(ledger, monkeypatch):
    """`publish --at` dates a publication that happened elsewhere: not before the parent's."""
    from datetime import UTC, datetime

    from ledger.store import session_state

    clock = {"now": datetime(2026, 1, 1, 10, 0, tzinfo=UTC)}
    monkeypatch.setattr(session_state, "now", lambda: clock["now"])
    ledger.ok("record", ledger.write("r.yaml", RAW_AND_ROUNDED))
    with acting_as("approver"):
        ledger.ok("approve", "raw")
        ledger.ok("approve", "rounded")
    clock["now"] = datetime(2026, 1, 1, 10, 20, tzinfo=UTC)
    ledger.ok("publish", "raw")
    before = ledger.dump()
    refused = ledger("publish", "rounded", "--at", "2026-01-01T10:10:00Z")
    assert refused.code == 2, refused.out + refused.err
    assert "raw (published 2026-01-01T10:20:00+00:00)" in refused.err
    assert ledger.dump() == before
    clock["now"] = datetime(2026, 1, 1, 10, 40, tzinfo=UTC)
    ledger.ok("publish", "rounded", "--at", "2026-01-01T10:20:00Z")  # the same moment is not before


def test_run_tan_nonnegative_planned_cannot_free_the_raw_table(ledger):
    """Both tables of the run exist: neither can be cancelled (docs/explanation/accounting.md: an output that exists
    stays charged), and the derived one cannot go out before the raw one (docs/explanation/model.md#post-processing-and-lineage)."""
    data = ledger.write("data.csv", "region,sex\nN,f\nN,m\nS,f\nS,m\nN,f\nS,m\n")
    ledger.ok("run", "tan-consistent-counts", "--data", data, "--id", "t", "--seed", "3", "--status", "planned",
              "-p", "margin=region", "-p", "protected=sex", "-p", "epsilon=1", "-p", "nonnegative=true")
    before = ledger.dump()
    for release_id in ("t", "t-nonnegative"):
        refused = ledger("cancel", release_id, "--reason", "withdrawn")
        assert refused.code == 1 and f"cannot cancel release '{release_id}': its output exists" in refused.err
    assert ledger.dump() == before
    with acting_as("approver"):
        ledger.ok("approve", "t-nonnegative")
    before = ledger.dump()
    refused = ledger("publish", "t-nonnegative")
    assert refused.code == 2 and "t (planned)" in refused.err
    assert ledger.dump() == before
    assert ledger.ok("subset", "sex", "--json").json()["epsilon"] == 1


# --------------------------------------------------------------------------
# 1. Explicit guarantees no stronger than the parameters imply (docs/explanation/model.md#composition)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("release, named", [
    # Laplace scale 1, sensitivity 1 is 1-DP; 1/10 is claimed
    ("{id: l, reads: [a], mechanism: {name: laplace, scale: 1, sensitivity: 1}, "
     "guarantees: [{protects: [a], epsilon: \"1/10\"}]}", ("1/10", "epsilon 1")),
    # Gaussian sigma 1, sensitivity 1 is 1/2-zCDP (Bun and Steinke 2016, Prop 1.6)
    ("{id: g, reads: [a], mechanism: {name: gaussian, sigma: 1, sensitivity: 1}, "
     "guarantees: [{protects: [a], rho: \"1/1000\"}]}", ("1/1000", "rho 1/2")),
    # a Gaussian has no pure-epsilon bound at all
    ("{id: g, reads: [a], mechanism: {name: gaussian, sigma: 1, sensitivity: 1}, "
     "guarantees: [{protects: [a], epsilon: 100}]}", ("epsilon 100", "no pure-epsilon bound")),
    # Tan's Algorithm 1 releases its margin exactly
    ("{id: t, reads: [region, sex], mechanism: {name: tan-consistent-counts, epsilon: 1, margin: region}, "
     "guarantees: [{protects: [region, sex], epsilon: 1}]}", ("region", "exactly")),
    ("{id: t, reads: [region, sex], mechanism: {name: tan-consistent-counts, epsilon: 1}, "
     "guarantees: [{protects: [region, sex], epsilon: 1}]}", ("margin", "exactly")),
    # Tan's epsilon bounds what it protects, whether the protected variable is named by
    # `protects`, by `margin` (what is read but not the margin), or only by the claim
    ("{id: t, reads: [region, sex], mechanism: {name: tan-consistent-counts, epsilon: 1, margin: region}, "
     "guarantees: [{protects: [sex], epsilon: \"1/2\"}]}", ("1/2", "epsilon 1")),
    ("{id: t, reads: [region, sex], mechanism: {name: tan-consistent-counts, epsilon: 1}, "
     "guarantees: [{protects: [sex], epsilon: \"1/1000\"}]}", ("1/1000", "epsilon 1")),
    ("{id: t, reads: [region, sex], mechanism: {name: tan-consistent-counts, epsilon: 1}, "
     "guarantees: [{protects: [sex], rho: \"1/1000\"}]}", ("rho 1/1000", "rho 1/2")),
    # an add/remove claim is charged 2 epsilon for replacement (docs/explanation/model.md#variables-subsets-and-neighbours): not below the parameters' 1
    ("{id: l, reads: [a], mechanism: {name: laplace, scale: 1, sensitivity: 1}, "
     "guarantees: [{protects: [a], epsilon: \"1/100\", relation: add-remove}]}", ("1/100", "epsilon 1/50")),
    # a Pufferfish-family mechanism gives no DP figure at all (docs/explanation/model.md#pufferfish-guarantees): none may be claimed
    ("{id: p, reads: [income], mechanism: {name: p-percent, p: 0.1, epsilon: 1}, "
     "guarantees: [{protects: [income], epsilon: \"1/100\"}]}", ("epsilon 1/100", "Pufferfish")),
])
def test_a_guarantee_stronger_than_the_parameters_is_refused(ledger, release, named):
    before = ledger.dump()
    refused = ledger.record(f"dataset: survey\nreleases:\n  - {release}\n")
    assert refused.code == 2, refused.out
    assert "guarantees[0]" in refused.err and "releases.yaml" in refused.err
    for word in named:
        assert word in refused.err, (word, refused.err)
    assert ledger.dump() == before


@pytest.mark.parametrize("mechanism, named", [
    # scale 1 and sensitivity 2 are 2-DP, whatever epsilon says
    ("{name: laplace, epsilon: 1, scale: 1, sensitivity: 2}, guarantees: [{protects: [a], epsilon: 1}]",
     "mechanism.epsilon: is 1 but sensitivity / scale is 2"),
    # sigma 1, sensitivity 1 is 1/2-zCDP (Bun and Steinke 2016, Prop 1.6), not 1/1000
    ("{name: gaussian, sigma: 1, sensitivity: 1, rho: \"1/1000\"}, guarantees: [{protects: [a], rho: \"1/1000\"}]",
     "mechanism.rho: is 1/1000 but sensitivity^2 / (2 sigma^2) is 1/2"),
    # a sample of unknown population: no amplification can be certified, so none may be claimed
    ("{name: laplace, epsilon: 1, sample_size: 10}, guarantees: [{protects: [a], epsilon: \"1/100\"}]",
     "mechanism.population: a subsampled release needs both sample_size and population"),
])
def test_explicit_guarantees_do_not_waive_contradictory_parameters(ledger, mechanism, named):
    """Explicit guarantees replace the derived ones, and are checked against the parameters
    (docs/explanation/model.md#composition): parameters that contradict each other leave nothing to check a claim against,
    and were ignored beside a claim (a Gaussian of rho 1/2 recorded at its stated 1/1000)."""
    before = ledger.dump()
    refused = ledger.record(f"dataset: survey\nreleases:\n  - {{id: z, reads: [a], mechanism: {mechanism}}}\n")
    assert refused.code == 2, refused.out
    assert named in refused.err, refused.err
    assert ledger.dump() == before


def test_a_claim_without_parameters_stands_on_its_own(ledger):
    """Only a parameter the derivation needs is missing (no scale, no epsilon): the claim is the guarantee."""
    ledger.ok("record", ledger.write("r.yaml", "dataset: survey\nreleases:\n"
                                               "  - {id: z, reads: [a], mechanism: {name: laplace}, "
                                               "guarantees: [{protects: [a], epsilon: \"1/3\"}]}\n"))
    assert ledger.ok("subset", "a", "--json").json()["epsilon_exact"] == "1/3"


def gaussian_delta(sigma: float, epsilon: float) -> float:
    """The exact delta(epsilon) of the Gaussian mechanism, by dp_accounting (Balle and Wang 2018)."""
    from dp_accounting.pld import privacy_loss_mechanism

    return privacy_loss_mechanism.GaussianPrivacyLoss(sigma, sensitivity=1).get_delta_for_epsilon(epsilon)


@pytest.mark.parametrize("sigma, epsilon", [(1, 1), (2, 0.5), (0.5, 3)])
def test_an_epsilon_delta_claim_for_a_gaussian_must_meet_the_exact_delta(ledger, sigma, epsilon):
    exact = gaussian_delta(sigma, epsilon)
    # these deltas (0.05 to 0.18) fit only the allowance of a dataset stated at a large delta: half of 0.5
    ledger.ok("dataset", "add", ledger.write("loose.yaml", "dataset: loose\nself_approval: true\ndelta: 0.5\nvariables:\n  - {name: a}\n"))

    def claim(delta):
        return ledger.record(f"""\
dataset: loose
releases:
  - {{id: g, status: published, published_at: "2026-01-05T10:00:00+00:00", reads: [a],
     mechanism: {{name: gaussian, sigma: {sigma}, sensitivity: 1}},
     guarantees: [{{epsilon: {epsilon}, delta: {delta!r}}}]}}
""")

    too_small = claim(exact * 0.999)
    assert too_small.code == 2, too_small.err
    assert "Balle and Wang" in too_small.err
    enough = claim(exact * 1.001)
    assert enough.code == 0, enough.err


def test_weaker_claims_stay_allowed(ledger):
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        releases:
          - id: l
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [a, b]
            mechanism: {name: laplace, scale: 1, sensitivity: 1}
            guarantees: [{protects: [a], epsilon: 2}, {protects: [a, b], rho: 1}]
          - id: t
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [region, sex]
            mechanism: {name: tan-consistent-counts, epsilon: 1, margin: region}
            guarantees: [{protects: [sex], epsilon: 1}]
          - id: ar
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [income]
            mechanism: {name: laplace, scale: 1, sensitivity: 1}
            guarantees: [{protects: [income], epsilon: "1/2", relation: add-remove}]
        """)))
    rows = {row["release"]: row["exact"] for row in ledger.ok("table", "--json").json()["rows"]}
    assert rows["l"]["a"] == "2" and rows["t"]["sex"] == "1" and rows["t"]["region"] == "inf"
    assert rows["ar"]["income"] == "1"  # add/remove 1/2 is replacement 1 (group privacy), as the parameters give


# --------------------------------------------------------------------------
# 1. Families (docs/explanation/model.md#families)
# --------------------------------------------------------------------------


def test_a_move_between_keyed_parts_needs_add_remove_on_everything_read(ledger):
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        families: [{id: by-region, partition: [region]}]
        releases:
          - id: north
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            family: by-region
            part: north
            reads: [region, sex, income]
            mechanism: {name: declared}
            guarantees: [{protects: [region, income], epsilon: 1, relation: add-remove}]
          - id: south
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            family: by-region
            part: south
            reads: [region, sex, income]
            mechanism: {name: declared}
            guarantees: [{protects: [region, income], epsilon: 1, relation: add-remove}]
        """)))
    # a record moving from north to south takes its exactly released sex with it: ∞ (was 2)
    assert ledger.ok("subset", "region", "--json").json()["epsilon"] == "inf"
    # income alone: a change stays in its part, a replacement there: 2 * 1 (group privacy)
    assert ledger.ok("subset", "income", "--json").json()["epsilon"] == 2


def test_a_mixed_notion_family_is_charged_its_worst_member_as_a_whole(ledger, reference_filter):
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        families: [{id: split, partition: random}]
        releases:
          - id: pure-part
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            family: split
            part: pure-part
            reads: [income]
            mechanism: {name: laplace, epsilon: 1}
          - id: rho-part
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            family: split
            part: rho-part
            reads: [income]
            mechanism: {name: gaussian, rho: "1/2"}
        """)))
    got = ledger.ok("subset", "income", "--json").json()
    # the worst member as one approximate part: rho 1/2 stated at the allowance's share of the
    # delta, 5e-10 (its running figure there, the Rényi orders at 5e-10 / 44 each), ≈ 7.169, with
    # delta 5e-10 drawn from the allowance; never 1 + that (≈ 8.169). (7.169: by hand, min over the
    # 22 orders a of a / 2 + log(1 - 1/a) - (log(5e-10 / 44) + log a) / (a - 1), at a = 8)
    expected = reference_filter(approx_epsilon=reference_filter(rho=0.5, delta=5e-10), approx_delta=5e-10,
                                delta=1e-9)
    assert expected == pytest.approx(7.169, abs=1e-3)
    assert got["epsilon"] >= expected
    assert got["epsilon"] == pytest.approx(expected, rel=1e-9)
    table = ledger.ok("table", "--json").json()
    assert table["total"]["values"]["income"] == pytest.approx(expected, rel=1e-9)


# --------------------------------------------------------------------------
# 1. Overflow and rounding
# --------------------------------------------------------------------------


def test_an_epsilon_of_800_gives_figures_not_an_overflow(ledger, reference_filter):
    # replacement: (1600, (1 + e^800) 1e-10), a delta past 1: no bound, so past any allowance
    vacuous = ledger.record(releases("""\
        releases:
          - {id: big, reads: [a], mechanism: {name: declared},
             guarantees: [{epsilon: 800, delta: 1e-10, relation: add-remove}]}
        """))
    assert vacuous.code == 1, vacuous.err
    assert "the approximate deltas on {a} would reach 1," in vacuous.err
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        releases:
          - id: big
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [a]
            mechanism: {name: declared}
            guarantees: [{epsilon: 800, relation: add-remove}]
          - id: small
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [b]
            mechanism: {name: declared}
            guarantees: [{rho: 1}]
        """)))
    # replacement: 2 x 800 (group privacy); its Rényi curve 1600^2 / 2 at every order is not used
    assert ledger.ok("subset", "a", "--json").json()["epsilon"] == 1600
    assert ledger.ok("subset", "a", "b", "--json").json()["epsilon"] == pytest.approx(
        reference_filter(pure=1600, rho=1, delta=1e-9), rel=1e-9)
    assert "1600" in ledger.ok("table").out
    ledger.ok("pairs")
    ledger.ok("report", "--format", "md", "--out", ledger.directory / "r.md")


def test_headroom_next_to_a_tiny_spend_is_rounded_down_everywhere(ledger):
    ledger.ok("cap", "set", "a", "--epsilon", "1/5")
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        releases:
          - id: tiny
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [a]
            mechanism: {name: declared}
            guarantees: [{epsilon: 1e-70}]
        """)))
    exact = F(1, 5) - F(1, 10**70)

    def approximations(text):  # (a long fraction is shown rounded alone, as a float is)
        return [F(x.rstrip(".")) for x in re.findall(r"(?:≈ |headroom |largest epsilon )([0-9][0-9.e-]*)", text)]

    listed = ledger.ok("cap", "list").out
    room = ledger.ok("headroom", "a").out
    ledger.ok("report", "--format", "md", "--out", ledger.directory / "r.md")
    report = (ledger.directory / "r.md").read_text()
    for text in (listed, room):
        shown = [x for x in approximations(text) if x > F(1, 10)]  # the headroom's
        assert shown and all(x <= exact for x in shown), text
    caps_section = report[report.index("## Caps"):report.index("## Every pair")]
    lines = [line.split("|")[1:-1] for line in caps_section.splitlines() if line.startswith("|")]
    column = [cell.strip() for cell in lines[0]].index("Headroom")
    shown = [F(row[column].strip().lstrip("≈ ")) for row in lines[2:]]  # (the headroom, rounded down: 0.1999)
    assert shown and all(F(1, 10) < x <= exact for x in shown), caps_section
    figure = ledger.ok("cap", "list", "--json").json()[0]
    assert F(repr(figure["headroom"])) <= exact and F(figure["headroom_exact"]) == exact
    assert F(repr(ledger.ok("headroom", "a", "--json").json()["epsilon"])) <= exact


def test_the_subsampled_epsilon_is_never_below_the_bound_it_came_from():
    from ledger.mechanisms import subsampling

    import mpmath

    # float(1/3) is 1 ulp below 1/3: the float recorded must not be
    assert F(float(F(1, 3))) < F(1, 3)
    assert F(subsampling.subsampled_epsilon(F(1, 3), 1)) >= F(1, 3)  # no sampling: epsilon itself
    # the tight bound ln(1 + beta (e^eps - 1)) (Balle, Barthe, Gaboardi 2018), at 50 digits
    with mpmath.workdps(50):
        for eps, beta in ((F(1, 3), F(999, 1000)), (F(1, 10), F(1, 50)), (F(2), F(1, 10))):
            exact = mpmath.log(1 + mpmath.mpf(beta.numerator) / beta.denominator
                               * (mpmath.exp(mpmath.mpf(eps.numerator) / eps.denominator) - 1))
            assert mpmath.mpf(subsampling.subsampled_epsilon(eps, beta)) >= exact


# --------------------------------------------------------------------------
# 2. One accounting everywhere
# --------------------------------------------------------------------------

# Ten releases, each pure 1/2 or rho 1/50 on income: alone, pure 1/2 ranks first (rho 1/50
# is ≈ 1.3 at 1e-9); together, rho 1/5 (≈ 4.0) beats pure 5.
CHOICES = releases("releases:\n" + "".join(f"""\
  - id: r{k}
    status: published
    published_at: "2026-01-05T10:00:00+00:00"
    reads: [income]
    mechanism: {{name: declared}}
    guarantees: [{{epsilon: "1/2"}}, {{rho: "1/50"}}]
""" for k in range(10)))


def test_caps_charge_the_same_minimising_composition_as_subset(ledger, reference_filter):
    ledger.ok("cap", "set", "income", "--epsilon", "9/2", "--delta", "1e-9")
    recorded = ledger.record(CHOICES)
    assert recorded.code == 0, recorded.err  # pure 5 > 4.5: refused
    expected = reference_filter(rho=0.2, delta=1e-9)
    subset = ledger.ok("subset", "income", "--json").json()["epsilon"]
    current = ledger.ok("cap", "list", "--json").json()[0]["current"]
    assert subset == pytest.approx(expected, rel=1e-9) and current == subset
    plan = ledger.write("plan.yaml", releases("""\
        releases:
          - {id: p, status: planned, reads: [income], mechanism: {name: declared}, guarantees: [{rho: "1/1000"}]}
        """))
    checked = ledger("check", plan, "--json")
    assert checked.code == 0, checked.out
    assert checked.json()["caps"][0]["current"] == current
    table = ledger.ok("table", "--json").json()
    assert table["total"]["values"]["income"] == current
    ledger.ok("audit", "verify")


# --------------------------------------------------------------------------
# 4. Checks that explain themselves
# --------------------------------------------------------------------------


def test_check_explains_an_infinite_charge_and_lists_each_planned_release(ledger):
    ledger.ok("cap", "set", "income", "--epsilon", "1")
    plan = ledger.write("plan.yaml", releases("""\
        releases:
          - {id: T10, status: planned, reads: [income], mechanism: {name: gaussian, rho: "1/32"}}
          - {id: T11, status: planned, reads: [income], mechanism: {name: laplace, epsilon: "1/4"}}
        """))
    checked = ledger("check", plan, "--json")
    assert checked.code == 1
    (cap,) = checked.json()["caps"]
    charges = {c["release"]: c for c in cap["charges"]}
    assert charges["T11"]["value_exact"] == "1/4" and charges["T11"]["reason"] is None
    assert charges["T10"]["value"] == "inf"
    assert "Gaussian" in charges["T10"]["reason"] and "pure-epsilon" in charges["T10"]["reason"]
    assert cap["reason"] == charges["T10"]["reason"]
    text = ledger("check", plan).out
    assert "T11 +0.25" in text and "T10 +∞" in text and "declare the cap with a delta or in rho" in text
    refused = ledger("record", plan)
    assert refused.code == 1 and "T10" in refused.err


def test_an_exact_read_is_explained(ledger):
    ledger.ok("cap", "set", "region", "--epsilon", "1")
    plan = ledger.write("plan.yaml", releases("""\
        releases:
          - {id: T15, status: planned, reads: [region], mechanism: {name: exact}}
        """))
    (cap,) = ledger("check", plan, "--json").json()["caps"]
    assert cap["charges"][0]["reason"] == "T15 reads region exactly (no guarantee covers it)"


def test_a_family_appears_once_among_drivers_with_its_charge(ledger):
    ledger.ok("cap", "set", "income", "--epsilon", "5")
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        families: [{id: split, partition: random}]
        releases:
          - id: m1
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            family: split
            part: m1
            reads: [income]
            mechanism: {name: laplace, epsilon: 1}
          - id: m2
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            family: split
            part: m2
            reads: [income]
            mechanism: {name: laplace, epsilon: 1}
        """)))
    (cap,) = ledger.ok("cap", "list", "--json").json()
    assert cap["drivers"] == [{"release": None, "family": "split", "value": 1, "value_exact": "1", "reason": None}]
    assert cap["current"] == 1
    text = ledger.ok("cap", "list").out
    assert "family split (1, charged once)" in text and "m1" not in text


def test_cap_list_text_states_what_its_json_states(ledger):
    ledger.ok("cap", "set", "income", "--epsilon", "30")
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        releases:
          - id: r
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [income]
            mechanism: {name: laplace, epsilon: 20}
        """)))
    (cap,) = ledger.ok("cap", "list", "--json").json()
    text = ledger.ok("cap", "list").out
    assert (cap["current"], cap["charge"], cap["headroom"]) == (20, 0, 10)
    assert "spent 20" in text and "headroom 10" in text and "this plan" not in text


# --------------------------------------------------------------------------
# 5. Figures that read right
# --------------------------------------------------------------------------


def test_an_approximation_beside_a_fraction_is_the_fraction_value():
    from ledger.core.numbers import format_exact, format_number
    from ledger.reporting.views import param_text

    assert param_text(F(1, 10**10)) == "1e-10"
    for value in (F(1, 3 * 10**10), F(2, 3), F(10**12 + 1, 3), F(1, 7 * 10**70)):
        for text, places in ((format_number(value), 4), (format_exact(value), 2)):
            shown = F(re.search(r"(?:≈ |^)([0-9.e-]+)\)?$", text).group(1))  # (a long one: rounded alone)
            assert shown >= value and (shown - value) / value < F(1, 10**(places - 1)), text


def test_every_json_figure_has_one_shape(ledger):
    ledger.ok("cap", "set", "income", "--epsilon", "1")
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        releases:
          - id: r
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [income]
            mechanism: {name: laplace, epsilon: "1/4"}
        """)))
    subset = ledger.ok("subset", "income", "--json").json()
    assert (subset["epsilon"], subset["epsilon_exact"]) == (0.25, "1/4")
    (cap,) = ledger.ok("cap", "list", "--json").json()
    assert (cap["current"], cap["current_exact"], cap["headroom"], cap["headroom_exact"]) == (0.25, "1/4", 0.75, "3/4")
    room = ledger.ok("headroom", "income", "--json").json()
    assert (room["epsilon"], room["epsilon_exact"]) == (0.75, "3/4")
    (release,) = ledger.ok("releases", "--json").json()
    assert (release["guarantees"][0]["epsilon"], release["guarantees"][0]["epsilon_exact"]) == (0.25, "1/4")
    row = ledger.ok("table", "--json").json()["rows"][0]
    assert (row["values"]["income"], row["exact"]["income"]) == (0.25, "1/4")
    assert (row["dataset_wide"], row["dataset_wide_exact"]) == (0.25, "1/4")
    plan = ledger.write("plan.yaml", releases("""\
        releases:
          - {id: p, status: planned, reads: [income], mechanism: {name: gaussian, rho: "1/1000"}}
        """))
    ledger.ok("cap", "set", "income", "--epsilon", "1", "--delta", "1e-9")
    (checked,) = ledger("check", plan, "--json").json()["caps"]
    # an irrational figure (a CKS conversion) has no exact form: null, never a float as a string
    assert isinstance(checked["after"], float) and checked["after_exact"] is None
    assert (checked["current"], checked["current_exact"]) == (0.25, "1/4")


def test_audit_verify_names_the_differing_fields(ledger):
    ledger.ok("cap", "set", "income", "--epsilon", "1")
    ledger.ok("record", ledger.write("r.yaml", releases("""\
        releases:
          - id: r
            status: published
            published_at: "2026-01-05T10:00:00+00:00"
            reads: [income]
            mechanism: {name: laplace, epsilon: "1/4"}
        """)))
    with sqlite3.connect(ledger.path) as connection:
        (body,) = connection.execute("SELECT total FROM cap_totals").fetchone()
        total = json.loads(body)
        total["value"] = "1/8"
        connection.execute("UPDATE cap_totals SET total = ?", (json.dumps(total),))
    result = ledger("audit", "verify")
    assert result.code == 1
    assert "figure: stored 0.125, recomputed 0.25" in result.err
    assert "{" not in result.err.split("running total", 1)[1].splitlines()[0]
