"""What a history that watches its outputs spends against the figures a ledger printed (for tests).

A figure printed after t releases must hold for the history stopped at any stopping time tau, one
that may depend on the outputs seen so far (an odometer: Rogers, Roth, Ullman and Vadhan 2016).
The quantity (epsilon, delta)-DP bounds is the hockey-stick divergence; for the history stopped
at tau with the figure eps_tau printed then it is E[(1 - e^(eps_tau - L_tau))+] under the first
dataset, L the privacy loss (docs/explanation/accounting.md, "Criterion proved"). For Gaussian
releases of mu_k = sensitivity / sigma_k the loss is a sum of independent N(mu_k^2 / 2, mu_k^2)
steps, and the adversary knows the neighbouring pair (as DP assumes), so the loss so far is all a
stopping rule needs:

- `best_stopping_spend`: the largest spend over every stopping rule, by backward induction on a
  grid of the loss (the optimal rule stops when stopping is worth more than going on), the last
  release's term in closed form (Balle and Wang 2018, Thm 8);
- `stopped_hockey_stick`: the spend of one rule, "stop at the first t where L_t passes eps_t by a
  gap", by propagating L's distribution on a grid (no sampling), optionally with a (0, delta)
  release appended on the paths not stopped.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.signal import oaconvolve
from scipy.stats import norm


def gaussian_hockey_stick(mu, epsilon):
    """delta(epsilon) of a Gaussian of mu: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Balle and
    Wang 2018, Thm 8), i.e. E[(1 - e^(eps - L))+] for L ~ N(mu^2 / 2, mu^2); arrays allowed."""
    epsilon = np.asarray(epsilon, dtype=float)
    # e^eps Phi(b) in logs, so that a very negative epsilon (a loss far past the figure) stays finite
    tail = np.exp(epsilon + norm.logcdf(-epsilon / mu - mu / 2))
    return np.clip(norm.cdf(-epsilon / mu + mu / 2) - tail, 0.0, 1.0)


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon at which a Gaussian of mu is (epsilon, delta)-DP (Balle and Wang 2018)."""
    return brentq(lambda e: float(gaussian_hockey_stick(mu, e)) - delta, 0, 1000, xtol=1e-14)


def _stop_now(figure: float, loss: np.ndarray) -> np.ndarray:
    """(1 - e^(figure - L))+: what stopping with the figure `figure` at loss L is worth."""
    return np.where(loss > figure, -np.expm1(np.minimum(figure - loss, 0.0)), 0.0)


def _step_kernel(mu: float, h: float) -> tuple[int, np.ndarray]:
    """The exact bin probabilities of one step N(mu^2 / 2, mu^2) on a grid of bins h: (first offset, weights)."""
    mean, sd = mu * mu / 2, mu
    first, last = math.floor((mean - 12 * sd) / h), math.ceil((mean + 12 * sd) / h)
    offsets = np.arange(first, last + 1) * h
    return first, norm.cdf(offsets + h / 2, mean, sd) - norm.cdf(offsets - h / 2, mean, sd)


def best_stopping_spend(mus, figures, h: float = 0.002) -> float:
    """max over stopping times tau (1 <= tau <= k, adapted to the outputs) of
    E[(1 - e^(figures[tau - 1] - L_tau))+], for k Gaussian releases of mus[0..k-1] run in order
    and the figures printed after each. V_k(s) = E over the last step of the stop value (closed
    form); V_t(s) = max(stop now, E V_{t+1}(s + X_{t+1})); the spend is E V_1(X_1)."""
    mus, figures = [float(m) for m in mus], [float(f) for f in figures]
    assert len(mus) == len(figures) >= 1
    if len(mus) == 1:
        return float(gaussian_hockey_stick(mus[0], figures[0]))
    before_last = mus[:-1]
    variance = sum(m * m for m in before_last)
    low = -12 * math.sqrt(variance) - 1
    high = variance / 2 + 12 * math.sqrt(variance) + 1
    loss = low + h * np.arange(int((high - low) / h) + 1)
    value = np.maximum(_stop_now(figures[-2], loss), gaussian_hockey_stick(mus[-1], figures[-1] - loss))
    for t in range(len(mus) - 2, 0, -1):  # value is V_{t+1}; make V_t
        first, kernel = _step_kernel(mus[t], h)
        last = first + len(kernel) - 1
        # E V(s + X): V is 0 far below the grid and its edge value (about 1) far above
        padded = np.concatenate([np.full(max(-first, 0), value[0]), value, np.full(max(last, 0), value[-1])])
        shift = max(-first, 0) + first
        going_on = oaconvolve(padded, kernel[::-1], mode="valid")[shift:shift + len(loss)]
        value = np.maximum(_stop_now(figures[t - 1], loss), going_on)
    z = np.linspace(-12, 12, 24001)
    weights = norm.pdf(z) * (z[1] - z[0])
    return float((weights * np.interp(before_last[0] ** 2 / 2 + before_last[0] * z, loss, value)).sum())


def stopped_hockey_stick(figures: list[float], rho: float, gap, h: float = 0.005, *, final_delta: float = 0.0,
                         final_figure: float | None = None) -> float:
    """E[(1 - e^(eps_tau - L_tau))+] for Gaussian releases of `rho` each (L_t a random walk with
    N(rho, 2 rho) steps) and the stopping time tau = min{t: L_t > eps_t + gap_t} ∧ T (`gap`: one gap
    for every step, or a gap per step). At T the paths not stopped may also get a (0, final_delta)
    release (a disclosure with probability final_delta, else nothing) and the figure `final_figure`."""
    gaps = list(gap) if isinstance(gap, (list, tuple)) else [gap] * len(figures)
    last = figures[-1] if final_figure is None else final_figure
    low, high = -40.0, max(figures[-1], last) + max(gaps) + 40.0
    x = low + h * np.arange(int((high - low) / h) + 1)
    p = np.zeros_like(x)
    p[int(round(-low / h))] = 1.0
    sd = math.sqrt(2 * rho)
    offsets = np.arange(-int(10 * sd / h) - 1, int(10 * sd / h) + 2) * h
    kernel = norm.cdf(offsets + h / 2, rho, sd) - norm.cdf(offsets - h / 2, rho, sd)
    total = 0.0
    for eps, step_gap in zip(figures, gaps):
        p = np.convolve(p, kernel, mode="same")
        over = x > eps + step_gap
        total += float((p[over] * np.maximum(0.0, 1 - np.exp(eps - x[over]))).sum())
        p[over] = 0.0
    return total + final_delta * float(p.sum()) + (1 - final_delta) * float(
        (p * np.maximum(0.0, 1 - np.exp(last - x))).sum())
