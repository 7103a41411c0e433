"""The Gaussian mechanism's privacy loss distribution, built with numpy (issue 11).

Concept. dp_accounting builds, composes and converts privacy loss distributions
(PLDs); the ledger uses it for all three. For the Gaussian mechanism, building is
slow there: its Connect-the-Dots discretisation (Doroshenko, Ghazi, Kamath, Kumar
and Manurangsi 2022, Algorithm 1; dp_accounting's default) evaluates the
mechanism's hockey-stick divergence delta(eps) at every point of the grid one
point at a time in Python (0.1-0.5 s per PLD at the intervals the ledger uses, and
every subset with Gaussians, every cap at a delta with a declared plan, needs one).
The divergence has a closed form (Balle and Wang 2018, Theorem 8), for sensitivity
1 and standard deviation m:

    delta(eps) = Phi(1 / (2m) - eps m) - e^eps Phi(-1 / (2m) - eps m),

which numpy evaluates at every grid point at once. `gaussian_pld` takes the grid
(`connect_dots_bounds`) and the discretisation (`create_pmf_pessimistic_connect_dots_
fixed_gap`) from dp_accounting itself and supplies only those deltas, computed in
log space (delta = Phi(a) (1 - e^(eps + ln Phi(b) - ln Phi(a)))), so the two
products never cancel; the result is dp_accounting's own PLD to float rounding
(tests/test_privacy_loss.py compares them, and both against the exact profile).

Invariant: never under-reports. Connect-the-Dots with pessimistic_estimate is an
upper bound on delta(eps) at every eps (Doroshenko et al. 2022, Theorem 3.5), the
mass beyond the grid's top counted as an infinite loss.
"""

from __future__ import annotations

import math

from .lazy import lazy_module

np = lazy_module("numpy")

LOG_MASS_TRUNCATION_BOUND = -50  # dp_accounting's default: the grid leaves out at most e^-50 of mass


def gaussian_deltas(multiplier: float, epsilons):
    """delta(eps) of the Gaussian mechanism with sensitivity 1 and standard deviation
    `multiplier`, at each eps (Balle and Wang 2018, Theorem 8), in log space."""
    from scipy import special

    epsilons = np.asarray(epsilons, dtype=np.float64)
    a = 0.5 / multiplier - epsilons * multiplier
    b = -0.5 / multiplier - epsilons * multiplier
    log_a, log_b = special.log_ndtr(a), special.log_ndtr(b)
    return np.maximum(np.exp(log_a) * -np.expm1(np.minimum(epsilons + log_b - log_a, 0.0)), 0.0)


def gaussian_pld(multiplier: float, interval: float):
    """dp_accounting's pessimistic Connect-the-Dots PLD of a Gaussian mechanism with
    sensitivity 1 and standard deviation `multiplier` (add-or-remove and replace
    adjacency alike: the Gaussian pair is symmetric), on a grid of step `interval`."""
    from dp_accounting.pld import privacy_loss_mechanism
    from dp_accounting.pld import privacy_loss_distribution as PLD

    if not multiplier > 0 or not interval > 0:
        raise ValueError("a Gaussian PLD needs a positive noise multiplier and interval")
    loss = privacy_loss_mechanism.GaussianPrivacyLoss(
        multiplier, sensitivity=1, pessimistic_estimate=True,
        log_mass_truncation_bound=LOG_MASS_TRUNCATION_BOUND)
    bounds = loss.connect_dots_bounds()
    lower = math.floor(bounds.epsilon_lower / interval)
    upper = math.ceil(bounds.epsilon_upper / interval)
    deltas = gaussian_deltas(multiplier, np.arange(lower, upper + 1) * interval)
    return PLD.PrivacyLossDistribution(_connect_dots_pmf(interval, lower, upper, deltas))


def _connect_dots_pmf(interval: float, lower: int, upper: int, deltas):
    """dp_accounting's `create_pmf_pessimistic_connect_dots_fixed_gap` (Doroshenko et al. 2022,
    Algorithm 1 on a grid of fixed gap), with the PMF built from the array rather than through
    a dictionary of every grid point (which cost that function most of its time)."""
    from dp_accounting.pld import pld_pmf

    if upper == lower or upper - lower + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE:
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, upper, deltas)
    deltas = np.minimum.accumulate(np.asarray(deltas, dtype=np.float64))  # non-increasing, as there
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(interval)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(interval)) / math.expm1(interval)
    probs[-1] = diffs[-1] / math.expm1(-interval)
    return pld_pmf.DensePLDPmf(interval, lower, np.maximum(0.0, probs), float(deltas[-1]), True)


SELF_COMPOSE_TAIL = 1e-15  # dp_accounting's default tail mass truncation for self-composition


