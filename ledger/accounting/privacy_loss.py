"""The Gaussian mechanism's privacy loss distribution, built with numpy.

Concept. dp_accounting builds, composes and converts privacy loss distributions
(PLDs); the ledger uses it for all three. For the Gaussian mechanism, building is
slow there: its Connect-the-Dots discretisation (Doroshenko, Ghazi, Kamath, Kumar
and Manurangsi 2022, Algorithm 1; dp_accounting's default) evaluates the
mechanism's hockey-stick divergence delta(eps) at every point of the grid one
point at a time in Python (0.1-0.5 s per PLD at the intervals the ledger uses, and
every subset with Gaussians asked for its PLD figure needs one).
The divergence has a closed form (Balle and Wang 2018, Theorem 8), for sensitivity
1 and standard deviation m:

    delta(eps) = Phi(1 / (2m) - eps m) - e^eps Phi(-1 / (2m) - eps m),

which numpy evaluates at every grid point at once. `gaussian_pld` takes the grid
(`connect_dots_bounds`) and the discretisation (`create_pmf_pessimistic_connect_dots_
fixed_gap`) from dp_accounting itself and supplies only those deltas, computed in
log space (delta = Phi(a) (1 - e^(eps + ln Phi(b) - ln Phi(a)))), so the two
products never cancel, each bounded from above as catalogue._balle_wang_delta bounds it
(dp_accounting's own arithmetic is up to a relative 1.5e-8 below the exact delta where the
terms nearly cancel); the result is dp_accounting's PLD but for those allowances, its
epsilons at a delta a few 1e-12 higher, never lower (tests/accounting/test_privacy_loss.py compares
them, and both against the exact profile in mpmath).

The PLD figure is information only (had the plan been fixed in advance), and importing
dp_accounting (scipy.stats, scipy.signal, scipy.optimize) cost more than the rest of such a process. So the PLDs the ledger builds
are held here as `Pld`, plain arrays in dp_accounting's own layout (a symmetric PLD: the same
PMF for removal and addition), built for the Laplace, Gaussian and randomized-response
mechanisms and composed with numpy alone, in the very operations dp_accounting
performs, so the same floats: tests/accounting/test_privacy_loss.py compares every step with
dp_accounting (the reference) bit for bit. Anything else (the discrete
Laplace, a composition dp_accounting keeps sparse) is handed to dp_accounting itself
(`to_dp_accounting`, `from_dp_accounting`).

What dp_accounting computes with scipy is computed here without importing scipy.fft or
scipy.special as packages (their `__init__` imports scipy's array-API layer, 0.1-0.3 s of a
`check`): the FFTs are numpy.fft's, the same pocketfft transforms scipy.fft
runs (`_fft`, `_convolve`: a real input's full spectrum as scipy.fft builds it, from the half
spectrum and its conjugates), and the normal CDF's logarithm, its inverse and the binomial PMF
are scipy.special's compiled ufuncs themselves, their module imported alone
(`ledger.core.lazy.submodule_alone`); tests/accounting/test_privacy_loss.py compares each with scipy's
bit for bit.

Invariant: never under-reports. Connect-the-Dots with pessimistic_estimate is an
upper bound on delta(eps) at every eps (Doroshenko et al. 2022, Theorem 3.5), the
mass beyond the grid's top counted as an infinite loss, given deltas at the grid's points
that are not below the exact ones (`gaussian_deltas`).
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from ..core.lazy import lazy_module, submodule_alone

np = lazy_module("numpy")
np_fft = lazy_module("numpy.fft")


def _special():
    """scipy.special's compiled ufuncs (`log_ndtr`, `ndtri`, `_binom_pmf`): the very functions
    `scipy.special` exports, without importing scipy.special's package (module docstring)."""
    return submodule_alone("scipy.special", "_ufuncs")


def next_fast_len(target: int, real: bool = False) -> int:
    """scipy.fft.next_fast_len: the least size >= target whose prime factors are all in
    2, 3, 5 (a real transform) or 2, 3, 5, 7, 11 (a complex one), pocketfft's good_size."""
    if target <= 6:
        return target
    best = 1 << (target - 1).bit_length()  # the least power of two >= target
    odd = [1]
    for prime in (3, 5) if real else (3, 5, 7, 11):  # every odd smooth part below best
        odd = [m * prime ** k for m in odd for k in range(best.bit_length()) if m * prime ** k < best]
    for m in odd:
        size = m
        while size < target:
            size *= 2
        best = min(best, size)
    return best


