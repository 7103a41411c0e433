"""The append-only audit chain: `append_event`, its one writer, and reads of its head and events.

Invariant: every change appends an `AuditEventRow` whose hash is SHA-256 over the previous hash and
the event's canonical JSON (codec.chain_hash); rows are never updated or deleted by the ledger.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert
from sqlmodel import Session, select

from . import driver
from .codec import GENESIS_HASH, canonical_json, chain_hash, event_hash
from . import session_state
from .session_state import flush_pending, session_connection
from .table_models import AuditEventRow


_EVENTS = AuditEventRow.__table__


_LAST_EVENT = select(_EVENTS.c.seq, _EVENTS.c.hash).order_by(_EVENTS.c.seq.desc()).limit(1)
_INSERT_EVENT = insert(_EVENTS)


def append_event(session: Session, *, kind: str, subject: str, actor: str, payload: dict,
                 at: datetime | None = None) -> tuple[int, str]:
    """Append one event to the chain; returns its (seq, hash)."""
    flush_pending(session)  # anything the ORM holds goes first, in order
    connection = session_connection(session)
    head = session.info.get("audit_head")  # (seq, hash) of the last event this transaction wrote
    if head is None:
        last = connection.execute(_LAST_EVENT).first()
        head = (0, GENESIS_HASH) if last is None else (last[0], last[1])
    session.info.setdefault("head_before_writes", head)  # what the running totals were stamped with
    seq, previous = head[0] + 1, head[1]
    moment = (at or session_state.now()).isoformat()
    payload_json = canonical_json(payload)
    digest = event_hash(previous, seq, moment, actor, kind, subject, payload_json)
    driver.execute(connection, _INSERT_EVENT, {"seq": seq, "at": moment, "actor": actor, "kind": kind,
                                               "subject": subject, "payload": payload_json,
                                               "prev_hash": previous, "hash": digest}, columns=True)
    session.info["audit_head"] = (seq, digest)
    session.info["appended"] = True
    session.info["appended_seq"] = seq
    return seq, digest


def lifecycle_events(session: Session, kinds: Sequence[str],
                     subjects: Sequence[str] | None = None) -> list[tuple[int, str, str, str, str, str]]:
    """(seq, kind, subject, at, actor, payload) of the events of these kinds (about these
    subjects, when given: read through the (kind, subject) index), in chain order."""
    query = (select(_EVENTS.c.seq, _EVENTS.c.kind, _EVENTS.c.subject, _EVENTS.c.at, _EVENTS.c.actor,
                    _EVENTS.c.payload).where(_EVENTS.c.kind.in_(list(kinds))).order_by(_EVENTS.c.seq))
    if subjects is not None:
        query = query.where(_EVENTS.c.subject.in_(list(subjects)))
    return [tuple(row) for row in session_connection(session).execute(query)]


@dataclass(frozen=True)
class HeadRow:
    seq: int
    hash: str
    at: str
    events: int


def last_event(session: Session) -> tuple[int, str]:
    """(seq, hash) of the chain's last event ((0, GENESIS_HASH) when there is none): every change
    to a ledger appends an event, so two reads that find the same last event read the same ledger
    (what a report written by several processes checks, each in its own snapshot)."""
    last = session_connection(session).execute(_LAST_EVENT).first()
    return (0, GENESIS_HASH) if last is None else (int(last.seq), str(last.hash))


def chain_head(session: Session) -> HeadRow:
    """The last event of the chain and how many events there are."""
    connection = session_connection(session)
    last = connection.execute(select(_EVENTS.c.seq, _EVENTS.c.hash, _EVENTS.c.at)
                              .order_by(_EVENTS.c.seq.desc()).limit(1)).first()
    if last is None:
        return HeadRow(0, GENESIS_HASH, "", 0)
    from sqlalchemy import func

    count = connection.execute(select(func.count()).select_from(_EVENTS)).scalar_one()
    return HeadRow(last.seq, last.hash, last.at, count)


def event_at(session: Session, seq: int) -> tuple[int, str] | None:
    row = session_connection(session).execute(select(_EVENTS.c.seq, _EVENTS.c.hash).where(_EVENTS.c.seq == seq)).first()
    return None if row is None else (row.seq, row.hash)


def hashes_to_itself(row) -> bool:
    """The event row hashes to its stored hash, as the chain walk checks every later event
    (`audit_verify.ChainWalk`: over the stored canonical payload, else over the payload parsed)."""
    if event_hash(row.prev_hash, row.seq, row.at, row.actor, row.kind, row.subject, row.payload) == row.hash:
        return True
    try:
        payload = json.loads(row.payload)
    except ValueError:
        return False
    return chain_hash(row.prev_hash, {"seq": row.seq, "at": row.at, "actor": row.actor, "kind": row.kind,
                                      "subject": row.subject, "payload": payload}) == row.hash
