"""Incremental verification: check what was appended since the last verified head, and every derived row.

`audit verify` recomputes the whole chain and every row: the reference, and on a
ledger of a million releases minutes of work. After it succeeds, the head it
verified (seq and hash), with when it was verified and when the last full verification
ran, is kept in `ledger_meta` as the checkpoint (JSON; schema 8: before it, "seq:hash"
with no time, upgraded in place by schema_migrations._v8_verified_head_time); `audit verify --since-checkpoint`
then checks only the events after it:

- the checkpoint event still carries the hash that was verified (so nothing up to
  it was rewritten without also rewriting the stored checkpoint);
- every later event links to the one before and hashes to its stored hash;
- every release, dataset, family and cap those events name equals the state its
  latest event recorded, and each such release's accounting row equals the one
  recomputed from it;
- every other derived row -- the accounting rows, the reads index, the sealed chunks,
  each cap's row, running total and accountant state -- against the digest kept with
  the head (derived.py), the totals and states of the datasets the events since changed
  recomputed from the accounting rows. Without a digest (a head kept before it), or after
  a migration or an amended dataset, it is the full verification.

What it does not do, and the full verification does: compare the release rows no event
since names with their events, and recompute from them the accounting rows (which the
digest says are those the last verification recomputed). A passing incremental run
moves the checkpoint to the new head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlmodel import Session

from . import accounting_check, derived
from . import audit_chain, audit_verify, configuration, engines, row_dicts, session_state, table_models
from .codec import release_from_dict

CHECKPOINT_KEY = "verified_head"


@dataclass(frozen=True)
class VerifiedHead:
    """The last head a verification passed at: its event and hash, when that verification ran
    (`at`) and when the last *full* verification ran (`full_at`: an incremental one carries it
    forward). A time is None for a head kept before schema 8, which stored none."""

    seq: int
    hash: str
    at: datetime | None = None
    full_at: datetime | None = None
    derived: dict | None = None  # the derived rows' digest at this head (derived.py); None: not kept

    def to_value(self) -> str:
        return json.dumps({"seq": self.seq, "hash": self.hash, "at": _iso(self.at), "full_at": _iso(self.full_at),
                           "derived": self.derived}, sort_keys=True)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _moment(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text)


def parse(value: str) -> VerifiedHead:
    """The stored value: JSON (schema 8), or the "seq:hash" of earlier schemas (no time)."""
    if value.startswith("{"):
        body = json.loads(value)
        derived = body.get("derived")
        return VerifiedHead(int(body["seq"]), str(body["hash"]), _moment(body.get("at")), _moment(body.get("full_at")),
                            derived if isinstance(derived, dict) else None)
    seq, digest = value.split(":", 1)
    return VerifiedHead(int(seq), digest)


def read_head(session: Session) -> VerifiedHead | None:
    row = session.get(table_models.MetaRow, CHECKPOINT_KEY)
    return None if row is None else parse(row.value)


def read(session: Session) -> tuple[int, str] | None:
    """The verified head's (seq, hash), or None."""
    head = read_head(session)
    return None if head is None else (head.seq, head.hash)


def remember(engine, verification: audit_verify.Verification, full: bool = True,
             previous: VerifiedHead | None = None) -> bool:
    """Keep a verified head as the checkpoint (only a verification that passed), stamped with
    now; `full` says whether the whole chain was verified (else `previous`, the head an
    incremental verification started from, gives when the last full one ran). Never waits
    for the ledger's writers (a verification takes no lock): when the database is
    busy, or opened read-only (an auditor's copy), the head is not kept and False is returned;
    the next --since-checkpoint then starts from the last head kept."""
    if not verification.ok or verification.events == 0:
        return False
    now = session_state.now()
    value = VerifiedHead(verification.events, verification.head, now,
                         now if full else (previous.full_at if previous is not None else None),
                         verification.derived).to_value()
    try:
        if engine.dialect.name == "sqlite":
            import sqlite3

            raw = engine.raw_connection()
            try:
                connection = raw.driver_connection  # autocommit: the store emits BEGIN itself
                connection.execute("PRAGMA busy_timeout = 0")
                try:
                    connection.execute("BEGIN IMMEDIATE")
                    connection.execute("INSERT OR REPLACE INTO ledger_meta (key, value) VALUES (?, ?)",
                                       (CHECKPOINT_KEY, value))
                    connection.execute("COMMIT")
                except sqlite3.Error:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    return False
                finally:
                    connection.execute(f"PRAGMA busy_timeout = {int(engines.lock_timeout() * 1000)}")
            finally:
                raw.close()
            return True
        with Session(engine) as session, session.begin():
            # one meta row, no event: the ledger's write lock is not needed, and not waited for
            session.connection().exec_driver_sql("SET LOCAL lock_timeout = '1s'")
            session.merge(table_models.MetaRow(key=CHECKPOINT_KEY, value=value))
        return True
    except Exception as exc:  # noqa: BLE001 -- only a database failure is expected here
        from sqlalchemy.exc import DBAPIError

        if isinstance(exc, DBAPIError):
            return False
        raise


