"""Which guarantee of a release is charged: the side is fixed by the release, not by the history.

A release may offer an (epsilon, delta) guarantee beside a pure or rho one: a Gaussian declared
by (epsilon, delta) keeps its claim beside the rho it implies (catalogue, since schema 11), and a
file may state several guarantees. When releases may be adaptive (docs/explanation/accounting.md), the figure is the
smallest of spend.py's statements, each at a share of the delta fixed in advance; a release
charged by its (epsilon, delta) guarantee spends that delta off the top of all of them. Choosing
the side after the history (the combination with the smallest figure) would pick among as many
families of statements, each at the whole delta, valid only by a union bound over them; so the
side is fixed by the release and the subset (`cost_rule.charge_options`):

- its pure and rho guarantees wherever one covers what it reads of the subset (finite in every
  unit a figure or a cap is stated in), else its (epsilon, delta) ones, of which the first-ranked;
- among pure and rho guarantees, the choice stays with the composition (valid at every order).

Expected figures come from conftest's closed forms (`reference_filter`, `reference_cks`).
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest

from ledger.accounting.charge_choice import at_delta
from ledger.accounting.cost_rule import candidates, ledger_cost, release_cost
from ledger.accounting.ledger_index import LedgerIndex
from ledger.accounting.spend import Spend
from ledger.core.records import Guarantee, Mechanism, Notion, Relation, Release

from conftest import _reference_filter
from support import cli_main

DELTA = F(1, 10**6)


def release(id, reads, *guarantees):
    return Release(id, "survey", frozenset(reads), Mechanism("pinned"), tuple(guarantees))


def approx(protects, epsilon, delta):
    return Guarantee(frozenset(protects), Notion.APPROX, epsilon=F(epsilon), delta=F(delta))


def zcdp(protects, rho):
    return Guarantee(frozenset(protects), Notion.ZCDP, rho=F(rho))


def pure(protects, epsilon):
    return Guarantee(frozenset(protects), Notion.PURE, epsilon=F(epsilon))


def old_smallest_combination(n, claim_epsilon, claim_delta, rho, delta):
    """What the engine printed before: the smallest figure over every split of n identical
    releases between their (epsilon, delta) claim and their rho, chosen after the history."""
    figures = []
    for k in range(n + 1):  # k charged by the claim
        figures.append(_reference_filter(rho=(n - k) * rho, approx_epsilon=k * claim_epsilon,
                                         approx_delta=k * claim_delta, delta=delta))
    return min(figures)


def test_a_claim_beside_its_rho_is_charged_by_the_rho_in_every_composition():
    # 30 releases offering (0.1, 1e-9) and rho 0.02 on {a}: the rho side, the fixed orders' figure of
    # 30 * 0.02 (6.58: conftest's reference_filter, each order at 1e-6 / 44); the old choice took the
    # 30 claims (3.0) after the history
    n, claim, rho = 30, (F(1, 10), F(1, 10**9)), F(2, 100)
    releases = [release(f"r{i}", "a", approx("a", *claim), zcdp("a", rho)) for i in range(n)]
    got = ledger_cost(releases, [], {"a"}, objective=at_delta(DELTA))
    assert got == Spend(rho=n * rho)
    expected = _reference_filter(rho=float(n * rho), delta=float(DELTA))
    assert float(got.epsilon(DELTA)) == pytest.approx(expected, rel=1e-9)
    old = old_smallest_combination(n, *map(float, claim), float(rho), float(DELTA))
    assert old < expected * (1 - 1e-3), "the old after-history choice took the claims"
    # the arrays (subset, pairs, the table's total row) charge it the same way
    index = LedgerIndex(("a", "b"), releases)
    assert index.subset_cost({"a"}, at_delta(DELTA)).spend == got
    assert index.pair_matrix(at_delta(DELTA)).spend(0, 1) == got
    assert index.table("survey", at_delta(DELTA)).total[0] == got


def test_the_side_is_the_same_for_one_release_alone():
    # one release: its cost is its rho (the claim is never charged beside it), in every path
    r = release("g", "ab", approx("ab", F(1, 2), F(1, 10**9)), zcdp("ab", F(1, 100)))
    for subset in ({"a"}, {"b"}, {"a", "b"}):
        assert candidates(r, frozenset(subset)) == (Spend(rho=F(1, 100)),)
    index = LedgerIndex(("a", "b"), [r])
    cells = index.table("survey").cells
    assert [index.values[v] for v in cells[0]] == [Spend(rho=F(1, 100))] * 2
    assert index.values[index.cost_ids([0, 1])[0]] == Spend(rho=F(1, 100))


def test_a_pure_guarantee_is_charged_where_it_covers_and_the_approx_one_elsewhere():
    # pure 1/2 on {a}, (0.1, 1e-7) on {a, b}: {a} is charged the pure 1/2, {a, b} the approximate
    # one. At 1e-6 {a} then costs more than {a, b} (the documented exception to Tan Prop 3.2: no
    # side fixed by the release keeps both the finite figure at 1e-9 and monotonicity at 1e-6)
    r = release("r", "ab", pure("a", F(1, 2)), approx("ab", F(1, 10), F(1, 10**7)))
    assert release_cost(r, frozenset("a")) == Spend(pure=F(1, 2))
    assert release_cost(r, frozenset("ab")) == Spend(approx_epsilon=F(1, 10), approx_delta=F(1, 10**7))
    index = LedgerIndex(("a", "b"), [r])
    assert index.values[index.table("survey").cells[0][0]] == Spend(pure=F(1, 2))
    assert index.values[index.table("survey").cells[0][1]] == release_cost(r, frozenset("ab"))
    assert index.subset_cost({"a"}).spend == Spend(pure=F(1, 2))
    # a pure guarantee on more variables is charged wherever it covers
    s = release("s", "ab", pure("ab", F(1, 2)), approx("a", F(1, 10), F(1, 10**7)))
    assert release_cost(s, frozenset("a")) == Spend(pure=F(1, 2)) == release_cost(s, frozenset("ab"))


def test_a_cap_in_pure_epsilon_or_rho_or_at_a_small_delta_keeps_the_finite_side(tmp_path):
    # (the adversarial review of the first version, which charged the (epsilon, delta) side on {a}
    # because it protects more: every one of these went to ∞ though a pure guarantee covers)
    # A release offering pure 0.1 on {a} and (1, 1e-7) on {a, b}: {a, b} is charged its 1e-7, which
    # must fit the allowance of the dataset's delta (half of it). At 1e-6 it does; the caps on {a},
    # pure, rho and at the small delta 1e-9, keep the pure side.
    from support import dump_tables

    release_file = tmp_path / "r.yaml"
    release_file.write_text(
        "dataset: d\nreleases:\n  - {id: r, reads: [a, b], mechanism: {name: declared}, guarantees: "
        "[{protects: [a], epsilon: 0.1}, {protects: [a, b], epsilon: 1, delta: 1e-7}]}\n")

    def ledger(name, delta):
        url = f"sqlite:///{tmp_path / name}"
        (tmp_path / "d.yaml").write_text(
            f"dataset: d\nself_approval: true\ndelta: {delta}\nvariables:\n  - {{name: a, classification: sensitive}}\n  - {{name: b}}\n"
            "caps:\n  - {name: pure, subset: [a], epsilon: 5}\n  - {name: rho, subset: [a], rho: 5}\n"
            "  - {name: small, subset: [a], epsilon: 5, delta: 1e-9}\n")
        assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
        return url

    url = ledger("l.db", "1e-6")
    recorded = cli_main(url, "record", release_file)
    assert recorded.code == 0, recorded.err
    caps = {cap["cap"]: cap["current"] for cap in cli_main(url, "cap", "list", "--json").json()}
    assert caps == {"pure": pytest.approx(0.1), "rho": pytest.approx(0.005), "small": pytest.approx(0.1)}
    assert cli_main(url, "subset", "a", "--json").json()["epsilon"] == pytest.approx(0.1)
    assert cli_main(url, "subset", "a", "--delta", "1e-9", "--json").json()["epsilon"] == pytest.approx(0.1)
    assert cli_main(url, "subset", "a", "b", "--json").json()["epsilon"] == 1  # (1, 1e-7) at 1e-6
    # at 1e-9 the allowance (5e-10) does not hold 1e-7: no figure
    assert cli_main(url, "subset", "a", "b", "--delta", "1e-9", "--json").json()["epsilon"] == "inf"
    assert cli_main(url, "audit", "verify").code == 0
    # a dataset at 1e-9: the release would take {a, b} past its allowance, so it is refused, exit 1,
    # nothing written, naming the subset and the deltas
    url = ledger("small.db", "1e-9")
    before = dump_tables(url)
    refused = cli_main(url, "record", release_file)
    assert refused.code == 1
    assert "the approximate deltas on {a, b} would reach 1 × 10⁻⁷" in refused.err, refused.err
    assert dump_tables(url) == before


def test_of_several_approx_guarantees_the_first_ranked_is_charged_in_a_composition():
    # (1, 1e-10) and (1/2, 1e-7): incomparable; at 1e-9 only the first is a bound, so it ranks
    # first and is charged in every composition, even where the other would give less at 1e-6
    r = [release(f"r{i}", "a", approx("a", 1, F(1, 10**10)), approx("a", F(1, 2), F(1, 10**7))) for i in range(3)]
    got = ledger_cost(r, [], {"a"}, objective=at_delta(DELTA))
    assert got == Spend(approx_epsilon=3, approx_delta=F(3, 10**10))
    assert got.epsilon(DELTA) == 3  # the old choice: 3 * 1/2 at a delta of 3e-7


def test_add_remove_neighbours_fix_the_side_over_the_guarantees_that_bound_them():
    # for add/remove neighbours a replacement-only guarantee bounds nothing (docs/explanation/model.md#variables-subsets-and-neighbours): the side
    # is fixed among the guarantees that do, here the (epsilon, delta) one alone
    r = release("r", "ab", zcdp("ab", F(1, 100)),
                Guarantee(frozenset("ab"), Notion.APPROX, epsilon=F(1, 4), delta=F(1, 10**8),
                          relation=Relation.ADD_REMOVE))
    assert release_cost(r, frozenset("a"), Relation.ADD_REMOVE).approx_epsilon == F(1, 4)
    assert release_cost(r, frozenset("a"), Relation.REPLACE) == Spend(rho=F(1, 100))


GAUSSIAN_DATASET = (
    "dataset: d\nself_approval: true\ndelta: 1e-6\nvariables:\n  - {name: a, classification: sensitive}\n"
    "caps:\n  - {subset: [a], epsilon: 50, delta: 1e-6}\n")


def test_gaussians_declared_by_their_claim_are_charged_by_the_rho_they_imply(tmp_path):
    """Gaussians declared only by (epsilon, delta), published one by one (adaptive): `subset`,
    `table`'s total and the cap's figure are the split figure of the sum of their implied rhos,
    and `audit verify` agrees."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(GAUSSIAN_DATASET)
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    n = 12
    (tmp_path / "r.yaml").write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: g{i}, reads: [a], status: published, published_at: \"2026-03-01T00:00:{i:02d}Z\", "
        f"mechanism: {{name: gaussian, epsilon: 0.5, delta: 1e-8}}}}\n" for i in range(n)))
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    from ledger.accounting.catalogue import derive_guarantees

    (claim, implied) = derive_guarantees(Mechanism("gaussian", (("epsilon", F(1, 2)), ("delta", F(1, 10**8)))),
                                         frozenset("a"))[0]
    assert claim.notion == Notion.APPROX and implied.notion == Notion.ZCDP
    shown = cli_main(url, "subset", "a", "--json").json()
    assert shown["case"] == "adaptive"
    basic = _reference_filter(rho=float(n * implied.rho), delta=1e-6)
    assert shown["accountants"]["basic"]["epsilon"] == pytest.approx(basic, rel=1e-8)
    assert shown["epsilon"] == pytest.approx(basic, rel=1e-8)  # (the Rényi curve of m* ties it)
    # (for a Gaussian's own claim the rho side is the smaller composition anyway: the claim's delta
    # is below the dataset's, where CKS of the implied rho beats it; the old choice found the same)
    assert old_smallest_combination(n, 0.5, 1e-8, float(implied.rho), 1e-6) == pytest.approx(basic, rel=1e-12)
    table = cli_main(url, "table", "--json").json()
    assert table["total_shown"]["values"]["a"] == pytest.approx(shown["epsilon"], rel=1e-12)
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(shown["epsilon"], rel=1e-8)
    assert cli_main(url, "audit", "verify").code == 0
    assert not math.isinf(shown["epsilon"])


