"""Why a figure is ∞ or 0: one vocabulary for every command and report.

A figure without a finite value has one of a few causes, and each output names it
with the same words (docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#public-and-protected-variables):

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
- NOT_IMPLIED: a replace-one guarantee charged in an add/remove dataset (docs/explanation/model.md#variables-subsets-and-neighbours): it
  bounds nothing there; an alarm.
- NOT_READ: a 0 because no release reads the variable (Tan Prop 3.3).
- PAST_ALLOWANCE: the releases are bounded, but their approximate deltas pass the allowance of
  the delta the figure is stated at (the dataset's share of it, Dataset.allowance): no statement
  is left at that delta; an alarm.
- `family_reason`: a family split by key variables of the subset, one of whose members holds no
  add/remove guarantee protecting everything it reads: a record moving between its parts is not
  protected (docs/explanation/model.md#families), though every member's own figure may be finite: an alarm, named with
  the family (`check`'s sentence, cap_unbounded.why_family_unbounded, names its keys and the member).

`unbounded_reason` is the one place that decides which of these an unbounded figure has (a read
without a certified bound first, then a family's move), from the releases charged: `subset`,
`cap list`, the report's caps and its drivers all ask it.

`infinity_text` prints `∞ (why)`; `figure_text` any figure of a report with its
reason when it is ∞. Pure: the reason is chosen from the records and the cap.
"""

from __future__ import annotations

from collections.abc import Collection

from ..accounting.relation import NOT_IMPLIED, not_implied
from ..accounting.spend import Spend
from ..core.numbers import Number, format_number, is_infinite
from ..core.records import Cap, Family, Release

PUBLIC = "public, released exactly"
NOT_PROTECTED = "not protected"
NO_PURE_BOUND = "no pure-epsilon bound"
NO_RHO_BOUND = "no rho bound"
DELTA_ABOVE = "delta above the cap's"
NOT_READ = "not read"
PAST_ALLOWANCE = "approximate deltas past the allowance"

NEUTRAL = frozenset({PUBLIC})  # an ∞ that is expected (docs/explanation/model.md#public-and-protected-variables): no alarm


def infinity_text(why: str | None) -> str:
    """`∞ (why)`; `∞` alone when no reason is known."""
    return f"∞ ({why})" if why else "∞"


def family_reason(family: Family) -> str:
    """Why a keyed family's figure is ∞ (docs/explanation/model.md#families): a record moving between its parts takes
    everything a member reads, and no add/remove guarantee of that member protects all of it. In a
    word, as NO_PURE_BOUND and NO_RHO_BOUND, named by the family (short enough for a table's cell:
    `check`'s and `cap list`'s sentence, cap_unbounded.why_family_unbounded, names its keys and member)."""
    return f"family {family.id}: no add/remove bound"


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
    """Why `spend` has no figure in the cap's unit (cap_measure.measure is ∞): read without a
    certified bound (PUBLIC when `public_only`: what is read so is public), else the unit."""
    if spend.unbounded:
        return PUBLIC if public_only else NOT_PROTECTED
    if cap.rho is not None:
        return NO_RHO_BOUND
    if cap.delta is None:
        return NO_PURE_BOUND
    return DELTA_ABOVE


def release_reason(cap: Cap, release: Release, public: Collection[str]) -> str:
    """Why one release's own charge on a cap is ∞ (cap_unbounded.why_release_unbounded, in a word)."""
    from ..accounting.cost_rule import release_cost

    touched = cap.subset & release.reads
    spend = release_cost(release, frozenset(cap.subset))
    exact = release.exact_variables & touched
    if spend.unbounded and touched and not exact and not_implied(release, touched):
        return NOT_IMPLIED
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


