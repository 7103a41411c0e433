"""diffprivlib mechanisms and BudgetAccountants -> ledger releases.

A diffprivlib mechanism (Laplace, Gaussian, GaussianAnalytic, GaussianDiscrete,
Geometric, Exponential, Staircase, Uniform, ...) states its own `epsilon` and
`delta`: the release is (epsilon, delta)-DP, pure when delta is 0, for the
neighbour relation its `sensitivity` was computed under (`relation`, replace by
default, as for the ledger's own mechanisms). Laplace and Geometric with delta 0
are recorded as the ledger's `laplace` and `geometric` (epsilon, sensitivity);
the others as `declared` with their class and parameters.

A `BudgetAccountant`'s spent budget (`accountant.spent_budget`, one (epsilon, delta)
per query) becomes one release per query, ids `ID/1`, `ID/2`, ... The ledger
composes them by its own rules (basic composition per notion); the accountant's
slack-based total is not used.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.records import Notion, Relation, Release, Status
from . import guarantee, loss_fraction, make_release, refuse, relation_of

_CATALOGUED = {"Laplace": "laplace", "Geometric": "geometric"}


def release(mechanism: Any, *, id: str, dataset: str, reads: Iterable[str], relation: str | Relation = "replace",
            protects: Iterable[str] | None = None, title: str = "",
            status: Status | str = Status.PLANNED) -> Release:
    """One release from a diffprivlib mechanism object."""
    source = f"diffprivlib mechanism for release {id}"
    chosen = relation_of(relation, source)
    if not hasattr(mechanism, "epsilon") or not hasattr(mechanism, "delta"):
        raise refuse(source, "mechanism", f"not a diffprivlib mechanism: {type(mechanism).__name__}")
    name = type(mechanism).__name__
    epsilon, delta = loss_fraction(mechanism.epsilon), loss_fraction(mechanism.delta)
    params: dict[str, Any] = {"library": "diffprivlib", "class": name, "relation": chosen.value}
    sensitivity = getattr(mechanism, "sensitivity", None)
    if isinstance(sensitivity, (int, float)):
        params["sensitivity"] = loss_fraction(sensitivity)
    if name in _CATALOGUED and delta == 0:
        return make_release(id=id, dataset=dataset, reads=reads, mechanism=_CATALOGUED[name],
                            params={**params, "epsilon": epsilon}, protects=protects, title=title,
                            status=status, source=source)
    params.update(epsilon=epsilon, delta=delta)
    return make_release(id=id, dataset=dataset, reads=reads, mechanism="declared", params=params,
                        guarantees=[_guarantee(chosen, epsilon, delta)], protects=protects, title=title,
                        status=status, source=source)


def from_accountant(accountant: Any, *, id: str, dataset: str, reads: Iterable[str],
                    relation: str | Relation = "replace", protects: Iterable[str] | None = None,
                    title: str = "", status: Status | str = Status.PLANNED) -> list[Release]:
    """One release per query a diffprivlib BudgetAccountant has spent budget on."""
    source = f"diffprivlib BudgetAccountant for release {id}"
    chosen = relation_of(relation, source)
    spent = getattr(accountant, "spent_budget", None)
    if spent is None:
        raise refuse(source, "accountant", f"not a diffprivlib BudgetAccountant: {type(accountant).__name__}")
    reads = list(reads)
    made = []
    for index, (epsilon, delta) in enumerate(spent):
        e, d = loss_fraction(epsilon), loss_fraction(delta)
        made.append(make_release(id=id if len(spent) == 1 else f"{id}/{index + 1}", dataset=dataset, reads=reads,
                                 mechanism="declared",
                                 params={"library": "diffprivlib", "class": "BudgetAccountant", "epsilon": e,
                                         "delta": d, "relation": chosen.value},
                                 guarantees=[_guarantee(chosen, e, d)], protects=protects, title=title,
                                 status=status, source=source))
    return made


def _guarantee(relation: Relation, epsilon, delta):
    if delta == 0:
        return guarantee(Notion.PURE, relation, epsilon=epsilon)
    return guarantee(Notion.APPROX, relation, epsilon=epsilon, delta=delta)
