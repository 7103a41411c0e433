"""The accounting rows (accounting_rows.py) read into arrays: a dataset's charged rows as `_Rows` (seqs, reads
bitsets packed, value ids, events and moments), the raw tuples of a statement, read in one go or
streamed; moments as microseconds since the epoch (`micros`), compared as float seconds (`_stamps`).
Shared by the accounting rows' own reads (index_from_rows.py), their sealed chunks (sealed.py) and the rows
as they stood at a moment (as_of.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from . import driver
from ..core.lazy import lazy_module
from ..core.records import Status
from .table_models import AccountingReadRow, AccountingRow

np = lazy_module("numpy")

_READS = AccountingReadRow.__table__
_ROWS = AccountingRow.__table__


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime | None) -> int | None:
    """A moment as whole microseconds since 1970-01-01 UTC (a naive moment read as UTC, as
    `accountants` reads it); exact: a datetime holds whole microseconds."""
    if moment is None:
        return None
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH) // _MICROSECOND


def _raw_rows(connection, statement) -> list[tuple]:
    """A SELECT's rows as the driver returns them (plain tuples): on a million rows, building
    SQLAlchemy Row objects costs more than the query."""
    return list(stream_raw_rows(connection, statement))


def stream_raw_rows(connection, statement, batch: int = 10_000):
    """A SELECT's rows as the driver returns them (plain tuples, as `_raw_rows`), streamed `batch`
    at a time through the connection's own cursor: the writes pending on it go first."""
    compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args = tuple(params[name] for name in compiled.positiontup) if compiled.positional else params
    driver.end_pipeline(connection)  # the writes a record holds go first (sealing reads the rows it wrote)
    cursor = connection.connection.dbapi_connection.cursor()
    try:
        cursor.execute(str(compiled), args)
        while rows := cursor.fetchmany(batch):
            yield from rows
    finally:
        cursor.close()


def _unpack(blobs: list[bytes], width: int):
    """Bitsets (possibly shorter than `width`: written before a variable was added) -> bool matrix."""
    size = (width + 7) // 8 or 1
    joined = b"".join(blobs)
    if len(joined) != size * len(blobs) or set(map(len, blobs)) - {size}:  # another width: pad or cut each
        joined = b"".join(bytes(blob).ljust(size, b"\0")[:size] for blob in blobs)
    packed = np.frombuffer(joined, dtype=np.uint8).reshape(len(blobs), size)
    return np.unpackbits(packed, axis=1, count=width, bitorder="little").astype(bool)


@dataclass
class _Rows:
    """Accounting rows read column by column into compact arrays (not a tuple per row: a
    million rows as Python tuples would take half a gigabyte)."""

    seq: np.ndarray
    family: dict[int, str]  # row -> family, for the rows that have one
    reads: np.ndarray  # packed bitsets, one row of bytes per release
    value: np.ndarray  # the first guarantee's value id, -1: none
    protects: np.ndarray  # packed bitsets of the first guarantees, for the rows with value >= 0
    more: dict[int, str]  # row -> its further guarantees
    event: np.ndarray  # stored event id, -1: none
    charged_by_event: np.ndarray
    recorded: np.ndarray  # seconds (datetime.timestamp), -inf: unknown
    published: np.ndarray  # release_times.published_moment in seconds, inf: none, -inf: datetime.min
    ids: list[str] | None = None  # the release ids, when read with the rows (a subset lists them)


_BEFORE_ANY = -(2**62)  # (in SQL) a release published when recorded, at an unknown moment: datetime.min


def _read_rows(connection, statement, n_var: int, accounts: bool = True, batch: int = 50_000) -> _Rows:
    size = (n_var + 7) // 8 or 1
    seq, value, event, recorded, published = [], [], [], [], []
    reads, protects = [], []
    family: dict[int, str] = {}
    more: dict[int, str] = {}
    cursor = stream_raw_rows(connection, statement, batch)
    at = 0
    while True:
        chunk = list(itertools.islice(cursor, batch))
        if not chunk:
            break
        n = len(chunk)
        columns_ = list(zip(*chunk))
        del chunk
        c_seq, c_reads, c_value, c_protects, c_family, c_more = columns_[:6]
        seq.append(np.fromiter(c_seq, dtype=np.int64, count=n))
        reads.append(_packed(c_reads, size))
        value.append(np.fromiter(c_value, dtype=np.int64, count=n))
        # a first guarantee protects what the release reads unless its bitset is given
        protects.append(_packed([x if x is not None else r for x, r, v in zip(c_protects, c_reads, c_value)
                                 if v >= 0], size))
        if any(f is not None for f in c_family):
            family.update((at + k, f) for k, f in enumerate(c_family) if f is not None)
        if any(c_more):
            more.update((at + k, m) for k, m in enumerate(c_more) if m)
        if accounts:
            event.append(np.fromiter(columns_[6], dtype=np.int64, count=n))
            recorded.append(_stamps(columns_[7]))
            published.append(_stamps(columns_[8]))
        at += n

    def joined(parts, dtype, width=None):
        if parts:
            return np.concatenate(parts)
        return np.zeros((0,) if width is None else (0, width), dtype=dtype)

    combined = joined(event, np.int64)  # event * 2 + charged (-2: no event)
    return _Rows(joined(seq, np.int64), family, joined(reads, np.uint8, size), joined(value, np.int64),
                 joined(protects, np.uint8, size), more, combined // 2, combined % 2 == 1,
                 joined(recorded, np.float64), joined(published, np.float64))


