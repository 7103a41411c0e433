"""Every accounting row (accounting_rows.py) equal to the one recomputed from its release, its
inverted reads (`release_reads`) equal to its reads bitset, and no row without a release: `check`
over given releases, `Check` over the whole ledger a chunk of releases at a time (`audit verify`).
A difference is named with the event seq and release id it concerns, at most `limit` of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from sqlalchemy import select
from sqlmodel import Session

from ..core.records import Release
from . import table_models
from .accounting_rows import _EVENTS, _READS, _ROWS, _VALUES, Expected, _positions, expected_row
from .row_arrays import _raw_rows, stream_raw_rows


def _check_reads(connection, stored: Mapping[int, Expected], some: bool,
                 variables: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The inverted index equal to the stored reads bitsets (streamed in seq order). `some`: only
    the rows of the stored seqs, found through the primary key (dataset, position, seq): one
    seq range per dataset and position (a filter on seq alone would scan the whole index: 0.4 s
    at a million releases, for every chunk), the rows outside the seqs asked for dropped here."""
    query = select(_READS.c.seq, _READS.c.position).order_by(_READS.c.seq, _READS.c.position)
    if some:
        query = _reads_of(connection, stored, variables)
    problems: list[str] = []
    indexed: dict[int, list[int]] = {}

    def compare(seq: int, positions: list[int]) -> None:
        row = stored.get(seq)
        if row is None:
            problems.append(f"event {seq} (release ?): release_reads rows name no accounting row")
        elif _positions(row.reads) != positions:
            problems.append(f"event {seq} (release {row.release}): the release_reads rows differ from its reads")

    current, positions = None, []
    for seq, position in (query if isinstance(query, list) else stream_raw_rows(connection, query)):
        if seq != current:
            if current is not None:
                compare(current, positions)
                indexed[current] = []
            current, positions = seq, []
        positions.append(position)
    if current is not None:
        compare(current, positions)
        indexed[current] = []
    for seq, row in stored.items():
        if seq not in indexed and _positions(row.reads):
            problems.append(f"event {seq} (release {row.release}): its release_reads rows are missing")
    return problems


def _reads_of(connection, stored: Mapping[int, Expected], variables: Mapping[str, Sequence[str]] | None):
    """The release_reads rows (seq, position) of the stored seqs, in (seq, position) order."""
    if not stored:
        return []
    seqs = sorted(stored)
    if variables is None:  # (no catalogue at hand: by seq, a scan)
        return _raw_rows(connection, select(_READS.c.seq, _READS.c.position)
                         .where(_READS.c.seq.in_(seqs)).order_by(_READS.c.seq, _READS.c.position))
    width = max((len(names) for names in variables.values()), default=0)
    datasets = sorted(set(variables) | {row.dataset for row in stored.values()})
    span = _READS.c.seq.between(seqs[0], seqs[-1])
    rows = _raw_rows(connection, select(_READS.c.seq, _READS.c.position).where(
        _READS.c.dataset.in_(datasets), _READS.c.position.in_(range(width)), span))
    rows += _raw_rows(connection, select(_READS.c.seq, _READS.c.position).where(  # (a position past every
        _READS.c.dataset.in_(datasets), _READS.c.position >= width, span))         # variable: wrong, reported)
    wanted = set(seqs)
    return sorted(row for row in rows if row[0] in wanted)


_STORED_FIELDS = select(_ROWS.c.seq, _ROWS.c.release, _ROWS.c.dataset, _ROWS.c.status, _ROWS.c.family, _ROWS.c.title,
                        _ROWS.c.reads, _ROWS.c.value, _ROWS.c.protects, _ROWS.c.more, _ROWS.c.event,
                        _ROWS.c.charged_by_event, _ROWS.c.recorded_us, _ROWS.c.published_us)


def _stored(rows, bodies: Mapping[int, str], event_keys: Mapping[int, str]) -> dict[int, Expected]:
    """Stored accounting rows (as _STORED_FIELDS selects them) -> seq: Expected (value bodies and
    event keys, not ids)."""
    stored = {}
    for (seq, release, dataset, status, family, title, reads, value, protects, more, event, by_event, recorded,
         published) in rows:
        guarantees = []
        if value is not None:
            guarantees.append((bodies.get(value, f"missing value {value}"), bytes(protects)))
        for part in more.split(";") if more else ():
            value_id, bits = part.split(":")
            guarantees.append((bodies.get(int(value_id), f"missing value {value_id}"), bytes.fromhex(bits)))
        stored[seq] = Expected(release, dataset, status, family, title, bytes(reads), tuple(guarantees),
                               None if event is None else event_keys.get(event, f"missing event {event}"),
                               bool(by_event), recorded, published)
    return stored


