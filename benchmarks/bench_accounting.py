"""How tight the ledger's figures are: each workload's budget (cap) figure and running figure
beside the exact figure, at the same delta, in one run.

The exact figure: for Gaussians alone, the closed form (Balle and Wang 2018, Thm 8: k Gaussians
of sigma / sensitivity m are one Gaussian of m / sqrt(k)), computed here with scipy; otherwise
dp_accounting's PLD accountant (pessimistic, so never below the true figure). The ledger's
figures come through its Python API: the running figure is `Ledger.subset`, the budget figure is
what `Ledger.caps` reports spent by a cap set at the exact figure (its filter chosen as
`cap set` chooses it: Gaussian DP for Gaussians, else the running figure; and for the other
workloads a Rényi-filter cap too, whose order follows the cap's epsilon and delta).

    python benchmarks/bench_accounting.py            # every workload at delta 1e-6 and 1e-9
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dp_accounting.pld import privacy_loss_distribution  # noqa: E402
from scipy import optimize, stats  # noqa: E402

import ledger  # noqa: E402

TARGETS = {"gaussian cap": 1.001, "other cap": 1.08, "running": 1.25}


def workloads():
    """(name, [(mechanism name, parameter)]): gaussian's parameter is sigma / sensitivity."""
    for k in (10, 100, 1000):
        for m in (10, 50):
            yield f"{k} Gaussians, sigma/sensitivity {m}", [("gaussian", m)] * k
    yield "100 Laplace, epsilon 0.1", [("laplace", 0.1)] * 100
    yield "20 pure 0.5 + 20 Gaussians (sigma/sensitivity 10)", [("pure", 0.5)] * 20 + [("gaussian", 10)] * 20


def exact_gaussian(mu: float, delta: float) -> float:
    """Balle and Wang 2018, Thm 8: the Gaussian mechanism of mu = sensitivity / sigma."""
    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    return optimize.brentq(excess, 0.0, 200.0, xtol=1e-12)


def exact_pld(parts, delta: float) -> float:
    """dp_accounting's PLDs composed (pessimistic): Gaussian and Laplace of sensitivity 1, a pure
    epsilon as randomized response (the worst epsilon-DP mechanism)."""
    composed = None
    for kind, value in parts:
        if kind == "gaussian":
            pld = privacy_loss_distribution.from_gaussian_mechanism(value, value_discretization_interval=1e-4)
        elif kind == "laplace":
            pld = privacy_loss_distribution.from_laplace_mechanism(1 / value, value_discretization_interval=1e-4)
        else:
            pld = privacy_loss_distribution.from_randomized_response(
                2 / (1 + math.exp(value)), 2, value_discretization_interval=1e-4)
        composed = pld if composed is None else composed.compose(pld)
    return composed.get_epsilon_for_delta(delta)


def exact(parts, delta: float) -> tuple[float, str]:
    if all(kind == "gaussian" for kind, _ in parts):
        mu = math.sqrt(sum(1 / m ** 2 for _, m in parts))
        return exact_gaussian(mu, delta), "Balle-Wang"
    return exact_pld(parts, delta), "dp_accounting PLD"


def release(i: int, kind: str, value) -> dict:
    if kind == "gaussian":
        mechanism = {"name": "gaussian", "sigma": value, "sensitivity": 1}
    elif kind == "laplace":
        mechanism = {"name": "laplace", "epsilon": str(value)}
    else:
        mechanism = {"name": "declared"}
    entry = {"id": f"r{i}", "reads": ["x"], "mechanism": mechanism}
    if kind == "pure":
        entry["guarantees"] = [{"protects": ["x"], "epsilon": str(value)}]
    return entry


def ledger_figures(parts, delta: float, cap_epsilon: float, chosen: str | None = None) -> tuple[float, float, str]:
    """(the cap's figure, the running figure, the cap's filter): a cap set at the exact figure with
    filter `chosen` (None: as `cap set` chooses) after the releases are recorded."""
    book = ledger.open("sqlite://")
    book.add_dataset({"dataset": "w", "delta": repr(delta), "variables": [{"name": "x"}]})
    book.record({"dataset": "w", "releases": [release(i, kind, value) for i, (kind, value) in enumerate(parts)]})
    running = book.subset(["x"]).epsilon
    book.set_cap(["x"], epsilon=repr(cap_epsilon), delta=repr(delta), filter=chosen)
    (check,) = book.caps()
    return float(check.after), running, check.cap.filter or ""


def main() -> None:
    print(f"{'workload':52} {'delta':>6} {'exact':>9} {'cap':>9} {'ratio':>7} {'running':>9} {'ratio':>7}  "
          "filter; exact by")
    misses = []
    for delta in (1e-6, 1e-9):
        for name, parts in workloads():
            started = time.perf_counter()
            truth, how = exact(parts, delta)
            gaussian_only = all(kind == "gaussian" for kind, _ in parts)
            for chosen in (None,) if gaussian_only else (None, "renyi"):
                cap, running, kind = ledger_figures(parts, delta, truth, chosen)
                cap_ratio, running_ratio = cap / truth, running / truth
                target = TARGETS["gaussian cap" if kind == "gaussian" else "other cap"]
                print(f"{name:52} {delta:>6.0e} {truth:9.4f} {cap:9.4f} {cap_ratio:7.4f} {running:9.4f} "
                      f"{running_ratio:7.4f}  {kind}; {how} ({time.perf_counter() - started:.1f} s)")
                if cap_ratio < 1 - 1e-9 or running_ratio < 1 - 1e-9:
                    misses.append(f"BELOW THE EXACT FIGURE: {name} at {delta:g}")
                if cap_ratio > target:
                    misses.append(f"cap target {target} missed ({kind}): {name} at {delta:g} ({cap_ratio:.4f})")
            if running_ratio > TARGETS["running"]:
                misses.append(f"running target {TARGETS['running']} missed: {name} at {delta:g} ({running_ratio:.4f})")
    print("targets: Gaussian-DP caps <= 1.001 x exact, other caps <= 1.08, running figures <= 1.25")
    for line in misses or ["every target met"]:
        print(line)


if __name__ == "__main__":
    main()
