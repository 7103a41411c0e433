"""A dataset's `LedgerIndex` built from its accounting rows (accounting_rows.py), without a
`Release` per row.

`index_for` turns the rows of one dataset into the engine's `LedgerIndex` (bitsets are
unpacked by numpy), with the accountants' per-release events and times attached
(`index_figures.index_events` then returns them: the same `IndexEvents` as from the whole
releases, in the same event order, so every figure is the same to the last bit); the few
releases the exact path needs whole (family members, releases whose guarantees leave a
choice) are read from the release rows. Values stay exact: a value id names exact fractions,
an event id an exact event key. `read_rows` reads the rows: the sealed chunks (sealed.py),
then the rows after them.

Why no per-variable aggregates. The read commands' targets are approached from these rows:
`subset` reads only the rows of the releases that read the subset (the `release_reads`
inverted index), `headroom` reads the caps' running totals, `table` and `pairs` read every
charged row once as packed bitsets and integer ids (about 60 bytes of array per release) and
compose them over arrays, chunk by chunk for Table 1 (`chunked_table.large_table`). On SQLite
the rows are read a column at a time (`row_arrays._read_columns`: one `group_concat` per
column, parsed by numpy), since a Python tuple per row costs about twice the reading; the pair
counts come from the pairs of variables each release reads (`LedgerIndex.pair_counts`). An
aggregate per variable would save `table` one pass over the rows but could not serve `pairs`,
the whole-dataset column, the largest releases or the accountants' lifecycle moments, which
need the rows anyway, and it would be one more stored form for `audit verify` to recompute.
What remains of `subset`'s and `table`'s time at a million releases, where the PLD figure is
valid and so must be computed, is start-up (SQLAlchemy, numpy, scipy.fft: the PLDs are built
in `privacy_loss` without importing dp_accounting), reading the rows, and composing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from fractions import Fraction

from sqlalchemy import and_, bindparam, case, func, select
from sqlmodel import Session

from ..core.lazy import lazy_module
from ..core.records import CHARGED_STATUSES, DEFAULT_ALLOWANCE, Family, Status
from . import row_dicts, row_reads, sealed, table_models
from .accounting_rows import _EVENTS, _READS, _ROWS, _VALUES, guarantee_of
from .as_of import rows_then
from .codec import release_from_dict
from .release_heads import _LazyIds, _Releases
from .row_arrays import _AFTER_ALL, _BEFORE_ANY, _PUBLISHED, _Rows, _raw_rows, _read_columns, _read_rows, _unpack, _unpack_packed

np = lazy_module("numpy")

# the first charged release of a dataset with a given event and status (an indexed look-up)
_FIRST_WITH_EVENT = select(_ROWS.c.seq).where(
    _ROWS.c.dataset == bindparam("d"), _ROWS.c.event == bindparam("e"), _ROWS.c.status == bindparam("s")
).order_by(_ROWS.c.seq).limit(1)


def _row_statement(dataset: str, charged: list[str], positions: list[int] | None, accounts: bool,
                   after: int | None = None):
    """(the WHERE clauses, the SELECT) of the accounting rows `index_for` reads row by row:
    the dataset's charged rows, or with `positions` those of the releases reading one of them;
    with `after`, only those whose seq is at least that (the tail after the sealed chunks)."""
    chosen = (_ROWS.c.dataset == dataset, _ROWS.c.status.in_(charged))
    if positions is not None:
        # the dataset is the inverted index's: the rows are then looked up by seq, not scanned
        chosen = (_ROWS.c.status.in_(charged), _ROWS.c.seq.in_(select(_READS.c.seq).where(
            _READS.c.dataset == dataset, _READS.c.position.in_(positions),
            *(() if after is None else (_READS.c.seq >= after,)))))
    if after is not None:
        chosen += (_ROWS.c.seq >= after,)
    # what the accounting needs, and no more (on a million releases every column, and every
    # Python object, read costs about 0.1 s): a first guarantee protecting exactly what the
    # release reads as NULL; the event with whether it is charged as one number; the
    # publication moment as `release_times.published_moment` takes it (a release recorded as
    # published without a date was published when recorded)
    published = case((and_(_ROWS.c.published_us.is_(None), _ROWS.c.status.in_(sorted(_PUBLISHED))),
                      func.coalesce(_ROWS.c.recorded_us, _BEFORE_ANY)), else_=_ROWS.c.published_us)
    fields = [_ROWS.c.seq, _ROWS.c.reads, func.coalesce(_ROWS.c.value, -1),
              case((_ROWS.c.protects == _ROWS.c.reads, None), else_=_ROWS.c.protects), _ROWS.c.family, _ROWS.c.more]
    if accounts:
        fields += [func.coalesce(_ROWS.c.event * 2 + case((_ROWS.c.charged_by_event, 1), else_=0), -2),
                   func.coalesce(_ROWS.c.recorded_us, _BEFORE_ANY), func.coalesce(published, _AFTER_ALL)]
    return chosen, select(*fields).where(*chosen).order_by(_ROWS.c.seq)


def index_for(session: Session, variables: Sequence[str], dataset: str, families: Mapping[str, Family],
              titles: bool = False, touching: Iterable[str] | None = None, accounts: bool = True,
              when: datetime | None = None):
    """The `LedgerIndex` of a dataset's charged releases, from the accounting rows: equal to
    `LedgerIndex(variables, releases, families)` over the same releases in recording order.
    Release ids, titles and statuses (a table shows them, a subset lists the ids) are read
    now when `titles`, else when first asked for, while the session is open. With
    `touching` (a subset), only the releases that read some variable of it: the index then
    answers `subset_cost` on that subset (or a part of it) exactly, every other release
    costing 0 there (Tan Prop 3.3; a family of members that read nothing of it costs 0,
    docs/explanation/model.md#families). `accounts=False`: without the accountants'
    events and times (`pairs` composes by the basic accountant only). With `when`: the
    releases charged at that moment, each with the status it had then, as from
    `history.releases_as_of` (as_of.py; every row read, `touching` aside); None when the rows
    cannot say it exactly (as_of.rows_then)."""
    from ..accounting.ledger_index import LedgerIndex

    connection = session.connection()
    charged = sorted(s.value for s in CHARGED_STATUSES)
    listed = False  # (with `when`: a subset lists the ids of the releases charging it)
    if when is not None:  # the rows charged then are among those charged or cancelled now (as_of.py)
        listed = touching is not None
        charged, touching, accounts = sorted({*charged, Status.CANCELLED.value}), None, True
    wanted = None if touching is None else sorted({k for k, name in enumerate(variables) if name in set(touching)})
    chosen, _ = _row_statement(dataset, charged, wanted, accounts)
    rows = read_rows(connection, dataset, charged, wanted, len(variables), accounts)
    then = None
    if when is not None:
        found = rows_then(connection, dataset, rows, when)
        if found is None:
            return None
        rows, then = found
    bodies = dict(connection.execute(select(_VALUES.c.id, _VALUES.c.body)).all())
    releases = _releases(connection, chosen, rows, then, listed)

    index = LedgerIndex.__new__(LedgerIndex)
    index.variables = tuple(variables)
    index.column = {name: j for j, name in enumerate(index.variables)}
    index.families = {fid: f for fid, f in families.items() if f.dataset == dataset}
    index.reads = _unpack_packed(rows.reads, len(variables))
    raw = _set_guarantees(index, rows)
    spend_of_raw = _set_values(index, raw, bodies)
    index.release_ids = _LazyIds(releases)
    ambiguous, needed = _exact_path_rows(index, rows, raw, spend_of_raw)
    _read_whole(connection, releases, needed, then, titles or (touching is not None and rows.ids is None))
    index.releases = releases
    index.then = then  # (with `when`: the status each release had then, as_of.Then; else None)

    index.finish_arrays(ambiguous)  # the same derived arrays as LedgerIndex.__init__
    if accounts:
        _attach_events(connection, index, rows, dataset, charged, partial=touching is not None)
    stated = row_reads.dataset_allowances(connection, [dataset]).get(dataset)  # (Dataset.allowance)
    return index.for_dataset(DEFAULT_ALLOWANCE if stated is None else Fraction(stated))


def _releases(connection, chosen, rows: _Rows, then, listed: bool) -> _Releases:
    """The index's releases, their heads read when first asked for: from the rows `chosen` selects,
    or with `then` (as_of.Then) with the status each had then; the ids as read with the rows."""

    def heads(seqs: list[int] | None):
        """(ids, titles, statuses) of every release; with `seqs`, (seq, id, title, status) rows of those."""
        fields = (_ROWS.c.release, _ROWS.c.title, _ROWS.c.status)
        if seqs is not None:
            return _raw_rows(connection, select(_ROWS.c.seq, *fields).where(_ROWS.c.seq.in_(seqs)))
        found = _raw_rows(connection, select(*fields).where(*chosen).order_by(_ROWS.c.seq))
        return [r[0] for r in found], [r[1] for r in found], [r[2] for r in found]

    def ids() -> list[str]:
        return [r[0] for r in _raw_rows(connection, select(_ROWS.c.release).where(*chosen).order_by(_ROWS.c.seq))]

    releases = _Releases(rows.seq, {}, heads if then is None else then.heads, ids if then is None else then.ids)
    releases.known_ids = rows.ids if then is None or not listed else then.ids()
    return releases


def _set_guarantees(index, rows: _Rows):
    """The index's guarantees (`g_release`, `g_protects`, in release order, then each release's
    order): the first of each release over arrays, further ones (rare) one by one. Returns each
    guarantee's stored value id, in the same order."""
    n_rel, n_var = len(rows.value), len(index.variables)
    first = rows.value
    with_first = np.flatnonzero(first >= 0)
    g_release = [with_first]
    g_order = [np.zeros(len(with_first), dtype=np.int64)]
    g_raw = [first[with_first]]
    if len(with_first) == n_rel and np.array_equal(rows.protects, rows.reads):
        # every first guarantee protects what its release reads (nearly always): one matrix for both
        # (neither is written to after this), not a second million-row unpacking
        g_protects = [index.reads]
    else:
        g_protects = [_unpack_packed(rows.protects, n_var)]
    extra_release, extra_order, extra_raw, extra_bits = [], [], [], []
    several = sorted(rows.more)
    for i in several:
        for k, part in enumerate(rows.more[i].split(";"), start=1):
            value, bits = part.split(":")
            extra_release.append(i)
            extra_order.append(k)
            extra_raw.append(int(value))
            extra_bits.append(bytes.fromhex(bits))
    if extra_release:
        g_release.append(np.asarray(extra_release, dtype=np.int64))
        g_order.append(np.asarray(extra_order, dtype=np.int64))
        g_raw.append(np.asarray(extra_raw, dtype=np.int64))
        g_protects.append(_unpack(extra_bits, n_var))
    if extra_release:
        g_release_all = np.concatenate(g_release)
        order = np.lexsort((np.concatenate(g_order), g_release_all))
        index.g_release = g_release_all[order]
        raw = np.concatenate(g_raw)[order]
        index.g_protects = np.concatenate(g_protects)[order]
    else:  # one guarantee at most per release: already in order (no copy of the protects matrix)
        index.g_release, raw, index.g_protects = g_release[0], g_raw[0], g_protects[0]
    return raw


