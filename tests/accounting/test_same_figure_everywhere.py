"""One accounting everywhere: for the same subset and delta, every
command charges the same composition.

Random ledgers (the strategy of test_engine_properties) and random caps: the figure a
cap shows (its running total built release by release, as `record` builds it; rebuilt
from the history, as a new cap or `cancel` builds it; rebuilt over arrays, as `audit
verify` builds it; `check`'s current figure; the report's cap table) equals the figure
`subset --delta` prints for the cap's subset, and for a single variable the total row
of `table`. Then a few random ledgers through the command line itself.
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import _reference_filter
from support import cli_main
from test_engine_properties import ALL_SUBSETS, VARIABLES, ledgers

from ledger.accounting import budget, cap_measure
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.ledger_index import LedgerIndex
from ledger.accounting.spend import pure_spend
from ledger.core.records import Cap

F = Fraction
DELTAS = (F(1, 10**9), F(1, 10**6), F(1, 10**4))


@st.composite
def caps(draw):
    subset = draw(st.sampled_from([s for s in ALL_SUBSETS if s]))
    kind = draw(st.sampled_from(["pure", "delta", "rho"]))
    if kind == "pure":
        return Cap("survey", "c", subset, epsilon=F(100))
    if kind == "rho":
        return Cap("survey", "c", subset, rho=F(100))
    return Cap("survey", "c", subset, epsilon=F(100), delta=draw(st.sampled_from(DELTAS)))


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return float(a) == float(b) or math.isclose(float(a), float(b), rel_tol=1e-12)
    return a == b


@settings(max_examples=150)
@given(ledger=ledgers(), cap=caps())
def test_every_path_to_a_cap_figure_agrees_with_subset(ledger, cap):
    families = {f.id: f for f in ledger.families}
    running = budget.total_from_history(cap, [], families)  # a new cap, as `cap set` stores it
    counted: dict[str, list] = {}
    for release in ledger.releases:  # as `record` applies them, one file at a time
        running = budget.apply(running, cap, [release], families, counted)
        if release.family is not None:
            counted.setdefault(release.family, []).append(release)
    history = budget.total_from_history(cap, ledger.releases, families)
    index = LedgerIndex(VARIABLES, ledger.releases, ledger.families)
    arrays = budget.total_from_index(cap, index)
    (checked,) = budget.check([cap], {"c": running}, [], families, {}, only_touched=False)
    figures = [running.value, history.value, arrays.value, checked.current]
    assert all(same(f, figures[0]) for f in figures), figures
    spend = index.subset_cost(cap.subset, cap_measure.objective(cap)).spend
    assert same(cap_measure.measure(cap, spend), figures[0])
    if cap.delta is not None:  # what `subset --delta` prints
        printed = index.subset_cost(cap.subset, at_delta(cap.delta)).spend.epsilon(cap.delta)
        assert same(printed, figures[0]), (printed, figures[0])
        if len(cap.subset) == 1:  # the total row of `table --delta`
            (name,) = cap.subset
            table = index.table("survey", at_delta(cap.delta))
            assert same(table.total[VARIABLES.index(name)].epsilon(cap.delta), figures[0])
    # headroom: a pure release of the headroom still fits, by the same figure
    room = budget.largest_basic_charge(cap, running, pure_spend)
    if not math.isinf(room) and room > 0:
        after = budget.cap_value(cap, running, pure_spend(F(room)))
        assert after <= cap.limit


SURVEY = """\
dataset: survey
self_approval: true
delta: 1e-9
variables: [{name: a}, {name: b}, {name: c}, {name: d}]
"""
# The random ledgers' approximate deltas reach 4 x 1e-6 x (1 + e^2) ≈ 3.4e-5 (add-remove guarantees
# doubled into replacements): a dataset at 1e-4 keeps them within its allowance, half of it.
WIDE = SURVEY.replace("delta: 1e-9", "delta: 1e-4")


def release_yaml(release) -> str:
    def guarantee(g):
        value = {"pure": f'epsilon: "{g.epsilon}"', "approx": f'epsilon: "{g.epsilon}", delta: "{g.delta}"',
                 "zcdp": f'rho: "{g.rho}"'}[g.notion.value]
        return f"{{protects: [{', '.join(sorted(g.protects))}], {value}, relation: {g.relation.value}}}"

    lines = [f"  - id: {release.id}", "    status: published", '    published_at: "2026-01-05T10:00:00+00:00"',
             f"    reads: [{', '.join(sorted(release.reads))}]"]
    if release.reads:
        lines.append("    mechanism: {name: declared}" if release.guarantees else "    mechanism: {name: exact}")
    if release.guarantees:
        lines.append("    guarantees: [" + ", ".join(map(guarantee, release.guarantees)) + "]")
    if release.family:
        lines.append(f"    family: {release.family}")
        lines.append(f"    part: {release.part or release.id}")  # (the engine's members: each its own part)
    return "\n".join(lines)


@settings(max_examples=6)
@given(ledger=ledgers(max_releases=4))
def test_every_command_prints_the_same_figure_for_every_capped_subset(ledger, tmp_path_factory):
    directory = tmp_path_factory.mktemp("same")
    url = f"sqlite:///{directory / 'ledger.db'}"
    (directory / "survey.yaml").write_text(WIDE)
    assert cli_main(url, "dataset", "add", directory / "survey.yaml").code == 0
    usable = [r for r in ledger.releases if r.reads and not (r.family and not r.guarantees)]
    usable = [r for r in usable if not any(f.id == r.family and f.partition and not f.partition <= r.reads
                                           for f in ledger.families)]
    families = "".join(f"  - {{id: {f.id}, partition: {'random' if f.partition is None else '[' + ', '.join(sorted(f.partition)) + ']'}}}\n"
                       for f in ledger.families)
    text = "dataset: survey\n" + (f"families:\n{families}" if families else "") + "releases:\n" \
        + "\n".join(map(release_yaml, usable)) + "\n"
    if usable:
        (directory / "r.yaml").write_text(text)
        recorded = cli_main(url, "record", directory / "r.yaml")
        assert recorded.code == 0, (text, recorded.err)
    for args in (("a", "b", "--name", "ab", "--delta", "1e-4"), ("c", "--delta", "2e-4"), ("d", "--name", "pure-d")):
        assert cli_main(url, "cap", "set", *args, "--epsilon", "100").code == 0  # a new cap, from the history
    listed = {c["cap"]: c for c in cli_main(url, "cap", "list", "--json").json()}
    plan = directory / "plan.yaml"
    plan.write_text(textwrap.dedent("""\
        dataset: survey
        releases:
          - {id: p, status: planned, reads: [a, b, c, d], mechanism: {name: laplace, epsilon: "1/1000"}}
        """))
    checked = {c["cap"]: c for c in cli_main(url, "check", plan, "--json").json()["caps"]}
    for name, delta in (("ab", "1e-4"), ("c", "2e-4")):
        subset = cli_main(url, "subset", *listed[name]["subset"], "--delta", delta, "--json").json()
        assert listed[name]["current"] == checked[name]["current"], (name, text)  # one enforcement
        if subset["notion"] == "pure":
            # pure releases only: the cap's filter and the running figure are both the pure sum (the
            # Rényi statement of a cap of 100 at its one order A ≈ 1.35 adds about 26 by CKS 2020
            # Prop 12 at delta / 2, more than any pure sum here: 4 releases of at most 2 x 2)
            assert listed[name]["current"] == subset["epsilon"], (name, text)
            assert listed[name]["current_exact"] == subset["epsilon_exact"]
    table = cli_main(url, "table", "--delta", "2e-4", "--json").json()
    subset_c = cli_main(url, "subset", "c", "--delta", "2e-4", "--json").json()
    assert table["total_shown"]["values"]["c"] == subset_c["epsilon"]  # table and subset: the same figure
    assert table["total"]["values"]["c"] == subset_c["accountants"]["basic"]["epsilon"]  # (the basic row)
    subset_d = cli_main(url, "subset", "d", "--json").json()
    if subset_d["notion"] in ("pure", "unbounded"):
        assert listed["pure-d"]["current"] == subset_d["epsilon"], (subset_d, listed["pure-d"], text)
    assert cli_main(url, "audit", "verify").code == 0


NOISE = """\
  - {id: n1, status: STATUS, reads: [a, b], mechanism: {name: gaussian, sigma: 4, sensitivity: 1}}
  - {id: n2, status: STATUS, reads: [b, c], mechanism: {name: laplace, epsilon: "1/5"}}
  - {id: n3, status: STATUS, reads: [a], mechanism: {name: geometric, scale: 5, sensitivity: 1}}
