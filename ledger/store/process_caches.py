"""What this process caches between transactions, per ledger URL: running totals, accountant states,
roles, and the accounting rows' value and event ids (with `Known`, one transaction's).

Invariant: a cache serves a transaction only when the audit head that transaction read at its start
is the one the cache was made at: every write by any process appends an event, so moves the head.
"""

from __future__ import annotations


from sqlmodel import Session

from . import accounting_writes
from ..accounting.budget import CapTotal
from .session_state import ledger_key


TOTALS_CACHE: dict[str, tuple[str, dict[tuple[str, str], CapTotal]]] = {}


# The caps' running accountant states, cached the same way.
STATES_CACHE: dict[str, tuple[str, dict[tuple[str, str], dict]]] = {}


def current_cache(session: Session, caches: dict | None = None) -> dict[tuple[str, str], CapTotal]:
    caches = TOTALS_CACHE if caches is None else caches
    head = session.info.get("head_at_start")
    if head is None:  # no head read in this transaction: no way to tell whether the cache is current
        return {}
    url = ledger_key(session)
    cached = caches.get(url)
    if cached is None or cached[0] != head:
        cached = caches[url] = (head, {})
    return cached[1]


# The guarantee value and accounting event ids (accounting_writes.Known) this process last knew, per ledger
# URL, valid while the audit head is the one they were known at (as the running totals): the id
# tables are append-only, so what a committed transaction read or gave is still so at its head.
IDS_CACHE: dict[str, tuple[str, accounting_writes.Known]] = {}
IDS_KEPT = 4096  # ids carried from one transaction to the next (a copy each time), at most


def known_ids(session: Session) -> accounting_writes.Known:
    """The ids this transaction may take as known: this process's, while the head is unmoved."""
    known = session.info.get("known_ids")
    if known is None:
        cached = IDS_CACHE.get(ledger_key(session))
        head = session.info.get("head_at_start")
        if head is not None and cached is not None and cached[0] == head:
            known = accounting_writes.Known(dict(cached[1].values), dict(cached[1].events), dict(cached[1].stops))
        else:
            known = accounting_writes.Known({}, {})
        session.info["known_ids"] = known
    return known


def remember_ids(session: Session) -> None:
    """After a commit: the ids this transaction knew (read or given) are current at the new head."""
    known, head = session.info.get("known_ids"), session.info.get("audit_head")
    if known is not None and head is not None and len(known.values) + len(known.events) <= IDS_KEPT:
        IDS_CACHE[ledger_key(session)] = (head[1], known)


def remember_roles(session: Session) -> None:
    """After a commit that changed no role: the roles it read are current at the new head."""
    found, head = session.info.get("roles"), session.info.get("audit_head")
    if found is not None and head is not None and "roles_changed" not in session.info:
        ROLES_CACHE[ledger_key(session)] = (head[1], found)


def remember_totals(session: Session) -> None:
    """After a commit: the totals (and accountant states) this transaction wrote become the
    cache, as of the new head."""
    head = session.info.get("audit_head")
    if head is None:
        return
    url = ledger_key(session)
    for caches, key in ((TOTALS_CACHE, "saved_totals"), (STATES_CACHE, "saved_states")):
        saved = session.info.get(key)
        if not saved:
            continue
        cached = caches.get(url)
        entries = cached[1] if cached is not None and cached[0] == session.info.get("head_at_start") else {}
        entries.update(saved)
        entries = {k: v for k, v in entries.items() if v is not None}  # (a dropped state is read again)
        if len(entries) > 4096:
            entries = {k: v for k, v in saved.items() if v is not None}
        caches[url] = (head[1], entries)


# one they were read at (every grant and revocation appends an event: set_role).
ROLES_CACHE: dict[str, tuple[str, dict[str, frozenset[str]]]] = {}
