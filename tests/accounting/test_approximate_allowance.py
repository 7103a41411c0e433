"""Approximate releases draw their deltas from an allowance fixed in advance (docs/explanation/accounting.md).

An (epsilon, delta) release fails outright with probability up to its delta. Half of every delta
a figure is stated at (spend.ALLOWANCE) is kept for those chances; the statements themselves (the
Rényi filter at 22 orders, 1/44 of the delta each; a cap's filter at delta / 2) use the other
half, always, whatever approximate releases come later. So a figure printed before an
approximate release still holds after it, and a release that would take a subset's approximate
deltas past the allowance is refused (exit 1, nothing written).

A cap {x} of epsilon 2 at delta 1e-6 is a Rényi filter at one order A fixed when it was set
(cap_decisions.cap_order, an input here); its figure is CKS 2020 Prop 12 at that order, computed
here: A * rho + ln(1 - 1/A) - (ln(delta / 2) + ln A) / (A - 1).
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction as F
from types import SimpleNamespace

import pytest
from conftest import REFERENCE_ALLOWANCE, REFERENCE_FILTER_ORDERS
from stopping_rules import best_stopping_spend
from support import cli_main, cli_ok, dump_tables, tick_ledger_clock

from ledger.accounting import cap_decisions, spend

DELTA = 1e-6
DATASET = textwrap.dedent("""\
    dataset: d
    delta: 1e-6
    self_approval: true
    variables: [{name: x}, {name: y}]
    caps:
      - {name: cx, subset: [x], epsilon: 2, delta: 1e-6, filter: renyi}
    """)

run = cli_ok


@pytest.fixture(autouse=True)
def ticking(monkeypatch):
    tick_ledger_clock(monkeypatch)


def test_the_allowance_and_the_orders_shares_sum_to_the_delta_at_most():
    assert spend.ALLOWANCE == F(REFERENCE_ALLOWANCE) == F(1, 2)
    assert tuple(spend.FILTER_ORDERS) == REFERENCE_FILTER_ORDERS
    assert math.fsum([float(spend.ALLOWANCE)] + [(1 - float(spend.ALLOWANCE)) * spend.ORDER_SHARE]
                     * len(spend.FILTER_ORDERS)) <= 1


def renyi_cap_figure(order: float, rho: float, delta: float = DELTA) -> float:
    """A Rényi-filter cap's epsilon at its order for summed rho: CKS 2020 Prop 12 at delta / 2."""
    return order * rho + math.log1p(-1 / order) - (math.log(delta / 2) + math.log(order)) / (order - 1)


def renyi_cap_room(order: float, limit: float, delta: float = DELTA) -> float:
    """The largest summed rho the cap admits: renyi_cap_figure(order, rho) = limit, solved."""
    return (limit - math.log1p(-1 / order) + (math.log(delta / 2) + math.log(order)) / (order - 1)) / order