def _set_values(index, raw, bodies: Mapping[int, str]) -> dict:
    """The index's distinct values in rank order, as LedgerIndex.__init__ numbers them, and each
    guarantee's value id among them (`g_value`). Returns stored value id -> its Spend."""
    from ..accounting.spend import UNBOUNDED, ZERO, Spend, guarantee_spend

    spend_of_raw = {int(v): guarantee_spend(guarantee_of(bodies[int(v)])) for v in np.unique(raw)}
    distinct = sorted(set(spend_of_raw.values()), key=Spend.rank)
    value_id = {spend: k for k, spend in enumerate(distinct)}
    index.NONE = len(distinct)
    index.ZERO_ID = len(distinct) + 1
    index.values = tuple(distinct) + (UNBOUNDED, ZERO)
    index.value_is_zero = np.asarray([v.is_zero for v in index.values], dtype=bool)
    remap = np.zeros(max(spend_of_raw, default=0) + 1, dtype=np.int64)
    for v, spend in spend_of_raw.items():
        remap[v] = value_id[spend]
    index.g_value = remap[raw] if len(raw) else np.zeros(0, dtype=np.int64)
    return spend_of_raw


def _exact_path_rows(index, rows: _Rows, raw, spend_of_raw: Mapping) -> tuple[list[int], list[int]]:
    """(the releases whose guarantees leave a choice, the rows the exact path needs whole: family
    members and releases of several guarantees); sets the index's `members` (family -> rows)."""
    from ..accounting.cost_rule import one_charge

    several = sorted(rows.more)
    index.members = {}
    for i, family in sorted(rows.family.items()):
        if family in index.families:
            index.members.setdefault(family, []).append(i)
    ambiguous = [i for i in several if not one_charge(
        [spend_of_raw[int(v)] for v in raw[index.g_release == i]])]
    needed = sorted({i for rows_ in index.members.values() for i in rows_} | set(several))
    return ambiguous, needed