_AFTER_ALL = 2**62  # (in SQL) never published


def _in_parts(keys: list, fetch, part: int = 500):
    """The rows `fetch` gives for each `part` keys of `keys` in turn (an IN list of bounded length)."""
    for start in range(0, len(keys), part):
        yield from fetch(keys[start:start + part])


def _rare_columns(found, seq, reads, value, size: int):
    """(protects, family, more) of `_Rows` whose rows are `seq`, `reads`, `value`: a row's first
    guarantee protects what it reads unless its row says otherwise, and the rare rows (`found`: their
    (seq, protects, family, more[, width of reads]), those with a family, further guarantees or a
    protects bitset of their own) set theirs. None when a bitset has another width than `size`."""
    protects = reads[value >= 0].copy()
    family: dict[int, str] = {}
    more: dict[int, str] = {}
    with_value = np.cumsum(value >= 0) - 1  # row -> its place among the rows with a first guarantee
    for s, bits, fam, extra, *width in found:
        if width and width[0] != size:
            return None
        row = int(np.searchsorted(seq, s))
        if fam is not None:
            family[row] = fam
        if extra:
            more[row] = extra
        if value[row] >= 0 and bits is not None:
            protects[with_value[row]] = np.frombuffer(bytes(bits).ljust(size, b"\0")[:size], dtype=np.uint8)
    return protects, family, more


def _read_columns(connection, dataset: str, charged: list[str], positions: list[int] | None, n_var: int,
                  accounts: bool, after: int | None = None) -> _Rows | None:
    """`_read_rows` of the same rows on SQLite, each column read whole as one string by an
    aggregate (`group_concat`) and parsed by numpy, not as a Python tuple per row: on a million
    rows the tuples cost about three times the reading itself. The rare rows with a
    family, further guarantees or a first guarantee protecting other than what the release
    reads are read apart, by seq. None (the caller reads row by row) when some reads bitset
    has another width (written before a variable was added). `after`: only the rows whose seq
    is at least that (the tail after the sealed chunks, sealed.py)."""
    size = (n_var + 7) // 8 or 1
    where, params = _chosen_rows(connection, dataset, charged, positions, after)
    params = (size, *(sorted(_PUBLISHED) if accounts else ()), *params)  # (in the order of the placeholders)
    found = _aggregate(connection, _aggregate_fields(positions is not None, accounts), where, params)
    n = int(found[0])
    if found[5] or len(found[2] or b"") != n * size:  # some bitset of another width
        return None
    return _parsed_columns(connection, found, n, size, positions is not None, accounts)


def _chosen_rows(connection, dataset: str, charged: list[str], positions: list[int] | None,
                 after: int | None) -> tuple[str, tuple]:
    """(the WHERE clause, its parameters) of the rows `_read_columns` reads."""
    status = ", ".join("?" * len(charged))
    since, since_params = ("", ()) if after is None else (" AND seq >= ?", (after,))
    if positions is None:
        # the whole dataset: a scan in seq order (`+dataset`: not through the dataset index, a
        # look-up per row) unless the dataset holds few of the ledger's rows
        mine = connection.exec_driver_sql(f"SELECT count(*) FROM {_ROWS.name} WHERE dataset = ?{since}",
                                          (dataset, *since_params)).scalar()
        every = connection.exec_driver_sql(f"SELECT count(*) FROM {_ROWS.name}{since.replace(' AND', ' WHERE')}",
                                           since_params).scalar()
        where = f"{'+' if 4 * mine >= every else ''}dataset = ? AND status IN ({status}){since}"
        return where, (dataset, *charged, *since_params)
    where = (f"status IN ({status}){since} AND seq IN (SELECT seq FROM {_READS.name} WHERE dataset = ? "
             f"AND position IN ({', '.join('?' * len(positions))}){since})")
    return where, (*charged, *since_params, dataset, *positions, *since_params)