def _compare_rows(stored: Mapping[int, Expected], releases: Iterable[tuple[int, Release]],
                  variables: Mapping[str, Sequence[str]], problems: list[str], limit: int, trusted=None,
                  seen: set[int] | None = None) -> None:
    """Each release's accounting row equal to the one recomputed from it (see `check`)."""
    for seq, release in releases:
        if seen is not None:
            seen.add(seq)
        expected = expected_row(release, variables.get(release.dataset, ()))
        found = stored.get(seq)
        if found is None:
            problems.append(f"event {seq} (release {release.id}): its accounting row is missing")
        elif found != expected and (trusted is None or trusted(release.id)):
            fields = [name for name in Expected.__dataclass_fields__ if getattr(found, name) != getattr(expected, name)]
            problems.append(f"event {seq} (release {release.id}): the accounting row differs from the release "
                            f"(fields: {', '.join(fields)})")
        if len(problems) >= limit:
            return


def check(session: Session, releases: Iterable[tuple[int, Release]], variables: Mapping[str, Sequence[str]],
          limit: int = 20, only: set[str] | None = None, trusted=None) -> list[str]:
    """Every accounting row equal to the one recomputed from its release (and no row without
    a release); at most `limit` differences are named. `only`: just these releases' rows.
    `trusted(release id)`: whether the release row is the state its audit event recorded; a
    difference beside a release row changed behind the ledger's back is that change, already
    reported, and is not named again. (`Check` does the same a chunk of releases at a time.)"""
    connection = session.connection()
    bodies = dict(connection.execute(select(_VALUES.c.id, _VALUES.c.body)).all())
    event_keys = dict(connection.execute(select(_EVENTS.c.id, _EVENTS.c.key)).all())
    if only is None:
        stored_rows = stream_raw_rows(connection, _STORED_FIELDS)
    else:
        names = sorted(only)
        stored_rows = [row for at in range(0, len(names), 500)
                       for row in _raw_rows(connection, _STORED_FIELDS.where(_ROWS.c.release.in_(names[at:at + 500])))]
    stored = _stored(stored_rows, bodies, event_keys)
    problems = _check_reads(connection, stored, only is not None, variables)
    seen: set[int] = set()
    _compare_rows(stored, releases, variables, problems, limit, trusted, seen)
    if len(problems) >= limit:
        return problems
    for seq in sorted(stored.keys() - seen)[:limit]:
        problems.append(f"event {seq} (release {stored[seq].release}): an accounting row has no release")
    return problems


class Check:
    """`check` over the whole ledger, a chunk of releases at a time (the streaming `audit
    verify`): `add(chunk)` compares the chunk's accounting rows and their inverted
    reads, read by seq; `problems()` adds the rows no release has (anti-joins in the
    database). Memory holds one chunk, whatever the number of releases. `rows_read` is given
    each chunk's stored rows as they are read (seq: Expected), until a problem past `limit`
    stops the reading (derived.AccountingSum: the digest from the same read)."""

    def __init__(self, session: Session, variables: Mapping[str, Sequence[str]], limit: int = 20,
                 rows_read: Callable[[Mapping[int, Expected]], None] | None = None):
        self.connection = session.connection()
        self.variables, self.limit, self.rows_read = variables, limit, rows_read
        self.bodies = dict(self.connection.execute(select(_VALUES.c.id, _VALUES.c.body)).all())
        self.event_keys = dict(self.connection.execute(select(_EVENTS.c.id, _EVENTS.c.key)).all())
        # release_reads rows naming no accounting row (as `check` names them, first)
        unnamed = _raw_rows(self.connection, select(_READS.c.seq).distinct().where(
            _READS.c.seq.not_in(select(_ROWS.c.seq))).order_by(_READS.c.seq).limit(limit))
        self.found: list[str] = [f"event {seq} (release ?): release_reads rows name no accounting row"
                                 for (seq,) in unnamed]

    def add(self, releases: Sequence[tuple[int, Release]], trusted=None) -> None:
        if len(self.found) >= self.limit or not releases:
            return
        seqs = sorted({seq for seq, _ in releases})
        rows = [row for at in range(0, len(seqs), 500)
                for row in _raw_rows(self.connection, _STORED_FIELDS.where(_ROWS.c.seq.in_(seqs[at:at + 500])))]
        stored = _stored(rows, self.bodies, self.event_keys)
        if self.rows_read is not None:
            self.rows_read(stored)
        self.found.extend(_check_reads(self.connection, stored, True, self.variables))
        _compare_rows(stored, releases, self.variables, self.found, self.limit, trusted)

    def problems(self) -> list[str]:

        problems = self.found[:]
        if len(problems) >= self.limit:
            return problems
        releases = table_models.ReleaseRow.__table__
        orphans = _stored(_raw_rows(self.connection, _STORED_FIELDS.where(
            _ROWS.c.seq.not_in(select(releases.c.seq))).order_by(_ROWS.c.seq).limit(self.limit)), self.bodies,
            self.event_keys)
        problems.extend(_check_reads(self.connection, orphans, True, self.variables))
        for seq, row in orphans.items():
            problems.append(f"event {seq} (release {row.release}): an accounting row has no release")
        return problems

