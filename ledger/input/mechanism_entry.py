"""A release entry's mechanism and guarantees, read from a file.

Every parameter that is not a valid number and an unknown mechanism are reported together;
explicit guarantees are checked against what the parameters imply (`overclaims`).
Invariant: a Mechanism returned has only numbers the catalogue can read; guarantees
returned claim no more than the parameters imply.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..accounting.catalogue import CATALOGUE, NUMERIC_PARAMS, PARAMETERS, derive_guarantees, overclaims, \
    unknown_parameters
from ..core.records import Guarantee, Mechanism, Notion, Relation
from .documents import Collector, Path_
from .schema_check import RELEASE_SCHEMA, Taint, nearest_places, schema_places, under_places


SCALE_MECHANISMS = ("laplace", "geometric")  # epsilon, or scale and sensitivity (catalogue._scale_mechanism)


def build_mechanism(entry: dict, reads: frozenset[str], out: Collector, at: Path_,
                     refused: Taint | None = None) -> Mechanism | None:
    """The release's mechanism, or None with its problems added: every parameter that is not a
    valid number, and an unknown mechanism name, are all reported (one pass); a value the schema
    refused (`refused`) is reported by the schema alone."""
    refused = refused or Taint()
    spec = entry.get("mechanism")
    if spec is None:
        if refused.at(at):
            return None  # (the release has a field the schema refused: a misspelt `mechansim` is that problem)
        if reads and not refused.within(at + ("reads",)):
            out.add(at + ("mechanism",), "a release that reads data needs a mechanism "
                                         "(use {name: exact} for a release without noise)")
            return None
        spec = {"name": "post-processing"}
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) \
            or refused.within(at + ("mechanism", "name")):
        return None  # (the schema said so)
    params: dict[str, Any] = {}
    whole = True
    for problem in unknown_parameters(spec["name"], spec):
        # a field of the release written among the parameters is told where it goes; a parameter
        # of another mechanism, which mechanisms take it (a guarantee is no place for a scale)
        key = problem.field
        parameter = any(key in accepted.names for accepted in PARAMETERS.values())
        where = [] if parameter else nearest_places(schema_places(RELEASE_SCHEMA).get(key, ()), at + ("mechanism",))
        out.add(at + ("mechanism", key), f"{spec['name']} takes no parameter {key!r}: it belongs {under_places(where)}"
                if where else problem.message)
        whole = False
    for key, value in spec.items():
        if key == "name":
            continue
        if refused.within(at + ("mechanism", key)):
            whole = False
        elif key in NUMERIC_PARAMS:
            number = out.number(value, at + ("mechanism", key), below_one=key == "delta",
                                positive=key in ("scale", "sigma"))
            if number is None:
                whole = False
            else:
                params[key] = number
        elif isinstance(value, list):
            params[key] = tuple(value)
        else:
            params[key] = value
    if whole and spec["name"] in SCALE_MECHANISMS and "scale" in params and "sensitivity" not in params \
            and not _stray_parameters(entry, spec["name"]):
        # epsilon = sensitivity / scale: a scale alone says nothing, and beside an epsilon it was ignored
        # (with a sensitivity, a contradiction is refused: catalogue._scale_mechanism)
        out.add(at + ("mechanism", "scale"), f"a {spec['name']} scale is read with its sensitivity (epsilon = "
                                             "sensitivity / scale): give sensitivity too, or leave scale out")
        whole = False
    if not whole:  # the guarantees cannot be derived; the name is still checked
        if spec["name"] not in CATALOGUE:
            for problem in derive_guarantees(Mechanism(spec["name"], ()), reads)[1]:
                out.add(at + ("mechanism", problem.field), problem.message)
        return None
    return Mechanism(spec["name"], tuple(sorted(params.items())))


def _stray_parameters(entry: dict, name: str) -> bool:
    """A parameter of the mechanism written beside it, in the release: the schema says where it goes,
    and what the mechanism then lacks is that parameter, not another problem to report."""
    accepted = PARAMETERS.get(name)
    return accepted is not None and any(key in accepted.names for key in entry)


def build_guarantees(entry, mechanism, reads, out: Collector, at: Path_, check_variables,
                      refused: Taint | None = None) -> tuple[Guarantee, ...]:
    refused = refused or Taint()
    if mechanism is None:
        return ()
    if "protects" in dict(mechanism.params):
        check_variables(mechanism.param("protects"), at + ("mechanism", "protects"))
    derived, problems = derive_guarantees(mechanism, reads)
    explicit_specs = entry.get("guarantees")
    if explicit_specs is not None and not isinstance(explicit_specs, list):
        return ()  # (the schema said so)
    if explicit_specs is None:
        for problem in problems:
            if not (problem.missing and _stray_parameters(entry, mechanism.name)):
                out.add(at + ("mechanism", problem.field), problem.message)
        return derived
    # explicit guarantees replace derived ones; the mechanism must still be known, and its
    # parameters, where given, consistent (a claim is checked against them: overclaims)
    for problem in problems:
        if not problem.missing:
            out.add(at + ("mechanism", problem.field), problem.message)
    if mechanism.name in ("exact", "post-processing") and explicit_specs:
        out.add(at + ("guarantees",), f"a {mechanism.name} release cannot carry guarantees")
    guarantees = []
    for index, spec in enumerate(explicit_specs):
        g_at = at + ("guarantees", index)
        if refused.within(g_at):
            continue  # (the schema said what is wrong with it)
        protects = check_variables(spec["protects"], g_at + ("protects",)) if "protects" in spec else reads
        relation = Relation(spec.get("relation", Relation.REPLACE.value))
        if "rho" in spec:
            if "epsilon" in spec or "delta" in spec:
                out.add(g_at, "a guarantee is either rho (zCDP) or epsilon (with optional delta), not both")
                continue
            rho = out.number(spec["rho"], g_at + ("rho",))
            if rho is not None:
                guarantees.append(Guarantee(protects, Notion.ZCDP, rho=rho, relation=relation))
            continue
        epsilon = out.number(spec["epsilon"], g_at + ("epsilon",))
        delta = out.number(spec["delta"], g_at + ("delta",), below_one=True) if "delta" in spec else Fraction(0)
        if epsilon is None or delta is None:
            continue
        if delta:
            guarantees.append(Guarantee(protects, Notion.APPROX, epsilon=epsilon, delta=delta, relation=relation))
        else:
            guarantees.append(Guarantee(protects, Notion.PURE, epsilon=epsilon, relation=relation))
    if len(guarantees) == len(explicit_specs):  # no claim stronger than the parameters imply (docs/explanation/model.md#composition)
        for index, field_, message in overclaims(mechanism, reads, tuple(guarantees)):
            out.add(at + ("guarantees", index, field_), message)
    return tuple(guarantees)
