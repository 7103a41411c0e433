"""The adaptive figure is the smallest of statements fixed in advance, the delta split among them.

When releases may be chosen after earlier outputs were seen (DESIGN 2.10), a figure (and a cap
decision) may be the smallest of several statements only if their deltas sum to the delta: each
statement bounds E[(1 - e^(eps - L))+] at its own stopping time by its share, and the run stops
at the latest of them (a union bound). A first review found the zCDP filter at the whole delta
beside the Rényi orders (valid only at about twice the delta); the split that followed gave the
zCDP conversion half the delta, but a second review found that conversion is not valid at every
stopping time at all (its order follows the realized rho: tests/test_odometer.py). The statements
are now the Rényi orders of `ledger.accounting.spend.FILTER_ORDERS`, each at 1/44 of the delta, the
pure sum, free, and (a third review, R1: a subset declared first and adaptive later prints both
kinds along one history) the non-adaptive statements of a plan declared in advance (its PLD, its
Rényi curve at the best order), together at the other half of the delta (`DECLARED_SHARE`). These
tests check the shares, the figures against the closed forms (conftest's `reference_filter`,
written out independently), and a cap held to the figure.
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.accounting import accountants
from ledger.accounting.spend import DECLARED_SHARE, FILTER_ORDERS, ORDER_SHARE, Spend, cks_epsilon

from conftest import REFERENCE_DECLARED_PART, REFERENCE_FILTER_ORDERS, _reference_filter
from support import cli_main

DATASET = "dataset: d\ndelta: 1e-6\nvariables:\n  - {name: a, classification: sensitive}\ncaps:\n  - {subset: [a], epsilon: LIMIT, delta: 1e-6}\n"


def test_the_shares_of_the_statements_sum_to_the_delta_at_most():
    assert tuple(FILTER_ORDERS) == REFERENCE_FILTER_ORDERS
    assert DECLARED_SHARE == REFERENCE_DECLARED_PART
    # the declared statements' share and the orders' shares together: the delta at most
    assert float(DECLARED_SHARE) + ORDER_SHARE * len(FILTER_ORDERS) <= 1
    assert math.fsum([float(DECLARED_SHARE)] + [ORDER_SHARE] * len(FILTER_ORDERS)) <= 1
    assert ORDER_SHARE * len(FILTER_ORDERS) <= 1 - REFERENCE_DECLARED_PART
    # the accountants' Rényi filter uses the same orders
    assert [float(a) for a in accountants.FILTER_ORDERS] == [float(a) for a in FILTER_ORDERS]


fractions = st.fractions(min_value=0, max_value=20, max_denominator=1000)


@settings(max_examples=300)
@given(pure=fractions, extra_pure_rho=fractions, rho=fractions,
       approx=st.one_of(st.none(), st.tuples(st.fractions(min_value=0, max_value=3, max_denominator=100),
                                             st.sampled_from([F(0), F(1, 10**8), F(1, 10**7), F(5, 10**7)]))),
       delta=st.sampled_from([F(1, 10**6), F(1, 10**9), F(1, 10**5)]))
def test_the_basic_figure_is_the_smallest_statement_at_its_share(pure, extra_pure_rho, rho, approx, delta):
    """Spend.epsilon against the closed forms: the pure sum when there is no rho; else the smallest
    fixed order's min(pure, a * pure_rho) + a * rho converted at 1/44 of the delta left (CKS 2020,
    Prop 12; the other half is the declared statements')."""
    # pure_rho is a sum of epsilon_i^2 / 2 over the pure releases: at most pure^2 / 2, at least
    # any one release's share; any value in (0, pure^2 / 2] can arise
    pure_rho = min(pure * pure / 2, extra_pure_rho) if pure else F(0)
    if pure and not pure_rho:
        pure_rho = pure * pure / 2
    approx_epsilon, approx_delta = approx or (F(0), F(0))
    spend = Spend(pure=pure, approx_epsilon=approx_epsilon, approx_delta=approx_delta, rho=rho, pure_rho=pure_rho)
    expected = _reference_filter(pure, pure_rho, rho, approx_epsilon, approx_delta, delta)
    got = spend.epsilon(delta)
    if math.isinf(expected):
        assert math.isinf(float(got))
        return
    assert float(got) >= expected * (1 - 1e-12) - 1e-15  # never below (the reference searches no finer)
    assert float(got) <= expected * (1 + 1e-9) + 1e-12