def unbounded_reason(index, names: Collection[str], public: Collection[str]) -> str:
    """Why the figure of the subset `names` is ∞ when its spend is unbounded, from a LedgerIndex
    of the releases charged (the same on every command and on a report's small and large paths):
    - a release reads part of it with no guarantee covering all of that (docs/explanation/model.md#the-cost-of-one-release-on-a-subset): PUBLIC when
      the subset's protected variables alone are bounded (what is read exactly is public), else
      the reason of the protected variables alone (NOT_PROTECTED, or a family's move there);
    - else a keyed family's move (docs/explanation/model.md#families): `family_reason`;
    - else NOT_PROTECTED (an ∞ of unknown cause is an alarm).
    A subset whose spend is bounded is ∞ only at the delta asked: PAST_ALLOWANCE (decided from the
    index's arrays, with no release read: a large report's rows are no longer open then)."""
    names = sorted(n for n in names if n in index.column)
    if not index.subset_spend(names).unbounded:
        return PAST_ALLOWANCE
    if len(index.reads_uncovered(names)):
        protected = [n for n in names if n not in public]
        if not protected or not index.subset_spend(protected).unbounded:
            return PUBLIC
        return unbounded_reason(index, protected, public) if len(protected) < len(names) else NOT_PROTECTED
    moved = index.unprotected_move(names)
    if moved is not None:
        return family_reason(moved[0])
    touched = frozenset(names)
    if any(isinstance(r, Release) and r.reads & touched and not_implied(r, touched) for r in index.releases):
        return NOT_IMPLIED
    return NOT_PROTECTED


def keyed_reason(index, names: Collection[str], public: Collection[str], by_classification: str) -> str:
    """Why an unbounded figure of a table's total row or a pair is ∞: `by_classification` (the
    reason its variables' classification gives, `variable_reason` or `subset_reason`) unless the
    index holds a family split by key variables, whose move may be the cause (`unbounded_reason`
    then): a ledger without one is never read again for a reason."""
    if not any(family.partition for family in index.families.values()):
        return by_classification
    return unbounded_reason(index, names, public)


def index_reason(cap: Cap, index, public: Collection[str]) -> str:
    """Why a cap's figure is ∞, from a LedgerIndex of the releases charged (the same on a report's
    small and large paths): `unbounded_reason` when its spend is unbounded, else not in the cap's
    unit (`unit_reason`)."""
    names = sorted(n for n in cap.subset if n in index.column)
    spend = index.subset_spend(names)
    if spend.unbounded:
        return unbounded_reason(index, names, public)
    return unit_reason(cap, spend)


def driver_reasons(cap: Cap, drivers, index, public: Collection[str]) -> tuple[str | None, ...]:
    """Per driver of a cap (`(release id or "family <id>", its own charge)`, budget's drivers), why
    its own charge is ∞ (None where finite): a family's by `family_reason` when its move is
    unbounded, else by the reason of the subset over its members alone; a release's by
    `release_reason`. From the releases of `index` (family members are held whole)."""
    from ..accounting.budget import FAMILY_DRIVER
    from ..accounting.ledger_index import LedgerIndex

    if not any(is_infinite(value) for _name, value in drivers):
        return tuple(None for _ in drivers)
    row_of = None
    found = []
    for name, value in drivers:
        if not is_infinite(value):
            found.append(None)
            continue
        if name.startswith(FAMILY_DRIVER):
            fid = name[len(FAMILY_DRIVER):]
            members = [index.releases[i] for i in index.members.get(fid, ())]
            found.append(index_reason(cap, LedgerIndex(index.variables, members, [index.families[fid]]), public)
                         if members else NOT_PROTECTED)
            continue
        if row_of is None:
            row_of = {rid: i for i, rid in enumerate(index.release_ids[:])}
        row = row_of.get(name)
        found.append(NOT_PROTECTED if row is None else row_reason(cap, index, row, public))
    return tuple(found)


def row_reason(cap: Cap, index, row: int, public: Collection[str]) -> str:
    """`release_reason` of the release at `row` of a LedgerIndex: the release itself when the
    index holds it whole, else from the arrays (what it reads, what it reads exactly, its charge)."""
    release = index.releases[row]
    if isinstance(release, Release):
        return release_reason(cap, release, public)
    names = sorted(n for n in cap.subset if n in index.column)
    value = index.values[int(index.cost_ids([index.column[n] for n in names])[row])]
    if value.unbounded:
        exact = index.exact_at(row) & frozenset(names)
        return PUBLIC if exact and all(n in public for n in exact) else NOT_PROTECTED
    return unit_reason(cap, value)
