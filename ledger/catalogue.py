"""The mechanisms the ledger knows, and the guarantee each one's parameters imply.

A release file may state its guarantees; when it does not, they are derived
here from the mechanism's parameters (DESIGN 2.2). A mechanism name not in
`CATALOGUE` is refused, never guessed (STYLE 5). Every derivation cites its
source. Explicit guarantees in the file replace the derived ones: they are the
steward's certified claim, and may protect only part of what is read.

Sensitivities belong to a neighbour relation (DESIGN 2.1): the `sensitivity`
parameter is the sensitivity under the mechanism's `relation` (replace by
default), and the derived guarantee is stated for that relation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .records import Guarantee, Mechanism, Notion, Relation

NUMERIC_PARAMS = ("epsilon", "delta", "rho", "scale", "sigma", "sensitivity")


@dataclass(frozen=True, slots=True)
class Problem:
    field: str  # parameter name under `mechanism`
    message: str


Derivation = Callable[[Mechanism, frozenset[str]], tuple[tuple[Guarantee, ...], list[Problem]]]


def _relation(mechanism: Mechanism) -> Relation:
    return Relation(mechanism.param("relation", Relation.REPLACE.value))


def _scale_mechanism(mechanism: Mechanism, reads: frozenset[str]):
    """Geometric (Ghosh, Roughgarden and Sundararajan 2009) and Laplace (Dwork et al.
    2006) noise: epsilon = sensitivity / scale, pure, on everything read."""
    epsilon = mechanism.param("epsilon")
    scale, sensitivity = mechanism.param("scale"), mechanism.param("sensitivity")
    problems: list[Problem] = []
    if epsilon is None:
        if scale is None or sensitivity is None:
            return (), [Problem("epsilon", f"{mechanism.name} needs epsilon, or scale and sensitivity")]
        if scale <= 0:
            return (), [Problem("scale", f"must be positive. Found {scale}.")]
        epsilon = sensitivity / scale
    elif scale is not None and sensitivity is not None and sensitivity / scale != epsilon:
        return (), [Problem("epsilon", f"is {epsilon} but sensitivity / scale is {sensitivity / scale}")]
    guarantee = Guarantee(reads, Notion.PURE, epsilon=epsilon, relation=_relation(mechanism))
    return (guarantee,), problems


def _gaussian(mechanism: Mechanism, reads: frozenset[str]):
    """Gaussian noise: rho = sensitivity^2 / (2 sigma^2), zCDP (Bun and Steinke 2016,
    Prop 1.6); or (epsilon, delta) when those are given instead."""
    rho, sigma, sensitivity = mechanism.param("rho"), mechanism.param("sigma"), mechanism.param("sensitivity")
    epsilon, delta = mechanism.param("epsilon"), mechanism.param("delta")
    relation = _relation(mechanism)
    if sigma is not None and sensitivity is not None:
        if sigma <= 0:
            return (), [Problem("sigma", f"must be positive. Found {sigma}.")]
        implied = sensitivity * sensitivity / (2 * sigma * sigma)
        if rho is not None and rho != implied:
            return (), [Problem("rho", f"is {rho} but sensitivity^2 / (2 sigma^2) is {implied}")]
        rho = implied
    if rho is not None:
        return (Guarantee(reads, Notion.ZCDP, rho=rho, relation=relation),), []
    if epsilon is not None and delta is not None:
        return (Guarantee(reads, Notion.APPROX, epsilon=epsilon, delta=delta, relation=relation),), []
    return (), [Problem("sigma", "gaussian needs sigma and sensitivity, rho, or epsilon and delta")]


def _exact(mechanism: Mechanism, reads: frozenset[str]):
    """No noise: no bound on anything read (DESIGN 2.3, ∞)."""
    for name in ("epsilon", "rho"):
        if mechanism.param(name) is not None:
            return (), [Problem(name, "an exact release has no privacy parameter")]
    return (), []


def _post_processing(mechanism: Mechanism, reads: frozenset[str]):
    """Computed only from other releases' outputs (DESIGN 2.5): reads nothing, costs 0."""
    if reads:
        return (), [Problem("name", f"post-processing reads no data, but reads lists {sorted(reads)}")]
    return (), []