def _fft(x, n: int):
    """scipy.fft.fft(x, n) of a real array x: pocketfft's real transform (numpy.fft.rfft, the
    same as scipy's) and the other half of the spectrum its conjugates, as scipy.fft fills it
    for a real input."""
    half = np_fft.rfft(x, n)
    full = np.empty(n, dtype=np.complex128)
    full[:len(half)] = half
    full[len(half):] = np.conj(half[1:n - len(half) + 1][::-1])
    return full

LOG_MASS_TRUNCATION_BOUND = -50  # dp_accounting's default: the grid leaves out at most e^-50 of mass
MAX_SPARSE_SIZE = 1000  # dp_accounting's pld_pmf._MAX_PMF_SPARSE_SIZE: up to this many atoms a PMF stays sparse


@dataclass(frozen=True, eq=False)
class Pld:
    """A symmetric privacy loss distribution on the grid of step `discretization`: the loss
    takes the value i * discretization with probability probs[i - lower_loss] (dense) or
    loss_probs[i] (sparse, when dp_accounting would keep it sparse), and +infinity with
    probability `infinity_mass`. dp_accounting's DensePLDPmf / SparsePLDPmf, field for field."""

    discretization: float
    infinity_mass: float
    lower_loss: int = 0
    probs: object = None  # dense: a float64 array
    loss_probs: dict | None = None  # sparse: grid index -> mass, in dp_accounting's order
    pessimistic: bool = True

    @property
    def sparse(self) -> bool:
        return self.loss_probs is not None

    @property
    def size(self) -> int:
        return len(self.loss_probs) if self.sparse else len(self.probs)

    def dense(self) -> Pld:
        """dp_accounting's SparsePLDPmf.to_dense_pmf (common.dictionary_to_list)."""
        if not self.sparse:
            return self
        low, high = min(self.loss_probs), max(self.loss_probs)
        probs = np.array([self.loss_probs.get(i, 0) for i in range(low, high + 1)])
        return Pld(self.discretization, self.infinity_mass, low, probs, None, self.pessimistic)


def to_dp_accounting(pld):
    """The same PLD as a dp_accounting PrivacyLossDistribution (a dp_accounting one as it is)."""
    if not isinstance(pld, Pld):
        return pld
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as PLD

    if pld.sparse:
        pmf = pld_pmf.SparsePLDPmf(pld.loss_probs, pld.discretization, pld.infinity_mass, pld.pessimistic)
    else:
        pmf = pld_pmf.DensePLDPmf(pld.discretization, pld.lower_loss, pld.probs, pld.infinity_mass,
                                  pld.pessimistic)
    return PLD.PrivacyLossDistribution(pmf)


def from_dp_accounting(pld):
    """A symmetric dp_accounting PLD as a `Pld` (the same arrays); anything else as it is."""
    if isinstance(pld, Pld) or not getattr(pld, "_symmetric", False):
        return pld
    pmf = pld._pmf_remove
    if hasattr(pmf, "_loss_probs"):
        return Pld(pmf._discretization, pmf._infinity_mass, 0, None, pmf._loss_probs, pmf._pessimistic_estimate)
    if hasattr(pmf, "_probs"):
        return Pld(pmf._discretization, pmf._infinity_mass, pmf._lower_loss, pmf._probs, None,
                   pmf._pessimistic_estimate)
    return pld