def test_a_hundred_laplace_releases_published_one_by_one_are_held_to_the_split_figure(tmp_path):
    """The first review's example: 100 Laplace releases of 0.1, each published before the next was
    recorded (adaptive), delta 1e-6. The zCDP conversion gave 5.2215 at the whole delta, 5.3609 at
    half of it; neither holds at every stopping time. The figure is the Rényi orders' at 1/44 of the
    delta each (the Laplace curve at each order; the other half of the delta is the declared
    statements'), which a cap of 5.3 is held to: the releases it admits are fewer than the 100 the
    first rule admitted."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET.replace("LIMIT", "5.3"))
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    assert round(cks_epsilon(F(1, 2), 1e-6), 4) == 5.2215  # rho 100 * 0.1^2 / 2 (Bun and Steinke 2016, Prop 3.3)
    for i in range(100):
        (tmp_path / "r.yaml").write_text(
            f"dataset: d\nreleases:\n  - {{id: l{i}, reads: [a], status: published, "
            f"published_at: \"2026-03-01T00:{i // 60:02d}:{i % 60:02d}Z\", mechanism: {{name: laplace, epsilon: 0.1}}}}\n")
        result = cli_main(url, "record", tmp_path / "r.yaml")
        if result.code != 0:
            break
    assert result.code == 1, "the first rule admitted all 100 (5.2215 <= 5.3)"
    admitted = i
    shown = cli_main(url, "subset", "a", "--json").json()
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert shown["epsilon"] == pytest.approx(cap["current"], rel=1e-8)
    # the figure held: the smallest of the fixed orders' statements for the releases admitted
    curve = admitted * accountants.laplace_curve(10.0)[accountants._FILTER_INDEX]
    share = 1e-6 * (1 - REFERENCE_DECLARED_PART) / len(REFERENCE_FILTER_ORDERS)  # 1e-6 / 44
    orders = min(c + math.log1p(-1 / a) - (math.log(share) + math.log(a)) / (a - 1)
                 for c, a in zip(curve, accountants.FILTER_ORDERS))
    assert shown["epsilon"] == pytest.approx(orders, rel=1e-8) and orders <= 5.3
    with_one_more = min(c + math.log1p(-1 / a) - (math.log(share) + math.log(a)) / (a - 1) for c, a in
                        zip((admitted + 1) * accountants.laplace_curve(10.0)[accountants._FILTER_INDEX],
                            accountants.FILTER_ORDERS))
    assert with_one_more > 5.3  # refused exactly where the figure would pass the cap
    assert cli_main(url, "audit", "verify").code == 0


def test_a_ledger_of_schema_11_has_its_delta_caps_figures_computed_again(tmp_path):
    """A cap at a delta keeps its figure in its running total: a ledger made before the split
    (schema 11) holds the old figure, which the upgrades (schemas 13, 15 and 17) compute again, once,
    each with an audit event; `audit verify` agrees, and the cap shows the fixed orders' figure."""
    from test_accounting_rows import sql

    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET.replace("LIMIT", "50"))
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    (tmp_path / "r.yaml").write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: g{i}, reads: [a], status: published, published_at: \"2026-03-01T00:00:0{i}Z\", "
        f"mechanism: {{name: gaussian, rho: \"1/4\"}}}}\n" for i in range(4)))
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(_reference_filter(rho=1, delta=1e-6), rel=1e-9)
    # as schema 11 left it: the figure at the whole delta in the running total
    (text,), = sql(url, "SELECT total FROM cap_totals")[0]
    import json
    stored = json.loads(text)
    old = repr(cks_epsilon(F(1), 1e-6))
    stored["value"] = old
    sql(url, f"UPDATE cap_totals SET total = '{json.dumps(stored)}'",
        "UPDATE ledger_meta SET value = '11' WHERE key = 'schema_version'")
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(_reference_filter(rho=1, delta=1e-6), rel=1e-9)
    migrated, = sql(url, f"SELECT kind, subject FROM audit_events WHERE seq > {events}")
    assert migrated == [("ledger.migrated", "schema 12"), ("ledger.migrated", "schema 13"), ("ledger.migrated", "schema 14"),
                        ("ledger.migrated", "schema 15"),
                        ("ledger.migrated", "schema 16"), ("ledger.migrated", "schema 17"), ("ledger.migrated", "schema 18")]
    assert cli_main(url, "audit", "verify").code == 0


