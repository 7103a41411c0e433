"""The running figure of a subset is the smallest of statements fixed in advance (docs/explanation/accounting.md).

When releases may be chosen after earlier outputs were seen, a figure may be the smallest of
several statements only if their deltas sum to the delta: each statement bounds
E[(1 - e^(eps - L))+] at its own stopping time by its share (a union bound). The statements are
the pure sum (free: it holds on every outcome) and the Rényi orders of
`ledger.accounting.spend.FILTER_ORDERS`, each at 1/22 of the half of the delta the approximate
releases' allowance leaves. These tests check the figures against the closed forms (conftest's
`reference_filter`, written out independently), a cap held to them, and a release's own cell.
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.accounting import cap_decisions
from ledger.accounting.spend import Spend, cks_epsilon

from conftest import REFERENCE_ALLOWANCE, REFERENCE_FILTER_ORDERS, _reference_filter
from support import cli_main

DATASET = "dataset: d\nself_approval: true\ndelta: 1e-6\nvariables:\n  - {name: a, classification: sensitive}\ncaps:\n  - {subset: [a], epsilon: LIMIT, delta: 1e-6, filter: renyi}\n"


fractions = st.fractions(min_value=0, max_value=20, max_denominator=1000)


@settings(max_examples=300)
@given(pure=fractions, extra_pure_rho=fractions, rho=fractions,
       approx=st.one_of(st.none(), st.tuples(st.fractions(min_value=0, max_value=3, max_denominator=100),
                                             st.sampled_from([F(0), F(1, 10**8), F(1, 10**7), F(5, 10**7)]))),
       delta=st.sampled_from([F(1, 10**6), F(1, 10**9), F(1, 10**5)]))
def test_the_basic_figure_is_the_smallest_statement_at_its_share(pure, extra_pure_rho, rho, approx, delta):
    """Spend.epsilon against the closed forms: the pure sum when there is no rho; else the smallest
    fixed order's min(pure, a * pure_rho) + a * rho converted at 1/44 of the delta (CKS 2020, Prop 12;
    the other half is the approximate releases' allowance), plus the approximate epsilons; ∞ when the
    approximate deltas pass the allowance."""
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


def laplace_divergence(alpha: float, epsilon: float) -> float:
    """The Rényi divergence of order alpha of the Laplace mechanism of epsilon (scale 1 / epsilon,
    sensitivity 1): log(alpha / (2 alpha - 1) e^((alpha - 1) eps) + (alpha - 1) / (2 alpha - 1)
    e^(-alpha eps)) / (alpha - 1) (Mironov 2017, Prop 6)."""
    return math.log(alpha / (2 * alpha - 1) * math.exp((alpha - 1) * epsilon)
                    + (alpha - 1) / (2 * alpha - 1) * math.exp(-alpha * epsilon)) / (alpha - 1)


def prop12(divergence: float, alpha: float, delta: float) -> float:
    """Canonne, Kamath and Steinke 2020, Prop 12: epsilon at delta of a Rényi bound at order alpha."""
    return divergence + math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)


def test_a_hundred_laplace_releases_published_one_by_one_are_held_to_the_cap(tmp_path):
    """100 Laplace releases of 0.1, each published before the next was recorded, delta 1e-6. The
    zCDP conversion at the best order gives 5.2215 at the whole delta; it does not hold at every
    stopping time. The running figure is the smallest of the pure sum and the Rényi orders' at 1/44
    of the delta each (the Laplace curve at each order; the other half of the delta is the
    allowance). A cap of 5.3 at 1e-6, a Rényi filter at the order fixed when it was set (an input
    here), holds by its order's figure at half the delta and by the running figure (their shares
    sum to the delta): it admits exactly while the smaller is within 5.3."""
    from types import SimpleNamespace

    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET.replace("LIMIT", "5.3"))
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    assert round(cks_epsilon(F(1, 2), 1e-6), 4) == 5.2215  # rho 100 * 0.1^2 / 2 (Bun and Steinke 2016, Prop 3.3)
    share = 1e-6 * (1 - REFERENCE_ALLOWANCE) / len(REFERENCE_FILTER_ORDERS)  # 1e-6 / 44
    order = cap_decisions.cap_order(SimpleNamespace(epsilon=F(53, 10), delta=F(1, 10**6), allowance=F(1, 2)))

    def running(n):
        return min(n * 0.1, min(prop12(n * laplace_divergence(a, 0.1), a, share) for a in REFERENCE_FILTER_ORDERS))

    def held(n):
        return min(running(n), prop12(n * laplace_divergence(order, 0.1), order, 1e-6 / 2))

    admitted = 0
    for i in range(100):
        (tmp_path / "r.yaml").write_text(
            f"dataset: d\nreleases:\n  - {{id: l{i}, reads: [a], status: published, "
            f"published_at: \"2026-03-01T00:{i // 60:02d}:{i % 60:02d}Z\", mechanism: {{name: laplace, epsilon: 0.1}}}}\n")
        result = cli_main(url, "record", tmp_path / "r.yaml")
        assert result.code == (0 if held(admitted + 1) <= 5.3 else 1), (i, result.out)
        admitted += result.code == 0
    assert running(admitted) > 5.3 >= held(admitted)  # (the running figure alone would have stopped it)
    shown = cli_main(url, "subset", "a", "--json").json()
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert shown["epsilon"] == pytest.approx(running(admitted), rel=1e-8)
    assert cap["current"] == pytest.approx(held(admitted), rel=1e-8)
    assert cli_main(url, "audit", "verify").code == 0


def test_a_releases_own_cell_is_the_figure_of_it_alone(tmp_path):
    """A release's cell in `table` (and its charge as a cap's driver) is the running figure of that
    release alone: the Rényi filter's of rho = 1 / (2 * 2^2) = 1/8, the figure of a subset it alone
    reads ({b}); a total is never below the only cell it sums. {a}, read by both, holds rho 1/4."""
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
    alone = _reference_filter(rho=1 / 8, delta=1e-6)
    table = cli_main(url, "table", "--json").json()
    cells = {row["release"]: row["values"] for row in table["rows"]}
    assert cells["g"]["a"] == pytest.approx(alone, rel=1e-9) and cells["h"]["a"] == pytest.approx(alone, rel=1e-9)
    assert cells["g"]["a"] >= alone
    only = cli_main(url, "subset", "b", "--json").json()
    assert only["epsilon"] == pytest.approx(cells["g"]["b"], rel=1e-12) == pytest.approx(alone, rel=1e-9)
    both = cli_main(url, "subset", "a", "--json").json()
    assert both["epsilon"] == pytest.approx(_reference_filter(rho=1 / 4, delta=1e-6), rel=1e-8)
    assert table["total_shown"]["values"]["a"] == pytest.approx(both["epsilon"], rel=1e-12)
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert {d["release"]: d["value"] for d in cap["drivers"]} == pytest.approx({"g": alone, "h": alone}, rel=1e-9)
