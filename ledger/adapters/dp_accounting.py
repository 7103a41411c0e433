"""dp_accounting DpEvents -> ledger releases with their mechanism parameters.

A DpEvent describes what a pipeline did (Google's dp_accounting). Each
mechanism event becomes a release whose mechanism the ledger's catalogue
knows, so the guarantee is derived there and any accountant can read the
parameters:

- GaussianDpEvent(noise_multiplier s): gaussian, sigma s, sensitivity 1:
  rho = 1 / (2 s^2) (Bun and Steinke 2016, Prop 1.6);
- LaplaceDpEvent(noise_multiplier b): laplace, scale b, sensitivity 1: epsilon = 1 / b
  (Dwork et al. 2006);
- ZCDpEvent(rho): declared, rho-zCDP;
- SelfComposedDpEvent(e, k): one release for k runs of e: a Gaussian's k runs are one
  Gaussian with rho k / (2 s^2) (composition of Gaussians, Bun and Steinke 2016, Lemma 2.3),
  a Laplace's k runs are epsilon k / b (Tan, Prop 3.4); the count is kept as a parameter;
- ComposedDpEvent(events): one release per event, ids `ID/1`, `ID/2`, ...;
- PoissonSampledDpEvent: the sampled event's guarantee, not amplified (a Poisson sample of
  neighbouring datasets differs in at most one record, so the mechanism's own guarantee still
  holds), with the sampling recorded as parameters for an accountant that amplifies;
- SampledWithoutReplacementDpEvent (replace): sample_size of population, amplified by the
  catalogue (Balle, Barthe and Gaboardi 2018, docs/explanation/model.md#subsampling);
- SampledWithReplacementDpEvent: refused by the catalogue (a sample drawn with replacement
  can hold the changed record several times: neither bound holds); declare its guarantee;
- NoOpDpEvent: nothing; NonPrivateDpEvent: an exact release (∞ on what it reads).

Sensitivity 1 is under `relation`: dp_accounting's accountants count added or removed
records by default (NeighborRel.ADD_OR_REMOVE_ONE), so `relation="add-remove"` is the default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..core.records import Notion, Relation, Release, Status
from . import guarantee, loss_fraction, make_release, refuse, relation_of


@dataclass(frozen=True)
class _Part:
    mechanism: str
    params: dict[str, Any]
    guarantees: tuple | None = None


def releases(event: Any, *, id: str, dataset: str, reads: Iterable[str], relation: str | Relation = "add-remove",
             protects: Iterable[str] | None = None, title: str = "",
             status: Status | str = Status.PLANNED) -> list[Release]:
    """The releases a DpEvent stands for (one, several for a ComposedDpEvent, none for a no-op)."""
    source = f"dp_accounting event for release {id}"
    chosen = relation_of(relation, source)
    parts = _parts(event, chosen, source)
    reads = list(reads)
    made = []
    for index, part in enumerate(parts):
        release_id = id if len(parts) == 1 else f"{id}/{index + 1}"
        params = {"library": "dp_accounting", "relation": chosen.value, **part.params}
        made.append(make_release(id=release_id, dataset=dataset, reads=reads if part.mechanism != "-" else [],
                                 mechanism=part.mechanism, params=params, guarantees=part.guarantees,
                                 protects=None if part.mechanism == "exact" else protects, title=title,
                                 status=status, source=source))
    return made


def _parts(event: Any, relation: Relation, source: str) -> list[_Part]:
    import dp_accounting as dpa

    if isinstance(event, dpa.NoOpDpEvent):
        return []
    if isinstance(event, dpa.NonPrivateDpEvent):
        return [_Part("exact", {"event": "NonPrivateDpEvent"}, ())]
    if isinstance(event, dpa.GaussianDpEvent):
        return [_Part("gaussian", {"sigma": loss_fraction(event.noise_multiplier), "sensitivity": Fraction(1),
                                   "event": "GaussianDpEvent"})]
    if isinstance(event, dpa.LaplaceDpEvent):
        return [_Part("laplace", {"scale": loss_fraction(event.noise_multiplier), "sensitivity": Fraction(1),
                                  "event": "LaplaceDpEvent"})]
    if hasattr(dpa, "ZCDpEvent") and isinstance(event, dpa.ZCDpEvent):
        return [_Part("declared", {"event": "ZCDpEvent"},
                      (guarantee(Notion.ZCDP, relation, rho=loss_fraction(event.rho)),))]
    if isinstance(event, dpa.ComposedDpEvent):
        return [part for inner in event.events for part in _parts(inner, relation, source)]
    if isinstance(event, dpa.SelfComposedDpEvent):
        return [_times(part, int(event.count), relation) for part in _parts(event.event, relation, source)]
    sampling = _sampling(event, dpa)
    if sampling is not None:
        if sampling.get("sampling") == "without replacement" and relation != Relation.REPLACE:
            raise refuse(source, "relation", "a SampledWithoutReplacementDpEvent is accounted for replacement "
                                             "neighbours (as dp_accounting does): pass relation='replace'")
        return [_Part(part.mechanism, {**part.params, **sampling}, part.guarantees)
                for part in _parts(event.event, relation, source)]
    raise refuse(source, "event", f"{type(event).__name__} is not an event the ledger can record; record its "
                                  "guarantee with a `declared` release")


def _sampling(event: Any, dpa) -> dict[str, Any] | None:
    if isinstance(event, dpa.PoissonSampledDpEvent):
        return {"sampling": "poisson", "sampling_probability": Fraction(event.sampling_probability)}
    if isinstance(event, dpa.SampledWithReplacementDpEvent):
        return {"sampling": "with replacement", "population": event.source_dataset_size,
                "sample_size": event.sample_size}
    if isinstance(event, dpa.SampledWithoutReplacementDpEvent):
        return {"sampling": "without replacement", "population": event.source_dataset_size,
                "sample_size": event.sample_size}
    return None


def _times(part: _Part, count: int, relation: Relation) -> _Part:
    """k runs of one event, as one release."""
    if count == 1:
        return part
    params = {**part.params, "count": part.params.get("count", 1) * count}
    if part.mechanism == "gaussian":  # k Gaussians of noise s = one Gaussian with rho k / (2 s^2)
        sigma, sensitivity = part.params["sigma"], part.params["sensitivity"]
        params["rho"] = params["count"] * sensitivity * sensitivity / (2 * sigma * sigma)
        params.pop("sigma")
        params.pop("sensitivity")
        params["noise_multiplier"] = sigma
        return _Part("gaussian", params)
    if part.mechanism == "laplace":  # pure epsilon adds (Tan, Prop 3.4)
        params["epsilon"] = params["count"] * part.params["sensitivity"] / part.params["scale"]
        params.pop("sensitivity")
        params["noise_multiplier"] = params.pop("scale")
        return _Part("laplace", params)
    if part.mechanism == "exact":
        return part
    scaled = tuple(guarantee(g.notion, g.relation, epsilon=None if g.epsilon is None else g.epsilon * count,
                             delta=None if g.delta is None else g.delta * count,
                             rho=None if g.rho is None else g.rho * count) for g in part.guarantees or ())
    return _Part(part.mechanism, params, scaled)

