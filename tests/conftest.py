"""Shared test settings and an independent zCDP-to-(epsilon, delta) conversion.

`reference_cks` evaluates the Canonne-Kamath-Steinke (2020) bound, Corollary 13,
by its own search over the Renyi order (a dense grid, then a local refinement),
so tests can check `ledger.accounting.cks_epsilon` without calling it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import settings
from scipy.optimize import minimize_scalar

# The engine runs a numerical minimiser for zCDP totals: no per-example deadline.
settings.register_profile("ledger", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ledger"))


def _reference_cks(rho: float, delta: float) -> float:
    """inf over alpha > 1 of alpha rho + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha) - ln(alpha)) / (alpha - 1)."""
    rho, delta = float(rho), float(delta)
    if rho == 0:
        return 0.0
    log_inv_delta = math.log(1 / delta)

    def bound(alpha):
        return alpha * rho + (log_inv_delta + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)) / (alpha - 1)

    alphas = 1 + np.logspace(-6, 6, 6001)
    values = bound(alphas)
    k = int(np.argmin(values))
    low, high = alphas[max(k - 1, 0)], alphas[min(k + 1, len(alphas) - 1)]
    refined = minimize_scalar(bound, bounds=(low, high), method="bounded", options={"xatol": 1e-12})
    return float(min(values[k], bound(refined.x)))


@pytest.fixture(scope="session")
def reference_cks():
    return _reference_cks
