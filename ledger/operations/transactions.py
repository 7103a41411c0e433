"""What the ledger does, as functions over a database engine: record, check,
change status, set caps. The CLI and the mechanisms are thin adapters over these.

Every write runs in one `sessions.write_session`: the budget check and the write
it guards see the same committed state and cannot interleave with another
steward's (docs/explanation/architecture.md). Problems raise `InputErrors` (exit 2) or `BudgetRefused`
(exit 1) before anything is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from datetime import datetime

from ..accounting import budget, cap_unbounded, lineage
from ..core.errors import InputErrors, LedgerError, Refused, fail
from ..accounting.lifecycle import ENFORCING, OutputCharged, transition
from ..input.batch import already_recorded, finish_batch
from ..input.datasets import cap_from_entry
from ..input.documents import Document, read_document
from ..input.limits import field_name
from ..input.release_rules import check_release_record
from ..input.releases import build_releases, load_releases, validated_release_documents
from ..input.snapshot import LedgerSnapshot
from ..core.lazy import lazy_callable, lazy_module
from ..core.numbers import format_number, is_infinite
from ..core.records import Cap, Dataset, Family, Release, Status

if TYPE_CHECKING:
    from fractions import Fraction

    from ..store.sessions import Engine

cap_writes = lazy_module("ledger.store.cap_writes")  # the ORM, imported on first use
configuration = lazy_module("ledger.store.configuration")  # the ORM, imported on first use
dataset_writes = lazy_module("ledger.store.dataset_writes")  # the ORM, imported on first use
ledger_meta = lazy_module("ledger.store.ledger_meta")  # the ORM, imported on first use
release_writes = lazy_module("ledger.store.release_writes")  # the ORM, imported on first use
row_reads = lazy_module("ledger.store.row_reads")  # the ORM, imported on first use
running_totals = lazy_module("ledger.store.running_totals")  # the ORM, imported on first use
session_state = lazy_module("ledger.store.session_state")  # the ORM, imported on first use
sessions = lazy_module("ledger.store.sessions")  # the ORM, imported on first use
cap_accounting = lazy_module(f"{__package__}.cap_accounting")  # the ORM and numpy, on first use
people = lazy_module(f"{__package__}.people")  # the ORM, on first use
Session = lazy_callable("ledger.store.sessions", "Session")

Builder = Callable[[LedgerSnapshot], tuple[list[Release], list[Family], list[LedgerError]]]


class BudgetRefused(Exception):
    """A step would break a cap: exit 1, nothing written."""

    def __init__(self, checks: Sequence[budget.CapCheck], what: str):
        self.checks = list(checks)
        over = [c for c in self.checks if not c.ok]
        lines = [f"{what} refused: it would break {len(over)} cap{'s' if len(over) != 1 else ''}"]
        self.cap_messages: list[tuple[budget.CapCheck, str]] = []  # per broken cap: its lines, as one message
        for c in over:
            start = len(lines)
            if is_infinite(c.after):
                reason = c.reason or cap_unbounded.why_unbounded(c.cap, c.after_total.spend)
                said_below = any(charge.reason and reason in charge.reason for charge in c.charges)
                lines.append(f"  cap {c.cap.dataset}/{c.cap.name}: {c.cap.unit_text} would have no bound"
                             + ("" if said_below else f": {reason}"))
            else:
                lines.append(f"  cap {c.cap.dataset}/{c.cap.name}: {c.cap.unit_text} would be {format_number(c.after)} "
                             f"against a cap of {format_number(c.cap.limit, down=True)}, over by "
                             f"{format_number(-c.headroom)}")
            for charge in c.charges:  # the releases that break it, by name
                who = f"family {charge.family}" if charge.family else f"release {charge.release}"
                lines.append(f"    {who} charges {format_number(charge.value)}"
                             + (f": {charge.reason}" if charge.reason else ""))
            lines.append(f"    {cap_accounting.decision_text(c)}")
            self.cap_messages.append((c, "; ".join(line.strip() for line in lines[start:])))
        super().__init__("\n".join(lines))


class AllowanceRefused(BudgetRefused):
    """A step would take a subset's approximate deltas past the allowance: exit 1, nothing written."""

    def __init__(self, overdrafts: Sequence, what: str):
        self.checks: list = []
        self.overdrafts = list(overdrafts)
        self.cap_messages: list = [(_Subset(o), o.message) for o in self.overdrafts]
        Exception.__init__(self, "\n".join([f"{what} refused: the approximate releases' allowance would be passed"]
                                   + [f"  {o.message}" for o in self.overdrafts]))


