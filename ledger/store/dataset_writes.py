"""Writing datasets: added, amended, and their declared privacy unit; each with its audit event,
which carries the dataset's whole state after the change (the privacy unit is an event only).
"""

from __future__ import annotations

from collections.abc import Mapping
import json

from sqlmodel import Session, select

from . import accounting_writes
from ..core.records import Dataset
from .codec import dataset_to_dict
from .audit_chain import append_event
from .configuration import bump_config
from . import session_state
from .session_state import session_connection
from .table_models import AuditEventRow, DatasetRow, VariableRow

_EVENTS = AuditEventRow.__table__


def add_dataset(session: Session, dataset: Dataset, actor: str) -> None:
    body = dataset_to_dict(dataset)
    bump_config(session)
    session.add(DatasetRow(name=dataset.name, description=dataset.description, delta=body["delta"],
                           groups=body["groups"], created_at=session_state.now(), self_approval=dataset.self_approval,
                           relation=dataset.relation.value))
    session.flush()
    for position, variable in enumerate(dataset.variables):
        session.add(VariableRow(dataset=dataset.name, name=variable.name, classification=variable.classification,
                                description=variable.description, position=position,
                                categories=None if variable.categories is None else list(variable.categories)))
    append_event(session, kind="dataset.added", subject=dataset.name, actor=actor, payload={"dataset": body})


def amend_dataset(session: Session, dataset: Dataset, actor: str, kind: str, change: dict) -> None:
    """Write a recorded dataset's new state (amend.Amendment) and its audit event, which
    carries that whole state, as `dataset.added` does, and what changed."""
    body = dataset_to_dict(dataset)
    bump_config(session)
    row = session.get(DatasetRow, dataset.name)
    row.description = dataset.description
    row.groups = body["groups"]
    row.self_approval = dataset.self_approval
    session.add(row)
    rows = {r.name: r for r in session.exec(select(VariableRow).where(VariableRow.dataset == dataset.name))}
    before = tuple(sorted(rows, key=lambda name: rows[name].position))
    for name in rows.keys() - set(dataset.variable_names):
        session.delete(rows[name])
    session.flush()
    for position, variable in enumerate(dataset.variables):
        categories = None if variable.categories is None else list(variable.categories)
        row = rows.get(variable.name)
        if row is None:
            row = VariableRow(dataset=dataset.name, name=variable.name, position=position,
                              classification=variable.classification)
        row.classification, row.description, row.position = variable.classification, variable.description, position
        row.categories = categories
        session.add(row)
    if before != tuple(dataset.variable_names):  # the accounting bitsets are over variable positions
        session.flush()
        accounting_writes.rebuild_dataset(session, dataset.name, dataset.variable_names)
    append_event(session, kind=kind, subject=dataset.name, actor=actor, payload={"dataset": body, "change": change})


PRIVACY_UNIT_EVENT = "dataset.privacy-unit"


def set_privacy_unit(session: Session, dataset: str, unit: Mapping[str, str], actor: str) -> None:
    """Declare whose data the dataset's guarantees protect ({privacy_unit, privacy_unit_details});
    an event of the chain, so it is as tamper-evident as the rest and the latest one holds."""
    append_event(session, kind=PRIVACY_UNIT_EVENT, subject=dataset, actor=actor,
                 payload={"privacy_unit": dict(unit)})


def privacy_unit(session: Session, dataset: str) -> dict[str, str]:
    """The latest declared privacy unit of `dataset` ({} when none was declared)."""
    row = session_connection(session).execute(
        select(_EVENTS.c.payload).where(_EVENTS.c.kind == PRIVACY_UNIT_EVENT, _EVENTS.c.subject == dataset)
        .order_by(_EVENTS.c.seq.desc()).limit(1)).first()
    return {} if row is None else dict(json.loads(row[0]).get("privacy_unit", {}))
