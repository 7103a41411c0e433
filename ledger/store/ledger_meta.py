"""ledger_meta values a write keeps: the running totals' stamp and the number of events written.

Every write through the ledger keeps the running totals equal to the totals recomputed from the
releases and, in the same transaction, stamps them with the audit head it leaves; a decision
refuses when the stamp is behind the head it reads (`stale_totals`). The last event's seq
(`events_written`) lets `verify` tell a chain cut short or emptied from a whole one.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import bindparam, text, update
from sqlmodel import Session, select

from . import driver
from .configuration import configuration
from .session_state import session_connection, flush_pending
from .table_models import MetaRow


EVENTS_WRITTEN = "events_written"  # ledger_meta key: the seq of the last event the ledger wrote


_SET_META = text("""INSERT INTO ledger_meta ("key", value) VALUES (:k, :v) """
                 """ON CONFLICT ("key") DO UPDATE SET value = excluded.value""")


# Every write through the ledger keeps the running totals equal to the totals recomputed
# from the releases (budget.apply, or total_from_history for a new or changed cap) and, in
# the same transaction, stamps them with the audit head it leaves ("seq:hash", a MetaRow).
# A command that decides (check, record, approve, publish) compares that stamp with the
# head it reads: two primary-key reads, whatever the length of the history. A stamp
# behind the head means events were appended by something that did not keep the totals
# (raw SQL, a restored backup of one table): the totals may disagree with the releases,
# and the command refuses. A change that appends nothing (a row edited in place) leaves
# the head where it was: that is what `audit verify` (which recomputes every total) finds.
TOTALS_STAMP = "totals_head"
_META = MetaRow.__table__
_READ_STAMP = select(_META.c.value).where(_META.c.key == TOTALS_STAMP)
_WRITE_STAMP = update(_META).where(_META.c.key == TOTALS_STAMP).values(value=bindparam("stamp"))


def stamp_totals(session: Session) -> None:
    """Stamp the running totals with the head this transaction leaves (called by write_session)."""
    head = session.info.get("audit_head")
    if head is None:
        return
    set_meta(session, {TOTALS_STAMP: f"{head[0]}:{head[1]}"})


def set_meta(session: Session, values: Mapping[str, str]) -> None:
    """Set ledger_meta values: one statement for them all (an executemany), which inserts a
    key that has no row yet (a ledger's first writes)."""
    if not values:
        return
    flush_pending(session)
    driver.execute_many(session_connection(session), _SET_META, [{"k": key, "v": value} for key, value in values.items()])


def stale_totals(session: Session) -> str | None:
    """Why the running totals cannot be trusted by a decision, or None when their stamp is
    the chain head read at the start of this transaction."""
    configuration(session)  # reads the head (once per transaction)
    # events this transaction appended itself (a first writer's roles, say) come after the stamp
    head = session.info.get("head_before_writes", session.info.get("audit_head"))
    # read with the head, in the same statement (a write stamps only when it commits)
    stamp = session.info["totals_stamp"] if "totals_stamp" in session.info else \
        session_connection(session).execute(_READ_STAMP).scalar()
    if stamp is None or head is None:
        return None  # a ledger written before stamps existed: `audit verify` recomputes its totals
    seq, _, digest = stamp.partition(":")
    if (seq, digest) == (str(head[0]), head[1]):
        return None
    return (f"the running cap totals were computed at audit event {seq} but the chain head is event "
            f"{head[0]}: the ledger was changed by something other than privacy-ledger, so the totals "
            "may disagree with the releases they came from. Nothing was decided; run "
            "`privacy-ledger audit verify` to find the change")