def gaussian_deltas(multiplier: float, epsilons):
    """delta(eps) of the Gaussian mechanism with sensitivity 1 and standard deviation
    `multiplier`, at each eps (Balle and Wang 2018, Theorem 8), in log space, bounded from
    above: never below the exact delta. catalogue._balle_wang_delta(up=True) over an array, the
    same allowances (BALLE_WANG_LOG_SLACK on each logarithm, BALLE_WANG_ROUNDING on the result).
    dp_accounting's arithmetic (these logarithms, no allowance) came out up to a relative 1.5e-8
    below the exact delta where the two terms nearly cancel (a large multiplier at the grid's top
    losses: multiplier 1e5), 1e-12 at multiplier 10; the allowances move each delta up by about
    1e-12 of it there, by 1e-6 of it at the most where the terms cancel to 1e-6 of each."""
    special = _special()
    from .catalogue import BALLE_WANG_LOG_SLACK, BALLE_WANG_ROUNDING

    epsilons = np.asarray(epsilons, dtype=np.float64)
    log_first = special.log_ndtr(0.5 / multiplier - epsilons * multiplier)
    log_second = epsilons + special.log_ndtr(-0.5 / multiplier - epsilons * multiplier)
    with np.errstate(invalid="ignore", over="ignore"):
        slack = BALLE_WANG_LOG_SLACK * (1 + np.abs(log_first) + np.where(np.isfinite(log_second),
                                                                          np.abs(log_second), 0.0))
        gap = log_second - log_first - 2 * slack
        value = np.exp(log_first + slack) * -np.expm1(np.minimum(gap, 0.0))
        deltas = np.minimum(1.0, np.nextafter(value * (1 + BALLE_WANG_ROUNDING), np.inf))
    # the terms agree within the allowance: 0; Phi(first) below the smallest float: the smallest
    return np.where(np.isneginf(log_first), math.ulp(0.0), np.where(gap < 0, deltas, 0.0))


def gaussian_pld(multiplier: float, interval: float):
    """dp_accounting's pessimistic Connect-the-Dots PLD of a Gaussian mechanism with
    sensitivity 1 and standard deviation `multiplier` (add-or-remove and replace
    adjacency alike: the Gaussian pair is symmetric), on a grid of step `interval`,
    as a dp_accounting PrivacyLossDistribution (`gaussian` gives the `Pld`)."""
    return to_dp_accounting(gaussian(multiplier, interval))


def gaussian(multiplier: float, interval: float) -> Pld:
    """`gaussian_pld` as a `Pld`. The grid's ends are dp_accounting's GaussianPrivacyLoss
    connect_dots_bounds (the losses at the points where the normal's tails hold
    e^LOG_MASS_TRUNCATION_BOUND / 2 of mass, scipy's norm.ppf being ndtri times the scale)."""
    special = _special()
    if not multiplier > 0 or not interval > 0:
        raise ValueError("a Gaussian PLD needs a positive noise multiplier and interval")
    lower_x = float(special.ndtri(0.5 * math.exp(LOG_MASS_TRUNCATION_BOUND)) * multiplier + 0.0)
    upper_x = -lower_x
    lower_x -= 1  # remove adjacency, sensitivity 1

    def loss(x: float) -> float:  # GaussianPrivacyLoss._privacy_loss_without_subsampling_remove
        return 1 * (-0.5 * 1 - x) / (multiplier ** 2)

    lower = math.floor(loss(upper_x) / interval)
    upper = math.ceil(loss(lower_x) / interval)
    deltas = gaussian_deltas(multiplier, np.arange(lower, upper + 1) * interval)
    return _connect_dots(interval, lower, upper, deltas)


def laplace(parameter: float, interval: float) -> Pld:
    """dp_accounting's `from_laplace_mechanism(parameter, value_discretization_interval=interval)`
    (sensitivity 1, no sampling, Connect-the-Dots, pessimistic) as a `Pld`: the grid from
    -1/b to 1/b, and at each grid loss eps the hockey-stick divergence of LaplacePrivacyLoss
    (AdditiveNoisePrivacyLoss.get_delta_for_epsilon: F(x + 1) - e^eps F(x) at
    x = -(1 + eps b) / 2, F the Laplace CDF of scale b, written as scipy.stats.laplace writes it)."""
    if not parameter > 0 or not interval > 0:
        raise ValueError("a Laplace PLD needs a positive parameter and interval")
    most = 1 / parameter
    lower, upper = math.floor(-most / interval), math.ceil(most / interval)
    epsilons = np.arange(lower, upper + 1) * interval
    threshold = epsilons * parameter  # LaplacePrivacyLoss._inverse_privacy_loss_without_subsampling_remove
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        cutoffs = np.where(threshold > 1, -np.inf, np.where(threshold <= -1, np.inf, 0.5 * (-1 - threshold)))
        upper_cdf = _laplace_cdf((cutoffs + 1) / parameter)
        lower_log_cdf = np.log(_laplace_cdf(cutoffs / parameter))
        deltas = np.clip(upper_cdf - np.exp(epsilons + lower_log_cdf), 0, 1)
    return _connect_dots(interval, lower, upper, deltas)