def _read_whole(connection, releases: _Releases, needed: list[int], then, load_heads: bool) -> None:
    """The `needed` releases read whole from the release rows (with `then`, as they stood then);
    every release's head read now when `load_heads`, else only the needed rows' heads."""
    whole = releases.whole
    release_table = table_models.ReleaseRow.__table__
    if load_heads:
        releases.load()
    else:
        releases.prefetch(needed)
    for start in range(0, len(needed), 500):
        chunk = {releases[i].id: i for i in needed[start:start + 500]}
        for row in connection.execute(select(release_table).where(release_table.c.id.in_(list(chunk)))):
            whole[chunk[row.id]] = release_from_dict(row_dicts.release_row_dict(row))
            if then is not None:
                whole[chunk[row.id]] = then.release(whole[chunk[row.id]])


def read_rows(connection, dataset: str, charged: list[str], positions: list[int] | None, n_var: int,
              accounts: bool) -> "_Rows":
    """The dataset's charged accounting rows (those reading one of `positions`, when given) as
    `_Rows`: the sealed chunks' part (sealed.py: a few BLOBs), then the rows after them, a
    column at a time on SQLite (`_read_columns`), else row by row (`_read_rows`)."""

    found = sealed.read_part(connection, dataset, charged, positions, n_var, accounts)
    head, after = found if found is not None else (None, None)
    rows = None
    if connection.dialect.name == "sqlite":  # (the same rows, a column at a time: _read_columns)
        rows = _read_columns(connection, dataset, charged, positions, n_var, accounts, after)
    if rows is None:
        rows = _read_rows(connection, _row_statement(dataset, charged, positions, accounts, after)[1], n_var,
                          accounts)
    return rows if head is None else sealed.join_rows(head, rows)


