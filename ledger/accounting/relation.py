"""Neighbour relations: a guarantee charged in its dataset's relation (docs/explanation/model.md#variables-subsets-and-neighbours).

A dataset states the relation its figures and caps are in: replace-one (Tan's bounded
U-neighbours, the default) or add/remove (OpenDP's and Tumult's usual unit). A guarantee
in the dataset's relation is charged as stated. One in the other relation is converted
here, and only here (`charged`); `conversion` says what was done, for output.

- add/remove -> replace-one: a replacement is a removal followed by an addition, so the
  guarantee holds at distance 2 (group privacy, k = 2);
- replace-one -> add/remove: nothing follows in general (n is public under replace-one,
  and a replace-one guarantee says nothing about neighbours of another size). Where the
  mechanism's parameters are known, `rederived` derives the guarantee again from them with
  the add/remove sensitivity; otherwise the charge is ∞ (`NOT_IMPLIED`).

Invariant: `charged(g, r)` is None or a guarantee stated in relation `r`, valid for every
pair of `r`-neighbours whenever `g` is valid for its own.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from ..core.numbers import float_up
from ..core.records import Dataset, Guarantee, Mechanism, Notion, Relation, Release

NOT_IMPLIED = "a replace-one guarantee does not bound add/remove neighbours"
GROUP_PRIVACY = "group privacy, k = 2"


def charged(guarantee: Guarantee, relation: Relation) -> Guarantee | None:
    """`guarantee` as a guarantee for neighbours under `relation`, or None (no certified bound).

    add/remove -> replace-one, group privacy for a group of k = 2:
    - pure: 2 epsilon (Dwork and Roth 2014, Theorem 2.2);
    - (epsilon, delta): (2 epsilon, (1 + e^epsilon) delta), from the definition applied twice
      along x -> y -> z: P[M(x) in S] <= e^eps (e^eps P[M(z) in S] + delta) + delta
      (the k = 2 case of the chain behind Vadhan 2017, Lemma 2.3, whose stated form
      k e^((k-1) eps) delta is the larger 2 e^eps delta); e^epsilon rounded up;
    - rho-zCDP: k^2 rho = 4 rho (Bun and Steinke 2016, Prop 1.9 (ii))."""
    if guarantee.relation == relation:
        return guarantee
    if guarantee.relation == Relation.REPLACE:
        return None
    if guarantee.notion == Notion.PURE:
        return replace(guarantee, epsilon=2 * guarantee.epsilon, relation=relation)
    if guarantee.notion == Notion.ZCDP:
        return replace(guarantee, rho=4 * guarantee.rho, relation=relation)
    if guarantee.epsilon >= 700:  # e^epsilon past any float: (1 + e^epsilon) delta >= 1 bounds nothing
        delta = Fraction(1)
    else:
        e_eps = Fraction(math.nextafter(math.exp(float_up(guarantee.epsilon)), math.inf))
        delta = min(guarantee.delta * (1 + e_eps), Fraction(1))
    return replace(guarantee, epsilon=2 * guarantee.epsilon, delta=delta, relation=relation)


def conversion(release_id: str, stated: Guarantee, relation: Relation) -> str | None:
    """What charging `stated` in a dataset of `relation` does, in words; None when it is
    charged as stated: `r1: add/remove epsilon 1/2, charged as replace-one epsilon 1 (group
    privacy, k = 2)`, or `r1: replace-one epsilon 1, not charged as add/remove: ∞ (a
    replace-one guarantee does not bound add/remove neighbours)`."""
    if stated.relation == relation:
        return None
    target = charged(stated, relation)
    if target is None:
        return f"{release_id}: {stated.relation.label} {figure(stated)}, charged as {relation.label} ∞ ({NOT_IMPLIED})"
    return (f"{release_id}: {stated.relation.label} {figure(stated)}, charged as {relation.label} {figure(target)} "
            f"({GROUP_PRIVACY})")


def conversions(release: Release) -> list[dict]:
    """Each guarantee of `release` charged other than as stated: its figures, for output (JSON)."""
    found = []
    for guarantee in release.guarantees:
        relation = guarantee.charge_relation
        note = conversion(release.id, guarantee, relation)
        if note is None:
            continue
        target = charged(guarantee, relation)
        found.append({"release": release.id, "stated": _figures(guarantee), "charged_in": relation.value,
                      "charged": None if target is None else _figures(target),
                      "reason": NOT_IMPLIED if target is None else GROUP_PRIVACY, "text": note})
    return found


def not_implied(release: Release, touched: frozenset[str]) -> bool:
    """Whether what `release` reads of `touched` is covered only by guarantees that bound nothing
    in their dataset's relation (a replace-one guarantee charged in an add/remove dataset)."""
    covering = [g for g in release.guarantees if (touched & release.reads) <= g.protects]
    return bool(covering) and all(charged(g, g.charge_relation) is None for g in covering)