def test_a_releases_own_cell_is_its_figure_alone_at_the_whole_delta(tmp_path, reference_cks):
    """One release is one mechanism, not a composition: its cell in `table` (and its charge as a
    cap's driver) converts its rho at the whole delta (CKS 2020: 2.42). A subset holding it alone is
    a plan declared in advance, whose figure is printed along the subset's history (it may turn
    adaptive): its Rényi figure is made at the declared statements' half of the delta (2.49, above
    the cell), its PLD figure there too; the total of two, adaptive, is the split figure. (With the
    basic filter's half delta, before, the cell stood at 2.49.)"""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET.replace("LIMIT", "50").replace(
        "  - {name: a, classification: sensitive}\n", "  - {name: a, classification: sensitive}\n  - {name: b}\n"))
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    (tmp_path / "r.yaml").write_text(
        "dataset: d\nreleases:\n"
        "  - {id: g, reads: [a, b], status: published, published_at: '2026-03-01T00:00:00Z', "
        "mechanism: {name: gaussian, sigma: 2, sensitivity: 1}}\n"
        "  - {id: h, reads: [a], status: published, published_at: '2026-03-02T00:00:00Z', "
        "mechanism: {name: gaussian, sigma: 2, sensitivity: 1}}\n")
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    alone = reference_cks(1 / 8, 1e-6)  # rho = 1 / (2 * 2^2)
    table = cli_main(url, "table", "--json").json()
    cells = {row["release"]: row["values"] for row in table["rows"]}
    assert cells["g"]["a"] == pytest.approx(alone, rel=1e-9) and cells["h"]["a"] == pytest.approx(alone, rel=1e-9)
    # {b} holds g alone (declared: one release): its Rényi figure is CKS at the declared statements'
    # share of the delta, half of it; the printed one (PLD, at that share too) no more, never below
    # the Gaussian's exact profile there (Balle and Wang 2018, Thm 8; sensitivity / sigma = 1/2)
    from exact_profiles import epsilon_at

    declared_delta = 1e-6 * REFERENCE_DECLARED_PART
    only = cli_main(url, "subset", "b", "--json").json()
    assert only["case"] == "declared"
    assert only["accountants"]["rdp"]["epsilon"] == pytest.approx(reference_cks(1 / 8, declared_delta), rel=1e-9)
    assert only["accountants"]["rdp"]["epsilon"] > alone  # (2.4905 > 2.4191: the cell is at the whole delta)
    assert only["epsilon"] <= only["accountants"]["rdp"]["epsilon"]
    assert only["epsilon"] >= epsilon_at(declared_delta, s=0.5, high=100.0)
    assert only["epsilon"] <= alone
    # {a} holds both, recorded after each other's publication: the split figure, above either cell
    both = cli_main(url, "subset", "a", "--json").json()
    assert both["case"] == "adaptive"
    assert both["epsilon"] == pytest.approx(_reference_filter(rho=1 / 4, delta=1e-6), rel=1e-8)
    assert table["total_shown"]["values"]["a"] == pytest.approx(both["epsilon"], rel=1e-12)
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert {d["release"]: d["value"] for d in cap["drivers"]} == pytest.approx({"g": alone, "h": alone}, rel=1e-9)