def verify_since(session: Session, checkpoint: tuple[int, str], derived_digest: dict | None = None
                 ) -> audit_verify.Verification:
    """Verify what was appended since the verified head `checkpoint` (seq, hash), and every derived
    row against the digest kept with it (`derived_digest`, derived.py); a full verification when
    no digest was kept or the derived rows cannot be checked from it (derived.needs_full)."""
    events = table_models.AuditEventRow.__table__
    connection = session.connection()
    start, digest = checkpoint
    problems: list[str] = []
    row = connection.execute(select(events).where(events.c.seq == start)).first()
    found = None if row is None else row.hash
    if found != digest:
        problems.append(f"event {start}: the verified checkpoint's hash changed (it was {digest[:12]}..., now "
                        f"{'missing' if found is None else found[:12] + '...'}); run a full `audit verify`")
    elif not audit_chain.hashes_to_itself(row):  # its content edited, its hash kept: the head no longer holds
        problems.append(f"event {start} ({row.kind} {row.subject}): the verified checkpoint's content does not "
                        "match its hash; run a full `audit verify`")
    releases: dict[str, tuple[int, dict | None, str | None]] = {}
    touched_datasets: set[str] = set()
    kinds: set[str] = set()
    dataset_events = False
    states = audit_verify.StateEvents()  # the datasets, families, caps and roles the events since name
    walk = audit_verify.ChainWalk(connection, problems, start=start, previous=digest)  # the chain walk verify makes
    for row, canonical in walk:
        if not canonical:
            problems.append(f"event {row.seq} ({row.kind} {row.subject}): content does not match its hash")
        kinds.add(row.kind)
        try:
            payload = json.loads(row.payload)
        except ValueError:
            problems.append(f"event {row.seq} ({row.kind} {row.subject}): payload is not valid JSON")
            continue
        if "release" in payload:
            releases[row.subject] = (row.seq, payload["release"], None)
            if isinstance(payload["release"], dict):
                touched_datasets.add(str(payload["release"].get("dataset")))
        if "cap" in payload:
            touched_datasets.add(row.subject.split("/", 1)[0])
        dataset_events = dataset_events or "dataset" in payload
        states.note(row, payload)
    if not problems and derived.needs_full(derived_digest, kinds, dataset_events):
        return audit_verify.verify(session)

    variables = {d.name: d.variable_names for d in configuration.configuration(session).datasets.values()}
    seqs: dict[str, int] = {}
    if releases:
        table = table_models.ReleaseRow.__table__
        rows = {}
        ids = list(releases)
        for at in range(0, len(ids), 500):
            for row in connection.execute(select(table).where(table.c.id.in_(ids[at:at + 500]))):
                rows[row.id] = row_dicts.release_row_dict(row)
        problems.extend(audit_verify.compare("release", releases, rows, audit_verify.normal_release))
        seqs = {rid: seq for rid, seq in connection.execute(
            select(table.c.id, table.c.seq).where(table.c.id.in_(list(rows))))} if rows else {}
        readable = []
        for rid, body in rows.items():
            try:
                readable.append((seqs[rid], release_from_dict(body)))
            except (KeyError, TypeError, ValueError):
                continue
        problems.extend(accounting_check.check(session, readable, variables, only={rid for rid in rows}))
    problems.extend(states.problems(session, only_named=True))
    problems.sort(key=audit_verify.event_number)
    problems.extend(audit_verify.check_count(session, walk.count))  # a chain cut at its end
    fresh = None
    if derived_digest is not None:
        found, fresh = derived.check_since(session, derived_digest, seqs, set(states.caps), touched_datasets,
                                           variables, walk.count, set(states.families))
        problems.extend(found)
    return audit_verify.Verification(ok=not problems, events=walk.count, head=walk.head, problems=tuple(problems),
                              full=False, derived=None if problems else fresh)
