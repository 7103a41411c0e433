"""Reads that need no whole history: datasets (with their allowances, from their `dataset.added`
events), releases by id (`ReleaseLookup`, for the loader's checks), the releases deriving from
one, the members of families and the parts they hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
import json

from sqlalchemy import bindparam, text
from sqlmodel import Session, select

from . import driver
from ..core.records import Dataset, Family, Release, Status
from .codec import dataset_from_dict, family_from_dict, release_from_dict
from .row_dicts import dataset_dict, family_dict, text_rows, release_row_dict
from .session_state import session_connection, flush_pending
from .table_models import AuditEventRow, DatasetRow, FamilyRow, ReleaseRow, VariableRow

_EVENTS = AuditEventRow.__table__
_RELEASES = ReleaseRow.__table__


_RELEASE_EXISTS = text("SELECT id FROM releases WHERE id = :id")


def read_datasets(session: Session, names: Sequence[str] | None = None) -> list[Dataset]:
    # Core rows (the columns as attributes, the same column types): no ORM object is built
    # and no mapper configured, which a `check` in a fresh process paid for
    variable_table, dataset_table = VariableRow.__table__, DatasetRow.__table__
    variables: dict[str, list[dict]] = {}
    binds = {} if names is None else {"names": list(names)}
    named = [bindparam("names", expanding=True)] if names is not None else []
    query = text_rows(variable_table, "dataset IN :names" if named else "", "dataset, position", *named)
    datasets = text_rows(dataset_table, "name IN :names" if named else "", "", *named)
    flush_pending(session)
    connection = session_connection(session)
    for row in connection.execute(query, binds):
        variables.setdefault(row.dataset, []).append(
            {"name": row.name, "classification": row.classification, "description": row.description,
             "categories": row.categories}
        )
    rows = connection.execute(datasets, binds).all()
    allowances = dataset_allowances(connection, [row.name for row in rows])
    return [dataset_from_dict(dataset_dict(row, variables.get(row.name, []), allowances.get(row.name)))
            for row in rows]


def dataset_allowances(connection, names: Sequence[str]) -> dict[str, str]:
    """Dataset name -> its approximate allowance (Dataset.allowance) as recorded, for the datasets
    that state one. The allowance is fixed when the dataset is recorded (amend.plan refuses a
    change), so its `dataset.added` event, which carries the whole dataset, holds it: no column
    of its own. A dataset whose event states none has the default."""
    if not names:
        return {}
    found = {}
    for subject, payload in connection.execute(select(_EVENTS.c.subject, _EVENTS.c.payload).where(
            _EVENTS.c.kind == "dataset.added", _EVENTS.c.subject.in_(list(names)))):
        allowance = json.loads(payload).get("dataset", {}).get("allowance")
        if allowance is not None:
            found[subject] = allowance
    return found


def is_empty(session: Session) -> bool:
    return session.exec(select(AuditEventRow.seq).limit(1)).first() is None


class ReleaseLookup(Mapping):
    """Recorded releases by id, fetched on demand (for the loader's checks)."""

    def __init__(self, session: Session):
        self.session = session

    def __getitem__(self, release_id: str) -> Release:
        row = self.session.get(ReleaseRow, release_id)
        if row is None:
            raise KeyError(release_id)
        return release_from_dict(release_row_dict(row))

    def __contains__(self, release_id: object) -> bool:
        # asked once per transaction and id (the batch's checks, then `already_recorded`: on
        # PostgreSQL each ask is a round trip); `add_releases` notes the ids it writes
        known = self.session.info.setdefault("release_exists", {})
        found = known.get(release_id)
        if found is None:
            found = known[release_id] = driver.query(session_connection(self.session), _RELEASE_EXISTS,
                                                     {"id": release_id}).fetchone() is not None
        return found

    def __iter__(self):
        return iter(self.session.exec(select(ReleaseRow.id)).all())

    def __len__(self) -> int:
        return len(self.session.exec(select(ReleaseRow.id)).all())


def deriving_from(session: Session, release_id: str) -> dict[str, Status]:
    """The releases that name `release_id` in their derived-from list, with their status (the
    lineage rule of a cancellation, docs/explanation/model.md#post-processing-and-lineage): only the rows whose list is not empty are read,
    three columns each, never a whole release."""
    from sqlalchemy import Text, cast

    rows = session_connection(session).execute(
        select(_RELEASES.c.id, _RELEASES.c.status, _RELEASES.c.derived_from)
        .where(cast(_RELEASES.c.derived_from, Text) != "[]"))
    return {row.id: Status(row.status) for row in rows if release_id in (row.derived_from or ())}


def parts_held(session: Session, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(family, part) -> the first recorded release of that family holding that part and charged
    (any status but cancelled: docs/explanation/model.md#families's members on disjoint parts), for the pairs asked about:
    the loader's check that a new member's part is free (loader._distinct_parts). Reads those
    families' rows with those parts only, by PART_INDEX."""
    pairs = set(pairs)
    found: dict[tuple[str, str], str] = {}
    if not pairs:
        return found
    flush_pending(session)
    families, parts = sorted({family for family, _ in pairs}), sorted({part for _, part in pairs})
    for start in range(0, len(parts), 500):
        query = (select(_RELEASES.c.family, _RELEASES.c.part, _RELEASES.c.id)
                 .where(_RELEASES.c.family.in_(families), _RELEASES.c.part.in_(parts[start:start + 500]),
                        _RELEASES.c.status != Status.CANCELLED.value)
                 .order_by(_RELEASES.c.seq))
        for family, part, release_id in session_connection(session).execute(query):
            if (family, part) in pairs:
                found.setdefault((family, part), release_id)
    return found


def family_members(session: Session, family_ids: Iterable[str]) -> dict[str, list[Release]]:
    family_ids = list(family_ids)
    if not family_ids:
        return {}
    members: dict[str, list[Release]] = {fid: [] for fid in family_ids}
    for row in session.exec(select(ReleaseRow).where(ReleaseRow.family.in_(family_ids)).order_by(ReleaseRow.seq)):
        members[row.family].append(release_from_dict(release_row_dict(row)))
    return members


def read_families(session: Session, dataset: str) -> list[Family]:
    return [family_from_dict(family_dict(row)) for row in session.exec(select(FamilyRow).where(
        FamilyRow.dataset == dataset))]
