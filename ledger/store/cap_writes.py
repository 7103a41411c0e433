"""Writing caps: set (its running total computed once from the history, a cap at a delta given its
filter) and removed; each with its audit event.
"""

from __future__ import annotations

from dataclasses import replace

from sqlmodel import Session

from ..accounting.budget import total_from_index
from ..accounting.cap_decisions import choose_filter
from ..accounting.cap_states import state_from_index
from ..core.records import Cap
from .codec import cap_to_dict
from .audit_chain import append_event
from .running_totals import caps_index, drop_accountant_states, save_accountant_states, save_totals
from .configuration import bump_config
from .row_dicts import cap_dict
from .table_models import CapRow, CapTotalRow


def set_cap(session: Session, cap: Cap, actor: str) -> Cap:
    """Add or replace a cap; its running total is computed once from the history, and a cap at a
    delta is given its filter (cap_decisions.choose_filter) from the releases it already holds.
    Returns the cap as set."""
    # from the accounting rows of the releases that read the cap's subset (the others cost 0
    # on it, Tan Prop 3.3), not by decoding the history
    index = caps_index(session, cap.dataset, [cap])
    if cap.delta is not None and cap.rho is None:  # the accountants' running state, from the same rows
        state = state_from_index(cap, index)
        cap = replace(cap, filter=choose_filter(cap, state))
    body = cap_to_dict(cap)
    session.merge(CapRow(**{"filter": None, **body}))
    bump_config(session)
    save_totals(session, cap.dataset, {cap.name: total_from_index(cap, index)})
    if cap.delta is not None and cap.rho is None:
        save_accountant_states(session, cap.dataset, {cap.name: state})
    append_event(session, kind="cap.set", subject=f"{cap.dataset}/{cap.name}", actor=actor, payload={"cap": body})
    return cap


def remove_cap(session: Session, dataset: str, name: str, actor: str, reason: str | None = None) -> None:
    """Remove a cap and its running total; the audit chain keeps every value it had."""
    row = session.get(CapRow, (dataset, name))
    if row is None:
        raise KeyError(name)
    was = cap_dict(row)
    session.delete(row)
    total = session.get(CapTotalRow, (dataset, name))
    if total is not None:
        session.delete(total)
    bump_config(session)
    session.info.get("saved_totals", {}).pop((dataset, name), None)
    drop_accountant_states(session, dataset, [name])  # a cap set again starts afresh
    append_event(session, kind="cap.removed", subject=f"{dataset}/{name}", actor=actor,
                 payload={"cap": None, "was": was, "reason": reason})