def charged_words(guarantee: Guarantee) -> str:
    """A guarantee as charged in its dataset's relation, saying so when it is converted:
    `epsilon 1/2`, or `add/remove epsilon 0.5, charged as replace-one epsilon 1 (group privacy, k = 2)`."""
    note = conversion("", guarantee, guarantee.charge_relation)
    return figure(guarantee) if note is None else note[2:]


def figure(guarantee: Guarantee) -> str:
    from ..core.numbers import format_delta, format_number

    if guarantee.notion == Notion.PURE:
        return f"epsilon {format_number(guarantee.epsilon)}"
    if guarantee.notion == Notion.APPROX:
        return f"(epsilon {format_number(guarantee.epsilon)}, delta {format_delta(guarantee.delta)})"
    return f"rho {format_number(guarantee.rho)}"


def _figures(guarantee: Guarantee) -> dict:
    from ..core.numbers import fraction_text

    values = {"relation": guarantee.relation.value, "notion": guarantee.notion.value}
    for name in ("epsilon", "delta", "rho"):
        value = getattr(guarantee, name)
        if value is not None:
            values[name] = fraction_text(value)
    return values


def in_dataset(release: Release, dataset: Dataset) -> Release:
    """`release` as recorded into `dataset`: in an add/remove dataset each guarantee is marked
    to be charged there (`Guarantee.charged_in`), and a replace-one guarantee whose mechanism's
    parameters are known is derived again for add/remove neighbours (`rederived`); in a
    replace-one dataset the release is unchanged (None: replace-one, as ledgers before
    datasets stated a relation read)."""
    if dataset.relation == Relation.REPLACE or not release.guarantees:
        return release
    guarantees = []
    for guarantee in release.guarantees:
        if guarantee.relation == Relation.REPLACE:
            again = rederived(release.mechanism, guarantee)
            guarantee = again if again is not None else guarantee
        guarantees.append(replace(guarantee, charged_in=dataset.relation))
    return replace(release, guarantees=tuple(guarantees))


def rederived(mechanism: Mechanism, guarantee: Guarantee) -> Guarantee | None:
    """The add/remove guarantee of a replace-one `guarantee` whose mechanism's parameters are
    known: Laplace / geometric (epsilon = sensitivity / scale, Dwork et al. 2006) or Gaussian
    (rho = sensitivity^2 / (2 sigma^2), Bun and Steinke 2016, Prop 1.6) noise on a query whose
    add/remove sensitivity is known (docs/explanation/model.md#variables-subsets-and-neighbours): a histogram or a count of records (1), a sum
    clipped to [lower, upper] (max(|lower|, |upper|)). None otherwise: a mean (n is not public
    under add/remove), any other query, a declared figure."""
    sensitivity = add_remove_sensitivity(mechanism)
    if sensitivity is None:
        return None
    if mechanism.name in ("laplace", "geometric") and guarantee.notion == Notion.PURE:
        scale = mechanism.param("scale")
        if scale is None or scale <= 0:
            return None
        return replace(guarantee, epsilon=Fraction(sensitivity) / Fraction(scale), relation=Relation.ADD_REMOVE)
    if mechanism.name == "gaussian" and guarantee.notion == Notion.ZCDP:
        sigma = mechanism.param("sigma")
        if sigma is None or sigma <= 0:
            return None
        sensitivity = Fraction(sensitivity)
        return replace(guarantee, rho=sensitivity * sensitivity / (2 * Fraction(sigma) ** 2),
                       relation=Relation.ADD_REMOVE)
    return None


def add_remove_sensitivity(mechanism: Mechanism) -> Fraction | None:
    """The add/remove sensitivity of the mechanism's query, when its parameters state it
    (`query` crosstab / histogram / count; sum with lower and upper), else None."""
    query = mechanism.param("query")
    if query in ("crosstab", "histogram", "count"):
        return Fraction(1)  # adding or removing a record changes one cell by 1
    if query == "sum":
        lower, upper = mechanism.param("lower"), mechanism.param("upper")
        if lower is None or upper is None:
            return None
        return max(abs(Fraction(lower)), abs(Fraction(upper)))
    return None
