"""Why a figure on a cap is ∞, in words: the release or family that makes it so, and what to do.

The same sentence on `check`, `cap list` and `cap set`, whatever the plan. Invariant: a
reason is given exactly when the figure is ∞ (None when it is finite).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from .relation import charged_words, not_implied
from .spend import Spend, allowance_words
from .cost_rule import candidates, family_options, unprotected_move
from .ledger_index import LedgerIndex
from ..core.numbers import format_delta, is_infinite
from ..core.records import Cap, Family, Notion, Release
from .cap_measure import options_measure


def why_unbounded(cap: Cap, spend: Spend) -> str:
    """Why a spend has no finite figure in a cap's unit."""
    if spend.unbounded:
        return "a release reads the subset without a certified bound (not protected)"
    if cap.rho is not None:
        return "it includes (epsilon, delta) releases, which a rho cap cannot hold"
    if cap.delta is None:
        return "it includes (epsilon, delta) or zCDP releases, which a pure epsilon cap cannot hold"
    if cap.filter == "gaussian":
        return ("it includes rho-only or (epsilon, delta) releases, which a Gaussian-DP cap cannot hold")
    if cap.allowance == Fraction(1, 2):
        return ("the approximate releases' deltas pass the allowance, half of the cap's delta (the other half is "
                "the filter's)")
    return (f"the approximate releases' deltas pass the allowance, {allowance_words(cap.allowance)} of the cap's "
            "delta (the rest is the filter's)")


def _guarantee_words(guarantee) -> str:
    """A guarantee's figure; as charged in its dataset's relation when converted (docs/explanation/model.md#variables-subsets-and-neighbours)."""
    if guarantee.charge_relation != guarantee.relation:
        return charged_words(guarantee)
    if guarantee.notion == Notion.ZCDP:
        return f"rho {guarantee.rho}"
    if guarantee.notion == Notion.APPROX:
        return f"epsilon {guarantee.epsilon}, delta {guarantee.delta}"
    return f"epsilon {guarantee.epsilon}"


def why_release_unbounded(cap: Cap, release: Release) -> str | None:
    """In words, why a release's own charge on a cap is ∞ (None when it is finite)."""
    touched = cap.subset & release.reads
    if not touched:
        return None
    options = candidates(release, cap.subset)
    covering = [g for g in release.guarantees if touched <= g.protects]
    if not options:
        if not_implied(release, touched):  # covered, in a relation that bounds nothing in the dataset's
            return f"{release.id}: {'; '.join(charged_words(g) for g in covering)}"
        return _uncovered_words(release.id, release.exact_variables & touched, touched)
    if not is_infinite(options_measure(cap, options)):
        return None
    kind = release.mechanism.name
    # each guarantee as charged in the dataset's relation (a converted delta is the one compared)
    described = f"{release.id} is a {kind} ({'; '.join(_guarantee_words(g) for g in covering)})"
    if cap.rho is not None:
        return (f"{described} and this cap is in rho: an (epsilon, delta) guarantee has no zCDP bound; "
                "declare the cap in epsilon at a delta (`cap set`: docs/how-to/set-budgets.md)")
    if cap.delta is None:
        if any(g.notion == Notion.ZCDP for g in covering):
            return (f"{described} and this cap is in pure epsilon: a zCDP guarantee (a Gaussian) has no "
                    "pure-epsilon bound; declare the cap with a delta or in rho (`cap set`: docs/how-to/set-budgets.md)")
        return (f"{described} and this cap is in pure epsilon: an (epsilon, delta) guarantee has no "
                "pure-epsilon bound; declare the cap with a delta (`cap set`: docs/how-to/set-budgets.md)")
    if cap.filter == "gaussian":
        return f"{described} and this cap is a Gaussian-DP filter, which admits no (epsilon, delta) release"
    return (f"{described}: its delta passes the approximate releases' allowance, "
            f"{allowance_words(cap.allowance)} of the cap's delta {format_delta(cap.delta)}")


def _uncovered_words(release_id: str, exact: frozenset[str], touched: frozenset[str]) -> str:
    """A release with no guarantee covering what it reads of a cap's subset (docs/explanation/model.md#the-cost-of-one-release-on-a-subset)."""
    if exact:
        return f"{release_id} reads {', '.join(sorted(exact))} exactly (no guarantee covers it)"
    return (f"{release_id}: no one guarantee covers all of {', '.join(sorted(touched))} "
            "that it reads of this cap's subset")


def why_family_unbounded(cap: Cap, family: Family, members: Sequence[Release]) -> str | None:
    """In words, why a family's charge on a cap is ∞ (None when it is finite)."""
    options = family_options(family, members, cap.subset)
    if options and not is_infinite(options_measure(cap, options)):
        return None
    member = unprotected_move(family, members, cap.subset)
    if member is not None:
        return (f"family {family.id} is split by {', '.join(sorted(family.partition))}, in this cap's "
                f"subset: a record moving between parts takes everything {member.id} reads "
                f"({', '.join(sorted(member.reads))}) with it, and no add/remove guarantee of "
                f"{member.id} protects all of it")
    for member in members:
        reason = why_release_unbounded(cap, member)
        if reason is not None:
            return f"family {family.id}: {reason}"
    return f"family {family.id} has no certified bound in this cap's unit"


def why_index_unbounded(cap: Cap, index: LedgerIndex) -> str:
    """In words, why the cap's figure over the releases of `index` is ∞ (the `check` sentence of the
    release or family that makes it so, as `why_release_unbounded` and `why_family_unbounded`
    say it; `why_unbounded` when no one unit does): the same reason on `check`, `cap list` and
    `cap set`, whatever the plan."""
    names = frozenset(n for n in cap.subset if n in index.column)
    uncovered = index.reads_uncovered(names) if names else ()
    if len(uncovered):  # read without a certified bound (docs/explanation/model.md#the-cost-of-one-release-on-a-subset)
        rows = {int(i) for i in uncovered}
        member_of = {i: fid for fid, rows_ in index.members.items() for i in rows_ if i in rows}
        i = int(uncovered[0])
        if i in member_of:
            fid = member_of[i]
            reason = why_family_unbounded(cap, index.families[fid], [index.releases[k] for k in index.members[fid]])
        elif isinstance(index.releases[i], Release):  # held whole (a release with a choice of charges)
            reason = why_release_unbounded(cap, index.releases[i])
        else:  # a simple release: what it reads exactly, from the arrays
            touched = cap.subset & index.reads_at(i)
            reason = _uncovered_words(str(index.release_ids[i]), index.exact_at(i) & touched, touched)
        if reason is not None:
            return reason
    moved = index.unprotected_move(names)
    if moved is not None:  # a record moving between a keyed family's parts (docs/explanation/model.md#families)
        family, _ = moved
        return why_family_unbounded(cap, family, [index.releases[k] for k in index.members[family.id]])
    return why_unbounded(cap, index.subset_spend(names))
