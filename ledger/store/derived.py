"""Derived rows under the chain: what every figure is computed from, covered by the incremental
verification (`audit verify --since-checkpoint`, verified_head.verify_since) as well as the full one.

The figures are computed from derived rows, not from the audit events: the accounting rows
(`release_accounting`, with the value and event ids they name in `guarantee_values` and
`accounting_events`, and the inverted index `release_reads`: accounting_rows.py), the sealed chunks
(sealed.py), and each cap's running total and accountant state (`cap_totals`,
`cap_accountant_state`). An incremental verification that checked only the rows the events since
the verified head name would trust every other row to be what it was at the head, and the head
sits in the same editable database. So a passing verification keeps, beside the head, a digest of
the derived rows (`digest`), and the next incremental one checks every derived row:

- an accounting row of a release an event since the head names is recomputed from its release
  (accounting_check.check, as before); every other one must be what it was at the head. The digest holds
  a sum of SHA-256 hashes, one per row in its resolved form (accounting_rows.Expected: value bodies and
  event keys, not ids, so an edit of `guarantee_values` or `accounting_events` changes the rows
  that name them), modulo 2**256 (a multiset hash, Bellare & Micciancio 1997, "A New Paradigm for
  Collision-Free Hashing", AdHash): the rows untouched since the head must sum to the head's sum
  less the hashes the touched ones had then, each recomputed from its release's state at the head
  (its latest audit event up to the head's seq);
- `release_reads` rows are written once, with their release: those up to the head's seq hash,
  in key order, to what they hashed at the head; later ones are compared by accounting_check.check;
- every sealed chunk is compared with the accounting rows (sealed.check in full: a binary compare);
- a cap's row, running total and accountant state hash to what they did at the head, unless an
  event since names its dataset; then its total and state are recomputed from the accounting rows
  (budget.total_from_index, cap_states.state_from_index, as `cap set` computes them) and its row
  is compared with its latest event (audit_verify.StateEvents).

- the dataset and variable rows, and each family's row (how its members are charged), hash to
  what they did at the head, unless an event since names the family.

An amended dataset (its accounting rows rebuilt), a migration, or a head kept without a digest
makes the incremental verification a full one (`needs_full`). The digest is as editable as the
head it sits beside: a user who rewrites both to match is found by the full verification, and
by a signed checkpoint (checkpoint.py), which carries the digest out of the database.

The invariant: a passing `audit verify --since-checkpoint` has checked every derived row, either
recomputed from a release row it compared with its audit event, or equal to the row a verification
recomputed at the head.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import select

from . import accounting_check, accounting_rows, enforced, row_arrays, row_dicts, running_totals, sealed, table_models
from .audit_chain import hashes_to_itself
from .codec import canonical_json, cap_from_dict, cap_total_from_dict, cap_total_to_dict, release_from_dict

MODULUS = 2 ** 256
DIGEST_KEYS = frozenset({"seq", "accounting", "reads", "caps", "datasets", "families"})


def _row_hash(seq: int, row: accounting_rows.Expected) -> int:
    text = repr((seq, row.release, row.dataset, row.status, row.family, row.title, row.reads, row.guarantees,
                 row.event, row.charged_by_event, row.recorded_us, row.published_us))
    return int.from_bytes(hashlib.sha256(text.encode()).digest(), "big")


class AccountingSum:
    """The digest's sum over the accounting rows (`_row_hash`, modulo MODULUS) taken as a
    verification reads them, a chunk at a time in seq order (accounting_check.Check: one read of
    the rows for both); a row given again (a release row's seq repeated across chunks) is
    counted once. `total` equals `_accounting_sums` when every accounting row was given: when
    the check found no row without a release."""

    def __init__(self) -> None:
        self.total, self.through = 0, 0

    def add(self, rows: Mapping[int, accounting_rows.Expected]) -> None:
        total, through = self.total, self.through
        for seq, row in rows.items():
            if seq > through:
                total += _row_hash(seq, row)
        self.total = total % MODULUS
        self.through = max(through, max(rows, default=through))


def _ids(connection) -> tuple[dict, dict]:
    bodies = dict(connection.execute(select(accounting_rows._VALUES.c.id, accounting_rows._VALUES.c.body)).all())
    keys = dict(connection.execute(select(accounting_rows._EVENTS.c.id, accounting_rows._EVENTS.c.key)).all())
    return bodies, keys


def _accounting_sums(connection, leave_out: set[int]) -> tuple[int, int]:
    """(sum over every accounting row, sum over the rows whose seq is not in `leave_out`)."""
    bodies, keys = _ids(connection)
    whole = kept = 0
    batch: list[tuple] = []

    def add(rows) -> None:
        nonlocal whole, kept
        for seq, row in accounting_check._stored(rows, bodies, keys).items():
            value = _row_hash(seq, row)
            whole += value
            if seq not in leave_out:
                kept += value

    for raw in row_arrays.stream_raw_rows(connection, accounting_check._STORED_FIELDS):
        batch.append(raw)
        if len(batch) >= 10_000:
            add(batch)
            batch = []
    add(batch)
    return whole % MODULUS, kept % MODULUS


def _reads_digests(connection, through: int) -> tuple[str, str]:
    """SHA-256 over the release_reads rows in key order: (all of them, those with seq <= through)."""
    reads = accounting_rows._READS
    whole, upto = hashlib.sha256(), hashlib.sha256()
    query = select(reads.c.dataset, reads.c.position, reads.c.seq).order_by(reads.c.dataset, reads.c.position,
                                                                             reads.c.seq)
    for dataset, position, seq in row_arrays.stream_raw_rows(connection, query):
        line = f"{dataset}\x00{position}\x00{seq}\n".encode()
        whole.update(line)
        if seq <= through:
            upto.update(line)
    return whole.hexdigest(), upto.hexdigest()


def _json_text(value) -> str:
    return canonical_json(json.loads(value) if isinstance(value, str) else value)


def _cap_digests(connection) -> dict[str, list[str]]:
    """Per cap ("dataset/name"): [SHA-256 over its row, SHA-256 over its running total and accountant
    state] (the row changes by a cap event only; the figures by any charge on its dataset)."""

    rows: dict[str, str] = {}
    figures: dict[str, list[str]] = {}
    caps, totals, states = table_models.CapRow.__table__, table_models.CapTotalRow.__table__, table_models.CapAccountantRow.__table__
    for row in connection.execute(select(caps)):
        rows[f"{row.dataset}/{row.name}"] = _row_text(row)
    for name, table, column in (("total", totals, totals.c.total), ("state", states, states.c.state)):
        for dataset, cap, value in connection.execute(select(table.c.dataset, table.c.cap, column)):
            figures.setdefault(f"{dataset}/{cap}", []).append(f"{name} {_json_text(value)}")
    return {key: [hashlib.sha256(rows.get(key, "").encode()).hexdigest(),
                  hashlib.sha256("\n".join(sorted(figures.get(key, []))).encode()).hexdigest()]
            for key in set(rows) | set(figures)}


def _row_text(row) -> str:
    return repr(sorted((key, _json_text(value) if isinstance(value, (dict, list)) else value)
                       for key, value in row._mapping.items()))


def _configuration_digests(connection) -> tuple[str, dict[str, str]]:
    """What the figures read of the configuration: SHA-256 over the dataset and variable rows
    (which variables a subset holds, and which are protected), and per family its row (how its
    members are charged, docs/explanation/model.md#families)."""

    datasets, variables = table_models.DatasetRow.__table__, table_models.VariableRow.__table__
    whole = hashlib.sha256()
    for table, order in ((datasets, (datasets.c.name,)), (variables, (variables.c.dataset, variables.c.name))):
        for row in connection.execute(select(table).order_by(*order)):
            whole.update(f"{table.name} {_row_text(row)}\n".encode())
    families = table_models.FamilyRow.__table__
    return whole.hexdigest(), {row.id: hashlib.sha256(_row_text(row).encode()).hexdigest()
                               for row in connection.execute(select(families))}


def digest(connection, through: int, accounting: int) -> dict:
    """The derived rows' digest at the head `through` (see the module docstring); `accounting`:
    the sum over the accounting rows, as the verification read them (`AccountingSum.total`)."""
    reads, _ = _reads_digests(connection, through)
    datasets, families = _configuration_digests(connection)
    return {"seq": through, "accounting": format(accounting, "064x"), "reads": reads,
            "caps": _cap_digests(connection), "datasets": datasets, "families": families}


def needs_full(kept: Mapping | None, kinds: Iterable[str], dataset_events: bool) -> bool:
    """Whether derived rows cannot be checked from the kept digest: none kept, or since it the
    ledger was migrated or a dataset amended (rows rebuilt beyond the releases the events name)."""
    return (kept is None or not DIGEST_KEYS <= set(kept) or dataset_events
            or any(kind == "ledger.migrated" for kind in kinds))


def states_at(connection, ids: Sequence[str], through: int) -> dict[str, dict]:
    """Each release's state at event `through` (its latest release event up to it), where it had one."""

    events = table_models.AuditEventRow.__table__
    kinds = enforced.release_kinds()  # the events that carry a release's state (by its index on kind, subject)
    found: dict[str, tuple[int, dict]] = {}
    for at in range(0, len(ids), 500):
        for row in connection.execute(select(events).where(events.c.kind.in_(kinds),
                                                           events.c.subject.in_(list(ids[at:at + 500])),
                                                           events.c.seq <= through)):
            if row.subject in found and found[row.subject][0] > row.seq or not hashes_to_itself(row):
                continue
            try:
                body = json.loads(row.payload).get("release")
            except (ValueError, AttributeError):
                continue
            if isinstance(body, dict):
                found[row.subject] = (row.seq, body)
    return {rid: body for rid, (_, body) in found.items()}


def check_since(session, kept: Mapping, touched: Mapping[str, int], named_caps: set[str],
                touched_datasets: set[str], variables: Mapping[str, Sequence[str]], now: int,
                named_families: set[str] = frozenset()) -> tuple[list[str], dict]:
    """The derived rows against the digest `kept` (module docstring); `touched`: release id ->
    its accounting seq, for the releases the events since name (their rows are recomputed by
    accounting_check.check); `named_caps`, `named_families`: the caps and families the events since name
    (compared with their events by audit_verify.StateEvents); `touched_datasets`: the
    datasets whose totals and states those events changed. Returns (problems, the digest now)."""

    connection = session.connection()
    through = int(kept["seq"])
    problems: list[str] = []
    at_head = states_at(connection, sorted(rid for rid, seq in touched.items() if seq <= through), through)
    leave_out = set(touched.values())
    whole, untouched = _accounting_sums(connection, leave_out)
    expected = int(kept["accounting"], 16)
    for rid, body in at_head.items():
        try:
            release = release_from_dict(body)
        except (KeyError, TypeError, ValueError):
            continue
        expected -= _row_hash(touched[rid], accounting_rows.expected_row(release, variables.get(release.dataset, ())))
    if untouched != expected % MODULUS:
        problems.append(f"event {through} (table release_accounting): an accounting row of a release no event since "
                        f"the verified head (event {through}) names was changed outside the ledger, or one was added "
                        "or removed (the derived rows' digest differs); run a full `audit verify` to name it")
    reads, reads_then = _reads_digests(connection, through)
    if reads_then != kept["reads"]:
        problems.append(f"event {through} (table release_reads): rows of the releases recorded up to the verified "
                        "head were changed outside the ledger (the derived rows' digest differs)")
    problems.extend(sealed.check(connection, variables))
    caps_now = _cap_digests(connection)
    caps_then = dict(kept.get("caps", {}))
    for key in sorted(set(caps_now) | set(caps_then)):
        row_now, figures_now = caps_now.get(key, [None, None])
        row_then, figures_then = caps_then.get(key, [None, None])
        if key not in named_caps and row_now != row_then:
            problems.append(f"event {through} (cap {key}): the cap's row (table caps) was changed outside the ledger "
                            f"since the verified head (event {through}); no event since names it")
        if key.split("/", 1)[0] not in touched_datasets and figures_now != figures_then:
            problems.append(f"event {through} (cap {key}): the cap's running total or accountant state (tables "
                            f"cap_totals, cap_accountant_state) was changed outside the ledger since the verified "
                            f"head (event {through}); no event since changed its dataset")
    for dataset in sorted(touched_datasets):
        problems.extend(_recomputed_caps(session, dataset))
    datasets, families = _configuration_digests(connection)
    if datasets != kept.get("datasets"):  # (a dataset event since makes the verification a full one)
        problems.append(f"event {through} (table datasets): a dataset or variable row was changed outside the ledger "
                        f"since the verified head (event {through})")
    for family in sorted(set(families) | set(kept.get("families", {}))):
        if family not in named_families and families.get(family) != kept.get("families", {}).get(family):
            problems.append(f"event {through} (family {family}): the family row was changed outside the ledger since "
                            f"the verified head (event {through}); no event since names it")
    fresh = {"seq": now, "accounting": format(whole, "064x"), "reads": reads, "caps": caps_now, "datasets": datasets,
             "families": families}
    return problems, fresh


def _recomputed_caps(session, dataset: str) -> list[str]:
    """Each cap of `dataset`: its stored running total and accountant state against the ones
    recomputed from the accounting rows (checked above)."""
    from ..accounting.cap_states import state_differences, state_from_index, state_is_current
    from ..accounting.budget import total_differences, total_from_index

    connection = session.connection()
    caps = [cap_from_dict(row_dicts.cap_dict(row)) for row in
            session.exec(select(table_models.CapRow).where(table_models.CapRow.dataset == dataset)).scalars()]
    if not caps:
        return []
    index = running_totals.caps_index(session, dataset, caps)
    totals, states = table_models.CapTotalRow.__table__, table_models.CapAccountantRow.__table__
    stored_totals = {cap: total for cap, total in connection.execute(
        select(totals.c.cap, totals.c.total).where(totals.c.dataset == dataset))}
    stored_states = {cap: state for cap, state in connection.execute(
        select(states.c.cap, states.c.state).where(states.c.dataset == dataset))}
    problems = []
    for cap in caps:
        expected = total_from_index(cap, index)
        found = stored_totals.get(cap.name)
        if found is None:
            problems.append(f"cap {dataset}/{cap.name}: the running total is missing")
        else:
            found = cap_total_from_dict(json.loads(found) if isinstance(found, str) else found)
            if cap_total_to_dict(found) != cap_total_to_dict(expected):
                differences = total_differences(found, expected) or ["its stored form"]
                problems.append(f"cap {dataset}/{cap.name} (table cap_totals): the running total differs from the "
                                f"total recomputed from the accounting rows: {'; '.join(differences)}")
        state = stored_states.get(cap.name)
        state = json.loads(state) if isinstance(state, str) else state
        if cap.delta is not None and cap.rho is None and state is not None and state_is_current(cap, state):
            differences = state_differences(state, state_from_index(cap, index))
            if differences:
                problems.append(f"cap {dataset}/{cap.name} (table cap_accountant_state): the running accountant "
                                f"state differs from the state recomputed from the accounting rows: "
                                f"{'; '.join(differences)}")
    return problems