def release_file(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text("dataset: d\nreleases:\n  - " + body + "\n")
    return path


def approximate(rid: str, subset: str, delta: str) -> str:
    return (f"{{id: {rid}, reads: [{subset}], mechanism: {{name: declared}}, "
            f"guarantees: [{{protects: [{subset}], epsilon: 0, delta: \"{delta}\"}}]}}")


def gaussian(rid: str, rho) -> str:
    return (f"{{id: {rid}, reads: [x], status: published, published_at: \"2026-01-01T00:00:00Z\", "
            f"mechanism: {{name: gaussian, rho: \"{rho}\"}}}}")


@pytest.fixture
def capped(tmp_path):
    """The cap {x} at epsilon 2, delta 1e-6, with a published Gaussian of rho 0.04237 under it."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "ds.yaml").write_text(DATASET)
    run(url, "dataset", "add", tmp_path / "ds.yaml")
    run(url, "record", release_file(tmp_path, "g", gaussian("g", "0.04237")))
    return url


def cap_cx(url) -> dict:
    (cap,) = run(url, "cap", "list", "--json").json()
    return cap


def test_the_caps_figure_is_its_renyi_filters_at_its_order(capped):
    order = cap_decisions.cap_order(SimpleNamespace(epsilon=F(2), delta=F(1, 10**6), allowance=F(1, 2)))
    cap = cap_cx(capped)
    assert f"Rényi filter at order {order:g}" in cap["theorem"]
    assert cap["current"] == pytest.approx(renyi_cap_figure(order, 0.04237), rel=1e-9)
    assert cap["current"] >= renyi_cap_figure(order, 0.04237)


def test_an_approximate_release_past_the_allowance_is_refused_under_the_cap(capped, tmp_path):
    """(0, 9.99896e-7) on {x}: within the cap's delta, past its allowance (half of it): refused by
    record and by check, exit 1, nothing written."""
    before = dump_tables(capped)
    late = release_file(tmp_path, "late", approximate("late", "x", "9.99896e-7"))
    for command in ("record", "check"):
        refused = cli_main(capped, command, late)
        assert refused.code == 1, (command, refused.out, refused.err)
        said = refused.out + refused.err
        assert "allowance" in said and "{x}" in said  # why, and on which subset (before any cap's ∞)
    assert dump_tables(capped) == before
    assert "late" not in {r["id"] for r in run(capped, "releases", "--json").json()}


def test_the_refusal_under_a_cap_says_the_allowance_would_be_passed_on_the_subset(capped, tmp_path):
    refused = cli_main(capped, "record", release_file(tmp_path, "late", approximate("late", "x", "9.99896e-7")))
    said = refused.out + refused.err
    assert refused.code == 1
    assert "larger than the cap's delta" not in said
    assert "allowance" in said and "{x}" in said


def test_an_approximate_release_past_the_allowance_is_refused_naming_its_subset(capped, tmp_path):
    """{y} has no cap: the allowance alone refuses, naming {y} and the allowance, half of 1e-6."""
    before = dump_tables(capped)
    refused = cli_main(capped, "record", release_file(tmp_path, "late", approximate("late", "y", "9.99896e-7")))
    assert refused.code == 1
    said = refused.out + refused.err
    assert "allowance would be passed" in said and "approximate deltas on {y} would reach" in said
    assert dump_tables(capped) == before


def test_a_gaussian_taking_the_rest_is_admitted_only_while_the_caps_figure_is_within_it(capped, tmp_path):
    """Within the allowance, (0, 4e-7) on {x} is admitted and moves the cap's figure by nothing
    (epsilon 0 at its order; its delta is the allowance's); then a Gaussian is admitted exactly
    while the Rényi figure at the cap's order stays within 2."""
    order = cap_decisions.cap_order(SimpleNamespace(epsilon=F(2), delta=F(1, 10**6), allowance=F(1, 2)))
    run(capped, "record", release_file(tmp_path, "small", approximate("small", "x", "4e-7")))
    assert cap_cx(capped)["current"] == pytest.approx(renyi_cap_figure(order, 0.04237), rel=1e-9)
    rest = renyi_cap_room(order, 2) - 0.04237
    assert rest > 0
    before = dump_tables(capped)
    over = cli_main(capped, "record", release_file(tmp_path, "over", gaussian("over", F(rest * (1 + 1e-6)))))
    assert over.code == 1 and "d/cx" in over.out + over.err
    assert dump_tables(capped) == before
    run(capped, "record", release_file(tmp_path, "rest", gaussian("rest", F(rest * (1 - 1e-6)))))
    cap = cap_cx(capped)
    assert cap["current"] == pytest.approx(renyi_cap_figure(order, 0.04237 + rest), rel=1e-6)
    assert renyi_cap_figure(order, 0.04237 + rest * (1 - 1e-6)) <= cap["current"] <= 2
    assert cli_main(capped, "audit", "verify").code == 0


def test_figures_printed_before_an_approximate_release_still_hold_after_it(tmp_path, reference_filter):
    """Gaussians of sigma 10/3 published one at a time on {y} (no cap), delta 1e-3; a history that
    stops when the loss passes the printed figure, or else ends with a (0, 0.49e-3) release chosen
    after seeing the outputs. The figures never changed for it (the filter always uses half the
    delta), so the best stopping rule spends at most its own spend plus the late delta (the late
    release fails with probability its delta): at most delta. A (0, 0.99e-3) release, which would
    have made the earlier figures wrong, is refused."""
    url = f"sqlite:///{tmp_path / 'y.db'}"
    (tmp_path / "ds.yaml").write_text("dataset: d\ndelta: 1e-3\nself_approval: true\nvariables: [{name: y}]\n")
    run(url, "dataset", "add", tmp_path / "ds.yaml")
    shown = []
    for k in (1, 2, 3):
        run(url, "record", release_file(tmp_path, f"g{k}", f"{{id: g{k}, reads: [y], "
                                        "mechanism: {name: gaussian, sigma: 10/3, sensitivity: 1}}"))
        run(url, "approve", f"g{k}")
        run(url, "publish", f"g{k}")
        shown.append(run(url, "subset", "y", "--json").json()["epsilon"])
    refused = cli_main(url, "record", release_file(tmp_path, "late", approximate("late", "y", "0.99e-3")))
    assert refused.code == 1 and "{y}" in refused.out + refused.err
    run(url, "record", release_file(tmp_path, "late", approximate("late", "y", "0.49e-3")))
    rho = 9 / 200  # 1 / (2 (10/3)^2)
    after = run(url, "subset", "y", "--json").json()["epsilon"]
    assert after == pytest.approx(shown[-1], rel=1e-12)  # the late release's epsilon is 0, its delta the allowance's
    assert shown == pytest.approx([reference_filter(rho=rho * t, delta=1e-3) for t in (1, 2, 3)], rel=1e-9)
    figures = shown + [reference_filter(rho=rho * t, delta=1e-3) for t in range(4, 201)]
    assert best_stopping_spend([0.3] * 200, figures) + 0.49e-3 <= 1e-3