def _laplace_cdf(z):
    """scipy.stats.laplace's standard CDF (its `_cdf`; 0 and 1 at the infinities, as there)."""
    return np.where(z > 0, 1.0 - 0.5 * np.exp(-z), 0.5 * np.exp(z))


def _connect_dots(interval: float, lower: int, upper: int, deltas) -> Pld:
    """dp_accounting's `create_pmf_pessimistic_connect_dots_fixed_gap` (Doroshenko et al. 2022,
    Algorithm 1 on a grid of fixed gap), the same arithmetic, with the PMF built from the array
    (dense) rather than through a dictionary of every grid point (which cost that function most
    of its time); up to MAX_SPARSE_SIZE points the dictionary, as there (sparse)."""
    deltas = np.asarray(deltas, dtype=np.float64)
    if upper == lower:
        return Pld(interval, deltas[0], 0, None, {lower: 1 - deltas[0]}, True)
    deltas = np.minimum.accumulate(deltas)  # non-increasing, as there
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(interval)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(interval)) / math.expm1(interval)
    probs[-1] = diffs[-1] / math.expm1(-interval)
    probs = np.maximum(0.0, probs)
    if len(probs) <= MAX_SPARSE_SIZE:
        return Pld(interval, deltas[-1], 0, None, dict(zip(range(lower, upper + 1), probs)), True)
    return Pld(interval, float(deltas[-1]), lower, probs, None, True)


SELF_COMPOSE_TAIL = 1e-15  # dp_accounting's default tail mass truncation for self-composition


def self_compose(pld, count: int):
    """`pld.self_compose(count)` (dp_accounting's DensePLDPmf.self_compose: an FFT power of the
    PMF, truncated where a Chernoff bound puts at most SELF_COMPOSE_TAIL of mass, that mass
    counted as an infinite loss), with the Chernoff bound's 40 log-moment-generating values
    computed in one numpy expression instead of 40 calls of scipy's logsumexp (which cost
    dp_accounting's self-composition nearly all its time on a ledger's PMFs). The same
    orders and the same bound (dp_accounting, common.compute_self_convolve_bounds), so the
    same truncation; a sparse PMF is made dense first where dp_accounting makes it dense, and
    anything else (an asymmetric PLD, a small sparse power) goes to dp_accounting unchanged.
    A `Pld` gives a `Pld`, a dp_accounting PLD a dp_accounting PLD."""
    if count == 1:
        return pld
    light = from_dp_accounting(pld)
    if not isinstance(light, Pld):
        return pld.self_compose(count)
    if light.sparse and light.size ** count <= MAX_SPARSE_SIZE:  # dp_accounting keeps these sparse
        found = to_dp_accounting(light).self_compose(count)
        return found if light is not pld else from_dp_accounting(found)
    composed = _dense_self_compose(light.dense(), count)
    return composed if light is pld else to_dp_accounting(composed)