@dataclass(frozen=True)
class _Subset:
    """A refused subset where a JSON refusal names a cap (`field`: "cap DATASET/NAME")."""

    overdraft: Any

    @property
    def cap(self):
        return Cap("allowance", "{" + ", ".join(self.overdraft.subset) + "}", frozenset(self.overdraft.subset))


@dataclass(frozen=True)
class Recorded:
    releases: tuple[Release, ...]
    families: tuple[Family, ...]
    checks: tuple[budget.CapCheck, ...]
    unchanged: tuple[Release, ...] = ()  # already recorded, identical: a retry, not written again

    @property
    def ids(self) -> tuple[str, ...]:
        """The recorded releases' ids, in order."""
        return tuple(release.id for release in self.releases)


def release_builder(paths: Sequence[str | Path], actor: str) -> Builder:
    """The files are read, parsed and checked against the release schema here, before any
    transaction: a slow, huge or hostile file never holds the ledger's write lock (only the
    checks against the ledger run inside). A file the schema refuses is refused before any lock
    too, with every other problem of every file found in one pass (`refused_early`): `record`
    and `check` read the ledger without a lock to name them all."""
    documents, early = validated_release_documents(read_document(path) for path in paths)
    schema = {id(error) for document in documents for _at, error in document.release_schema_problems}
    unread = [error for error in early if id(error) not in schema]  # files not read or not parsed

    def build(snapshot: LedgerSnapshot):
        releases, families, errors = load_releases(documents, snapshot, recorded_by=actor, recorded_at=session_state.now())
        return releases, families, unread + errors

    build.release_ids = declared_ids(documents)
    build.refused_early = bool(early)  # (all or nothing: nothing would be written)
    return build


def refuse_early(engine: Engine, build: Builder) -> None:
    """A build refused before any transaction (release_builder: a file unread, unparsed or
    against the schema): every problem of the files, checked against the ledger read without
    a lock, raised; nothing is written and no lock is taken."""
    if not getattr(build, "refused_early", False):
        return
    with sessions.read_session(engine) as session:
        _releases, _families, errors = build(configuration.write_context(session))
    raise InputErrors(errors)


def declared_ids(documents: Sequence[Document]) -> tuple[str, ...]:
    """The release ids the (schema-checked) documents declare: `record` reads which of them the
    ledger holds with the write lock (sessions.write_session's `release_ids`)."""
    return tuple(entry["id"] for document in documents if isinstance(document.data, dict)
                 and isinstance(document.data.get("releases"), list)  # (else the schema's error, not a crash)
                 for entry in document.data["releases"] if isinstance(entry, dict)
                 and isinstance(entry.get("id"), str))


def record(engine: Engine, build: Builder, actor: str,
           then: Callable[[Session, Recorded], None] | None = None) -> Recorded:
    """Build releases against the current ledger, enforce every cap, and write them, atomically.
    `then(session, recorded)` writes what belongs with them in the same transaction (a plan's
    version: plan_book.record); an exception from it writes nothing."""
    refuse_early(engine, build)
    with sessions.write_session(engine, read_head=True, release_ids=getattr(build, "release_ids", ())) as session:
        snapshot = configuration.write_context(session)
        releases, families, errors = build(snapshot)
        if errors:
            raise InputErrors(errors)
        unchanged = already_recorded(releases, snapshot)  # identical retries: charged once, when first recorded
        releases = [r for r in releases if r.id not in {u.id for u in unchanged}]
        if not releases and not families:
            recorded = Recorded((), (), (), tuple(unchanged))
            if then is not None:
                then(session, recorded)
            return recorded
        people.check_recorded(session, actor, releases, snapshot.datasets)
        states: dict[str, dict[str, dict]] = {}
        overdrafts = _overdrafts(session, snapshot, releases)  # (first: the reason, where a cap would say ∞)
        if overdrafts:
            raise AllowanceRefused(overdrafts, "recording")
        checks = _checks(session, snapshot, releases, families, states)
        if any(not c.ok for c in checks):
            raise BudgetRefused(checks, "recording")
        sessions.pipelined(session)  # the writes, together (PostgreSQL: one round trip)
        release_writes.add_releases(session, releases, families, actor, cap_accounting.decisions_json(checks))
        for dataset in {c.cap.dataset for c in checks}:
            running_totals.save_totals(session, dataset, {c.cap.name: c.after_total for c in checks if c.cap.dataset == dataset})
        for dataset, dataset_states in states.items():
            running_totals.save_accountant_states(session, dataset, dataset_states)
        recorded = Recorded(tuple(releases), tuple(families), tuple(checks), tuple(unchanged))
        if then is not None:
            then(session, recorded)
        return recorded


