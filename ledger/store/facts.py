"""The charged releases' facts a registry record states, by SQL.

`registry.release_facts` reads every charged release whole for: how many there are, the
earliest publication (else recording) moment, the releases read exactly, the releases
derived from others, and how many releases each mechanism made. At a million releases
that pass decoded every release (60 s and 1.5 GB). The same facts, from the columns:

- count: the charged accounting rows (accounting_rows.py: their status is the release's);
- first: the charged row with the smallest `coalesce(published_us, recorded_us)` (whole
  microseconds, so the order of the moments themselves), the earliest seq among equals
  (the pass keeps the first it meets); that one release is decoded for its moment;
- mechanisms: the release rows' `mechanism_name` counted by SQL;
- derived: the charged release rows whose `derived_from` is not the empty list, decoded;
- exact: the releases at the rows `LedgerIndex.exactly_read` finds (a variable read that no
  guarantee protects), decoded (the caller keeps their `exact_variables`).

Invariant: `ChargedFacts` holds whole releases only for the few rows named above, in seq
order, each as the release row decodes; the record made from them is the pass's
(tests/api/test_registry_export.py compares both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Text, cast, func, select

from ..core.records import CHARGED_STATUSES, Release
from . import row_dicts, table_models
from .codec import release_from_dict
from .row_arrays import _ROWS


@dataclass(frozen=True)
class ChargedFacts:
    """What `ReleaseFacts` is made from: counts, and the few releases it names, whole."""

    count: int
    first: Release | None  # the release of the earliest moment (None: no charged release has one)
    exact: tuple[Release, ...]  # the releases reading a variable no guarantee protects, in seq order
    derived: tuple[Release, ...]  # the releases derived from others, in seq order
    mechanisms: tuple[tuple[str, int], ...]  # (mechanism name, releases), by name


def charged_facts(connection, dataset: str, exact_seqs: Sequence[int]) -> ChargedFacts:
    """The facts of `dataset`'s charged releases; `exact_seqs`: the seqs of the releases read
    exactly (from the index of the charged rows: `LedgerIndex.exactly_read`)."""

    charged = sorted(s.value for s in CHARGED_STATUSES)
    releases = table_models.ReleaseRow.__table__
    count = connection.execute(select(func.count()).select_from(_ROWS).where(
        _ROWS.c.dataset == dataset, _ROWS.c.status.in_(charged))).scalar_one()
    moment = func.coalesce(_ROWS.c.published_us, _ROWS.c.recorded_us)
    earliest = connection.execute(select(_ROWS.c.seq).where(
        _ROWS.c.dataset == dataset, _ROWS.c.status.in_(charged), moment.is_not(None))
        .order_by(moment, _ROWS.c.seq).limit(1)).scalar_one_or_none()
    mechanisms = connection.execute(select(releases.c.mechanism_name, func.count()).where(
        releases.c.dataset == dataset, releases.c.status.in_(charged)).group_by(releases.c.mechanism_name)).all()
    derived = [seq for (seq,) in connection.execute(select(releases.c.seq).where(
        releases.c.dataset == dataset, releases.c.status.in_(charged),
        cast(releases.c.derived_from, Text) != "[]"))]
    whole = _releases_at(connection, sorted({*exact_seqs, *derived, *(() if earliest is None else (earliest,))}))
    return ChargedFacts(count=count, first=None if earliest is None else whole[earliest],
                        exact=tuple(whole[seq] for seq in sorted(set(exact_seqs))),
                        derived=tuple(whole[seq] for seq in sorted(derived)),
                        mechanisms=tuple(sorted((name, n) for name, n in mechanisms)))


def _releases_at(connection, seqs: list[int], batch: int = 500) -> dict[int, Release]:
    """The releases at these seqs, decoded (a batch of seqs per statement)."""

    table = table_models.ReleaseRow.__table__
    found = {}
    for start in range(0, len(seqs), batch):
        for row in connection.execute(select(table).where(table.c.seq.in_(seqs[start:start + batch]))):
            found[row.seq] = release_from_dict(row_dicts.release_row_dict(row))
    return found
