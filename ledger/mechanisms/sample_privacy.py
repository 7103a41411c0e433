"""Perfect sample privacy and synergistic disclosure (Rassouli, Rosas and Gündüz,
"Data disclosure under perfect sample privacy").

Concept: a disclosure mapping P(Y | X1..Xn) is *perfectly sample-private* when
its output is independent of every single sample, I(Xi; Y) = 0 for all i
(Definition 1), even though Y may depend on the samples jointly
(Y = X1 xor X2 for two fair coins). Its utility is I(W; Y) about a latent
feature W with W - X - Y a Markov chain (Definition 2); with no W the data
itself is the feature (self-disclosure, section V).

Computations here, all exact for small discrete models:
- I(Xi; Y) in bits for each sample, the maximum, the perfect-privacy decision
  (every I(Xi; Y) <= 1e-12) and I(W; Y);
- Y = (X1 + ... + Xn) mod m, perfectly sample-private when the samples are
  independent and uniform on Z_m (any one sample leaves the sum uniform);
- the optimal perfectly sample-private mapping (Theorem 1). By Lemma 1,
  Y is independent of every Xi iff A (p_{X|y} - p_X) = 0 for every y, where A
  is the 0/1 matrix mapping a distribution on the support of X to the stacked
  marginals of X1..Xn (Eq. 3). So each p_{X|y} lies in the polytope
  S = {r >= 0 : A r = A p_X}. H(W | Y = y) is concave in p_{X|y}, so the
  minimum of H(W | Y) is attained with every p_{X|y} at an extreme point of S
  (Lemma 2). The extreme points are the basic feasible solutions, found by
  trying every set of rank(A) linearly independent columns of A (Algorithm 1);
  the weights p_Y on them solve the LP  min sum_k w_k H(W | v_k)  subject to
  sum_k w_k v_k = p_X, w >= 0  (Eq. 17, Algorithm 2), here by scipy's HiGHS.
  The enumeration grows combinatorially: keep alphabets small.
- joint leakage: several recorded mappings, each applied independently to
  the same X, form P(Y1..Yk | X) = prod_k P(Yk | X). Perfect sample privacy
  does not compose (docs/explanation/model.md#pufferfish-guarantees): for three independent fair bits,
  Y1 = X1 xor X2 and Y2 = X1 xor X2 xor X3 are each perfectly sample-private,
  yet Y1 xor Y2 = X3, so I(X3; Y1, Y2) = 1 bit. (With two bits no such pair
  exists: every sample-private output depends on X only through X1 xor X2. And
  Y2 = X2 is not sample-private at all: I(X2; Y2) = 1 bit.)

Arrays: a joint distribution is p[x1, ..., xn] or, with a latent feature,
p[w, x1, ..., xn] (pass latent=True). A mapping has the sample axes first and
then its output axes: P[x1, ..., xn, y] (or several y axes for a joint mapping),
summing to 1 over the output axes for every x.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from . import _validate as check
from .errors import MechanismInputError

PERFECT_TOLERANCE = 1e-12
SUM_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class SampleLeakage:
    """What a mapping reveals: I(Xi; Y) per sample (bits), their maximum, whether the
    mapping is perfectly sample-private (all <= 1e-12), and the utility I(W; Y)
    (I(X; Y), self-disclosure, when there is no latent W)."""

    leakage_bits: tuple[float, ...]
    max_leakage_bits: float
    perfect: bool
    utility_bits: float


@dataclass(frozen=True, slots=True, eq=False)
class OptimalMapping:
    """The optimal perfectly sample-private mapping (Theorem 1).

    mapping: P[x1, ..., xn, y]; Y = k means "the data distribution is extreme point k".
    utility_bits: the maximal I(W; Y) = H(W) - LP optimum.
    extreme_points: (m, |support|) the extreme points of S used (rows), over `support`.
    weights: P(Y = k). support: the flat indices of the x with p(x) > 0.
    n_extreme_points: how many extreme points S has in all.
    """

    mapping: np.ndarray
    utility_bits: float
    extreme_points: np.ndarray
    weights: np.ndarray
    support: np.ndarray
    n_extreme_points: int


# ---------------------------------------------------------------------------
# information measures


def entropy_bits(distribution: np.ndarray) -> float:
    """H(p) in bits (0 log 0 = 0)."""
    p = np.asarray(distribution, dtype=float).ravel()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def mutual_information_bits(joint: np.ndarray) -> float:
    """I(A; B) in bits from a 2-D joint distribution p[a, b] (clipped at 0 against rounding)."""
    p = np.asarray(joint, dtype=float)
    row = p.sum(axis=1, keepdims=True)
    column = p.sum(axis=0, keepdims=True)
    mask = p > 0
    value = float((p[mask] * np.log2(p[mask] / (row @ column)[mask])).sum())
    return max(0.0, value)


def sample_leakage(joint: np.ndarray, mapping: np.ndarray, *, latent: bool = False) -> SampleLeakage:
    """I(Xi; Y) for every sample, max_i, perfect sample privacy, and I(W; Y) (I(X; Y) with no W).

    joint: p[x1..xn], or p[w, x1..xn] with latent=True. mapping: P[x1..xn, y...].
    """
    p_wx, has_w = _joint(joint, latent)
    p_x = p_wx.sum(axis=0)
    n = p_x.ndim
    kernel = _mapping(mapping, p_x.shape)
    p_xy = p_x[..., None] * kernel  # p(x, y), y flattened
    leakage = []
    for i in range(n):
        others = tuple(axis for axis in range(n) if axis != i)
        leakage.append(mutual_information_bits(p_xy.sum(axis=others)))
    if has_w:
        p_wy = p_wx.reshape(p_wx.shape[0], -1) @ kernel.reshape(-1, kernel.shape[-1])
        utility = mutual_information_bits(p_wy)
    else:  # self-disclosure, W = X (section V)
        utility = mutual_information_bits(p_xy.reshape(-1, p_xy.shape[-1]))
    worst = max(leakage)
    return SampleLeakage(tuple(leakage), worst, worst <= PERFECT_TOLERANCE, utility)


# ---------------------------------------------------------------------------
# mappings


def deterministic_mapping(
    function: Callable[..., int], alphabet_sizes: Sequence[int], output_size: int
) -> np.ndarray:
    """P[x1..xn, y] = 1 when y = function(x1, ..., xn), values x_i in 0..size_i-1."""
    sizes = [check.positive_int("alphabet_sizes", size) for size in alphabet_sizes]
    output_size = check.positive_int("output_size", output_size)
    mapping = np.zeros((*sizes, output_size))
    for x in itertools.product(*(range(size) for size in sizes)):
        y = function(*x)
        if isinstance(y, bool) or not isinstance(y, (int, np.integer)) or not 0 <= y < output_size:
            raise MechanismInputError("function", f"must return an output in 0..{output_size - 1}, found {y!r} at {x!r}")
        mapping[(*x, int(y))] = 1.0
    return mapping


def modular_sum_mapping(alphabet_sizes: Sequence[int], modulus: int) -> np.ndarray:
    """Y = (X1 + ... + Xn) mod m as P[x1..xn, y]: perfectly sample-private for
    independent samples uniform on Z_m (given any one sample, the sum of the
    others is uniform)."""
    modulus = check.positive_int("modulus", modulus, minimum=2)
    return deterministic_mapping(lambda *x: sum(x) % modulus, alphabet_sizes, modulus)


def joint_mapping(mappings: Sequence[np.ndarray], n_samples: int) -> np.ndarray:
    """P(Y1, ..., Yk | X) = prod_k P(Yk | X): the outputs of several mappings applied
    independently to the same data. Shape: sample axes, then each mapping's output axes."""
    n_samples = check.positive_int("n_samples", n_samples)
    if not mappings:
        raise MechanismInputError("mappings", "at least one mapping is needed, found none")
    arrays = [np.asarray(m, dtype=float) for m in mappings]
    shape = arrays[0].shape[:n_samples]
    for k, array in enumerate(arrays):
        if array.ndim <= n_samples or array.shape[:n_samples] != shape:
            raise MechanismInputError("mappings", f"mapping {k} has shape {array.shape}; samples are {shape}")
        _mapping(array, shape)
    combined = arrays[0]
    for array in arrays[1:]:
        before, after = combined.shape[n_samples:], array.shape[n_samples:]
        # outputs are conditionally independent given X: multiply, one new axis per output
        combined = combined.reshape(shape + before + (1,) * len(after)) * array.reshape(
            shape + (1,) * len(before) + after
        )
    return combined