"""


def record_noise_ledger(directory, ledger, planned: bool) -> str:
    """A ledger of the random releases and the noise releases, every one planned, or every one
    published; its URL."""
    url = f"sqlite:///{directory / ('planned.db' if planned else 'published.db')}"
    (directory / "survey.yaml").write_text(WIDE)
    assert cli_main(url, "dataset", "add", directory / "survey.yaml").code == 0
    lines = [release_yaml(r) for r in ledger.releases if r.reads and not r.family]
    if planned:
        lines = [line.replace("    status: published\n    published_at: \"2026-01-05T10:00:00+00:00\"\n",
                              "    status: planned\n") for line in lines]
        noise = NOISE.replace("STATUS", "planned")
    else:
        noise = NOISE.replace("status: STATUS,", 'status: published, published_at: "2026-01-05T10:00:00+00:00",')
    text = "dataset: survey\nreleases:\n" + "\n".join(lines) + "\n" + noise
    (directory / "r.yaml").write_text(text)
    recorded = cli_main(url, "record", directory / "r.yaml")
    assert recorded.code == 0, (text, recorded.err)
    return url


@settings(max_examples=8, deadline=None)
@given(ledger=ledgers(max_releases=4))
def test_pairs_print_the_figure_subset_prints_for_every_pair(ledger, tmp_path_factory):
    """`pairs` (and the Python API's `pairs`) print, for every pair, the figure `subset A B` prints,
    with the same accountant; and the same whether the releases are planned or published (one case,
    fully adaptive: no figure depends on the record's times)."""
    import ledger as ledger_api

    directory = tmp_path_factory.mktemp("pairs")
    url = record_noise_ledger(directory, ledger, planned=False)
    pairs = cli_main(url, "pairs", "--delta", "1e-4", "--json").json()
    assert len(pairs) == 6
    as_planned = cli_main(record_noise_ledger(directory, ledger, planned=True), "pairs", "--delta", "1e-4",
                          "--json").json()
    assert as_planned == pairs
    api = ledger_api.open(url).pairs(delta="1e-4")
    for entry, row in zip(pairs, api.itertuples()):
        one = cli_main(url, "subset", *entry["subset"], "--delta", "1e-4", "--json").json()
        assert entry["accountant"] == one["accountant"] != "pld", (entry, one)
        # (the same figure; rdp's curves are summed over arrays for pairs, in another order: ulps)
        assert same(float(entry["epsilon"]), float(one["epsilon"])), (entry, one)
        assert (row.variable_1, row.variable_2) == tuple(entry["subset"])
        assert row.accountant == one["accountant"] and same(row.epsilon, float(one["epsilon"]))


def test_noise_releases_get_the_running_figure_in_pairs_and_subset_and_the_pld_as_information(tmp_path):
    """{a, b} is charged by a Gaussian (sigma 4), a Laplace (1/5) and a geometric release (scale 5,
    1/5-DP). Planned or published, `pairs` and `subset` print the same running figure, never the
    PLD: that is shown by `subset` as information only (the tight figure had the plan been fixed in
    advance), not valid, and below the running figure."""
    figures = []
    for status in ("planned", "published"):
        url = f"sqlite:///{tmp_path / (status + '.db')}"
        (tmp_path / "survey.yaml").write_text(SURVEY)
        assert cli_main(url, "dataset", "add", tmp_path / "survey.yaml").code == 0
        noise = NOISE.replace("status: STATUS,", 'status: published, published_at: "2026-01-05T10:00:00+00:00",'
                              if status == "published" else "status: planned,")
        (tmp_path / "r.yaml").write_text("dataset: survey\nreleases:\n" + noise)
        assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
        pairs = {tuple(e["subset"]): e for e in cli_main(url, "pairs", "--delta", "1e-9", "--json").json()}
        one = cli_main(url, "subset", "a", "b", "--delta", "1e-9", "--json").json()
        assert pairs[("a", "b")]["accountant"] == one["accountant"] != "pld"
        assert same(float(pairs[("a", "b")]["epsilon"]), float(one["epsilon"]))  # (ulps: summed over arrays)
        pld = one["accountants"]["pld"]
        assert pld["available"] and not pld["valid"] and "information" in pld["note"]
        assert float(pld["epsilon"]) < float(one["epsilon"])
        # the basic statement, from the closed forms: pure 1/5 + 1/5 (each also (1/5)^2 / 2-zCDP) and
        # the Gaussian's rho 1 / (2 x 4^2), at the 22 orders fixed in advance
        assert one["accountants"]["basic"]["epsilon"] == pytest.approx(
            _reference_filter(pure=0.4, pure_rho=0.04, rho=1 / 32, delta=1e-9), rel=1e-9)
        assert float(one["epsilon"]) <= float(one["accountants"]["basic"]["epsilon"])
        figures.append((one["epsilon"], pld["epsilon"], pairs[("a", "b")]["epsilon"]))
    assert figures[0] == figures[1]


@settings(max_examples=80, deadline=None)
@given(ledger=ledgers(max_releases=6), declared=st.booleans(), laplace=st.booleans(), fallback=st.booleans())
def test_the_pair_arrays_compose_each_pair_as_subset_does(ledger, declared, laplace, fallback):
    """`pair_rdp` (the figures of `pairs`, the report's heat map and its diagonal) counts, for every
    pair {i, j} and every {i} alone, the events `subset` composes for it (IndexEvents.composition:
    families, releases with several guarantees or a choice), with the same unbounded pairs and case,
    and each pair's chosen figure is subset's: random ledgers with families keyed and random, through
    the families' array path and, `fallback`, through the per-case one."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta
    from unittest import mock

    from ledger.accounting import composition_figures, every_pair, family_case_costs, figure_validity, index_figures
    from ledger.core.records import Guarantee, Mechanism, Notion, Relation, Status

    releases = []
    for k, release in enumerate(ledger.releases):
        if laplace and k % 2 == 0 and release.reads:  # a mechanism event where the guarantee is its own
            release = replace(release, mechanism=Mechanism("laplace", (("epsilon", Fraction(1, 3)),)),
                              guarantees=(Guarantee(release.reads, Notion.PURE, epsilon=Fraction(1, 3),
                                                    relation=Relation.REPLACE),))
        moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=k)
        releases.append(replace(release, status=Status.PLANNED if declared else Status.PUBLISHED,
                                recorded_at=moment, published_at=None if declared else moment))
    delta = Fraction(1, 10**9)
    index = LedgerIndex(VARIABLES, releases, ledger.families)
    grid = index.pair_matrix(at_delta(delta))
    with mock.patch.object(family_case_costs, "PAIR_FAMILY_VALUES", 0 if fallback else family_case_costs.PAIR_FAMILY_VALUES):
        rdp = every_pair.pair_rdp(index, delta, grid)
    events = index_figures.index_events(index)
    n = len(VARIABLES)
    for i in range(n):
        for j in range(i, n):
            subset = frozenset({VARIABLES[i], VARIABLES[j]})
            comp = events.composition(index.cost_ids(sorted({i, j})), subset, grid.spend(i, j))
            mine = every_pair.pair_composition(rdp, grid, i, j)
            assert mine.unbounded == comp.unbounded, (i, j)
            if not comp.unbounded:
                assert {e: c for e, c in mine.events.items() if c} == dict(comp.events), (i, j)
            expected = composition_figures.rdp_figure(comp, delta, figure_validity.ADAPTIVE)
            assert same(float(rdp.epsilon[i, j]), float(expected.epsilon)), (i, j)
            spend = index.subset_spend(subset, at_delta(delta))
            shown = figure_validity.best(index_figures.subset_figures(index, subset, delta, spend))
            figure = figure_validity.best(every_pair.pair_figure(index, delta, grid, rdp, i, j))
            assert figure.accountant == shown.accountant and same(float(figure.epsilon), float(shown.epsilon)), \
                (i, j, figure, shown)



@settings(max_examples=150, deadline=None)
@given(ledger=ledgers(max_releases=8))
def test_a_family_composed_once_per_case_costs_what_family_cost_gives(ledger):
    """`family_case_costs.FamilyCases` (a family's cost keyed by the set of its touched members' values,
    whether one is untouched and whether the key is met) equals `cost_rule.family_cost` on every
    subset, for families keyed and random, members of one or several guarantees."""
    from ledger.accounting import family_case_costs
    from ledger.accounting.cost_rule import family_cost

    index = LedgerIndex(VARIABLES, ledger.releases, ledger.families)
    for fid, rows in index.members.items():
        cases = family_case_costs.family_cases(index, fid)
        members = [index.releases[i] for i in rows]
        for subset in ALL_SUBSETS:
            touched = np.asarray([bool(m.reads & subset) for m in members])
            if touched.any():
                assert cases.cost(touched, subset) == family_cost(index.families[fid], members, subset), \
                    (fid, sorted(subset), cases.uniform)


def test_an_unprotected_read_gives_pairs_and_subset_the_same_case(tmp_path):
    """A release whose guarantee protects none of what it reads makes every pair it touches
    unbounded, in `pairs` as in `subset` ({c, d} has one finite event, the Laplace, beside the
    unbounded release: not "one release alone")."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "survey.yaml").write_text(SURVEY)
    assert cli_main(url, "dataset", "add", tmp_path / "survey.yaml").code == 0
    unprotected = ('  - {id: r0, status: published, published_at: "2026-01-05T10:00:00+00:00", reads: [a, b, c],\n'
                   '     mechanism: {name: declared}, guarantees: [{protects: [], epsilon: "1/10"}]}\n')
    noise = NOISE.replace("status: STATUS,", 'status: published, published_at: "2026-01-05T10:00:00+00:00",')
    (tmp_path / "r.yaml").write_text("dataset: survey\nreleases:\n" + unprotected + noise)
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    pairs = cli_main(url, "pairs", "--delta", "1e-9", "--json").json()
    assert len(pairs) == 6
    for entry in pairs:
        one = cli_main(url, "subset", *entry["subset"], "--delta", "1e-9", "--json").json()
        assert (entry["case"], entry["epsilon"]) == (one["case"], one["epsilon"]) == ("adaptive", "inf")


def test_pairs_asked_for_pld_compose_every_pair_as_subset_does(tmp_path):
    """Seven variables, each read by one planned Laplace release of its own epsilon: 21 pairs, each
    a distinct composition (two Laplace releases). By default `pairs` composes at most
    PAIR_PLD_LIMIT of them; `pairs --accountant pld` composes every one, each the information figure
    `subset A B --accountant pld` prints (had the plan been fixed in advance; not valid), and never
    below the exact figure."""
    from ledger.accounting.every_pair import PAIR_PLD_LIMIT

    names = [f"v{k}" for k in range(7)]
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "d.yaml").write_text("dataset: survey\nself_approval: true\ndelta: 1e-9\nvariables: ["
                                     + ", ".join(f"{{name: {n}}}" for n in names) + "]\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    epsilon = {n: Fraction(k + 1, 100) for k, n in enumerate(names)}
    (tmp_path / "r.yaml").write_text("dataset: survey\nreleases:\n" + "".join(
        f'  - {{id: r{n}, status: planned, reads: [{n}], mechanism: {{name: laplace, epsilon: "{epsilon[n]}"}}}}\n'
        for n in names))
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    default = cli_main(url, "pairs", "--json").json()
    assert len(default) == 21
    # (the singletons {v} compete for the same PAIR_PLD_LIMIT compositions: at least 5 pairs go without)
    assert sum(not e["accountants"]["pld"]["available"] for e in default) >= 21 - PAIR_PLD_LIMIT
    every = cli_main(url, "pairs", "--accountant", "pld", "--json").json()
    assert [e["subset"] for e in every] == [e["subset"] for e in default]
    for entry in every:
        a, b = entry["subset"]
        one = cli_main(url, "subset", a, b, "--accountant", "pld", "--json").json()
        assert entry["accountant"] == one["accountant"] == "pld"
        assert not entry["accountants"]["pld"]["valid"] and not one["accountants"]["pld"]["valid"]
        assert same(float(entry["epsilon"]), float(one["epsilon"])), (entry, one)
        # never below the exact figure: a Laplace release's privacy loss is at its largest, epsilon,
        # with probability 1/2, so the two reach epsilon_a + epsilon_b with probability 1/4 and
        # delta(eps) >= (1 - e^(eps - epsilon_a - epsilon_b)) / 4: eps(1e-9) >= sum + ln(1 - 4e-9)
        assert float(entry["epsilon"]) >= float(epsilon[a] + epsilon[b]) + math.log1p(-4e-9)
    # the default prints the same figure wherever it composed one
    for shown, pld in zip(default, every):
        if shown["accountants"]["pld"]["available"]:
            assert same(float(shown["accountants"]["pld"]["epsilon"]), float(pld["epsilon"]))
