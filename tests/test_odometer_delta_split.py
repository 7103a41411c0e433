"""Under-reports R1 (fixed, schema 17) and R2 (open, a strict xfail) of the adversarial review of
2026-11-24. R1's fix: the delta is split before any release between the statements of a plan
declared in advance (PLD and the best-order conversions: half, spend.DECLARED_SHARE) and the Rényi
filter's orders (the other half, 1/44 each), so that no statement printed at one moment uses a
share another statement printed later also uses. R2 still needs the approximate releases' own
deltas drawn from an allowance fixed in advance (a policy decision: README, "Accountants"); once
fixed, its strict xfail fails, so the marker must go with the fix.

Both use test_odometer's own criterion: a printed adaptive figure
must hold at every stopping time, i.e. for the history stopped at any stopping time tau (which
may watch the outputs), the hockey-stick divergence at the figure printed then,
E[(1 - e^(eps_tau - L_tau))+], is at most delta. Gaussian releases of rho = 9/200 each
(sigma 10/3, sensitivity 1): under the first dataset the loss L_t is a random walk with
N(rho, 2 rho) steps, propagated on a grid exactly as tests/test_odometer.py does (no sampling).

R1. Every adaptive history begins declared. After the first release is recorded and published,
    the subset is "declared" and prints the PLD figure (for one Gaussian this is the exact
    figure: the Gaussian's hockey-stick at it is its delta, closed form below). A release
    recorded after that publication makes the subset adaptive, and the 22 Rényi statements
    take their shares. Stop at t = 1 when L_1 exceeds the declared figure, and otherwise go on,
    stopping when L_t exceeds the filter figure. Before schema 17 the declared figure took the
    whole delta and the filter delta / 22 per order: 1.0975e-3 at delta 1e-3. Now the declared
    figure takes delta / 2 and each order delta / 44: 5.50e-4.

R2. The approximate releases' deltas are "taken off the top" when the figure is computed, not
    split in advance: figures printed before an (epsilon, delta) release was recorded used
    a fixed share per order of the whole delta. Stop when L_t exceeds the printed filter figure;
    on the paths that never do, record a (0, 0.99 delta) release at the end (chosen after seeing
    the outputs). The stopped branch spends what the filter spends, the late branch 0.99 delta:
    1.098e-3 at delta 1e-3 before schema 17 (the filter at delta / 22 per order spending 1.1e-4),
    1.046e-3 since (delta / 44 per order, 5.6e-5).

(The fixed-cap decision is not shown broken by either: with a fixed epsilon, stopping only
lowers the hockey-stick, so these are about the printed odometer figures.)
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction as F

import pytest
from scipy.stats import norm
from support import cli_ok, tick_ledger_clock
from test_odometer import stopped_hockey_stick

from ledger.accounting.spend import DECLARED_SHARE, Spend

RHO = F(9, 200)
DELTA = F(1, 1000)
T = 200


def filter_figure(t: int, approx_delta: F = F(0)) -> float:
    """What the ledger prints for t adaptive Gaussians (and an approximate release's delta)."""
    return float(Spend(rho=RHO * t, approx_delta=approx_delta).epsilon(DELTA))


@pytest.fixture(autouse=True)
def ticking(monkeypatch):
    tick_ledger_clock(monkeypatch)


run = cli_ok


def printed_after_each_release(url, tmp_path, count: int, late_approx: F | None = None) -> list[dict]:
    """Record, approve and publish `count` Gaussians one at a time, `subset a --json` after each."""
    (tmp_path / "ds.yaml").write_text("dataset: d\ndelta: 1e-3\nself_approval: true\nvariables: [{name: a}]\n")
    run(url, "dataset", "add", tmp_path / "ds.yaml")
    shown = []
    for k in range(1, count + 1):
        path = tmp_path / f"g{k}.yaml"
        path.write_text(f"dataset: d\nreleases:\n  - {{id: g{k}, reads: [a], "
                        "mechanism: {name: gaussian, sigma: 10/3, sensitivity: 1}}\n")
        run(url, "record", path)
        run(url, "approve", f"g{k}")
        run(url, "publish", f"g{k}")
        shown.append(run(url, "subset", "a", "--json").json())
    if late_approx is not None:
        path = tmp_path / "late.yaml"
        path.write_text(textwrap.dedent(f"""\
            dataset: d
            releases:
              - {{id: late, reads: [a], mechanism: {{name: declared}},
                  guarantees: [{{protects: [a], epsilon: 0, delta: "{late_approx}"}}]}}
            """))
        run(url, "record", path)
        shown.append(run(url, "subset", "a", "--json").json())
    return shown


def test_review_r1_the_declared_first_figure_is_outside_the_delta_split(ledger_url, tmp_path):
    """R1 (failed before schema 17: 1.0975e-3 > 1e-3; now 5.50e-4)."""
    shown = printed_after_each_release(ledger_url, tmp_path, 3)
    assert [s["case"] for s in shown] == ["declared", "adaptive", "adaptive"]
    first = float(shown[0]["epsilon"])
    # the declared figure of one Gaussian (mu = 3/10) is made at the declared statements' share of
    # delta (half), where its hockey-stick is that share itself: Balle and Wang 2018, Thm 8
    mu = 0.3
    exact_delta = norm.cdf(-first / mu + mu / 2) - math.exp(first) * norm.cdf(-first / mu - mu / 2)
    assert exact_delta == pytest.approx(float(DELTA * DECLARED_SHARE), rel=1e-3)
    # the adaptive figures are the filter's (checked against the CLI for t = 2, 3)
    assert [float(s["epsilon"]) for s in shown[1:]] == pytest.approx([filter_figure(2), filter_figure(3)], rel=1e-12)
    figures = [first] + [filter_figure(t) for t in range(2, T + 1)]
    spent = stopped_hockey_stick(figures, float(RHO), [0.0] + [0.3] * (T - 1))
    assert spent <= float(DELTA), f"stopped hockey-stick {spent:.4e} > delta {float(DELTA)}"


@pytest.mark.xfail(strict=True, reason="open under-report R2: approximate deltas are taken off the top, not split in advance")
def test_review_r2_an_approximate_delta_taken_off_the_top_after_figures_were_printed(ledger_url, tmp_path):
    """R2 (fails today: 1.046e-3 > 1e-3)."""
    late = F(99, 100000)
    shown = printed_after_each_release(ledger_url, tmp_path, 3, late_approx=late)
    assert [s["case"] for s in shown[1:]] == ["adaptive"] * 3
    # the figure printed with the late release is the filter's at the delta it leaves (the CLI agrees)
    assert float(shown[-1]["epsilon"]) == pytest.approx(filter_figure(3, late), rel=1e-12)
    figures = [filter_figure(t) for t in range(1, T + 1)]
    spent = stopped_hockey_stick(figures, float(RHO), 0.0, final_delta=float(late),
                                 final_figure=filter_figure(T, late))
    assert spent <= float(DELTA), f"stopped hockey-stick {spent:.4e} > delta {float(DELTA)}"
