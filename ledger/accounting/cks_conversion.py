"""zCDP to (epsilon, delta) over arrays: the Canonne, Kamath and Steinke (2020) bound (Prop 12 / Cor 13).

Invariant: the same order as spend.cks_order (a safeguarded Newton iteration), guarded by
rho + 2 sqrt(rho ln(1/delta)) (Bun and Steinke 2016, Prop 1.3), rounded up.
"""

from __future__ import annotations

from ..core.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use


def cks_floats(rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """accounting.cks_epsilon over arrays: the Canonne, Kamath and Steinke (2020) bound
    (Proposition 12 / Corollary 13) at the Renyi order found by the same safeguarded
    Newton iteration (accounting.cks_order), guarded by the simple bound
    rho + 2 sqrt(rho ln(1/delta)) (Bun and Steinke 2016, Prop 1.3), rounded up."""
    rho = np.asarray(rho, dtype=np.float64)
    delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), rho.shape)
    result = np.zeros(rho.shape)
    live = rho > 0
    if not live.any():
        return result
    # each distinct (rho, delta) once: totals repeat across checkpoints and pairs
    distinct, back = np.unique(np.stack([rho[live], delta[live]]), axis=1, return_inverse=True)
    with np.errstate(all="ignore"):  # extreme rho: the simple bound below, never a warning or a NaN
        values = _cks_distinct(distinct[0], distinct[1])
        simple = distinct[0] + 2 * np.sqrt(distinct[0] * np.log(1 / distinct[1]))
        values = np.where(np.isfinite(values) & (distinct[0] <= 1e12), np.minimum(values, simple), simple)
    result[live] = values[back.ravel()]
    return result


def _cks_distinct(r: np.ndarray, delta: np.ndarray) -> np.ndarray:
    log_inv = np.log(1 / delta)
    # the root of h(x) = r x^2 + ln(1 + x) - ln(1/delta) in (0, sqrt(ln(1/delta) / r)), x = alpha - 1
    low, high = np.zeros(r.shape), np.sqrt(log_inv / r)
    x = high.copy()
    for _ in range(200):
        value = r * x * x + np.log1p(x) - log_inv
        high = np.where(value > 0, x, high)
        low = np.where(value > 0, low, x)
        following = x - value / (2 * r * x + 1 / (1 + x))
        following = np.where((low < following) & (following < high), following, (low + high) / 2)
        done = (np.abs(following - x) <= 1e-15 * x) | (high - low <= 1e-15 * high)
        x = following
        if done.all():
            break
    alpha = 1 + x
    bound = alpha * r + (log_inv - np.log(alpha)) / (alpha - 1) + np.log1p(-1 / alpha)
    best = np.minimum(bound, r + 2 * np.sqrt(r * log_inv))
    return np.nextafter(np.maximum(best, 0.0) * (1 + 1e-12), np.inf)  # as accounting._up