def check(engine: Engine, build: Builder) -> list[budget.CapCheck]:
    """The pre-release check: the same composition as `record`, as a dry run (one
    consistent read, no lock)."""
    return check_plan(engine, build)[0]


def check_plan(engine: Engine, build: Builder) -> tuple[list[budget.CapCheck], list[Release]]:
    """`check`, with the releases as they would be charged (in their datasets' relations:
    what the output says of a converted guarantee, relation.conversions)."""
    refuse_early(engine, build)
    with sessions.read_session(engine) as session:
        snapshot = configuration.write_context(session)
        releases, families, errors = build(snapshot)
        if errors:
            raise InputErrors(errors)
        overdrafts = _overdrafts(session, snapshot, releases)
        if overdrafts:
            raise AllowanceRefused(overdrafts, "the plan")
        return _checks(session, snapshot, releases, families), list(releases)


def _checks(session: Session, snapshot: LedgerSnapshot, releases: Sequence[Release],
            families: Sequence[Family], states: dict | None = None) -> list[budget.CapCheck]:
    _require_current_totals(session)
    family_map = {**snapshot.families, **{f.id: f for f in families}}
    results: list[budget.CapCheck] = []
    for dataset in sorted({r.dataset for r in releases}):
        plan = [r for r in releases if r.dataset == dataset]
        read = frozenset().union(*(r.reads for r in plan))  # a cap touched by some release reads some of these
        caps = [cap for cap in configuration.caps(session, dataset) if cap.subset & read]  # (budget.touches, for any)
        if not caps:
            continue
        joined = {r.family for r in plan if r.family is not None}
        members = row_reads.family_members(session, joined & set(snapshot.families))
        totals = running_totals.cap_totals(session, dataset, [cap.name for cap in caps])
        checks = budget.check(caps, totals, plan, family_map, members)
        # the best valid figure per cap: a layer over the basic check
        checks, after_states = cap_accounting.refine(session, dataset, checks, totals, plan, family_map, members)
        checks = cap_accounting.explained(session, dataset, checks)  # a cap ∞ already: why, from its releases
        if states is not None:
            states[dataset] = after_states
        results.extend(checks)
    return results


def _overdrafts(session: Session, snapshot: LedgerSnapshot, releases: Sequence[Release]) -> list:
    """Per dataset, the plan's overdraft of the approximate releases' allowance (allowance.py): read
    only when the plan holds an (epsilon, delta) release, from the charged releases' rows."""
    from ..accounting import allowance
    from ..accounting.spend import DEFAULT_DELTA

    found = []
    for dataset in sorted({r.dataset for r in releases}):
        plan = [r for r in releases if r.dataset == dataset]
        if not allowance.approximate(plan):
            continue
        info = snapshot.datasets[dataset]
        delta = info.delta if info.delta is not None else DEFAULT_DELTA
        index = running_totals.caps_index(session, dataset, [Cap(dataset, "", frozenset(info.variable_names))])
        over = allowance.overdraft(index, plan, info.variable_names, delta, info.allowance)
        if over is not None:
            found.append(over)
    return found


def _require_current_totals(session: Session) -> None:
    """A decision reads running totals: refuse when they are not stamped with the chain head
    (ledger_meta.stale_totals: two key lookups, whatever the history's length)."""
    problem = ledger_meta.stale_totals(session)
    if problem is not None:
        raise fail("ledger", "cap totals", problem)


REASONED = frozenset({"retract", "cancel"})  # steps that carry a reason (docs/explanation/model.md#people-duties-and-the-book-of-record)


