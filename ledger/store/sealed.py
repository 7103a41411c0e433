"""Sealed chunks: the accounting rows of a stretch of the history in a binary columnar
form, so a read at a million releases is a few BLOB reads, not a million rows parsed.

`index_from_rows.index_for` reads, per charged release of a dataset, its reads bitset, its first
guarantee's value id, its accounting event and its two moments (`row_arrays._Rows`). Read
from the accounting rows, that is one aggregate over a million rows on SQLite (about two
seconds) or a million tuples on PostgreSQL. Here the same columns of the rows whose seq
lies in one range [first, stop) of CHUNK_SEQS seqs are kept, once the range is complete,
as one BLOB (BYTEA on PostgreSQL) of little-endian numpy arrays: `accounting_chunks`, one
row per (dataset, range). A read takes the chunks, then the rows after the last one (the
tail: fewer than CHUNK_SEQS seqs) from the accounting rows as before.

What a chunk holds, per accounting row of the dataset in its range (every status, in seq
order): seq; status (a code: STATUSES); the reads bitset, padded or cut to the dataset's
width as the row reader pads it; the first guarantee's value id (-1: none); event * 2 +
charged through it (-2: no event); recorded_us and published_us as stored (NULL_US: NULL);
the release id; and the seqs of the rare rows the reader takes from the rows themselves
(a family, further guarantees, or a first guarantee protecting other than what the
release reads), as `row_arrays._read_columns` takes them. The arrays equal what the row
reader reads, so every figure is the same to the last bit.

Why ranges of seqs, not of rows: a range [first, stop) is complete as soon as any seq at
or past `stop` has been given (seqs only grow), which the writer knows from the seqs it is
writing, without counting rows. A range holding no row of the dataset is a chunk of none
(a few bytes), so the chunks of a dataset run contiguously from seq 0.

The only accounting-row columns that change after a release is recorded are its status and
publication moment (`accounting_writes.set_status`). A change to a row inside a sealed range is noted
in `accounting_chunk_changes` (dataset, seq) in the same transaction: a reader takes the
status and moment of those rows from the rows. A chunk with more than RESEAL_CHANGES noted
changes is sealed again (from its rows) and its notes dropped, in the same transaction, so
the notes stay few.

Invariants (`check`, run by `audit verify`):
- the chunks of a dataset cover [0, stop of the last) without gap or overlap, and no
  chunk's range reaches past the last seq given (a later release would land inside it);
- each chunk, with the status and moment of its noted rows taken from the rows, equals the
  chunk sealed afresh from the accounting rows (which `accounting_check.check` compares with the
  release rows); a noted change names a row of that dataset inside a sealed range;
- written only in the transaction that writes the rows they derive from: a record (seal
  what the new seqs complete), a status change (a note), an amended dataset (rebuilt),
  and once for a ledger made before them (the schema 10 migration, an audit event).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import Column, Integer, LargeBinary, bindparam, delete, func, insert, select
from sqlmodel import Field, SQLModel

from ..core.lazy import lazy_module
from . import configuration, table_models
from .row_arrays import _AFTER_ALL, _BEFORE_ANY, _ROWS, _Rows, _in_parts, _packed, _rare_columns, _raw_rows, _stamps, stream_raw_rows

np = lazy_module("numpy")

CHUNK_SEQS = 16_384  # the seqs of one chunk (about 1 MB per chunk when every event records a release)
RESEAL_CHANGES = 256  # noted changes after which a chunk is sealed again
STATUSES = ("planned", "approved", "published", "retracted", "cancelled")  # status codes, by position
NULL_US = -(2**63)  # a NULL moment (no datetime is this many microseconds before 1970)
_MAGIC = b"PLC1"


class AccountingChunkRow(SQLModel, table=True):
    """The accounting rows of one dataset whose seq is in [first, stop), sealed (see the module docstring)."""

    __tablename__ = "accounting_chunks"
    dataset: str = Field(primary_key=True)
    first: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    stop: int = Field(sa_column=Column(Integer, nullable=False))
    width: int  # the dataset's number of variables the bitsets were sealed at
    count: int  # rows held
    body: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class AccountingChangeRow(SQLModel, table=True):
    """An accounting row inside a sealed chunk whose status or publication moment changed
    after the chunk was sealed: a reader takes them from the row."""

    __tablename__ = "accounting_chunk_changes"
    dataset: str = Field(primary_key=True)
    seq: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))


_CHUNKS = AccountingChunkRow.__table__
_CHANGES = AccountingChangeRow.__table__


def _rows_table():

    return _ROWS


# --------------------------------------------------------------------------
# Encoding: named little-endian arrays in one BLOB
# --------------------------------------------------------------------------


def encode(arrays: Mapping[str, "np.ndarray"]) -> bytes:
    """The arrays as one BLOB: magic, header length, JSON header (name, dtype, shape), data."""
    header, parts = [], []
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and np.little_endian is False):
            array = array.astype(array.dtype.newbyteorder("<"))
        header.append([name, array.dtype.str, list(array.shape)])
        parts.append(array.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([_MAGIC, len(text).to_bytes(4, "little"), text, *parts])


def decode(body: bytes) -> dict[str, "np.ndarray"]:
    """`encode`'s arrays (read-only views of the BLOB, no copy)."""
    body = bytes(body)  # (PostgreSQL hands a memoryview)
    if body[:4] != _MAGIC:
        raise ValueError(f"not a sealed chunk: starts with {body[:4]!r}")
    size = int.from_bytes(body[4:8], "little")
    header = json.loads(body[8:8 + size])
    at = 8 + size
    found = {}
    for name, dtype, shape in header:
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        found[name] = np.frombuffer(body, dtype=dtype, count=count, offset=at).reshape(shape)
        at += count * dtype.itemsize
    if at != len(body):
        raise ValueError(f"a sealed chunk of {len(body)} bytes holds {at}")
    return found