def _aggregate_fields(listed: bool, accounts: bool) -> list[str]:
    """The aggregates `_read_columns` reads, one string per column: count, seqs, reads bitsets,
    value ids, the rare rows' seqs, 0, the release ids when `listed`, then the accountants'
    columns when `accounts` (placeholders: the reads width, then the published statuses)."""
    published = (f"CASE WHEN published_us IS NULL AND status IN ({', '.join('?' * len(_PUBLISHED))}) THEN "
                 f"coalesce(recorded_us, {_BEFORE_ANY}) ELSE published_us END")
    # (a bitset of another width, written before a variable was added, is rare too: the reading
    # then goes back to the rows, below; one test on the rare rows, not an aggregate over every row)
    rare = ("family IS NOT NULL OR more IS NOT NULL OR "
            "(value IS NOT NULL AND protects IS NOT NULL AND protects != reads) OR length(reads) != ?")
    fields = ["count(*)", "group_concat(seq)", "group_concat(reads, '')", "group_concat(coalesce(value, -1))",
              f"group_concat(CASE WHEN {rare} THEN seq END)", "0",
              # a subset lists the ids of the releases charging it: read with the rows (char(30) apart;
              # an id holding that character sends the reading back to the rows, below)
              "group_concat(release, char(30))" if listed else "NULL"]
    if accounts:
        fields += ["group_concat(coalesce(event * 2 + (CASE WHEN charged_by_event THEN 1 ELSE 0 END), -2))",
                   f"group_concat(coalesce(recorded_us, {_BEFORE_ANY}))",
                   f"group_concat(coalesce({published}, {_AFTER_ALL}))"]
    return fields


def _aggregate(connection, fields: list[str], where: str, params: tuple) -> tuple:
    """The one row of the aggregates, text read as raw bytes (the bitsets concatenated as they
    are: text of raw bytes, not UTF-8)."""
    raw = connection.connection.dbapi_connection
    factory = raw.text_factory
    raw.text_factory = bytes
    cursor = raw.cursor()
    try:
        return cursor.execute(f"SELECT {', '.join(fields)} FROM {_ROWS.name} WHERE {where}", params).fetchone()
    finally:
        cursor.close()
        raw.text_factory = factory


def _parsed_columns(connection, found: tuple, n: int, size: int, listed: bool, accounts: bool) -> _Rows | None:
    """`_Rows` of the aggregates `found` (n rows, bitsets of `size` bytes), the rare rows read by
    seq; None when the ids or a rare row's bitset cannot be read so (the caller reads row by row)."""

    def numbers(text: str | None):
        return np.zeros(0, dtype=np.int64) if not text else np.fromstring(text, dtype=np.int64, sep=",")

    seq = numbers(found[1])
    reads = np.frombuffer(found[2] or b"", dtype=np.uint8).reshape(n, size)
    value = numbers(found[3])
    columns_ = [numbers(found[k]) for k in (7, 8, 9)] if accounts else []
    ids = None
    if listed:
        ids = found[6].decode().split("\x1e") if n else []
        if len(ids) != n:
            return None
    # (an aggregate reads the rows in the scan's order, seq order here, but that is not promised)
    order = np.argsort(seq, kind="stable") if n and (np.diff(seq) < 0).any() else None
    if order is not None:
        seq, reads, value = seq[order], reads[order], value[order]
        columns_ = [c[order] for c in columns_]
        ids = None if ids is None else [ids[k] for k in order.tolist()]
    def rare_rows(part: list[int]):
        return connection.exec_driver_sql(f"SELECT seq, protects, family, more, length(reads) FROM {_ROWS.name} "
                                          f"WHERE seq IN ({', '.join('?' * len(part))})", tuple(part)).all()

    rare = _rare_columns(_in_parts(sorted(set(numbers(found[4]).tolist())), rare_rows), seq, reads, value, size)
    if rare is None:  # a bitset of another width: read row by row
        return None
    protects, family, more = rare
    if accounts:
        combined, recorded, published_ = columns_
        return _Rows(seq, family, reads, value, protects, more, combined // 2, combined % 2 == 1,
                     _stamps(recorded), _stamps(published_), ids)
    empty = np.zeros(0)
    return _Rows(seq, family, reads, value, protects, more, np.zeros(0, dtype=np.int64), empty.astype(bool),
                 empty, empty, ids)


def _stamps(values: Sequence[int]):
    """Microseconds since the epoch (or the sentinels) -> seconds as `datetime.timestamp()`
    gives them; _BEFORE_ANY -> -inf (datetime.min, or an unknown recording), _AFTER_ALL -> inf."""
    raw = values if isinstance(values, np.ndarray) else np.fromiter(values, dtype=np.int64, count=len(values))
    before, after = raw == _BEFORE_ANY, raw == _AFTER_ALL
    known = ~(before | after)
    if (np.abs(raw[known]) < _EXACT_FLOAT).all():
        out = raw / 1e6  # the correctly rounded quotient, as Python's int / int
    else:
        out = np.asarray([v / 10**6 for v in raw.tolist()], dtype=np.float64)
    out[before] = -np.inf
    out[after] = np.inf
    return out


def _packed(blobs, size: int):
    """Bitsets (possibly of another width: written before a variable was added or removed)
    as a (n, size) array of bytes."""
    joined = b"".join(blobs)
    if len(joined) != size * len(blobs) or set(map(len, blobs)) - {size}:
        # (each blob's width, not only the total: one shorter and one longer would add up)
        joined = b"".join(bytes(blob).ljust(size, b"\0")[:size] for blob in blobs)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(blobs), size)


def _unpack_packed(packed, width: int):
    return np.unpackbits(packed, axis=1, count=width, bitorder="little").view(bool)  # (0/1 bytes: no copy)


_PUBLISHED = frozenset({Status.PUBLISHED.value, Status.RETRACTED.value})
_EXACT_FLOAT = 2**53