def self_compose(pld, count: int):
    """`pld.self_compose(count)` (dp_accounting's DensePLDPmf.self_compose: an FFT power of the
    PMF, truncated where a Chernoff bound puts at most SELF_COMPOSE_TAIL of mass, that mass
    counted as an infinite loss), with the Chernoff bound's 40 log-moment-generating values
    computed in one numpy expression instead of 40 calls of scipy's logsumexp (which cost
    dp_accounting's self-composition nearly all its time on a ledger's PMFs). The same
    orders and the same bound (dp_accounting, common.compute_self_convolve_bounds), so the
    same truncation; a sparse PMF is made dense first where dp_accounting makes it dense, and
    anything else (an asymmetric PLD, a small sparse power) goes to dp_accounting unchanged."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as PLD
    from scipy import fft

    pmf = getattr(pld, "_pmf_remove", None)
    if count == 1:
        return pld
    if not getattr(pld, "_symmetric", False) or not isinstance(pmf, (pld_pmf.DensePLDPmf, pld_pmf.SparsePLDPmf)):
        return pld.self_compose(count)
    if isinstance(pmf, pld_pmf.SparsePLDPmf):
        if pmf.size ** count <= pld_pmf._MAX_PMF_SPARSE_SIZE:  # dp_accounting keeps these sparse
            return pld.self_compose(count)
        pmf = pmf.to_dense_pmf()  # as dp_accounting does before its dense self-composition
    probs = np.asarray(pmf._probs, dtype=np.float64)
    low, high = _self_convolve_bounds(probs, count, SELF_COMPOSE_TAIL)
    length = high - low + 1
    fast = fft.next_fast_len(max(length, len(probs)))
    power = np.real(fft.ifft(fft.fft(probs, fast) ** count))
    out = np.roll(power, -low)[:length]
    infinity = SELF_COMPOSE_TAIL - math.expm1(count * math.log1p(-pmf._infinity_mass))
    composed = pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss * count + low, np.array(out), infinity,
                                   pmf._pessimistic_estimate)
    return PLD.PrivacyLossDistribution(composed)


def _self_convolve_bounds(probs, count: int, tail: float) -> tuple[int, int]:
    """dp_accounting's `compute_self_convolve_bounds` (Chernoff bounds at orders +-1..20 / n),
    the log moment generating function at every order in one pass."""
    n = len(probs)
    upper, lower = (n - 1) * count, 0
    orders = np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / n
    positive = probs > 0
    index = np.arange(n, dtype=np.float64)[positive]
    log_p = np.log(probs[positive])
    exponents = orders[:, None] * index[None, :] + log_p[None, :]
    peak = exponents.max(axis=1)
    log_mgf = peak + np.log(np.exp(exponents - peak[:, None]).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bounds = (count * log_mgf + math.log(2 / tail)) / orders
    for order, bound in zip(orders, bounds):
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper = min(upper, math.ceil(bound))
        else:
            lower = max(lower, math.floor(bound))
    return lower, upper


COMPOSE_TAIL = 1e-15  # dp_accounting's default tail mass truncation for PrivacyLossDistribution.compose


def compose(first, second):
    """`first.compose(second)` (dp_accounting's PrivacyLossDistribution.compose at its default
    truncation), with the tails truncated by numpy: dp_accounting finds each truncated tail
    with a Python loop over the convolved PMF, element by element (half the cost of a cap's
    PLD figure on a ledger's PMFs). The same FFT convolution (scipy's fftconvolve), the same
    partial sums (a cumulative sum adds in the same order as the loop, so the same floats)
    and the same cut, so the same PMF, bit for bit (tests/test_privacy_loss.py). Anything but
    two symmetric PLDs, or two small sparse PMFs (kept sparse by dp_accounting), goes to
    dp_accounting unchanged."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as PLD
    from scipy import signal

    one, two = getattr(first, "_pmf_remove", None), getattr(second, "_pmf_remove", None)
    kinds = (pld_pmf.DensePLDPmf, pld_pmf.SparsePLDPmf)
    if not (getattr(first, "_symmetric", False) and getattr(second, "_symmetric", False)
            and isinstance(one, kinds) and isinstance(two, kinds)):
        return first.compose(second)
    if (isinstance(one, pld_pmf.SparsePLDPmf) and isinstance(two, pld_pmf.SparsePLDPmf)
            and one.size * two.size <= pld_pmf._MAX_PMF_SPARSE_SIZE):
        return first.compose(second)
    one, two = one.to_dense_pmf(), two.to_dense_pmf()
    one.validate_composable(two)
    probs = signal.fftconvolve(one._probs, two._probs)
    infinity = one._infinity_mass + two._infinity_mass - one._infinity_mass * two._infinity_mass
    offset, probs, right_tail = _truncate_tails(probs, COMPOSE_TAIL, one._pessimistic_estimate)
    return PLD.PrivacyLossDistribution(pld_pmf.DensePLDPmf(
        one._discretization, one._lower_loss + two._lower_loss + offset, probs, infinity + right_tail,
        one._pessimistic_estimate))