# --------------------------------------------------------------------------
# Sealing (inside sessions.write_session)
# --------------------------------------------------------------------------


def _compact(values: "np.ndarray") -> "np.ndarray":
    """Int64 values as int32 when they fit (ids: a chunk a third smaller)."""
    if not len(values) or (values.min() >= -(2**31) and values.max() < 2**31):
        return values.astype("<i4")
    return values.astype("<i8")


def build(connection, dataset: str, first: int, stop: int, width: int) -> tuple[int, bytes]:
    """(how many rows, the BLOB) of the dataset's accounting rows with seq in [first, stop)."""

    rows_table = _rows_table()
    c = rows_table.c
    rare = ((c.family.is_not(None)) | (c.more.is_not(None))
            | ((c.value.is_not(None)) & (c.protects.is_not(None)) & (c.protects != c.reads)))
    statement = (select(c.seq, c.status, c.reads, func.coalesce(c.value, -1),
                        func.coalesce(c.event * 2 + _charged_case(c), -2),
                        func.coalesce(c.recorded_us, NULL_US), func.coalesce(c.published_us, NULL_US),
                        c.release, _flag(rare))
                 .where(c.dataset == dataset, c.seq >= first, c.seq < stop).order_by(c.seq))
    rows = list(stream_raw_rows(connection, statement))
    size = (width + 7) // 8 or 1
    n = len(rows)
    columns_ = list(zip(*rows)) if rows else [()] * 9
    code = {name: k for k, name in enumerate(STATUSES)}
    ids = [str(rid).encode() for rid in columns_[7]]
    ends = np.cumsum([len(b) for b in ids], dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    seq = np.fromiter(columns_[0], dtype=np.int64, count=n)
    arrays = {
        "seq": seq.astype("<i8"),
        "status": np.fromiter((code[s] for s in columns_[1]), dtype=np.uint8, count=n),
        "reads": np.asarray(_packed(list(columns_[2]), size), dtype=np.uint8).reshape(n, size),
        "value": _compact(np.fromiter(columns_[3], dtype=np.int64, count=n)),
        "event": _compact(np.fromiter(columns_[4], dtype=np.int64, count=n)),
        "recorded": np.fromiter(columns_[5], dtype=np.int64, count=n).astype("<i8"),
        "published": np.fromiter(columns_[6], dtype=np.int64, count=n).astype("<i8"),
        "id_ends": ends.astype("<i8"),
        "ids": np.frombuffer(b"".join(ids), dtype=np.uint8),
        "rare": seq[np.fromiter((bool(f) for f in columns_[8]), dtype=bool, count=n)].astype("<i8"),
    }
    return n, encode(arrays)


def _charged_case(c):
    from sqlalchemy import case

    return case((c.charged_by_event, 1), else_=0)


def _flag(condition):
    from sqlalchemy import case

    return case((condition, 1), else_=0)


def sealed_stop(connection, dataset: str) -> int:
    """Where the dataset's sealed chunks end (0: none)."""
    found = connection.execute(select(func.max(_CHUNKS.c.stop)).where(_CHUNKS.c.dataset == dataset)).scalar()
    return int(found or 0)


def seal(connection, dataset: str, top: int, width: int, stop: int | None = None) -> int:
    """Seal every complete range of the dataset not yet sealed: those ending at or before
    `top` + 1, the last seq given so far being `top`. Returns how many chunks were written.
    `stop`: where the sealed chunks end, when the caller knows it (else read)."""
    stop = sealed_stop(connection, dataset) if stop is None else stop
    made = 0
    while stop + CHUNK_SEQS <= top + 1:
        count, body = build(connection, dataset, stop, stop + CHUNK_SEQS, width)
        connection.execute(insert(_CHUNKS), {"dataset": dataset, "first": stop, "stop": stop + CHUNK_SEQS,
                                             "width": width, "count": count, "body": body})
        stop += CHUNK_SEQS
        made += 1
    return made


def seal_after_insert(connection, seqs_by_dataset: Mapping[str, Sequence[int]],
                      variables: Mapping[str, Sequence[str]], stops: dict[str, int] | None = None) -> None:
    """After a record: every range the new seqs complete is sealed, for each dataset written
    to (a dataset recorded to rarely seals its own ranges when it is next recorded to).

    `stops`: where each dataset's sealed chunks end, as the caller knows them (accounting_writes.Known,
    kept by the audit head: no other transaction has written since), updated here. A record
    whose seqs complete no range past a known stop reads nothing (on PostgreSQL, the read
    would be a round trip of its own and end the record's pipeline)."""
    for dataset, seqs in seqs_by_dataset.items():
        top = max(seqs)
        if top + 1 < CHUNK_SEQS:  # (a small ledger: nothing to seal, no query)
            continue
        stop = None if stops is None else stops.get(dataset)
        if stop is not None and top + 1 < stop + CHUNK_SEQS:
            continue  # no new range is complete
        if stop is None:
            stop = sealed_stop(connection, dataset)
        made = seal(connection, dataset, top, len(variables[dataset]), stop)
        if stops is not None:
            stops[dataset] = stop + made * CHUNK_SEQS


_CHUNK_OF = select(_CHUNKS.c.first, _CHUNKS.c.stop, _CHUNKS.c.width).where(
    _CHUNKS.c.dataset == bindparam("d"), _CHUNKS.c.first <= bindparam("s"), _CHUNKS.c.stop > bindparam("s"))


def note_change(connection, dataset: str, seq: int) -> None:
    """A status or publication moment changed (`accounting_writes.set_status`): noted when the row is in
    a sealed chunk, and that chunk sealed again once it has more than RESEAL_CHANGES notes."""
    chunk = connection.execute(_CHUNK_OF, {"d": dataset, "s": seq}).first()
    if chunk is None:
        return
    first, stop, width = chunk
    noted = connection.execute(select(_CHANGES.c.seq).where(_CHANGES.c.dataset == dataset,
                                                            _CHANGES.c.seq == seq)).first()
    if noted is None:
        connection.execute(insert(_CHANGES), {"dataset": dataset, "seq": seq})
    count = connection.execute(select(func.count()).select_from(_CHANGES).where(
        _CHANGES.c.dataset == dataset, _CHANGES.c.seq >= first, _CHANGES.c.seq < stop)).scalar()
    if count > RESEAL_CHANGES:
        reseal(connection, dataset, first, stop, width)


def reseal(connection, dataset: str, first: int, stop: int, width: int) -> None:
    """One chunk sealed again from its rows, its notes dropped."""
    count, body = build(connection, dataset, first, stop, width)
    connection.execute(_CHUNKS.update().where(_CHUNKS.c.dataset == dataset, _CHUNKS.c.first == first).values(
        count=count, body=body, width=width))
    connection.execute(delete(_CHANGES).where(_CHANGES.c.dataset == dataset, _CHANGES.c.seq >= first,
                                              _CHANGES.c.seq < stop))


def top_seq(connection) -> int:
    """The last seq given (the audit chain's last event), -1 in an empty ledger."""

    events = table_models.AuditEventRow.__table__
    found = connection.execute(select(func.max(events.c.seq))).scalar()
    return -1 if found is None else int(found)


def rebuild(connection, dataset: str, width: int) -> int:
    """The dataset's chunks dropped and sealed again (an amended dataset: its bitsets are over
    variable positions, which changed; the schema 10 migration). Returns how many."""
    connection.execute(delete(_CHUNKS).where(_CHUNKS.c.dataset == dataset))
    connection.execute(delete(_CHANGES).where(_CHANGES.c.dataset == dataset))
    return seal(connection, dataset, top_seq(connection), width)


def build_all(session) -> int:
    """The schema 10 migration: every dataset's complete ranges sealed once."""

    connection = session.connection()
    made = 0
    for name, dataset in sorted(configuration.configuration(session).datasets.items()):
        made += rebuild(connection, name, len(dataset.variable_names))
    return made


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def chunks(connection, dataset: str) -> list[tuple[int, int, int, int, bytes]]:
    """(first, stop, width, count, body) of the dataset's chunks, in seq order."""

    return _raw_rows(connection, select(_CHUNKS.c.first, _CHUNKS.c.stop, _CHUNKS.c.width, _CHUNKS.c.count,
                                        _CHUNKS.c.body).where(_CHUNKS.c.dataset == dataset)
                     .order_by(_CHUNKS.c.first))


def _published_code():
    return np.asarray([name in ("published", "retracted") for name in STATUSES], dtype=bool)


class Sealed:
    """The decoded chunks of one dataset (their arrays joined), with the noted changes applied."""

    def __init__(self, found: list[tuple[int, int, int, int, bytes]]):
        parts = [decode(body) for *_, body in found]
        self.stop = found[-1][1] if found else 0

        def joined(name, dtype, width=None):
            if parts:
                return np.concatenate([p[name] for p in parts]).astype(dtype, copy=False)
            return np.zeros((0,) if width is None else (0, width), dtype=dtype)

        size = parts[0]["reads"].shape[1] if parts else 1
        self.seq = joined("seq", np.int64)
        self.status = joined("status", np.uint8).copy()
        self.reads = joined("reads", np.uint8, size)
        self.value = joined("value", np.int64)
        self.event = joined("event", np.int64)
        self.recorded = joined("recorded", np.int64)
        self.published = joined("published", np.int64).copy()
        self.rare = joined("rare", np.int64)
        self._parts = parts
        self._id_offsets = np.cumsum([0] + [len(p["seq"]) for p in parts])

    def ids(self, rows: "np.ndarray") -> list[str]:
        """The release ids of these rows (positions in the joined arrays)."""
        found = []
        for k, part in enumerate(self._parts):
            lo, hi = self._id_offsets[k], self._id_offsets[k + 1]
            mine = rows[(rows >= lo) & (rows < hi)] - lo
            if not len(mine):
                continue
            ends = part["id_ends"].tolist()
            starts = [0] + ends[:-1]
            data = part["ids"].tobytes()
            text = data.decode()
            if len(text) == len(data):  # (ASCII: the byte offsets are character offsets)
                found.extend([text[starts[r]:ends[r]] for r in mine.tolist()])
            else:
                found.extend([data[starts[r]:ends[r]].decode() for r in mine.tolist()])
        return found

    def apply(self, changes: Iterable[tuple[int, str, int | None]]) -> None:
        """The status and publication moment of noted rows, as their rows now hold them."""
        code = {name: k for k, name in enumerate(STATUSES)}
        for seq, status, published_us in changes:
            at = int(np.searchsorted(self.seq, seq))
            if at < len(self.seq) and self.seq[at] == seq:
                self.status[at] = code[status]
                self.published[at] = NULL_US if published_us is None else published_us


def read_part(connection, dataset: str, charged: Sequence[str], positions: list[int] | None, n_var: int,
              accounts: bool):
    """(`row_arrays._Rows` of the sealed part, where the chunks end) of the dataset's charged rows
    (those reading one of `positions`, when given), as the row reader reads them; None when
    there are no chunks or they cannot be used as they are (sealed at another width, or not
    contiguous from seq 0: the rows then).

    The chunks are read and decoded one at a time and only the rows kept are taken from each, so memory
    holds one chunk and the rows kept, never every chunk's arrays joined. A row's status and
    publication moment noted as changed (`note_change`) are taken from its row."""

    size = (n_var + 7) // 8 or 1
    charged_code = np.asarray([name in set(charged) for name in STATUSES], dtype=bool)
    noted = noted_rows(connection, dataset)
    noted_seq = np.asarray([seq for seq, _, _ in noted], dtype=np.int64)
    wanted = None if positions is None else _position_mask(positions)
    kept: dict[str, list] = {name: [] for name in ("seq", "reads", "value", "event", "recorded", "published",
                                                    "status", "rare")}
    ids: list[str] | None = [] if positions is not None else None
    at = 0
    statement = (select(_CHUNKS.c.first, _CHUNKS.c.stop, _CHUNKS.c.width, _CHUNKS.c.body)
                 .where(_CHUNKS.c.dataset == dataset).order_by(_CHUNKS.c.first))
    for first, stop, sealed_width, body in stream_raw_rows(connection, statement, batch=4):
        if first != at or sealed_width != n_var:
            return None
        at = stop
        lo, hi = np.searchsorted(noted_seq, [first, stop])
        _keep_rows(decode(body), noted[lo:hi], charged_code, wanted, accounts, kept, ids)
        del body
    if at == 0:
        return None
    return _joined_rows(connection, kept, ids, size, accounts), at


def _position_mask(positions: list[int]) -> tuple[list[int], "np.ndarray"]:
    """(the bytes of a reads bitset that hold a position asked for, the bits of those positions in each)."""
    columns_ = sorted({k // 8 for k in positions})
    mask = np.zeros(len(columns_), dtype=np.uint8)
    for k in positions:
        mask[columns_.index(k // 8)] |= 1 << (k % 8)
    return columns_, mask


def _keep_rows(part: dict, changes: list[tuple], charged_code, wanted, accounts: bool, kept: dict[str, list],
               ids: list[str] | None) -> None:
    """The charged rows of one decoded chunk (those reading a position of `wanted`, when given)
    added to `kept` (and their release ids to `ids`, when a list), the status and publication
    moment of the rows noted as changed (`changes`) as their rows now hold them."""
    code = {name: k for k, name in enumerate(STATUSES)}
    seq, status = part["seq"], part["status"]
    published_raw = part["published"]
    if changes:  # (noted changes in this chunk: the rows' status and moment as they now are)
        status, published_raw = status.copy(), published_raw.copy()
        for s, now_status, published_us in changes:
            where = int(np.searchsorted(seq, s))
            if where < len(seq) and seq[where] == s:
                status[where] = code[now_status]
                published_raw[where] = NULL_US if published_us is None else published_us
    keep = charged_code[status]
    reads = part["reads"]
    if wanted is not None:
        columns_, mask = wanted
        keep &= (reads[:, columns_] & mask).any(axis=1)
    rows = np.flatnonzero(keep)
    every = len(rows) == len(keep)
    take = (lambda a: a) if every else (lambda a: a[rows])
    kept["seq"].append(take(seq))
    kept["reads"].append(take(reads))
    kept["value"].append(take(part["value"]))
    kept["status"].append(take(status))
    if accounts:
        kept["event"].append(take(part["event"]))
        kept["recorded"].append(take(part["recorded"]))
        kept["published"].append(take(published_raw))
    if len(part["rare"]):
        kept["rare"].append(part["rare"][np.isin(part["rare"], take(seq))])
    if ids is not None and len(rows):  # the ids of the rows kept, and no other
        ids.extend(_ids_of(part, rows))


def _ids_of(part: dict, rows) -> list[str]:
    """The release ids of these rows of one decoded chunk."""
    all_ends = part["id_ends"]
    ends = all_ends[rows]
    starts = np.where(rows > 0, all_ends[np.maximum(rows - 1, 0)], 0)
    data = part["ids"].tobytes()
    text = data.decode()
    if len(text) == len(data):  # (ASCII: the byte offsets are character offsets)
        return [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
    return [data[a:b].decode() for a, b in zip(starts.tolist(), ends.tolist())]


def _joined_rows(connection, kept: dict[str, list], ids: list[str] | None, size: int, accounts: bool) -> _Rows:
    """`row_arrays._Rows` of the rows kept from every chunk, the rare rows' columns read by seq."""

    def joined(name, dtype, shape=()):
        parts = kept[name]
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros((0, *shape), dtype=dtype)

    seq = joined("seq", np.int64)
    reads = joined("reads", np.uint8, (size,))
    value = joined("value", np.int64)
    rare = select(_ROWS.c.seq, _ROWS.c.protects, _ROWS.c.family, _ROWS.c.more)
    found = _in_parts(joined("rare", np.int64).tolist(),
                      lambda part_: _raw_rows_of(connection, rare.where(_ROWS.c.seq.in_(part_))))
    protects, family, more = _rare_columns(found, seq, reads, value, size)
    if not accounts:
        empty = np.zeros(0)
        return _Rows(seq, family, reads, value, protects, more, np.zeros(0, dtype=np.int64), empty.astype(bool),
                     empty, empty, ids)
    combined = joined("event", np.int64)
    recorded_raw = joined("recorded", np.int64)
    published_raw = joined("published", np.int64)
    recorded = np.where(recorded_raw == NULL_US, _BEFORE_ANY, recorded_raw)
    when_published = _published_code()[joined("status", np.uint8)]
    published = np.where(published_raw == NULL_US, np.where(when_published, recorded, _AFTER_ALL), published_raw)
    return _Rows(seq, family, reads, value, protects, more, combined // 2, combined % 2 == 1,
                 _stamps(recorded), _stamps(published), ids)


def noted_rows(connection, dataset: str, first: int | None = None, stop: int | None = None) -> list[tuple]:
    """(seq, status, published_us) of the dataset's rows noted as changed (in [first, stop) when
    given), in seq order: the notes first (a few hundred at most per chunk), then their rows by
    seq. (One join let SQLite scan the dataset's every accounting row for the few noted: half a
    second at a million releases, in every read.)"""
    rows_table = _rows_table()
    where = [_CHANGES.c.dataset == dataset]
    if first is not None:
        where += [_CHANGES.c.seq >= first, _CHANGES.c.seq < stop]
    seqs = [seq for (seq,) in _raw_rows_of(connection, select(_CHANGES.c.seq).where(*where).order_by(_CHANGES.c.seq))]
    found = []
    for at in range(0, len(seqs), 500):
        found += _raw_rows_of(connection, select(rows_table.c.seq, rows_table.c.status, rows_table.c.published_us)
                              .where(rows_table.c.seq.in_(seqs[at:at + 500]), rows_table.c.dataset == dataset))
    return sorted(found)


def _raw_rows_of(connection, statement):

    return _raw_rows(connection, statement)


def join_rows(head, tail):
    """`row_arrays._Rows` of the sealed part followed by those of the tail (later seqs)."""

    offset = len(head.seq)
    family = dict(head.family)
    family.update((offset + k, f) for k, f in tail.family.items())
    more = dict(head.more)
    more.update((offset + k, m) for k, m in tail.more.items())
    ids = None
    if head.ids is not None and tail.ids is not None:
        ids = list(head.ids) + list(tail.ids)
    return _Rows(np.concatenate([head.seq, tail.seq]), family, np.concatenate([head.reads, tail.reads]),
                 np.concatenate([head.value, tail.value]), np.concatenate([head.protects, tail.protects]), more,
                 np.concatenate([head.event, tail.event]),
                 np.concatenate([head.charged_by_event, tail.charged_by_event]),
                 np.concatenate([head.recorded, tail.recorded]), np.concatenate([head.published, tail.published]),
                 ids)


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def check(connection, variables: Mapping[str, Sequence[str]], limit: int = 20, since: int | None = None,
          seqs: Iterable[int] = ()) -> list[str]:
    """Every chunk equal to the chunk sealed afresh from the accounting rows, the noted
    changes applied (see the module docstring); at most `limit` differences named. With
    `since` (incremental verification), only the chunks reaching past that seq and those
    holding one of `seqs` (the releases changed since)."""
    problems: list[str] = []
    top = top_seq(connection)
    wanted = set(seqs)
    datasets = sorted(set(variables) | set(connection.execute(select(_CHUNKS.c.dataset).distinct()).scalars()))
    for dataset in datasets:
        ranges = _raw_rows_of(connection, select(_CHUNKS.c.first, _CHUNKS.c.stop, _CHUNKS.c.width)
                              .where(_CHUNKS.c.dataset == dataset).order_by(_CHUNKS.c.first))
        if dataset not in variables:
            if ranges:
                problems.append(f"event ? (dataset {dataset}): sealed accounting chunks of no dataset")
            continue
        width = len(variables[dataset])
        at = 0
        for first, stop, sealed_width in ranges:
            if first != at:
                problems.append(f"event {first} (dataset {dataset}): the sealed accounting chunks do not run on "
                                f"from seq {at} (a chunk starts at {first})")
            if stop > top + 1:
                problems.append(f"event {first} (dataset {dataset}): a sealed accounting chunk reaches past the "
                                f"last event (to seq {stop - 1})")
            at = stop
            if since is not None and stop <= since and not any(first <= s < stop for s in wanted):
                continue
            if sealed_width != width:
                problems.append(f"event {first} (dataset {dataset}): a sealed accounting chunk is over "
                                f"{sealed_width} variables, the dataset has {width}")
                continue
            difference = _compare_chunk(connection, dataset, first, stop, width)
            if difference:
                problems.append(f"event {first} (dataset {dataset}): the sealed accounting chunk of seqs {first} to "
                                f"{stop - 1} differs from the accounting rows ({difference})")
            if len(problems) >= limit:
                return problems
        noted = _raw_rows_of(connection, select(_CHANGES.c.seq).where(_CHANGES.c.dataset == dataset))
        rows_table = _rows_table()
        for (seq,) in noted:
            if seq >= at:
                problems.append(f"event {seq} (dataset {dataset}): a noted change to a sealed accounting chunk "
                                f"names a seq no chunk holds")
            elif connection.execute(select(rows_table.c.seq).where(rows_table.c.seq == seq,
                                                                    rows_table.c.dataset == dataset)).first() is None:
                problems.append(f"event {seq} (dataset {dataset}): a noted change to a sealed accounting chunk "
                                f"names no accounting row of the dataset")
            if len(problems) >= limit:
                return problems
    return problems[:limit]


def _compare_chunk(connection, dataset: str, first: int, stop: int, width: int) -> str | None:
    """What differs between a stored chunk (its noted changes applied) and one sealed afresh."""
    body = connection.execute(select(_CHUNKS.c.body, _CHUNKS.c.count).where(
        _CHUNKS.c.dataset == dataset, _CHUNKS.c.first == first)).first()
    try:
        stored = Sealed([(first, stop, width, body.count, body.body)])
    except (ValueError, KeyError, TypeError) as exc:
        return f"unreadable: {exc}"
    stored.apply(noted_rows(connection, dataset, first, stop))
    count, fresh_body = build(connection, dataset, first, stop, width)
    fresh = Sealed([(first, stop, width, count, fresh_body)])
    fields = [name for name in ("seq", "status", "reads", "value", "event", "recorded", "published", "rare")
              if getattr(stored, name).shape != getattr(fresh, name).shape
              or not np.array_equal(getattr(stored, name), getattr(fresh, name))]
    if body.count != count:
        fields.insert(0, "count")
    if not fields and stored.ids(np.arange(len(stored.seq))) != fresh.ids(np.arange(len(fresh.seq))):
        fields.append("ids")
    return ("fields: " + ", ".join(fields)) if fields else None
