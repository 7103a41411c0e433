"""Caps' running totals (budget.CapTotal) and accountant states (cap_states), read and written
beside every record, and the index of accounting rows they are computed from (`caps_index`).

Invariant: a stored total or state is what the history gives (`verify` recomputes them); one read
within a transaction sees what that transaction wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import bindparam, text
from sqlmodel import Session, select

from . import driver, index_from_rows
from ..accounting.budget import CapTotal
from ..core.records import Cap
from .codec import cap_total_from_dict, cap_total_to_dict
from .process_caches import STATES_CACHE, current_cache
from .configuration import dataset_variables
from .row_reads import read_families
from .session_state import session_connection, flush_pending
from .table_models import CapAccountantRow, CapTotalRow


_TOTALS = CapTotalRow.__table__


_READ_TOTALS = text("SELECT cap, total FROM cap_totals WHERE dataset = :dataset AND cap IN :names").bindparams(
    bindparam("names", expanding=True)).columns(_TOTALS.c.cap, _TOTALS.c.total)
_READ_STATES = text("SELECT cap, state FROM cap_accountant_state WHERE dataset = :dataset AND cap IN :names"
                    ).bindparams(bindparam("names", expanding=True)).columns(
    CapAccountantRow.__table__.c.cap, CapAccountantRow.__table__.c.state)
_SAVE_STATE = text("INSERT INTO cap_accountant_state (dataset, cap, state) VALUES (:d, :c, :s) "
                     "ON CONFLICT (dataset, cap) DO UPDATE SET state = excluded.state").bindparams(
    bindparam("s", type_=CapAccountantRow.__table__.c.state.type))
_SAVE_TOTAL = text("INSERT INTO cap_totals (dataset, cap, total) VALUES (:d, :c, :t) "
                     "ON CONFLICT (dataset, cap) DO UPDATE SET total = excluded.total").bindparams(
    bindparam("t", type_=_TOTALS.c.total.type))


def cap_totals(session: Session, dataset: str, names: Iterable[str] | None = None) -> dict[str, CapTotal]:
    """The stored running totals of `names` (every cap of the dataset when None, always read
    from the database). Named totals come from the process's cache when it is current."""
    if names is None:
        rows = session.exec(select(CapTotalRow).where(CapTotalRow.dataset == dataset))
        return {row.cap: cap_total_from_dict(row.total) for row in rows}
    names = list(names)
    saved = session.info.get("saved_totals", {})  # written earlier in this transaction
    cached = current_cache(session)
    found: dict[str, CapTotal] = {}
    missing = []
    for name in names:
        total = saved.get((dataset, name)) or cached.get((dataset, name))
        if total is None:
            missing.append(name)
        else:
            found[name] = total
    if missing:
        for cap, body in session_connection(session).execute(_READ_TOTALS, {"dataset": dataset, "names": missing}):
            found[cap] = cached[(dataset, cap)] = cap_total_from_dict(body)
    return found


# Running totals as this process last read or wrote them, per ledger URL, valid while the


def save_totals(session: Session, dataset: str, totals: Mapping[str, CapTotal]) -> None:
    if not totals:
        return
    flush_pending(session)
    driver.execute_many(session_connection(session), _SAVE_TOTAL,
                        [{"d": dataset, "c": name, "t": cap_total_to_dict(total)} for name, total in totals.items()])
    session.info.setdefault("saved_totals", {}).update({(dataset, name): t for name, t in totals.items()})


def caps_index(session: Session, dataset: str, caps: Sequence[Cap]):
    """The LedgerIndex of the charged releases that read some variable of the caps' subsets, from
    the accounting rows (index_from_rows.index_for with `touching`): every cap's total
    (`budget.total_from_index`) and accountant state (`state_from_index`) over it are those of
    the whole history (the other releases cost 0 on a cap's subset, Tan Prop 3.3). Pending
    changes of this session are flushed first (a cancellation just written is read)."""
    flush_pending(session)
    families = {f.id: f for f in read_families(session, dataset)}
    variables = dataset_variables(session, [dataset])[dataset]
    return index_from_rows.index_for(session, variables, dataset, families, touching=set().union(*(cap.subset for cap in caps)))


def accountant_states(session: Session, dataset: str, names: Iterable[str]) -> dict[str, dict]:
    """The stored running accountant states of these caps."""
    names = list(names)
    if not names:
        return {}
    # written earlier in this transaction (None: dropped), else this process's cache while the
    # head is the one it was made at (as the running totals: cap_totals), else the table
    saved = session.info.get("saved_states", {})
    cached = current_cache(session, STATES_CACHE)
    found: dict[str, dict] = {}
    missing = []
    for name in names:
        key = (dataset, name)
        if key in saved:
            if saved[key] is not None:
                found[name] = saved[key]
        elif key in cached:
            found[name] = cached[key]
        else:
            missing.append(name)
    if missing:
        rows = session_connection(session).execute(_READ_STATES, {"dataset": dataset, "names": missing})
        for cap, state in rows:
            found[cap] = cached[(dataset, cap)] = state
    return found


def save_accountant_states(session: Session, dataset: str, states: Mapping[str, dict]) -> None:
    if not states:
        return
    flush_pending(session)
    # one statement for every cap (an executemany), which inserts a cap with no state yet
    driver.execute_many(session_connection(session), _SAVE_STATE,
                        [{"d": dataset, "c": name, "s": state} for name, state in states.items()])
    session.info.setdefault("saved_states", {}).update({(dataset, name): state for name, state in states.items()})


def drop_accountant_states(session: Session, dataset: str, names: Iterable[str]) -> None:
    """Forget running states (a cancellation): they are recomputed from the history when next needed."""
    names = list(names)
    if names:
        table = CapAccountantRow.__table__
        session_connection(session).execute(table.delete().where(table.c.dataset == dataset, table.c.cap.in_(names)))
        session.info.setdefault("saved_states", {}).update({(dataset, name): None for name in names})