# ---------------------------------------------------------------------------
# the optimal mapping (Theorem 1)


def marginal_matrix(p_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A of Eq. (3) on the support of p_x: A[(i, a), x] = 1 when x_i = a. Returns (A, support)."""
    support = np.flatnonzero(p_x.ravel() > 0)
    points = np.array(np.unravel_index(support, p_x.shape)).T  # (|support|, n)
    rows = []
    for i, size in enumerate(p_x.shape):
        for a in range(size):
            rows.append((points[:, i] == a).astype(float))
    return np.array(rows), support


def extreme_points(p_x: np.ndarray, *, max_bases: int = 200_000) -> tuple[np.ndarray, np.ndarray]:
    """The extreme points of S = {r >= 0 : A r = A p_X} (Algorithm 1 of the paper):
    basic feasible solutions from every set of rank(A) linearly independent columns.
    Returns (points as rows over the support, support)."""
    p_x = np.asarray(p_x, dtype=float)
    matrix, support = marginal_matrix(p_x)
    target = matrix @ p_x.ravel()[support]
    rank = int(np.linalg.matrix_rank(matrix))
    columns = len(support)
    if math.comb(columns, rank) > max_bases:
        raise MechanismInputError(
            "joint",
            f"C({columns}, {rank}) = {math.comb(columns, rank)} bases exceed max_bases={max_bases}; "
            "use a smaller alphabet",
        )
    found: dict[tuple[float, ...], np.ndarray] = {}
    for basis in itertools.combinations(range(columns), rank):
        sub = matrix[:, basis]
        if np.linalg.matrix_rank(sub) < rank:
            continue
        solution, *_ = np.linalg.lstsq(sub, target, rcond=None)
        if np.abs(sub @ solution - target).max() > 1e-9 or solution.min() < -1e-10:
            continue
        point = np.zeros(columns)
        point[list(basis)] = np.clip(solution, 0.0, None)
        found.setdefault(tuple(np.round(point, 10)), point)
    return np.array(list(found.values())), support


def optimal_mapping(joint: np.ndarray, *, latent: bool = False, max_bases: int = 200_000) -> OptimalMapping:
    """The perfectly sample-private mapping maximising I(W; Y) (Theorem 1; W = X without latent)."""
    p_wx, has_w = _joint(joint, latent)
    p_x = p_wx.sum(axis=0)
    points, support = extreme_points(p_x, max_bases=max_bases)
    flat_x = p_x.ravel()[support]
    if has_w:
        w_given_x = p_wx.reshape(p_wx.shape[0], -1)[:, support] / flat_x  # P(w | x)
        feature = points @ w_given_x.T  # row k: P(W | Y = k) = sum_x P(W | x) v_k(x)
        h_w = entropy_bits(p_wx.sum(axis=tuple(range(1, p_wx.ndim))))
    else:
        feature = points  # W = X: P(X | Y = k) = v_k
        h_w = entropy_bits(flat_x)
    costs = np.array([entropy_bits(row) for row in feature])
    result = linprog(costs, A_eq=points.T, b_eq=flat_x, bounds=(0, None), method="highs")
    if not result.success:  # p_X is in S, so the LP is always feasible; this is a solver failure
        raise RuntimeError(f"the synergistic-disclosure LP failed: {result.message}")
    keep = result.x > 1e-12
    weights, used = result.x[keep], points[keep]
    columns = weights[:, None] * used / flat_x  # P(Y = k | x) on the support, (m, |support|)
    columns /= columns.sum(axis=0, keepdims=True)
    mapping = np.full((p_x.size, len(weights)), 1.0 / len(weights))  # off the support: any law
    mapping[support] = columns.T
    return OptimalMapping(
        mapping=mapping.reshape(*p_x.shape, len(weights)),
        utility_bits=max(0.0, h_w - float(result.fun)),
        extreme_points=used,
        weights=weights,
        support=support,
        n_extreme_points=len(points),
    )


# ---------------------------------------------------------------------------
# input checks


def _joint(joint: np.ndarray, latent: bool) -> tuple[np.ndarray, bool]:
    """The joint as p[w, x...] (a single dummy w when there is no latent feature)."""
    p = np.asarray(joint, dtype=float)
    minimum = 2 if latent else 1
    if p.ndim < minimum or p.size == 0:
        axes = "a W axis and at least one sample axis" if latent else "at least one sample axis"
        raise MechanismInputError("joint", f"needs {axes}, found shape {p.shape}")
    if not np.all(np.isfinite(p)) or (p < 0).any():
        raise MechanismInputError("joint", f"probabilities must be finite and non-negative, found minimum {np.nanmin(p)!r}")
    if abs(p.sum() - 1) > SUM_TOLERANCE:
        raise MechanismInputError("joint", f"probabilities must sum to 1, found {p.sum()!r}")
    return (p, True) if latent else (p[None, ...], False)


def _mapping(mapping: np.ndarray, sample_shape: tuple[int, ...]) -> np.ndarray:
    """The mapping as P[x..., y] with the output axes flattened to one."""
    kernel = np.asarray(mapping, dtype=float)
    n = len(sample_shape)
    if kernel.ndim <= n or kernel.shape[:n] != sample_shape:
        raise MechanismInputError("mapping", f"shape must be {sample_shape} + output axes, found {kernel.shape}")
    kernel = kernel.reshape(*sample_shape, -1)
    if not np.all(np.isfinite(kernel)) or (kernel < 0).any():
        raise MechanismInputError("mapping", "conditional probabilities must be finite and non-negative")
    sums = kernel.sum(axis=-1)
    if np.abs(sums - 1).max() > SUM_TOLERANCE:
        raise MechanismInputError(
            "mapping", f"P(Y | x) must sum to 1 for every x, found sums from {sums.min()!r} to {sums.max()!r}"
        )
    return kernel
