"""The recorded history decoded as frozen records: `snapshot` (everything, or one dataset's part) and
`release_pages` (the same releases, in recording order, a page at a time). The engine never sees
rows: only these records.
"""

from __future__ import annotations


from sqlmodel import Session, select

from ..input.snapshot import LedgerSnapshot
from . import row_dicts
from .as_of import ended_at
from .codec import family_from_dict, release_from_dict
from .row_dicts import RELEASE_TEXT_COLUMNS, family_dict, release_row_dicts
from .row_reads import read_datasets
from .table_models import FamilyRow, ReleaseRow

_RELEASES = ReleaseRow.__table__


def snapshot(session: Session, dataset: str | None = None) -> LedgerSnapshot:
    """Everything recorded (or one dataset's part of it), as frozen records."""
    datasets = {d.name: d for d in read_datasets(session)}
    family_query = select(FamilyRow)
    if dataset is not None:
        family_query = family_query.where(FamilyRow.dataset == dataset)
    # Core rows, no ORM objects to build, and the JSON columns as text (`release_row_dicts`)
    release_query = select(*RELEASE_TEXT_COLUMNS).order_by(_RELEASES.c.seq)
    if dataset is not None:
        release_query = release_query.where(_RELEASES.c.dataset == dataset)
    families = {row.id: family_from_dict(family_dict(row)) for row in session.exec(family_query)}
    releases = {body["id"]: release_from_dict(body)
                for rows in session.connection().execute(release_query).partitions(row_dicts.VERIFY_CHUNK)
                for body in release_row_dicts(rows)}

    return LedgerSnapshot(datasets=datasets, releases=releases, families=families,
                          ended=ended_at(session.connection()))


RELEASE_PAGE = 5_000  # releases decoded at a time by `release_pages`


def release_pages(session: Session, dataset: str | None = None, page: int | None = None):
    """The releases of `snapshot` (every dataset's, or one's), in the same order (recording
    order), decoded `page` at a time: one list of Release per page, read by keyset paging on
    seq, so that a command listing every release holds one page, not the ledger."""
    page = page or RELEASE_PAGE
    after = -1
    while True:
        query = select(*RELEASE_TEXT_COLUMNS, _RELEASES.c.seq).where(_RELEASES.c.seq > after)
        if dataset is not None:
            query = query.where(_RELEASES.c.dataset == dataset)
        rows = session.connection().execute(query.order_by(_RELEASES.c.seq).limit(page)).all()
        if not rows:
            return
        after = rows[-1].seq
        yield [release_from_dict(body) for body in release_row_dicts(rows)]
