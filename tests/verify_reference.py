"""The audit verification as it was before it streamed (before it streamed
verify): every release row, decoded release and accounting row held in memory at once.
The reference the streaming `store.verify` must agree with on tampered ledgers
(tests/store/test_verify_streaming.py); not used by the ledger itself."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sqlmodel import Session, select

from sqlalchemy import select as sa_select

from ledger.store import accounting_check
from ledger.accounting.budget import total_differences, total_from_index
from ledger.store.codec import (GENESIS_HASH, canonical_json, cap_total_to_dict, chain_hash, dataset_from_dict,
                          dataset_to_dict, event_hash, release_from_dict)
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.records import CHARGED_STATUSES, Family, Release
from ledger.store.audit_verify import (RELEASE_PAYLOAD, Verification, _normal, check_count, compare, event_number,
                                      normal_release)
from ledger.store.configuration import configuration
from ledger.store.row_dicts import cap_dict, family_dict, release_row_dict
from ledger.store.row_reads import read_datasets
from ledger.store.running_totals import cap_totals
from ledger.store.session_state import session_connection
from ledger.store.table_models import AuditEventRow, CapAccountantRow, CapRow, FamilyRow, ReleaseRow, RoleRow

_EVENTS = AuditEventRow.__table__
_RELEASES = ReleaseRow.__table__


def verify_in_memory(session: Session) -> Verification:
    """Recompute the hash chain, and compare every release, dataset and family row
    with the state its latest audit event recorded."""
    problems: list[str] = []
    previous = GENESIS_HASH
    # key -> (seq of its latest event, the state it recorded, that state's canonical JSON if known)
    expected_releases: dict[str, tuple[int, dict | None, str | None]] = {}
    expected_datasets: dict[str, tuple[int, dict | None, str | None]] = {}
    expected_families: dict[str, tuple[int, dict | None, str | None]] = {}
    expected_caps: dict[str, tuple[int, dict | None, str | None]] = {}
    expected_roles: dict[tuple[str, str], tuple[int, bool]] = {}  # (person, role) -> (seq, held)
    count = 0
    for row in session_connection(session).execute(select(_EVENTS).order_by(_EVENTS.c.seq)):
        count += 1
        if row.seq != count:
            problems.append(f"event {row.seq}: sequence gap (expected event {count})")
            count = row.seq
        if row.prev_hash != previous:
            problems.append(f"event {row.seq} ({row.kind} {row.subject}): previous-hash link broken")
        previous = row.hash
        # The stored payload is canonical JSON, so the hash is taken over it as it is.
        canonical = event_hash(row.prev_hash, row.seq, row.at, row.actor, row.kind, row.subject,
                               row.payload) == row.hash
        if canonical and row.kind.startswith("release.") and row.payload.startswith(RELEASE_PAYLOAD):
            # {"release": body}: the text holds the body's canonical JSON; it is parsed only if
            # the row differs from it (and a wrong cut can only cause that re-check)
            expected_releases[row.subject] = (row.seq, None, row.payload[len(RELEASE_PAYLOAD):-1])
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
            expected_releases[row.subject] = (row.seq, payload["release"], None)
        if "dataset" in payload:
            expected_datasets[row.subject] = (row.seq, _normal(payload["dataset"], dataset_from_dict, dataset_to_dict),
                                              None)
        if "family" in payload:
            expected_families[row.subject] = (row.seq, payload["family"], None)
        if "cap" in payload:
            if payload["cap"] is None:  # cap.removed: no row is expected any more
                expected_caps.pop(row.subject, None)
            else:
                expected_caps[row.subject] = (row.seq, payload["cap"], None)
        if row.kind.startswith("role.") and isinstance(payload.get("role"), dict):
            grant = payload["role"]
            expected_roles[(str(grant.get("person")), str(grant.get("role")))] = (row.seq, bool(grant.get("granted")))

    release_rows = {r.id: release_row_dict(r) for r in session.connection().execute(select(_RELEASES))}
    problems.extend(compare("release", expected_releases, release_rows, normal_release))
    problems.extend(compare(
        "dataset", expected_datasets, {d.name: dataset_to_dict(d) for d in read_datasets(session)}))
    problems.extend(compare(
        "family", expected_families, {f.id: family_dict(f) for f in session.exec(select(FamilyRow))}))
    problems.extend(compare(
        "cap", expected_caps, {f"{c.dataset}/{c.name}": cap_dict(c) for c in session.exec(select(CapRow))}))
    held = {(r.person, r.role) for r in session.exec(select(RoleRow))}
    for (person, role), (seq, granted) in expected_roles.items():
        if granted != ((person, role) in held):
            problems.append(f"event {seq} (role {person}/{role}): the roles table was changed outside the ledger "
                            f"({'granted' if granted else 'revoked'} by this event)")
    for person, role in held - {key for key, (_, granted) in expected_roles.items() if granted}:
        if (person, role) not in expected_roles:
            problems.append(f"event ? (role {person}/{role}): a role row has no audit event")
    problems.sort(key=event_number)
    decoded = {rid: release_from_dict(body) for rid, body in release_rows.items()}  # once, for both
    problems.extend(_check_totals(session, release_rows, list(decoded.values())))
    problems.extend(_check_accounting(session, decoded, lambda rid: rid in expected_releases and canonical_json(
        release_rows[rid]) == (expected_releases[rid][2] or canonical_json(expected_releases[rid][1]))))
    problems.extend(check_count(session, count))
    return Verification(ok=not problems, events=count, head=previous, problems=tuple(problems))


def _check_totals(session: Session, release_rows: Mapping[str, dict],
                  decoded: Sequence[Release] | None = None) -> list[str]:
    """Recompute every cap's running total from the releases and compare."""
    problems = []
    config = configuration(session)
    releases = decoded if decoded is not None else [release_from_dict(body) for body in release_rows.values()]
    for dataset, dataset_caps in config.caps.items():
        counted = [r for r in releases if r.dataset == dataset and r.status in CHARGED_STATUSES]
        families = {f.id: f for f in config.families.values() if f.dataset == dataset}
        variables = config.datasets[dataset].variable_names
        index = LedgerIndex(variables, counted, families.values())
        stored = cap_totals(session, dataset)
        for cap in dataset_caps:
            expected = total_from_index(cap, index)
            found = stored.get(cap.name)
            if found is None:
                problems.append(f"cap {dataset}/{cap.name}: the running total is missing")
            elif cap_total_to_dict(found) != cap_total_to_dict(expected):
                differences = total_differences(found, expected) or ["its stored form"]
                problems.append(f"cap {dataset}/{cap.name}: the running total differs from the total recomputed "
                                f"from the releases: {'; '.join(differences)}")
        problems.extend(_check_accountant_states(session, dataset, dataset_caps,
                                                 [r for r in releases if r.dataset == dataset], families))
    return problems