def change_status(engine: Engine, release_id: str, action: str, actor: str, *, reason: str | None = None,
                  at: datetime | None = None) -> Release:
    """approve / publish / retract / cancel one release; approve and publish re-check its caps;
    cancel is refused (`Refused`, exit 1) once an output of the release exists (lifecycle.transition).

    `reason` is required by retract and cancel. `at` dates a publication that happened
    elsewhere (publish only): never in the future, never before the release was planned."""
    if action in REASONED:
        reason = people.check_reason(reason, action, release_id)
    elif reason is not None:
        raise fail("command line", "--reason", f"{action} takes no reason")
    if at is not None and action != "publish":
        raise fail("command line", "--at", f"{action} takes no date; --at dates a publication")
    with sessions.write_session(engine) as session:
        lookup = row_reads.ReleaseLookup(session)
        if release_id not in lookup:
            from ..core.errors import did_you_mean

            from ..core.failures import QUOTED, excerpt

            raise fail(f"release {excerpt(release_id, QUOTED)}", "id", "no such release in this ledger"
                       + did_you_mean(release_id, list(lookup)))
        people.require(session, actor, action)
        release = lookup[release_id]
        moment = session_state.now()
        if at is not None:
            _check_publication_moment(release, at, moment)
        changed = transition(release, action, actor, moment)
        if isinstance(changed, OutputCharged):  # an output exists: it stays charged (docs/explanation/accounting.md)
            raise Refused(LedgerError(f"release {release_id}", "status", changed.message))
        if isinstance(changed, str):
            raise fail(f"release {release_id}", "status", changed)
        _check_lineage(session, release, action, lookup, at or moment)
        if action == "approve":
            dataset = configuration.configuration(session).datasets.get(release.dataset)
            people.check_approver(release, actor, dataset)
        if at is not None:
            changed = replace(changed, published_at=at)
        caps = [cap for cap in configuration.caps(session, release.dataset) if budget.touches(cap, release)]
        totals = running_totals.cap_totals(session, release.dataset)
        decisions: list[dict] = []
        if action in ENFORCING:
            _require_current_totals(session)
            checks = budget.check(caps, totals, [], {}, {}, only_touched=False)
            checks, states = cap_accounting.refine(session, release.dataset, checks, totals, [], {}, {})
            if any(not c.ok for c in checks):
                raise BudgetRefused(checks, f"{action} {release_id}")
            running_totals.save_accountant_states(session, release.dataset, states)
            decisions = cap_accounting.decisions_json(checks)
        release_writes.set_status(session, changed, actor, kind=f"release.{changed.status.value}", decisions=decisions,
                         reason=reason)
        if action == "cancel" and caps:  # frees the reservation: recompute the totals and accountant states
            # it was in, from one index of the accounting rows of the releases reading the caps' subsets
            # (running_totals.caps_index), not from every decoded release
            from ..accounting import cap_states

            index = running_totals.caps_index(session, release.dataset, caps)
            running_totals.drop_accountant_states(session, release.dataset, [cap.name for cap in caps])
            running_totals.save_accountant_states(session, release.dataset, {
                cap.name: cap_states.state_from_index(cap, index) for cap in caps
                if cap.delta is not None and cap.rho is None})  # (the caps an accountant decides: current_states')
            running_totals.save_totals(session, release.dataset, {cap.name: budget.total_from_index(cap, index) for cap in caps})
        return changed


def _check_publication_moment(release: Release, at: datetime, moment: datetime) -> None:
    """`publish --at`: never in the future, never before the release was planned."""
    planned = release.recorded_at
    if planned is not None and planned.tzinfo is None:
        planned = planned.replace(tzinfo=moment.tzinfo)
    if at > moment:
        raise fail("command line", "--at", f"{at.isoformat()} is in the future (now: {moment.isoformat()})")
    if planned is not None and at < planned:
        raise fail("command line", "--at", f"{at.isoformat()} is before release {release.id!r} was "
                                           f"planned ({planned.isoformat()})")


def _check_lineage(session, release: Release, action: str, lookup, when: datetime) -> None:
    """The lineage rule (docs/explanation/model.md#post-processing-and-lineage): a release is cancelled only
    when no charged release derives from it (over the releases naming it, not every release), and
    published (at `when`) only after what it derives from."""
    release_id = release.id
    if action == "cancel":
        blockers = lineage.cancel_blockers(row_reads.deriving_from(session, release_id))
        if blockers:
            raise fail(f"release {release_id}", "status",
                       f"cannot cancel release {release_id!r}: charged release(s) derive from it: "
                       f"{lineage.describe(blockers, lookup)}; cancel them first")
    if action == "publish":
        blockers = lineage.publish_blockers(release, lookup, when)
        if blockers:
            raise fail(f"release {release_id}", "status",
                       f"cannot publish release {release_id!r} before what it derives from is published: "
                       f"{lineage.describe(blockers, lookup)}")


