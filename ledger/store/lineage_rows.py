"""The releases a release's lineage is drawn from, by SQL: its dataset's releases derived from
others (any status), every release of the dataset they name as a parent, and the members of its own family.

Invariant: the derivation graph of these releases holds every ancestor, descendant and family
member of the release, each with the edges between them, as the graph of every release of the
dataset does; a release outside them is no relative of it (no derived-from edge reaches it).
"""

from __future__ import annotations

from sqlalchemy import Text, cast, select

from ..core.records import Release
from . import row_dicts, table_models
from .codec import release_from_dict

_RELEASES = table_models.ReleaseRow.__table__


def lineage_releases(connection, release: Release, batch: int = 500) -> list[Release]:
    """The releases of `release`'s lineage (see the module docstring), decoded, in recording order."""
    table = _RELEASES
    derived = connection.execute(select(table).where(
        table.c.dataset == release.dataset, cast(table.c.derived_from, Text) != "[]")).all()
    found = {row.id: row for row in derived}
    wanted = {parent for row in derived for parent in row.derived_from} | {release.id}
    wanted -= set(found)
    ids = sorted(wanted)
    for start in range(0, len(ids), batch):
        found.update((row.id, row) for row in connection.execute(
            select(table).where(table.c.dataset == release.dataset, table.c.id.in_(ids[start:start + batch]))))
    if release.family is not None:
        found.update((row.id, row) for row in connection.execute(
            select(table).where(table.c.dataset == release.dataset, table.c.family == release.family)))
    return [release_from_dict(row_dicts.release_row_dict(row)) for row in sorted(found.values(), key=lambda r: r.seq)]
