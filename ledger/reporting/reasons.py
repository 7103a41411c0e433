"""Why a figure is ∞ or 0: one vocabulary for every command and report.

A figure without a finite value has one of a few causes, and each output names it
with the same words (DESIGN 2.3, 2.11):

- PUBLIC: a variable classified public is read by a release with no guarantee
  covering it: released exactly, by design, so its ∞ is expected and neutral.
  (A public variable covered by a guarantee has a finite figure, and one no
  release reads has 0: neither is "released exactly".)
- NOT_PROTECTED: a protected variable (not classified public) is read without a
  certified bound: an alarm.
- NO_PURE_BOUND / NO_RHO_BOUND / DELTA_ABOVE: the releases are protected, but not
  in the unit of the cap the figure is stated in: a zCDP or (epsilon, delta)
  guarantee has no pure-epsilon bound, an (epsilon, delta) guarantee has no rho
  bound, and a delta larger than the cap's has no epsilon at the cap's delta.
- NOT_READ: a 0 because no release reads the variable (Tan Prop 3.3).

`infinity_text` prints `∞ (why)`; `figure_text` any figure of a report with its
reason when it is ∞. Pure: the reason is chosen from the records and the cap.
"""

from __future__ import annotations

from collections.abc import Collection

from ..accounting.spend import Spend
from ..core.numbers import Number, format_number, is_infinite
from ..core.records import Cap, Release

PUBLIC = "public, released exactly"
NOT_PROTECTED = "not protected"
NO_PURE_BOUND = "no pure-epsilon bound"
NO_RHO_BOUND = "no rho bound"
DELTA_ABOVE = "delta above the cap's"
NOT_READ = "not read"

NEUTRAL = frozenset({PUBLIC})  # an ∞ that is expected (DESIGN 2.11): no alarm


def infinity_text(why: str | None) -> str:
    """`∞ (why)`; `∞` alone when no reason is known."""
    return f"∞ ({why})" if why else "∞"


def variable_reason(name: str, public: Collection[str]) -> str:
    """Why a cell of one variable (or a subset's figure) is ∞: its classification decides."""
    return PUBLIC if name in public else NOT_PROTECTED


def subset_reason(names: Collection[str], public: Collection[str], infinite: Collection[str] = ()) -> str:
    """Why the figure of a subset (a pair, the whole dataset) is ∞: neutral (PUBLIC) only when
    it holds a public variable and none of its protected variables is ∞ alone (`infinite`: the
    variables whose own figure is ∞); else an alarm."""
    if any(n in public for n in names) and not any(n in infinite for n in names if n not in public):
        return PUBLIC
    return NOT_PROTECTED


def unit_reason(cap: Cap, spend: Spend, public_only: bool = False) -> str:
    """Why `spend` has no figure in the cap's unit (budget.measure is ∞): read without a
    certified bound (PUBLIC when `public_only`: what is read so is public), else the unit."""
    if spend.unbounded:
        return PUBLIC if public_only else NOT_PROTECTED
    if cap.rho is not None:
        return NO_RHO_BOUND
    if cap.delta is None:
        return NO_PURE_BOUND
    return DELTA_ABOVE


def release_reason(cap: Cap, release: Release, public: Collection[str]) -> str:
    """Why one release's own charge on a cap is ∞ (budget.why_release_unbounded, in a word)."""
    from ..accounting.engine import release_cost

    touched = cap.subset & release.reads
    spend = release_cost(release, frozenset(cap.subset))
    exact = release.exact_variables & touched
    return unit_reason(cap, spend, public_only=bool(exact) and spend.unbounded and all(n in public for n in exact))


def figure_text(value: Number, why: str | None = None, *, down: bool = False) -> str:
    """A figure as every report prints it: `∞ (why)` when unbounded (NOT_PROTECTED when no
    reason is given: an ∞ of unknown cause is an alarm), else as the command line prints it
    (`format_number`: 4 decimals, rounded up for a loss, down for a headroom; exact
    fractions kept)."""
    if is_infinite(value):
        if value < 0:
            return "-∞"
        return infinity_text(why or NOT_PROTECTED)
    return format_number(value, down=down)


def index_reason(cap: Cap, index, public: Collection[str]) -> str:
    """Why a cap's figure is ∞, from a LedgerIndex of the releases charged (the same on a report's
    small and large paths): read without a certified bound (PUBLIC when the subset's protected
    variables alone are bounded: what is read exactly is public), else not in the cap's unit."""
    names = sorted(n for n in cap.subset if n in index.column)
    protected = [n for n in names if n not in public]
    spend = index.subset_spend(names)
    if spend.unbounded:
        return PUBLIC if not protected or not index.subset_spend(protected).unbounded else NOT_PROTECTED
    return unit_reason(cap, spend)