def add_caps(engine: Engine, dataset: str, entries: Iterable[dict], actor: str, source: str) -> list[Cap]:
    """Add or replace caps ({subset | name, epsilon [, delta] | rho} entries)."""
    with sessions.write_session(engine) as session:
        people.require(session, actor, "set a cap")
        snapshot = configuration.write_context(session)
        if dataset not in snapshot.datasets:
            raise fail(source, "dataset", f"unknown dataset {dataset!r}")
        errors: list[LedgerError] = []
        caps = []
        for index, entry in enumerate(entries):
            def report(at, message, index=index):
                errors.append(LedgerError(source, field_name(("caps", index) + tuple(at)), message))

            cap = cap_from_entry(entry, snapshot.datasets[dataset], report)
            if cap is not None:
                caps.append(cap)
        if errors:
            raise InputErrors(errors)
        return [cap_writes.set_cap(session, cap, actor) for cap in caps]


def cap_checks(session: Session, dataset: str, caps: Sequence[Cap]) -> list[budget.CapCheck]:
    """Every cap as it stands, each with its best valid figure."""
    totals = running_totals.cap_totals(session, dataset)
    checks = budget.check(caps, totals, [], {}, {}, only_touched=False)
    checks, _ = cap_accounting.refine(session, dataset, checks, totals, [], {}, {})
    return cap_accounting.with_running(session, dataset, cap_accounting.explained(session, dataset, checks))


def cap_checks_as_of(session: Session, dataset: str, caps: Sequence[Cap], when: datetime) -> list[budget.CapCheck]:
    """Every cap as the ledger stood at `when`, each with its best valid figure (`cap list
    --as-of`, the report --as-of): the totals and states then (cap_accounting.standing_at: from
    the accounting rows of the releases charged then, store/as_of.py; where the rows
    cannot state the ledger then exactly, from the whole releases as they stood)."""
    totals, states = cap_accounting.standing_at(session, dataset, caps, when)
    checks = cap_accounting.checks_on(caps, totals, lambda cap: states.get(cap.name))
    return cap_accounting.with_running(session, dataset, cap_accounting.explained(session, dataset, checks, when),
                                       when)


def headroom(engine: Engine, dataset: str, variables: Iterable[str], *, when: datetime | None = None,
             mechanism: str = "any", delta: Fraction | None = None) -> budget.Headroom:
    """The largest epsilon (and rho) a new release reading these variables could take such that
    every cap's enforcement would still admit it: derived from the decision `record` makes
    (cap_accounting.headroom), so a release of the headroom is admitted, never more. `when`: as
    the ledger stood then (as `cap list --as-of`); `mechanism`: what the release is assumed to be
    (any, laplace, gaussian); `delta`: the rho headroom is also stated as an epsilon at it (the
    dataset's delta by default, as every epsilon figure; `budget.with_rho_epsilon`)."""
    from . import choices

    with sessions.read_session(engine) as session:
        caps = configuration.caps(session, dataset)
        if when is not None:  # the caps as they stood then (history.state_as_of)
            from ..store.as_of import state_then

            _, caps, _ = state_then(session, configuration.write_context(session).datasets[dataset], when)
        room = cap_accounting.headroom(session, dataset, frozenset(variables), caps, when=when, mechanism=mechanism)
        known = configuration.write_context(session).datasets[dataset]
        if delta is None:
            delta = choices.parse_delta(None, known)
    return budget.with_rho_epsilon(room, delta, known.allowance)


# --------------------------------------------------------------------------
# Shared by the CLI and the Python API
# --------------------------------------------------------------------------


PRIVACY_UNIT_KEYS = ("privacy_unit", "privacy_unit_details")


def declared_privacy_unit(document: Document) -> dict[str, str]:
    """The optional privacy_unit and privacy_unit_details of a dataset document."""
    data = document.data if isinstance(document.data, Mapping) else {}
    return {key: data[key] for key in PRIVACY_UNIT_KEYS if key in data}


