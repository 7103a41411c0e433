"""OpenDP measurements -> ledger releases.

A `Measurement` carries its privacy map: `measurement.map(d_in)` is the
guarantee for inputs at distance `d_in` under its input metric, in its output
measure (OpenDP programming framework, Gaboardi, Hay and Vadhan 2020):

- MaxDivergence -> pure epsilon;
- ZeroConcentratedDivergence -> rho-zCDP;
- Approximate(MaxDivergence) -> (epsilon, delta);
- SmoothedMaxDivergence (a privacy profile) -> (epsilon, delta) at the `delta` you give.

The neighbour relation is read from the input metric: SymmetricDistance and
InsertDeleteDistance count added or removed records (add-remove, d_in 1 for
one privacy unit; a replacement is at distance 2), ChangeOneDistance and
HammingDistance count changed records (replace, d_in 1). Any other metric
(AbsoluteDistance, L1/L2 distances: a distance between query answers, not
datasets) cannot tell: declare `d_in` (the sensitivity under your relation)
and `relation` yourself. The guarantee is recorded in the relation it is stated in and
charged in its dataset's (docs/explanation/model.md#variables-subsets-and-neighbours): in an add/remove dataset a SymmetricDistance
measurement is charged exactly its `map(1)`; in a replace-one dataset, by group privacy
(accounting.relation). An `opendp.context.Context` is recorded as the
budget of its compositor at its own `d_in` (its privacy unit).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.records import Notion, Relation, Release, Status
from . import guarantee, loss_fraction, make_release, refuse, relation_of

ADD_REMOVE_METRICS = ("SymmetricDistance", "InsertDeleteDistance", "SymmetricIdDistance")
REPLACE_METRICS = ("ChangeOneDistance", "HammingDistance", "ChangeOneIdDistance")


def type_name(value: Any) -> str:
    """An OpenDP metric's or measure's type, by its public `type` (`SymmetricDistance`,
    `Approximate<MaxDivergence>`); its text where it has none."""
    found = getattr(value, "type", None)
    return str(found if found is not None else value)


def metric_relation(metric: Any) -> Relation | None:
    """The neighbour relation an OpenDP input metric counts in, or None when it cannot tell."""
    name = type_name(metric).split("<")[0].split("(")[0]
    if name in REPLACE_METRICS:
        return Relation.REPLACE
    if name in ADD_REMOVE_METRICS:
        return Relation.ADD_REMOVE
    return None


def release(measurement: Any, *, id: str, dataset: str, reads: Iterable[str], d_in: Any = None,
            relation: str | Relation | None = None, delta: float | None = None,
            protects: Iterable[str] | None = None, title: str = "",
            status: Status | str = Status.PLANNED) -> Release:
    """One release from an OpenDP Measurement (or an opendp.context Context)."""
    source = f"OpenDP measurement for release {id}"
    if hasattr(measurement, "accountant") and hasattr(measurement, "d_in"):  # opendp.context.Context
        d_in = measurement.d_in if d_in is None else d_in
        measurement = measurement.accountant
    if not hasattr(measurement, "map") or not hasattr(measurement, "input_metric"):
        raise refuse(source, "measurement", f"not an OpenDP Measurement: {type(measurement).__name__}")
    metric = measurement.input_metric
    native = metric_relation(metric)
    wanted = None if relation is None else relation_of(relation, source)
    if native is None:
        if d_in is None or wanted is None:
            raise refuse(source, "relation", f"the input metric {metric} does not say which datasets are "
                                             "neighbours: declare d_in (the sensitivity of what it measures under "
                                             "your neighbour relation) and relation='replace' or 'add-remove'")
        chosen = wanted
    else:
        chosen = wanted or native
        if d_in is None:
            # one privacy unit: one record added or removed (add-remove metrics), one changed (replace
            # metrics); a replacement is a removal and an addition: distance 2 under add-remove metrics
            d_in = 2 if (native == Relation.ADD_REMOVE and chosen == Relation.REPLACE) else 1
        elif native == Relation.REPLACE and chosen == Relation.ADD_REMOVE:
            raise refuse(source, "relation", f"the input metric {metric} counts changed records (replace); it "
                                             "gives no bound for adding or removing one")
    measure = type_name(measurement.output_measure).replace("<", "(").replace(">", ")")
    try:
        loss = measurement.map(d_in)
    except Exception as exc:  # OpenDP raises OpenDPException for a d_in of the wrong type
        raise refuse(source, "d_in", f"the privacy map refused d_in={d_in!r}: {exc}") from None
    params: dict[str, Any] = {"library": "opendp", "output_measure": measure, "input_metric": str(metric),
                              "d_in": _param(d_in)}
    if measure.startswith("MaxDivergence"):
        found = guarantee(Notion.PURE, chosen, epsilon=loss_fraction(loss))
    elif measure.startswith("ZeroConcentratedDivergence"):
        found = guarantee(Notion.ZCDP, chosen, rho=loss_fraction(loss))
    elif measure.startswith("Approximate(MaxDivergence"):
        epsilon, found_delta = loss
        found = _approx(chosen, epsilon, found_delta)
    elif measure.startswith("SmoothedMaxDivergence"):
        if delta is None:
            raise refuse(source, "delta", "the measurement gives a privacy profile (SmoothedMaxDivergence): "
                                          "give the delta to state its epsilon at")
        found = _approx(chosen, loss.epsilon(delta), delta)
    else:
        raise refuse(source, "output_measure", f"output measure {measure} is not one the ledger composes "
                                               "(pure, zCDP, approximate DP); convert it first, e.g. with "
                                               "opendp.combinators.make_fix_delta")
    return make_release(id=id, dataset=dataset, reads=reads, mechanism="declared", params=params,
                        guarantees=[found], protects=protects, title=title, status=status, source=source)


def _approx(relation: Relation, epsilon: float, delta: float):
    found_delta = loss_fraction(delta)
    if found_delta == 0:
        return guarantee(Notion.PURE, relation, epsilon=loss_fraction(epsilon))
    return guarantee(Notion.APPROX, relation, epsilon=loss_fraction(epsilon), delta=found_delta)


def _param(value: Any) -> Any:
    if isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return loss_fraction(value)
    return str(value)
