"""The recording path's shortcuts give the very figures of the formulas they shortcut.

Recording one release at a time was bound by its Python; these shortcuts cut it without changing
a figure or a stored byte: the filter's per-order constants evaluated once (`order_epsilon`,
`rdp_filter_epsilon`), a running state's curves stacked once per set of event keys
(`_state_sums`), a total with nothing to choose among measured without composing (`budget.total_from_parts`),
and a refined check built without `dataclasses.replace` (`cap_accounting._with`). Each is
compared here, bit for bit, with the expression it replaces (written out below as it was), and a
ledger recorded one release at a time through them passes `audit verify` (which recomputes every
running total and accountant state) on SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from ledger.accounting import budget, cap_decisions, renyi_curves
from ledger.accounting.spend import FILTER_ORDERS, ORDER_SHARE, Spend, _up, order_epsilon
from ledger.core.records import Cap
from ledger.operations import cap_accounting

from support import cli_main


def _order_epsilon_as_written(pure, pure_rho, rho, delta):
    if delta <= 0:
        return math.inf
    if rho == 0 and pure == 0:
        return 0.0
    log_delta = math.log(delta)
    best = min(min(pure, a * pure_rho) + a * rho + math.log1p(-1 / a) - (log_delta + math.log(a)) / (a - 1)
               for a in FILTER_ORDERS)
    return _up(max(best, 0.0))


def _rdp_filter_as_written(curve, delta):
    if delta <= 0:
        return math.inf
    sub = curve[renyi_curves._grids()["_FILTER_INDEX"]]
    if not sub.any():
        return 0.0
    a = renyi_curves._grids()["FILTER_ORDERS"]
    eps = sub + np.log1p(-1 / a) - (math.log(delta * ORDER_SHARE) + np.log(a)) / (a - 1)
    return renyi_curves._up(max(float(eps.min()), 0.0))


def test_order_epsilon_is_the_formula_to_the_bit():
    rng = random.Random(1)
    for _ in range(2000):
        pure, rho = rng.choice([0.0, rng.uniform(0, 5)]), rng.choice([0.0, rng.uniform(0, 3), 10 ** rng.uniform(-9, 2)])
        pure_rho = rng.uniform(0, pure * pure / 2 + 1e-12)
        delta = 10 ** rng.uniform(-14, -1)
        order_epsilon.cache_clear()
        assert order_epsilon(pure, pure_rho, rho, delta) == _order_epsilon_as_written(pure, pure_rho, rho, delta)


def test_rdp_filter_epsilon_is_the_formula_to_the_bit():
    rng = np.random.default_rng(2)
    orders = renyi_curves._grids()["ORDERS"]
    for _ in range(500):
        curve = orders * rng.uniform(0, 0.5) + rng.uniform(0, 2) * (rng.random(len(orders)) < 0.5)
        delta = float(10 ** rng.uniform(-14, -1))
        assert renyi_curves.rdp_filter_epsilon(curve, delta) == _rdp_filter_as_written(curve, delta)
    assert renyi_curves.rdp_filter_epsilon(np.zeros_like(orders), 1e-9) == 0.0


def test_state_sums_are_the_stacked_sums_to_the_bit():
    """As a running state grows (counts at every record, a new key now and then), the sums over
    the cached matrix are those over the curves stacked again in key order (`summed_curve`)."""
    keys = ["laplace:1000", "dlaplace:1000:1", "gaussian:40", "zcdp:1/3200", "pure:1/7", "approx:1/9:1/10000000000000",
            "laplace:2000", "dlaplace:500:1", "gaussian:3/2"]
    rng = random.Random(3)
    counts: dict[str, int] = {}
    for _ in range(300):
        key = rng.choice(keys[:rng.randint(1, len(keys))])
        counts[key] = counts.get(key, 0) + rng.randint(1, 3)
        items = tuple(counts.items())
        curve, rho, approx_eps, approx_delta = renyi_curves._state_sums(items)
        summaries = [(renyi_curves._key_summary(k), c) for k, c in items]
        # in the canonical order (renyi_curves.summed_curve: the keys sorted), as a composition sums them
        stacked = [(s[0], c) for k, (s, c) in sorted(zip([k for k, _ in items], summaries)) if s[0] is not None]
        expected = (np.asarray([c for _, c in stacked], dtype=np.float64) @ np.asarray([s for s, _ in stacked])
                    if stacked else np.zeros_like(renyi_curves._grids()["ORDERS"]))
        assert np.array_equal(curve, expected) and curve.tobytes() == expected.tobytes()
        expected_rho = 0.0
        for s, c in summaries:
            if s[0] is not None:
                expected_rho += c * s[1]
        assert rho == expected_rho
        assert approx_eps == sum((c * s[2] for s, c in summaries if s[0] is None), Fraction(0))
        assert approx_delta == sum((c * s[3] for s, c in summaries if s[0] is None), Fraction(0))


def _cap(**numbers) -> Cap:
    return Cap("d", "c", frozenset({"a", "b"}), **numbers)


@pytest.mark.parametrize("cap", [_cap(epsilon=Fraction(5)), _cap(epsilon=Fraction(5), delta=Fraction(1, 10**9)),
                                 _cap(rho=Fraction(3))], ids=["pure", "at-delta", "rho"])
def test_finish_measures_as_cap_value(cap):
    """A total with no choices and no families: `total_from_parts`'s figure is `cap_value`'s."""
    spends = [Spend(pure=Fraction(1, 1000)), Spend(rho=Fraction(1, 3200)), Spend(pure=Fraction(1, 7)),
              Spend(approx_epsilon=Fraction(1, 9), approx_delta=Fraction(1, 10**13)), Spend(unbounded=True)]
    rng = random.Random(4)
    for _ in range(200):
        standalone = sum(rng.sample(spends[:4], rng.randint(0, 4)), Spend())
        if rng.random() < 0.05:
            standalone = spends[4]
        total = budget.total_from_parts(cap, standalone, {}, {}, [("r1", Fraction(1, 1000))])
        reference = budget.CapTotal(standalone, {}, total.drivers, None, ())
        assert total.value == budget.cap_value(cap, reference)
        assert type(total.value) is type(budget.cap_value(cap, reference))


def test_refined_check_is_the_replaced_check():
    cap = _cap(epsilon=Fraction(5), delta=Fraction(1, 10**9))
    check = budget.CapCheck(cap, Fraction(1, 10), Fraction(1, 100), Fraction(11, 100), Fraction(489, 100), "ok",
                            (("r1", Fraction(1, 10)),), budget.CapTotal(), (budget.Charge("r2", None, Fraction(1, 100)),))
    for before, after in [(Fraction(1, 20), 0.07), (0.2, 0.3), (math.inf, math.inf), (Fraction(1, 10), Fraction(11, 100))]:
        decision_before = cap_decisions.Decision("rdp", before, "adaptive", "t")
        decision_after = cap_decisions.Decision("rdp", after, "adaptive", "t")
        current, value = before, after  # a cap's figure is its filter's alone
        charge = check.charge if math.isinf(float(current)) else budget.difference(value, current)
        expected = dataclasses.replace(check, current=current, after=value, charge=charge,
                                       headroom=budget.difference(cap.limit, value, down=True),
                                       status=budget.status(cap, value), decision=decision_after)
        got = cap_accounting._with(check, decision_before, decision_after)
        assert got == expected and got.decision is decision_after and got.after_total is check.after_total


def test_one_by_one_recording_verifies(ledger_url, tmp_path):
    """Releases recorded one at a time (published and planned; pure, Gaussian, (epsilon, delta) and
    rho) against caps in every unit: `audit verify` recomputes every running total and state."""
    dataset = tmp_path / "d.yaml"
    dataset.write_text("dataset: d\nself_approval: true\nvariables: [{name: a}, {name: b}, {name: c}, {name: e}]\ncaps:\n"
                       "  - {subset: all, epsilon: 1000, delta: 1e-9}\n  - {name: ab, subset: [a, b], rho: 1000}\n"
                       "  - {name: bc, subset: [b, c], epsilon: 1000}\n"
                       "  - {name: ce, subset: [c, e], epsilon: 1000, delta: 1e-6}\n")
    assert cli_main(ledger_url, "dataset", "add", dataset).code == 0
    rng = random.Random(6)
    kinds = ["mechanism: {{name: laplace, epsilon: 0.01}}", "mechanism: {{name: geometric, epsilon: 0.002}}",
             "mechanism: {{name: gaussian, sigma: 40, sensitivity: 1}}",
             "mechanism: {{name: declared}}, guarantees: [{{protects: [{reads}], epsilon: 1/50, delta: 1e-12}}]",
             "mechanism: {{name: declared}}, guarantees: [{{protects: [{reads}], rho: 1/900}}]"]
    admitted = 0
    for k in range(40):
        reads = ", ".join(rng.sample(["a", "b", "c", "e"], rng.randint(1, 3)))
        kind = rng.choice(kinds).format(reads=reads)
        published = ", status: published, published_at: 2026-01-01T00:00:00Z" if k % 3 else ""
        path = tmp_path / f"r{k}.yaml"
        path.write_text(f"dataset: d\nreleases:\n  - {{id: r{k}, reads: [{reads}], {kind}{published}}}\n")
        run = cli_main(ledger_url, "record", path)
        assert run.code in (0, 1), run.err  # (a pure or rho cap refuses what it cannot hold: exit 1)
        admitted += run.code == 0
    assert admitted >= 15
    run = cli_main(ledger_url, "audit", "verify")
    assert run.code == 0, run.out + run.err
    assert "intact" in run.out
