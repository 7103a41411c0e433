"""`verify`: the audit chain recomputed, and every release, dataset, family, cap and role row
compared with the state its latest event recorded; every accounting row and running total
recomputed from the releases.

Invariant: memory stays bounded at any size (the chain and the release rows streamed VERIFY_CHUNK
at a time; each release's latest event kept in a temporary SQLite file); a passing verification
gives the derived rows' digest (derived.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
import hashlib
import json

from sqlalchemy import Connection, LargeBinary, cast, func
from sqlmodel import Session, select

from . import accounting_check, derived, sealed
from ..core.memory import paused_gc
from .codec import (GENESIS_HASH, canonical_json, chain_hash, dataset_from_dict, dataset_to_dict, event_hash_of_bytes,
                    release_from_dict, release_to_dict)
from .configuration import configuration
from .ledger_meta import EVENTS_WRITTEN
from .row_reads import read_datasets
from . import row_dicts
from .row_arrays import _raw_rows
from .row_dicts import RELEASE_TEXT_COLUMNS, cap_dict, family_dict, release_row_dicts_canonical
from .session_state import session_connection
from .table_models import AuditEventRow, CapRow, FamilyRow, MetaRow, ReleaseRow, RoleRow
from .totals_check import TotalsCheck


_EVENTS = AuditEventRow.__table__
_RELEASES = ReleaseRow.__table__


RELEASE_PAYLOAD = '{"release":'  # how a payload holding only a release's state starts (canonical JSON)


@dataclass(frozen=True)
class Verification:
    ok: bool
    events: int
    head: str
    problems: tuple[str, ...]  # the first names the first bad event
    full: bool = True  # the whole chain and every row recomputed (else: since a verified head)
    derived: dict | None = None  # a passing one: the derived rows' digest (derived.py), kept with the head


class ChainEvent(NamedTuple):
    """An audit event as the chain walk reads it: the payload as its stored UTF-8 bytes."""

    seq: int
    at: str
    actor: str
    kind: str
    subject: str
    payload: bytes
    prev_hash: str
    hash: str


class ChainWalk:
    """The audit chain walked in seq order from just after event `start` (whose hash is
    `previous`), `batch` events at a time (a keyset query per batch: nothing holds the whole
    chain, on SQLite or PostgreSQL), read as the driver's tuples with each payload as bytes.
    Iterating yields (event, canonical) after checking the sequence and the previous-hash link;
    `canonical` says the event hashes to its stored hash as stored. Problems found go to
    `problems`; `count` and `head` follow the walk.
    Shared by `verify` and `verified_head.verify_since`."""

    def __init__(self, connection: Connection, problems: list[str], start: int = 0,
                 previous: str = GENESIS_HASH, batch: int | None = None):
        self.connection, self.problems, self.batch = connection, problems, batch or row_dicts.VERIFY_CHUNK
        self.start, self.count, self.head = start, start, previous

    def __iter__(self) -> Iterator[tuple[ChainEvent, bool]]:
        columns = (_EVENTS.c.seq, _EVENTS.c.at, _EVENTS.c.actor, _EVENTS.c.kind, _EVENTS.c.subject,
                   _payload_bytes(self.connection), _EVENTS.c.prev_hash, _EVENTS.c.hash)
        digest = event_hash_of_bytes
        after = self.start
        while True:
            rows = _raw_rows(self.connection, select(*columns).where(_EVENTS.c.seq > after)
                             .order_by(_EVENTS.c.seq).limit(self.batch))
            for seq, at, actor, kind, subject, payload, prev_hash, hash_ in rows:
                if type(payload) is not bytes:  # (a driver without the cast: the text, encoded here)
                    payload = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
                self.count += 1
                if seq != self.count:
                    self.problems.append(f"event {seq}: sequence gap (expected event {self.count})")
                    self.count = seq
                if prev_hash != self.head:
                    self.problems.append(f"event {seq} ({kind} {subject}): previous-hash link broken")
                self.head = hash_
                # The stored payload is canonical JSON, so the hash is taken over it as it is.
                canonical = digest(prev_hash, seq, at, actor, kind, subject, payload) == hash_
                yield ChainEvent(seq, at, actor, kind, subject, payload, prev_hash, hash_), canonical
            if len(rows) < self.batch:
                return
            after = rows[-1][0]


def _payload_bytes(connection: Connection):
    """The payload column read as its UTF-8 bytes where the database can hand them over as they
    are stored (SQLite: a cast to BLOB copies the bytes; PostgreSQL: `convert_to`)."""
    dialect = connection.dialect.name
    if dialect == "sqlite":
        return cast(_EVENTS.c.payload, LargeBinary)
    if dialect == "postgresql":
        return func.convert_to(_EVENTS.c.payload, "UTF8")
    return _EVENTS.c.payload


class _LatestReleaseEvents:
    """Release id -> the seq of its latest event that carries the release's state, and the
    SHA-256 of that state's canonical JSON as the event's text holds it (None: the payload was
    parsed, the state is read again by seq when its row is compared). Kept in a temporary
    SQLite file, not in memory: a million releases are a million keys, and `verify` must stay
    within bounded memory at any size."""

    def __init__(self):
        import sqlite3
        import tempfile

        self.directory = tempfile.TemporaryDirectory(prefix="ledger-verify-")
        self.db = sqlite3.connect(Path(self.directory.name) / "latest.db")
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute("CREATE TABLE latest (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, digest BLOB, "
                        "seen INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID")
        self.pending: list[tuple[str, int, bytes | None]] = []

    def note(self, release_id: str, seq: int, digest: bytes | None) -> None:
        self.pending.append((release_id, seq, digest))
        if len(self.pending) >= row_dicts.VERIFY_CHUNK:
            self.flush()

    def flush(self) -> None:
        # events come in seq order: the last one written for an id is its latest
        self.db.executemany("INSERT INTO latest (id, seq, digest) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE "
                            "SET seq = excluded.seq, digest = excluded.digest", self.pending)
        self.pending = []

    def lookup(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes | None]]:
        """The latest events of these releases (marked seen: they have a row)."""
        found = {}
        for at in range(0, len(ids), 500):
            part = list(ids[at:at + 500])
            marks = ",".join("?" * len(part))
            found.update((rid, (seq, digest)) for rid, seq, digest in self.db.execute(
                f"SELECT id, seq, digest FROM latest WHERE id IN ({marks})", part))
            self.db.execute(f"UPDATE latest SET seen = 1 WHERE id IN ({marks})", part)
        return found

    def unseen(self) -> Iterator[tuple[str, int]]:
        """The releases with an event and no row."""
        yield from self.db.execute("SELECT id, seq FROM latest WHERE seen = 0 ORDER BY seq")

    def close(self) -> None:
        self.db.close()
        self.directory.cleanup()


def release_state_digest(payload: bytes) -> bytes | None:
    """SHA-256 of the release state a release event's canonical payload holds, cut from its
    bytes without parsing them: the value of its last key, "release" (sorted keys put it
    after "budget_decisions"), up to the payload's closing brace. None where the payload
    does not end so. A key "release" nested deeper would leave the cut with more closing
    brackets than opening ones (no canonical JSON of a row has that digest), and a quote inside
    a string is escaped, so a wrong cut can only make the row differ, and be parsed again."""
    at = 0 if payload.startswith(_RELEASE_FIRST) else payload.rfind(_RELEASE_KEY)
    if at < 0 or not payload.endswith(b"}"):
        return None
    return hashlib.sha256(memoryview(payload)[at + len(_RELEASE_KEY):-1]).digest()


_RELEASE_KEY = b',"release":'
_RELEASE_FIRST = b'{"release":'


class StateEvents:
    """What the latest audit event of each dataset, family, cap and role grant says its row
    holds, noted event by event along the chain; `problems` compares the rows with it. The
    full verification notes every event (and a row no event names is reported); the
    incremental one (`verified_head.verify_since`) notes the events since its checkpoint and
    compares only the rows they name. A cap's latest event may remove it (`cap.removed`,
    payload {"cap": None}): its row must then be gone."""

    def __init__(self) -> None:
        # key -> (seq of its latest event, the state it recorded (None: removed), its canonical JSON if known)
        self.datasets: dict[str, tuple[int, dict | None, str | None]] = {}
        self.families: dict[str, tuple[int, dict | None, str | None]] = {}
        self.caps: dict[str, tuple[int, dict | None, str | None]] = {}
        self.roles: dict[tuple[str, str], tuple[int, bool]] = {}  # (person, role) -> (seq, held)

    def note(self, row, payload: dict) -> None:
        if "dataset" in payload:
            self.datasets[row.subject] = (row.seq, _normal(payload["dataset"], dataset_from_dict, dataset_to_dict),
                                          None)
        if "family" in payload:
            self.families[row.subject] = (row.seq, payload["family"], None)
        if "cap" in payload:
            self.caps[row.subject] = (row.seq, payload["cap"], None)
        if row.kind.startswith("role.") and isinstance(payload.get("role"), dict):
            grant = payload["role"]
            self.roles[(str(grant.get("person")), str(grant.get("role")))] = (row.seq, bool(grant.get("granted")))

    def problems(self, session: Session, only_named: bool = False) -> list[str]:
        """Every row against its latest event's state; `only_named`: only the rows the noted
        events name (an incremental verification: the others were verified before)."""
        problems = []
        if self.datasets or not only_named:
            datasets = read_datasets(session, list(self.datasets)) if only_named else read_datasets(session)
            problems.extend(compare("dataset", self.datasets, {d.name: dataset_to_dict(d) for d in datasets}))
        if self.families or not only_named:
            query = select(FamilyRow)
            if only_named:
                query = query.where(FamilyRow.id.in_(list(self.families)))
            problems.extend(compare("family", self.families,
                                     {f.id: family_dict(f) for f in session.exec(query)}))
        caps = {f"{c.dataset}/{c.name}": cap_dict(c) for c in session.exec(select(CapRow))}
        removed = {key: seq for key, (seq, body, _) in self.caps.items() if body is None}
        for key, seq in removed.items():
            if caps.pop(key, None) is not None:
                problems.append(f"event {seq} (cap {key}): the cap was removed by this event, but its row remains")
        if only_named:
            caps = {key: body for key, body in caps.items() if key in self.caps}
        problems.extend(compare("cap", {k: v for k, v in self.caps.items() if k not in removed}, caps))
        held = {(r.person, r.role) for r in session.exec(select(RoleRow))}
        for (person, role), (seq, granted) in self.roles.items():
            if granted != ((person, role) in held):
                problems.append(f"event {seq} (role {person}/{role}): the roles table was changed outside the "
                                f"ledger ({'granted' if granted else 'revoked'} by this event)")
        if not only_named:
            for person, role in held - {key for key, (_, granted) in self.roles.items() if granted}:
                if (person, role) not in self.roles:
                    problems.append(f"event ? (role {person}/{role}): a role row has no audit event")
        return problems


def verify(session: Session) -> Verification:
    """Recompute the hash chain, and compare every release, dataset and family row
    with the state its latest audit event recorded; recompute every accounting row and
    every cap's running total from the releases.

    Streams: the chain is walked VERIFY_CHUNK events at a time, and the
    release rows are read, compared, decoded and charged VERIFY_CHUNK at a time (in seq
    order), the running totals summed chunk by chunk (`TotalsCheck`); what must be
    remembered across the whole chain for each release (its latest event) is kept in a
    temporary SQLite file. Memory does not grow with the number of releases, except for
    the members of families (a family is charged once, over all its members: docs/explanation/model.md#families)."""
    problems: list[str] = []
    states = StateEvents()
    connection = session_connection(session)
    latest = _LatestReleaseEvents()
    pause = paused_gc()  # a chunk's rows are freed by reference counting; cycle searches cost a third of the time
    pause.__enter__()
    try:
        walk = ChainWalk(connection, problems)
        for row, canonical in walk:
            if canonical and row.kind.startswith("release."):
                # the release's state is compared with its row by the digest of its text; the
                # payload is parsed only if the row differs from it
                digest = release_state_digest(row.payload)
                if digest is not None:
                    latest.note(row.subject, row.seq, digest)
                    continue
            try:
                payload = json.loads(row.payload)
            except ValueError:
                problems.append(f"event {row.seq} ({row.kind} {row.subject}): payload is not valid JSON")
                payload = {}
            if not canonical and chain_hash(row.prev_hash, {"seq": row.seq, "at": row.at, "actor": row.actor,
                                                            "kind": row.kind, "subject": row.subject,
                                                            "payload": payload}) != row.hash:
                problems.append(f"event {row.seq} ({row.kind} {row.subject}): content does not match its hash")
            if "release" in payload:
                latest.note(row.subject, row.seq, None)
            states.note(row, payload)
        latest.flush()
        count = walk.count

        config = configuration(session)
        totals = TotalsCheck(session, config)
        accounting_sum = derived.AccountingSum()  # the digest's, from the rows the check reads
        accounting = accounting_check.Check(session, {d.name: d.variable_names for d in config.datasets.values()},
                                            rows_read=accounting_sum.add)
        for rows in _release_chunks(connection):
            written = release_row_dicts_canonical(rows)
            release_rows = {body["id"]: body for body, _ in written}
            seqs = {r.id: r.seq for r in rows}
            found = latest.lookup(list(release_rows))
            sha256 = hashlib.sha256
            same = {body["id"] for body, text in written if found.get(body["id"], (0, None))[1]
                    == sha256(text.encode("utf-8")).digest()}
            differing = {rid: body for rid, body in release_rows.items() if rid not in same}
            expected = _expected_releases(connection, {rid: found[rid][0] for rid in differing if rid in found})
            problems.extend(compare("release", expected, differing, normal_release))
            decoded = {rid: release_from_dict(body) for rid, body in release_rows.items()}  # once, for both
            totals.add(decoded.values())
            accounting.add([(seqs[rid], release) for rid, release in decoded.items()],
                           trusted=same.__contains__)
        for rid, seq in latest.unseen():
            problems.append(f"event {seq} (release {rid}): the release row is missing")
    finally:
        latest.close()
        pause.__exit__(None, None, None)
    problems.extend(states.problems(session))
    problems.sort(key=event_number)
    problems.extend(totals.problems())
    problems.extend(accounting.problems())
    problems.extend(sealed.check(connection, {d.name: d.variable_names for d in config.datasets.values()}))
    problems.extend(check_count(session, count))
    digest = None if problems else derived.digest(connection, count, accounting_sum.total)
    return Verification(ok=not problems, events=count, head=walk.head, problems=tuple(problems), derived=digest)


def _release_chunks(connection: Connection, batch: int | None = None) -> Iterator[list]:
    """The release rows in (seq, id) order, `batch` at a time (keyset pagination: a seq
    changed behind the ledger's back may repeat, the id never does), the JSON columns as
    their text (`release_row_dicts` reads them)."""
    from sqlalchemy import tuple_

    batch = batch or row_dicts.VERIFY_CHUNK
    after = None
    while True:
        query = select(*RELEASE_TEXT_COLUMNS).order_by(_RELEASES.c.seq, _RELEASES.c.id).limit(batch)
        if after is not None:
            query = query.where(tuple_(_RELEASES.c.seq, _RELEASES.c.id) > tuple_(*after))
        rows = connection.execute(query).all()
        if rows:
            yield rows
        if len(rows) < batch:
            return
        after = (rows[-1].seq, rows[-1].id)


def _expected_releases(connection: Connection, latest: Mapping[str, int]
                       ) -> dict[str, tuple[int, dict | None, str | None]]:
    """Release id -> (seq, body, None) of its latest event (given by seq), its payload parsed
    whole (as `compare` takes them): read only for the rows that differ from the state's digest."""
    by_seq = {seq: rid for rid, seq in latest.items()}
    found: dict[str, tuple[int, dict | None, str | None]] = {}
    seqs = sorted(by_seq)
    for at in range(0, len(seqs), 500):
        for seq, payload in connection.execute(
                select(_EVENTS.c.seq, _EVENTS.c.payload).where(_EVENTS.c.seq.in_(seqs[at:at + 500]))):
            try:
                body = json.loads(payload)["release"]
            except (ValueError, KeyError, TypeError):
                body = {}
            found[by_seq[seq]] = (seq, body, None)
    return found


def check_count(session: Session, count: int) -> list[str]:
    """A chain with no event, or with fewer than the ledger recorded writing, is not intact:
    rows were deleted (a chain cut at its end still links)."""
    row = session.get(MetaRow, EVENTS_WRITTEN)
    written = int(row.value) if row is not None and row.value.isdigit() else None
    if written is not None and count < written:
        return [f"event {count + 1}: the ledger wrote {written} events, only {count} are left "
                f"(events {count + 1} to {written} were deleted)"]
    if count == 0:
        return ["event 1: the ledger holds no audit event at all (an empty or emptied ledger)"]
    return []


def normal_release(body: dict) -> dict:
    return _normal(body, release_from_dict, release_to_dict)


def _normal(body: dict, read, write) -> dict:
    """A record as the current format writes it (fields added since are given their defaults)."""
    try:
        return write(read(body))
    except (KeyError, TypeError, ValueError):
        return body  # unreadable: compared as it is, and reported


def compare(kind: str, expected: Mapping[str, tuple[int, dict | None, str | None]], actual: dict[str, dict],
             normal=None) -> list[str]:
    """Every row equal to the state its latest event recorded (`normal` brings a record
    written by an earlier version of the format to the current one before comparing).
    `expected` maps a key to (event seq, body, body's canonical JSON): either may be None,
    and the body is then parsed from the JSON only when the row differs from it."""
    problems = []
    for key, (seq, body, body_json) in expected.items():
        row = actual.get(key)
        if row is None:
            problems.append(f"event {seq} ({kind} {key}): the {kind} row is missing")
            continue
        if body_json is None:
            body_json = canonical_json(body)
        if canonical_json(row) == body_json:
            continue
        if body is None:  # a release event's payload, as stored: parse it whole
            try:
                body = json.loads(RELEASE_PAYLOAD + body_json + "}")["release"]
            except (ValueError, KeyError, TypeError):
                body = {}
        if normal is not None:
            row, body = normal(row), normal(body)
        if canonical_json(row) != canonical_json(body):
            fields = sorted(k for k in body if canonical_json(body.get(k)) != canonical_json(row.get(k)))
            problems.append(f"event {seq} ({kind} {key}): the {kind} row was changed outside the ledger "
                            f"(fields: {', '.join(fields)})")
    for key in actual.keys() - expected.keys():
        problems.append(f"event ? ({kind} {key}): a {kind} row has no audit event")
    return problems


def event_number(problem: str) -> float:
    token = problem.split()[1]
    return float(token.rstrip(":")) if token.rstrip(":").isdigit() else float("inf")