def _tan_consistent_counts(mechanism: Mechanism, reads: frozenset[str]):
    """Tan, Algorithm 1: epsilon on the protected variable(s) (Prop 5.1, with the
    n_i >= 2 correction of DESIGN 2.9); the margin variables are released exactly."""
    epsilon, protects = mechanism.param("epsilon"), mechanism.param("protects")
    if epsilon is None:
        return (), [Problem("epsilon", "tan-consistent-counts needs epsilon")]
    if not protects:
        return (), [Problem("protects", "tan-consistent-counts needs the protected variable(s), "
                                        "in `protects` or as an explicit guarantee")]
    return (Guarantee(frozenset(protects), Notion.PURE, epsilon=epsilon, relation=_relation(mechanism)),), []


def _pufferfish_only(mechanism: Mechanism, reads: frozenset[str]):
    """A Pufferfish-family mechanism (Bailie's p%, Zhang et al.'s attribute-private
    Gaussian, a perfectly sample-private mapping): no DP guarantee, so ∞ on what it
    reads in every DP total; its own guarantee is recorded under `pufferfish` and
    reported apart (DESIGN 2.8)."""
    return (), []


def _declared(mechanism: Mechanism, reads: frozenset[str]):
    """A mechanism described only by its explicit guarantees."""
    return (), [Problem("name", "a declared mechanism needs explicit guarantees")]


CATALOGUE: dict[str, Derivation] = {
    "geometric": _scale_mechanism,
    "laplace": _scale_mechanism,
    "gaussian": _gaussian,
    "exact": _exact,
    "post-processing": _post_processing,
    "tan-consistent-counts": _tan_consistent_counts,
    "declared": _declared,
    "p-percent": _pufferfish_only,
    "attribute-gaussian": _pufferfish_only,
    "modular-sum": _pufferfish_only,
}


def derive_guarantees(mechanism: Mechanism, reads: frozenset[str]) -> tuple[tuple[Guarantee, ...], list[Problem]]:
    derivation = CATALOGUE.get(mechanism.name)
    if derivation is None:
        known = ", ".join(sorted(CATALOGUE))
        return (), [Problem("name", f"unknown mechanism {mechanism.name!r}; known: {known}")]
    sampling = sampling_problems(mechanism)
    if sampling:
        return (), sampling
    guarantees, problems = derivation(mechanism, reads)
    if problems or mechanism.param("sample_size") is None or mechanism.param("epsilon_before_subsampling") is not None:
        return guarantees, problems  # (a mechanism run by the ledger records its amplified guarantee itself)
    return _amplified(mechanism, guarantees)


SAMPLING_PARAMS = ("sample_size", "population")


def sampling_problems(mechanism: Mechanism) -> list[Problem]:
    """The sampling event (sample_size of population, without replacement; DESIGN 2.7): both
    positive integers, the sample no larger than the population."""
    values = {name: mechanism.param(name) for name in SAMPLING_PARAMS}
    if all(value is None for value in values.values()):
        return []
    for name, value in values.items():
        if value is None:
            return [Problem(name, "a subsampled release needs both sample_size and population")]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return [Problem(name, f"must be a positive integer. Found {value!r}.")]
    if values["sample_size"] > values["population"]:
        return [Problem("sample_size", f"must be at most the population ({values['population']}). "
                                       f"Found {values['sample_size']}.")]
    return []


def _amplified(mechanism: Mechanism, guarantees):
    """A pure guarantee of a mechanism run on a sample drawn without replacement, amplified by
    Balle, Barthe and Gaboardi (2018): ln(1 + beta (e^eps - 1)), rounded up (DESIGN 2.7)."""
    from fractions import Fraction

    from .mechanisms.subsampling import subsampled_epsilon

    beta = Fraction(mechanism.param("sample_size"), mechanism.param("population"))
    result = []
    for guarantee in guarantees:
        if guarantee.notion != Notion.PURE or guarantee.relation != Relation.REPLACE:
            return (), [Problem("sample_size", "amplification by subsampling is certified here for pure "
                                               "guarantees under replacement neighbours only")]
        if guarantee.epsilon:
            epsilon = min(guarantee.epsilon, Fraction(subsampled_epsilon(guarantee.epsilon, beta)))
            guarantee = Guarantee(guarantee.protects, guarantee.notion, epsilon=epsilon, relation=guarantee.relation)
        result.append(guarantee)
    return tuple(result), []


def needs_explicit_guarantees(mechanism: Mechanism) -> bool:
    return mechanism.name == "declared"