def _truncate_tails(probs, tail: float, pessimistic: bool):
    """dp_accounting's pld_pmf._truncate_tails, its prefix searches by `_prefix_within`."""
    if tail == 0:
        return 0, probs, 0
    left = _prefix_within(probs, tail / 2)
    right = len(probs) - _prefix_within(np.flip(probs), tail / 2)
    right = max(right, left + 1)
    left_mass = np.sum(probs[:left])
    right_mass = np.sum(probs[right:])
    kept = probs[left:right]
    if pessimistic:
        kept[0] += left_mass
        return left, kept, right_mass
    kept[-1] += right_mass
    return left, kept, 0
def _prefix_within(values, threshold: float) -> int:
    """The length of the longest prefix whose running sum (left to right) stays <= threshold:
    the sums a block at a time (the cut is usually near the end), each block's cumulative sum
    started from the running total, so every sum is the loop's own."""
    n, start, block, total = len(values), 0, 256, 0.0
    while start < n:
        sums = np.cumsum(np.concatenate(([total], values[start:start + block])))[1:]
        above = np.flatnonzero(sums > threshold)
        if above.size:
            return start + int(above[0])
        total, start, block = float(sums[-1]), start + block, block * 4
    return n


def epsilon_for_delta(pld, delta: float) -> float:
    """`pld.get_epsilon_for_delta(delta)` (dp_accounting's `_get_epsilon_for_delta`: the smallest
    eps with hockey-stick divergence at most delta, scanning the losses from the top) with the
    scan's running masses as cumulative sums instead of a Python loop over the grid (7 ms of
    every PLD figure at a fine grid). The same sums in the same order; the losses, exp(-loss)
    and the log that finds the segment holding the answer are numpy's (within an ulp of
    math's), the answer itself math's. Anything but a symmetric dense PMF goes to dp_accounting."""
    from dp_accounting.pld import pld_pmf

    pmf = pld._pmf_remove
    if not pld._symmetric or not isinstance(pmf, pld_pmf.DensePLDPmf) or len(pmf._probs) == 0:
        return pld.get_epsilon_for_delta(delta)
    infinity = pmf._infinity_mass
    if infinity > delta:
        return math.inf
    probs = np.flip(np.asarray(pmf._probs, dtype=np.float64))
    n, step = len(probs), pmf._discretization
    top = (pmf._lower_loss + n - 1) * step
    losses = np.cumsum(np.concatenate(([top], np.full(n - 1, -step))))  # itertools.count: repeated addition
    upper = np.cumsum(np.concatenate(([infinity], probs)))  # before element k: upper[k]; after it: upper[k + 1]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        lower = np.cumsum(np.concatenate(([0.0], np.exp(-losses) * probs)))
        stop = (upper[:-1] > delta) & (lower[:-1] > 0) & (np.log((upper[:-1] - delta) / lower[:-1]) >= losses)
    done = (upper[1:] >= delta) & (lower[1:] == 0)  # exp(-loss) underflowed: the loss itself
    first_stop = int(np.argmax(stop)) if stop.any() else n
    first_done = int(np.argmax(done)) if done.any() else n
    if first_done < first_stop:
        return max(0.0, float(losses[first_done]))
    mass_upper, mass_lower = float(upper[first_stop]), float(lower[first_stop])
    if mass_upper <= mass_lower + delta:
        return 0
    return math.log((mass_upper - delta) / mass_lower)


def randomized_response_pld(steps: int, count: int, interval: float):
    """`count` randomized responses at e = steps * interval, composed exactly: the privacy
    loss is (2k - count) * steps grid points with k ~ Binomial(count, e^e / (1 + e^e))
    (Kairouz, Oh and Viswanath 2015, §3), every atom on the grid (nothing rounded). Atoms
    below 1e-300 go to the infinite loss (pessimistic). Built as dp_accounting's
    `create_from_rounded_probability` builds it from the same atoms (a sparse PMF up to its
    sparse size, else dense), the dense array filled directly rather than through a
    dictionary of every grid point between the atoms."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as PLD
    from scipy import stats

    k = np.arange(count + 1)
    probabilities = stats.binom.pmf(k, count, math.exp(-np.logaddexp(0.0, -steps * interval)))
    keep = probabilities > 1e-300
    losses, masses = (2 * k - count)[keep] * steps, probabilities[keep]
    infinity = max(0.0, 1.0 - math.fsum(masses.tolist()))
    if len(losses) <= pld_pmf._MAX_PMF_SPARSE_SIZE:
        mass = {int(v): float(p) for v, p in zip(losses, masses)}
        return PLD.PrivacyLossDistribution.create_from_rounded_probability(mass, infinity, interval,
                                                                           pessimistic_estimate=True)
    lower = int(losses[0])
    probs = np.zeros(int(losses[-1]) - lower + 1)
    probs[losses - lower] = masses
    return PLD.PrivacyLossDistribution(pld_pmf.DensePLDPmf(interval, lower, probs, infinity, True))