def test_a_ledger_of_schema_13_has_its_caps_computed_again_with_the_fixed_sides(tmp_path):
    """A cap's running total holds the charge of each release: a ledger of schema 13 holds the
    combination the history favoured (the 30 claims, 3.0), which the schema 14 upgrade computes
    again, once, with an audit event; the cap then shows the rho side's figure and `audit verify`
    agrees (it compares the stored totals with the accounting rows)."""
    import json

    from test_accounting_rows import sql

    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(GAUSSIAN_DATASET)
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    (tmp_path / "r.yaml").write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: m{i}, reads: [a], status: published, published_at: \"2026-03-01T00:00:{i:02d}Z\", "
        f"mechanism: {{name: declared}}, guarantees: [{{protects: [a], epsilon: 0.1, delta: 1e-9}}, "
        f"{{protects: [a], rho: 0.02}}]}}\n" for i in range(30)))
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    expected = _reference_filter(rho=0.6, delta=1e-6)
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(expected, rel=1e-8)
    # as schema 13 would have left it: the 30 claims, chosen after the history
    (text,), = sql(url, "SELECT total FROM cap_totals")[0]
    stored = json.loads(text)
    stored["standalone"], stored["value"] = {"approx_epsilon": "3", "approx_delta": "3/100000000"}, "3"
    sql(url, f"UPDATE cap_totals SET total = '{json.dumps(stored)}'",
        "UPDATE ledger_meta SET value = '13' WHERE key = 'schema_version'")
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(expected, rel=1e-8)
    migrated, = sql(url, f"SELECT kind, subject FROM audit_events WHERE seq > {events}")
    assert migrated == [("ledger.migrated", "schema 14"), ("ledger.migrated", "schema 15"),
                        ("ledger.migrated", "schema 16"), ("ledger.migrated", "schema 17"), ("ledger.migrated", "schema 18"),
                        ("ledger.migrated", "schema 19"), ("ledger.migrated", "schema 20")]
    assert cli_main(url, "audit", "verify").code == 0
