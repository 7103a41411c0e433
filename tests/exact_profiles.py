"""Exact privacy profiles, computed independently of the ledger (for tests).

- the Gaussian mechanism with sensitivity/sigma = s: delta(eps) = Phi(s/2 - eps/s) -
  e^eps Phi(-s/2 - eps/s) (Balle and Wang 2018, Theorem 8);
- randomized response at epsilon (the worst epsilon-DP mechanism): privacy loss +eps with
  probability e^eps / (1 + e^eps), -eps otherwise, under the dominating pair;
- their composition: the privacy loss is the sum of independent losses, so
  delta(eps) = sum over the randomized-response part's atoms x of P(x) * delta_G(eps - x),
  and with no Gaussian part delta(eps) = sum of P(x) (1 - e^(eps - x))_+ (the hockey stick).
Epsilon at delta by bisection on the decreasing delta(eps), with mpmath at 40 digits.
"""

from __future__ import annotations

from math import comb

import mpmath

mpmath.mp.dps = 40


def rr_atoms(epsilons: list[float]) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """Privacy-loss atoms (value, probability) of randomized response composed over `epsilons`
    (equal epsilons: a binomial)."""
    atoms = {mpmath.mpf(0): mpmath.mpf(1)}
    for eps in epsilons:
        eps = mpmath.mpf(eps)
        p = mpmath.e**eps / (1 + mpmath.e**eps)
        new: dict = {}
        for value, prob in atoms.items():
            new[value + eps] = new.get(value + eps, 0) + prob * p
            new[value - eps] = new.get(value - eps, 0) + prob * (1 - p)
        atoms = new
    return list(atoms.items())


def rr_binomial_atoms(eps: float, count: int) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    eps = mpmath.mpf(eps)
    p = mpmath.e**eps / (1 + mpmath.e**eps)
    return [((2 * k - count) * eps, comb(count, k) * p**k * (1 - p) ** (count - k)) for k in range(count + 1)]


def gaussian_delta(eps, s) -> mpmath.mpf:
    """Balle and Wang 2018, Theorem 8: the Gaussian mechanism's exact privacy profile."""
    eps, s = mpmath.mpf(eps), mpmath.mpf(s)
    return mpmath.ncdf(s / 2 - eps / s) - mpmath.e**eps * mpmath.ncdf(-s / 2 - eps / s)


def delta_of(eps, atoms=None, s=None) -> mpmath.mpf:
    atoms = atoms or [(mpmath.mpf(0), mpmath.mpf(1))]
    eps = mpmath.mpf(eps)
    if s is None:
        return mpmath.fsum(prob * max(mpmath.mpf(0), 1 - mpmath.e ** (eps - value)) for value, prob in atoms)
    return mpmath.fsum(prob * gaussian_delta(eps - value, s) for value, prob in atoms)


def epsilon_at(delta, atoms=None, s=None, high=200.0) -> float:
    """The exact epsilon at `delta` (the smallest eps with delta(eps) <= delta), to 1e-12."""
    low, high = mpmath.mpf(0), mpmath.mpf(high)
    if delta_of(0, atoms, s) <= delta:
        return 0.0
    for _ in range(200):
        middle = (low + high) / 2
        if delta_of(middle, atoms, s) <= delta:
            high = middle
        else:
            low = middle
        if high - low < 1e-13:
            break
    return float(high)