def add_dataset(engine: Engine, dataset: Dataset, caps: Sequence[Cap], actor: str, source: str,
                privacy_unit: Mapping[str, str] | None = None) -> bool:
    """Record a dataset, its caps and its declared privacy unit; False when it is already
    recorded exactly so. A recorded dataset is never rewritten: other variables or caps are
    bad input; a new privacy-unit declaration is recorded (the latest one holds)."""
    with sessions.write_session(engine) as session:
        people.require(session, actor, "add a dataset")
        existing = configuration.write_context(session).datasets.get(dataset.name)
        if existing is not None:
            if existing.relation != dataset.relation:
                from .amend import relation_fixed

                raise fail(source, "relation", relation_fixed(existing))
            if existing.allowance != dataset.allowance:
                from .amend import allowance_fixed

                raise fail(source, "allowance", allowance_fixed(existing))
            if existing == dataset and set(configuration.caps(session, dataset.name)) == set(caps):
                if privacy_unit and dict(privacy_unit) != dataset_writes.privacy_unit(session, dataset.name):
                    dataset_writes.set_privacy_unit(session, dataset.name, privacy_unit, actor)
                    return True
                return False
            differing = [name for name, differs in (
                ("variables", existing.variables != dataset.variables), ("groups", existing.groups != dataset.groups),
                ("description", existing.description != dataset.description),
                ("self_approval", existing.self_approval != dataset.self_approval),
                ("caps", set(configuration.caps(session, dataset.name)) != set(caps))) if differs]
            raise fail(source, "dataset", f"dataset {dataset.name!r} is already recorded with other "
                                          f"{', '.join(differing)}; a recorded dataset is never rewritten "
                                          "(apply a changed dataset file with `dataset amend FILE`, caps with `cap set`)")
        dataset_writes.add_dataset(session, dataset, actor)
        for cap in caps:
            cap_writes.set_cap(session, cap, actor)
        if privacy_unit:
            dataset_writes.set_privacy_unit(session, dataset.name, privacy_unit, actor)
        return True


ReleaseSource = Union[str, Path, Mapping[str, Any], Release]


def source_builder(sources: Sequence[ReleaseSource], actor: str) -> Builder:
    """Releases from files (YAML or JSON), release documents as dicts (the file format),
    or `Release` records (from an adapter), checked together as one batch: all or nothing."""

    def build(snapshot: LedgerSnapshot):
        releases: list[Release] = []
        families: list[Family] = []
        errors: list[LedgerError] = []
        recorded_at = session_state.now()
        for index, source in enumerate(sources):
            if isinstance(source, Release):
                dataset = snapshot.datasets.get(source.dataset)
                if dataset is None:
                    errors.append(LedgerError(f"release {source.id}", "dataset",
                                              f"unknown dataset {source.dataset!r}"))
                    continue
                unknown = sorted(set(source.reads).union(*(g.protects for g in source.guarantees))
                                 - set(dataset.variable_names))
                if unknown:
                    errors.append(LedgerError(f"release {source.id}", "reads",
                                              f"unknown variable(s) {', '.join(map(repr, unknown))} in dataset "
                                              f"{dataset.name!r}"))
                    continue
                more_errors = check_release_record(source, recorded_at, snapshot.families)
                if more_errors:
                    errors.extend(more_errors)
                    continue
                # recorded now, by whoever records it: the ledger's own stamps (check_release_record);
                # published without a date (an adapter's output): published as it is recorded
                published_at = source.published_at
                if published_at is None and source.status is Status.PUBLISHED:
                    published_at = recorded_at
                approved = source.status is Status.APPROVED  # its recorder's own approval (people.check_recorded)
                releases.append(replace(source, recorded_by=actor, recorded_at=recorded_at, published_at=published_at,
                                        approved_by=actor if approved else None,
                                        approved_at=recorded_at if approved else None,
                                        source=source.source or f"release {source.id}"))
                continue
            if isinstance(source, Mapping):
                document = Document(f"<release document {index + 1}>", dict(source))
            else:
                document, read_errors = read_document(source)
                errors.extend(read_errors)
                if document is None:
                    continue
            more_releases, more_families, more_errors = build_releases(
                document, snapshot, recorded_by=actor, recorded_at=recorded_at)
            releases.extend(more_releases)
            families.extend(more_families)
            errors.extend(more_errors)
        return finish_batch(releases, families, errors, snapshot)

    # the ids known before the transaction (records and documents given as dicts; a file is read
    # inside it): read with the write lock, as release_builder's
    build.release_ids = (tuple(s.id for s in sources if isinstance(s, Release))
                         + declared_ids([Document("", s) for s in sources if isinstance(s, Mapping)]))
    return build