def _check_accounting(session: Session, releases: Mapping[str, Release], trusted=None) -> list[str]:
    """Recompute every accounting row (accounting_check.check) from its release and compare."""
    seqs = dict(session_connection(session).execute(select(_RELEASES.c.id, _RELEASES.c.seq)).all())
    variables = {d.name: d.variable_names for d in configuration(session).datasets.values()}
    return accounting_check.check(session, ((seqs[rid], release) for rid, release in releases.items()), variables,
                         trusted=trusted)


def _check_accountant_states(session: Session, dataset: str, caps, releases: Sequence[Release],
                             families: Mapping[str, Family]) -> list[str]:
    """Recompute every stored running accountant state from the releases and compare,
    like the running totals. A state for another version of a cap (or of the state format) is
    never read by a decision (it is recomputed), so only the states a decision would use count."""
    from ledger.accounting.cap_states import state_differences, state_from_history, state_is_current

    problems = []
    table = CapAccountantRow.__table__  # the table itself, never a process's cache
    stored = dict(session.connection().execute(sa_select(table.c.cap, table.c.state).where(
        table.c.dataset == dataset)).all())
    for cap in caps:
        state = stored.get(cap.name)
        if state is None or not state_is_current(cap, state):
            continue
        differences = state_differences(state, state_from_history(cap, releases, families))
        if differences:
            problems.append(f"cap {dataset}/{cap.name}: the running accountant state differs from the state "
                            f"recomputed from the releases: {'; '.join(differences)}")
    return problems