def _attach_events(connection, index, rows: _Rows, dataset: str, charged: list[str], partial: bool) -> None:
    """The accountants' per-release events and times (index_figures.stored_index_events) from
    the rows' schema 6 columns. Events are numbered in the order of their first charged
    release of the dataset, as the index of the whole releases numbers them: from the rows
    themselves, or for a `partial` index (the releases touching a subset) by a few indexed
    look-ups, one per event and status."""
    from ..accounting.dp_events import Event
    from ..accounting.index_figures import stored_index_events

    stored = rows.event
    present = stored >= 0
    used, first_row = np.unique(stored[present], return_index=True)
    used = [int(k) for k in used]
    if partial and len(used) > 1:
        first = {k: min(seq for status in charged if (seq := connection.execute(
            _FIRST_WITH_EVENT, {"d": dataset, "e": k, "s": status}).scalar()) is not None) for k in used}
        order = sorted(used, key=first.__getitem__)
    else:
        order = [used[k] for k in np.argsort(first_row, kind="stable")]
    keys = dict(_raw_rows(connection, select(_EVENTS.c.id, _EVENTS.c.key).where(_EVENTS.c.id.in_(used)))) \
        if used else {}
    rank = np.full(max(used, default=0) + 1, -1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    stored = np.where(present, rank[np.where(present, stored, 0)], -1)
    stored_index_events(index, stored, [Event.from_key(keys[k]) for k in order], rows.charged_by_event,
                        rows.recorded, rows.published)