def _dense_self_compose(pmf: Pld, count: int) -> Pld:
    probs = np.asarray(pmf.probs, dtype=np.float64)
    low, high = _self_convolve_bounds(probs, count, SELF_COMPOSE_TAIL)
    length = high - low + 1
    fast = next_fast_len(max(length, len(probs)))
    power = np.real(np_fft.ifft(_fft(probs, fast) ** count))  # scipy.fft.ifft(scipy.fft.fft(...) ** count)
    out = np.roll(power, -low)[:length]
    infinity = SELF_COMPOSE_TAIL - math.expm1(count * math.log1p(-pmf.infinity_mass))
    return Pld(pmf.discretization, infinity, pmf.lower_loss * count + low, np.array(out), None, pmf.pessimistic)


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
    PLD figure on a ledger's PMFs). The same FFT convolution (scipy's fftconvolve, `_convolve`),
    the same partial sums (a cumulative sum adds in the same order as the loop, so the same
    floats) and the same cut, so the same PMF, bit for bit (tests/accounting/test_privacy_loss.py).
    Anything but two symmetric PLDs, or two small sparse PMFs (kept sparse by dp_accounting),
    goes to dp_accounting unchanged. Two `Pld`s give a `Pld`; otherwise a dp_accounting PLD."""
    one, two = from_dp_accounting(first), from_dp_accounting(second)
    light = isinstance(first, Pld) and isinstance(second, Pld)
    if not (isinstance(one, Pld) and isinstance(two, Pld)):
        return to_dp_accounting(first).compose(to_dp_accounting(second))
    if one.sparse and two.sparse and one.size * two.size <= MAX_SPARSE_SIZE:
        found = to_dp_accounting(one).compose(to_dp_accounting(two))
        return from_dp_accounting(found) if light else found
    one, two = one.dense(), two.dense()
    if one.discretization != two.discretization or one.pessimistic != two.pessimistic:
        return to_dp_accounting(first).compose(to_dp_accounting(second))  # dp_accounting refuses these
    probs = _convolve(np.asarray(one.probs, dtype=np.float64), np.asarray(two.probs, dtype=np.float64))
    infinity = one.infinity_mass + two.infinity_mass - one.infinity_mass * two.infinity_mass
    offset, probs, right_tail = _truncate_tails(probs, COMPOSE_TAIL, one.pessimistic)
    composed = Pld(one.discretization, infinity + right_tail, one.lower_loss + two.lower_loss + offset, probs,
                   None, one.pessimistic)
    return composed if light else to_dp_accounting(composed)


def _convolve(one, two):
    """scipy.signal.fftconvolve(one, two) of two 1-d float arrays, its very steps (a length-1
    array by broadcasting; else real FFTs padded to next_fast_len of the full length), with
    numpy.fft's real transforms, scipy.fft's rfftn and irfftn of one axis (the same pocketfft
    transforms): importing scipy.signal imports scipy.stats and scipy.optimize."""
    if len(one) == 1 or len(two) == 1:
        return one * two
    length = len(one) + len(two) - 1
    fast = next_fast_len(length, True)
    return np_fft.irfft(np_fft.rfft(one, fast) * np_fft.rfft(two, fast), fast)[:length].copy()


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
    light = from_dp_accounting(pld)
    if not isinstance(light, Pld) or light.sparse or len(light.probs) == 0:
        return to_dp_accounting(pld).get_epsilon_for_delta(delta)
    infinity = light.infinity_mass
    if infinity > delta:
        return math.inf
    probs = np.flip(np.asarray(light.probs, dtype=np.float64))
    n, step = len(probs), light.discretization
    top = (light.lower_loss + n - 1) * step
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
    """`randomized_response` as a dp_accounting PrivacyLossDistribution."""
    return to_dp_accounting(randomized_response(steps, count, interval))


def randomized_response(steps: int, count: int, interval: float) -> Pld:
    """`count` randomized responses at e = steps * interval, composed exactly: the privacy
    loss is (2k - count) * steps grid points with k ~ Binomial(count, e^e / (1 + e^e))
    (Kairouz, Oh and Viswanath 2015, §3), every atom on the grid (nothing rounded). Atoms
    below 1e-300 go to the infinite loss (pessimistic). Built as dp_accounting's
    `create_from_rounded_probability` builds it from the same atoms (a sparse PMF up to its
    sparse size, else dense), the dense array filled directly rather than through a
    dictionary of every grid point between the atoms. The binomial's masses are
    scipy.stats.binom.pmf's (its `_pmf` is scipy.special's `_binom_pmf`, clipped to [0, 1]),
    read from scipy.special's ufuncs alone (`_special`)."""
    k = np.arange(count + 1)
    probabilities = np.clip(_special()._binom_pmf(k, count, math.exp(-np.logaddexp(0.0, -steps * interval))), 0, 1)
    keep = probabilities > 1e-300
    losses, masses = (2 * k - count)[keep] * steps, probabilities[keep]
    infinity = max(0.0, 1.0 - math.fsum(masses.tolist()))
    if len(losses) <= MAX_SPARSE_SIZE:
        return Pld(interval, infinity, 0, None, {int(v): float(p) for v, p in zip(losses, masses)}, True)
    lower = int(losses[0])
    probs = np.zeros(int(losses[-1]) - lower + 1)
    probs[losses - lower] = masses
    return Pld(interval, infinity, lower, probs, None, True)
