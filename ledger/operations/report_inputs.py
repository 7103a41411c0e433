"""The report's inputs: everything a report is computed from, read from the store in one session.

Gathered here, below the API, so that the façade (`Ledger.report_inputs`) and the command line read
the ledger the same way; the report (reporting/report.py) only computes its context from them and
renders it. The audit chain is verified with the inputs (since the verified head, when the ledger
keeps one), unless the caller verifies it alongside and passes a function giving the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction

from ..accounting.budget import CapCheck, CapTotal
from ..core.lazy import lazy_module
from ..core.records import Cap, Dataset, Family, Release
from .moments import parse_date

audit_verify = lazy_module("ledger.store.audit_verify")  # the ORM, imported when a report is gathered
configuration = lazy_module("ledger.store.configuration")  # the ORM, imported when a report is gathered
decoded_history = lazy_module("ledger.store.decoded_history")  # the ORM, imported when a report is gathered
running_totals = lazy_module("ledger.store.running_totals")  # the ORM, imported when a report is gathered
session_state = lazy_module("ledger.store.session_state")  # the ORM, imported when a report is gathered
report_queries = lazy_module("ledger.store.report_queries")  # the ORM, imported when a report is gathered


@dataclass(frozen=True)
class AuditEvent:
    """One event of the audit chain, as stored (table_models.AuditEventRow), without the ORM.

    payload: the canonical JSON text the chain hashed; parsed only when needed.
    """

    seq: int
    at: datetime
    actor: str
    kind: str
    subject: str
    payload: str
    hash: str = ""  # its link in the chain (table_models.AuditEventRow.hash)

    def data(self) -> dict:
        return json.loads(self.payload)


@dataclass(frozen=True)
class ChainStatus:
    """The result of recomputing the audit chain: in full (audit_verify.verify), or, on a ledger with a
    verified head (kept by a passing `audit verify`), what was appended since that head
    (verified_head.verify_since; `since` is the head's event: events 1..since were verified
    by that `audit verify`, and this report checked events since+1..events). `head_at` and
    `full_at`: when that head was verified, and when the last full verification ran (None
    when the head kept no time, before schema 8)."""

    ok: bool
    events: int
    head: str
    problems: tuple[str, ...]
    since: int = 0  # 0: the full verification
    head_at: datetime | None = None
    full_at: datetime | None = None


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is computed from.

    releases: every release of the dataset in recording order, cancelled ones too.
    cap_totals: the stored running totals (budget.CapTotal) by cap name.
    chain: the chain's verification, or a function giving it (verification may run
        alongside the rest, see cli/forked_helpers.py's VerifyAlongside); `chain_status()` reads it.
    events: the whole audit chain in order (the chain is ledger-wide).
    delta: the delta epsilon figures are stated at. since: the meeting-pack date.
    """

    dataset: Dataset
    releases: tuple[Release, ...]
    families: tuple[Family, ...]
    caps: tuple[Cap, ...]
    cap_totals: Mapping[str, CapTotal]
    chain: ChainStatus | Callable[[], ChainStatus]
    events: tuple[AuditEvent, ...]
    generated_at: datetime
    delta: Fraction
    since: datetime | None = None
    as_of: datetime | None = None  # the report shows the ledger as it stood then (ledger.accounting.history)
    # every cap as `cap list` decides it now (operations.cap_checks: the stored running totals and
    # accountant states); None: recomputed from the releases (cap_entries)
    cap_checks: tuple[CapCheck, ...] | None = None

    def chain_status(self) -> ChainStatus:
        return self.chain() if callable(self.chain) else self.chain



def parse_since(text: str | None) -> datetime | None:
    """--since: an ISO 8601 date or date-time; a date means its start (00:00), no zone means UTC
    (moments.parse_date, the rule of every date option)."""
    return parse_date(text, "--since", start=True, future=True)


def gather(session, dataset: Dataset, delta: Fraction, since: datetime | None,
           generated_at: datetime | None = None, chain: Callable[[], ChainStatus] | None = None) -> ReportInputs:
    """Everything the report is computed from, read in one session; the audit chain is
    verified here unless `chain` gives its verification (see cli/forked_helpers.py's VerifyAlongside)."""
    history = decoded_history.snapshot(session, dataset.name)
    if chain is None:
        chain = verify_for_report(session)
    events = tuple(AuditEvent(seq, event_moment(at), actor, kind, subject, payload, digest)
                   for seq, at, actor, kind, subject, payload, digest in report_queries.every_event(session))
    from .transactions import cap_checks

    caps = tuple(configuration.caps(session, dataset.name))
    return ReportInputs(
        dataset=dataset,
        releases=tuple(history.releases.values()),
        families=tuple(f for f in history.families.values() if f.dataset == dataset.name),
        caps=caps,
        cap_checks=tuple(cap_checks(session, dataset.name, list(caps))),  # as `cap list` decides them
        cap_totals=running_totals.cap_totals(session, dataset.name),
        chain=chain,
        events=events,
        generated_at=generated_at or session_state.now(),
        delta=delta,
        since=since,
    )


def release_count(session, dataset: str) -> int:
    """How many releases the dataset has, any status (one SQL count)."""
    return report_queries.release_count(session, dataset)


def chain_status(verification, since: int = 0, kept=None) -> ChainStatus:
    """The report's ChainStatus of a verification (audit_verify.Verification): in full, or (`since`) from
    the verified head `kept` (verified_head.VerifiedHead, whose times the report states)."""
    return ChainStatus(verification.ok, verification.events, verification.head, tuple(verification.problems),
                       since, None if kept is None else kept.at, None if kept is None else kept.full_at)


def verify_for_report(session) -> ChainStatus:
    """The report's verification of the audit chain: when the ledger has a verified head (kept
    by a passing `audit verify`), only what was appended since that head (verified_head.verify_since,
    as `audit verify --since-checkpoint`: the head's event must still carry the hash that was
    verified); else in full. The full one decodes and charges every release again: at 10,000
    releases it was most of a report's CPU, at a million minutes of it. The ChainStatus
    says which (`since`, and when the head and the last full verification were kept), and every
    report says it beside the result. A report never keeps a head itself: it writes nothing to the
    ledger (only `audit verify` does)."""
    from ..store import verified_head

    kept = verified_head.read_head(session)
    if kept is not None:
        result = verified_head.verify_since(session, (kept.seq, kept.hash), kept.derived)
        return chain_status(result) if result.full else chain_status(result, since=kept.seq, kept=kept)
    return chain_status(audit_verify.verify(session))


def event_moment(text: str) -> datetime:
    """An audit event's stored moment as an aware datetime (UTC when it names no zone)."""
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
