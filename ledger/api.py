"""The Python API: the ledger as values, for notebooks and pipelines.

    >>> import ledger
    >>> book = ledger.open("sqlite://")          # in memory; default: $LEDGER_DATABASE_URL, else sqlite:///ledger.db
    >>> book.add_dataset({"dataset": "survey", "variables": [{"name": "age"}, {"name": "income"}]})
    True
    >>> book.record({"dataset": "survey", "releases": [
    ...     {"id": "t1", "reads": ["age", "income"], "mechanism": {"name": "laplace", "epsilon": "1/2"}}]}).ids
    ('t1',)
    >>> book.subset(["income"]).exact
    Fraction(1, 2)

Every method calls the same operations the command line does (operations.py,
choices.py, engine.py), so a figure here is the figure the CLI prints: the same
composition, and no cancelled release is ever counted. Bad input raises
`InputErrors`, whose `.errors` is the list of `LedgerError` (source, field,
message) the CLI prints before exit 2; a step that would break a cap raises
`BudgetRefused`, and cancelling a release whose output exists raises
`Refused` (both exit 1 in the CLI). Nothing is written in any case.

Figures: `.epsilon` is a float that is a safe bound (a loss rounded up, a
headroom rounded down, `math.inf` when unbounded); `.exact` is the exact
Fraction where one exists (pure and approximate totals), None where the figure
comes from a floating-point conversion (zCDP to epsilon).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlmodel import Session

from .accounting import budget
from .operations import choices, transactions as operations
from .store import (audit_chain, audit_verify, configuration, dataset_writes, decoded_history, engines, identity, row_reads,
                    running_totals, schema_migrations, session_state, sessions)
from .store.identity import Person, front_end
from .accounting.charge_choice import at_delta
from .accounting.risk import Risk, figure_risks
from .core.errors import InputErrors, LedgerError, fail
from .input.datasets import dataset_and_caps
from .input.documents import Document, read_document
from .input.snapshot import LedgerSnapshot
from .core.numbers import Number, safe_float
from .core.records import Cap, Dataset, Release
from .operations.read_cache import kept, read_cache
from .operations.table_view import table_view

if TYPE_CHECKING:
    import pandas as pd

    from .operations.meeting_pack import MeetingPack
    from .operations.report_inputs import ReportInputs

__all__ = ["Ledger", "SubsetLoss", "Recorded", "PlanCheck", "BudgetRefused", "AuditEvent", "Person", "front_end", "open",
           "safe_float"]

Recorded = operations.Recorded
BudgetRefused = operations.BudgetRefused  # a step that would break a cap (exit 1, nothing written)


def _exact(value: Number) -> Fraction | None:
    return value if isinstance(value, Fraction) else None


@dataclass(frozen=True)
class SubsetLoss:
    """The privacy loss on one subset of variables (Tan, Prop 3.4 composition)."""

    dataset: str
    variables: tuple[str, ...]
    epsilon: float  # a safe upper bound; math.inf when not protected
    exact: Fraction | None  # the exact epsilon where one exists
    delta: Fraction | None  # the delta epsilon is stated at; None for a pure total
    rho: Fraction | None  # the total as rho-zCDP, when it has no (epsilon, delta) part
    notion: str  # pure, approx, zcdp, mixed or unbounded
    releases: tuple[str, ...]  # the releases charging it
    accountant: str = "basic"  # which accountant gave `epsilon`: the smallest valid one
    case: str = "adaptive"  # every figure holds under fully adaptive choices (docs/explanation/accounting.md)
    accountants: Mapping[str, Any] = field(default_factory=dict)  # name -> accountants.Figure, all three
    reason: str | None = None  # why the figure is ∞ (operations/reasons.py), as `subset` prints it

    @property
    def risk(self) -> tuple[Risk, ...]:
        """The strongest attack this figure allows, at 1% and 5% false positives: `subset --json`'s
        `risk` (accounting/risk.py: the (epsilon, delta) trade-off curve, Dong, Roth and Su 2022)."""
        return figure_risks(self.epsilon, None if self.delta is None else safe_float(self.delta))

    @property
    def statement(self) -> str:
        """The figure in one sentence: the releases composed, by which theorem, and what the
        figure allows an attacker (`subset --explain`'s words, operations/explain.py)."""
        from .core.numbers import format_delta, format_number
        from .operations.explain import figure_explanation
        from .operations.reasons import infinity_text

        if self.exact is None and self.epsilon == float("inf"):
            return figure_explanation(self.variables, self.releases, infinity_text(self.reason), self.risk,
                                      theorem=None, case=None)
        shown = self.accountants.get(self.accountant)
        figure = f"epsilon {format_number(self.exact if self.exact is not None else self.epsilon)}" + (
            " (pure)" if self.delta is None else f" at delta {format_delta(self.delta)}")
        return figure_explanation(self.variables, self.releases, figure, self.risk,
                                  theorem=getattr(shown, "theorem", self.accountant), case=self.case)


@dataclass(frozen=True)
class AuditEvent:
    """One audit-trail event about a release: when, who, what, and the reason given."""

    seq: int
    at: str
    actor: str
    kind: str  # release.recorded, release.approved, release.published, ...
    reason: str | None


@dataclass(frozen=True)
class PlanCheck:
    """The pre-release check of a plan: every cap it touches, as it would leave it."""

    checks: tuple[budget.CapCheck, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


class Ledger:
    """A ledger opened by URL. Cheap to keep: each call opens its own transaction. A read of an
    unchanged ledger is answered from its database's read cache (operations/read_cache.py)."""

    def __init__(self, url: str, engine: Engine, *, person: Person | None = None):
        self.url = url
        self.engine = engine if person is None else identity.acting_engine(engine, person)
        self._person = person

    def __repr__(self) -> str:
        return f"Ledger({self.url!r})"

    @classmethod
    def opened(cls, url: str, *, create: bool = False) -> Ledger:
        """The ledger at `url` as a command opens it (operations/opening.py): refused, never
        created, where there is none, unless `create`; its schema brought up to date."""
        from .operations.opening import checked_engine

        return cls(url, checked_engine(url, create))

    # -- reading ----------------------------------------------------------------

    def _light(self) -> LedgerSnapshot:
        with Session(self.engine) as session:
            return configuration.write_context(session)

    def _full(self, dataset: str | None) -> LedgerSnapshot:
        def build() -> LedgerSnapshot:
            with Session(self.engine) as session:
                return decoded_history.snapshot(session, dataset)

        return read_cache(self.engine).answer(self.engine, ("snapshot", dataset), build)

    @contextmanager
    def _indexed(self, dataset: str | None, as_of: str | datetime | None, *, subset: bool = False):
        """(the dataset, the index of its charged releases): now, or as the ledger stood at `as_of`
        (choices.index_as_of, the CLI's `--as-of`; its session open inside the block, where the
        index reads release ids). `subset`: the index answers a subset's question (`subset --as-of`)."""
        when = as_of_moment(as_of)
        if when is None:
            def build() -> tuple[Dataset, Any]:
                snapshot = self._full(dataset)
                chosen = choices.pick_dataset(snapshot, dataset, field="dataset")
                return chosen, choices.charged_index(snapshot, chosen)

            yield read_cache(self.engine).answer(self.engine, ("index", dataset), build)
            return
        with Session(self.engine) as session:
            light = configuration.write_context(session)
            chosen = choices.pick_dataset(light, dataset, field="dataset")
            yield choices.index_as_of(session, chosen, light.families, when,
                                      touching=set() if subset else None)

    @property
    def person(self) -> Person:
        """Who acts through this ledger: the person a front end named, else the database login
        (PostgreSQL) or the operating-system user (store/identity.py)."""
        if self._person is not None:
            return self._person
        person = identity.authenticated(self.engine)
        if self.engine.dialect.name == "postgresql":
            self._person = person  # (a login is the engine's for good; a process's user is read each time)
        return person

    def _by(self) -> str:
        return self.person.name

    def may(self, step: str) -> bool:
        """Whether the person acting holds the role `step` needs ("approve", "publish", "retract",
        "cancel", "record", ...: operations/people.py's DUTIES), as the step itself would decide;
        nothing is written. A front end shows only the steps its person may take."""
        from .operations import people

        with Session(self.engine) as session:
            return people.may(session, self._by(), step)

    @property
    def datasets(self) -> dict[str, Dataset]:
        """The recorded datasets, by name."""
        return dict(self._light().datasets)

    def dataset(self, name: str | None = None, *, field: str = "dataset") -> Dataset:
        """The named dataset, or the only one; `field`: what an error names (a front end's own
        spelling of the choice, such as the command line's `--dataset`)."""
        return choices.pick_dataset(self._light(), name, field=field)

    @kept
    def releases(self, dataset: str | None = None, *, as_of: str | datetime | None = None) -> list[Release]:
        """Every recorded release (cancelled ones too: they are part of the record); `as_of`: those
        in the ledger then, each with the status it had then (as every `--as-of`)."""
        if dataset is not None:
            choices.pick_dataset(self._light(), dataset, field="dataset")
        found = [r for r in self._full(dataset).releases.values() if dataset is None or r.dataset == dataset]
        when = as_of_moment(as_of)
        if when is None:
            return found
        with Session(self.engine) as session:
            return choices.releases_then(session, found, when)

    def dates(self) -> tuple[date | None, date]:
        """(the day of the ledger's first event, today): the days an `as_of` may name, by the
        ledger's own clock (UTC); the first is None in an empty ledger."""
        from .operations.ledger_dates import date_span

        with Session(self.engine) as session:
            return date_span(session)

    def release(self, release_id: str) -> Release:
        with Session(self.engine) as session:
            lookup = row_reads.ReleaseLookup(session)
            if release_id not in lookup:
                from .core.failures import QUOTED, excerpt

                raise fail(f"release {excerpt(release_id, QUOTED)}", "id", "no such release in this ledger"
                           + choices.did_you_mean(release_id, list(lookup)))
            return lookup[release_id]

    def events(self, release_id: str) -> list[AuditEvent]:
        """The audit events about one release, in chain order (who did what, and why)."""
        import json

        self.release(release_id)  # (an unknown id: the same error as `release`)
        with Session(self.engine) as session:
            rows = audit_chain.lifecycle_events(session, RELEASE_EVENTS, [release_id])
        return [AuditEvent(seq, at, actor, kind, _reason(json.loads(payload)))
                for seq, kind, _, at, actor, payload in rows]

    def overview(self) -> LedgerSnapshot:
        """The datasets and families, without reading any release."""
        return self._light()

    def dataset_as_of(self, name: str | None, when: datetime | None, *, field: str = "dataset") -> Dataset:
        """The named dataset (or the only one), as it stood at `when` (its variables and groups then)."""
        with sessions.read_session(self.engine) as session:
            chosen = choices.pick_dataset(configuration.write_context(session), name, field=field)
            if when is None:
                return chosen
            from .store.as_of import state_then

            return state_then(session, chosen, when)[0]

    def dataset_added_at(self, name: str) -> datetime | None:
        """When the dataset was added to the ledger (its first `dataset.added` event), or None."""
        from .operations.opening import dataset_added_at

        return dataset_added_at(self.engine, name)

    def release_pages(self, dataset: str | None = None):
        """(the datasets and families, a page of releases in recording order, each one's steps after
        recording: who, when, why), one consistent read (operations/release_steps.py)."""
        from .operations.release_steps import pages_with_steps

        yield from pages_with_steps(self.engine, dataset)

    @contextmanager
    def index_rows(self, dataset: str | None = None, *, titles: bool = False, variables: list[str] | None = None,
                   accounts: bool = True, as_of: datetime | None = None, field: str = "dataset"):
        """(the dataset, the index of its charged releases from the accounting rows), with the
        session open inside the block, where the index reads release titles (choices.rows_index)."""
        with Session(self.engine) as session:
            yield choices.rows_index(session, dataset, titles=titles, variables=variables, accounts=accounts,
                                     when=as_of, field=field)

    def roles(self) -> dict[str, frozenset[str]]:
        """Every person and the roles they hold."""
        from .operations import people

        return people.roles(self.engine)

    # -- writing ----------------------------------------------------------------

    def bootstrap(self) -> bool:
        """Make the person acting the admin of a ledger that has no roles yet (every role, audit
        events); False when it has roles."""
        from .operations import people

        with sessions.write_session(self.engine) as session:
            return people.bootstrap(session, self._by())

    def change_role(self, person: str, role: str, granted: bool) -> bool:
        """Grant or revoke a role (admins only; an audit event); False when already held."""
        from .operations import people

        return people.change_role(self.engine, person, role, granted, self._by())

    def add_dataset_records(self, dataset: Dataset, caps: Sequence[Cap], source: str,
                            privacy_unit: dict[str, str] | None) -> bool:
        """`add_dataset` of a dataset and caps already built from their file (`source`)."""
        return operations.add_dataset(self.engine, dataset, caps, self._by(), source, privacy_unit)

    def record_files(self, paths: Sequence[str | Path]) -> operations.Recorded:
        """`record` of release files, each read and checked against the schema before any lock."""
        return operations.record(self.engine, operations.release_builder(paths, self._by()), self._by())

    def check_files(self, paths: Sequence[str | Path]) -> tuple[list[budget.CapCheck], list[Release]]:
        """`check` of release files, with the releases as they would be charged."""
        return operations.check_plan(self.engine, operations.release_builder(paths, self._by()))

    def amend(self, dataset: str | None, change, *, source: str, reason: str | None, dry_run: bool = False,
              privacy_unit: dict[str, str] | None = None, shown=lambda _d, _a: None):
        """(the dataset, the amendments `change` implies), written as audited changes unless
        `dry_run` (operations/dataset_changes.py); `shown` sees them before any is written."""
        from .operations.dataset_changes import apply_change

        return apply_change(self.engine, dataset, change, source=source, actor=self._by(), reason=reason,
                            dry_run=dry_run, privacy_unit=privacy_unit, shown=shown)

    def set_caps(self, dataset: str, entries: Sequence[dict], source: str
                 ) -> tuple[list[Cap], list[budget.CapCheck]]:
        """Add or replace caps given as a dataset file's entries; (the caps, each as `cap list` states it)."""
        caps = operations.add_caps(self.engine, dataset, entries, self._by(), source)
        with sessions.read_session(self.engine) as session:
            return caps, operations.cap_checks(session, dataset, caps)

    def add_dataset(self, source: str | Path | Mapping[str, Any]) -> bool:
        """Add a dataset (a dataset file, or its content as a dict) with its caps.
        True when added; False when it is already recorded exactly so."""
        if isinstance(source, Mapping):
            document, errors = Document("<dataset document>", dict(source)), []
        else:
            document, errors = read_document(source)
        dataset, caps = dataset_and_caps(document, errors)
        return self.add_dataset_records(dataset, caps, document.path, operations.declared_privacy_unit(document))

    def record(self, *sources: operations.ReleaseSource) -> operations.Recorded:
        """Record releases from files, release documents (dicts in the file format) or
        `Release` records (e.g. from `ledger.adapters`): every cap is checked first, and
        all are recorded or none (`BudgetRefused`, `InputErrors`)."""
        sources = _flat(sources)  # (a list of releases, as the adapters return them, is its releases)
        if not sources:
            raise fail("record", "sources", "nothing to record")
        return operations.record(self.engine, operations.source_builder(sources, self._by()), self._by())

    def check(self, *plans: operations.ReleaseSource) -> PlanCheck:
        """Would these planned releases keep every cap? A dry run of `record`."""
        plans = _flat(plans)
        if not plans:
            raise fail("check", "plans", "nothing to check")
        builder = operations.source_builder(plans, self._by())
        return PlanCheck(tuple(operations.check(self.engine, builder)))

    def run(self, mechanism: str, data: pd.DataFrame, *, dataset: str, **options: Any):
        """Run a mechanism on data and record its release in the same step (operations/recording.py's
        `run_and_record`: its options, the result with the output)."""
        from .operations.recording import run_and_record

        return run_and_record(self.engine, mechanism, data, dataset=dataset, actor=self._by(), **options)

    def record_example(self, build, held) -> tuple[Dataset, bool]:
        """An example recorded in an empty ledger, by the person acting (operations/example_ledger.py):
        (its dataset, whether it was recorded now; False: the ledger already held it)."""
        from .operations.example_ledger import record_example

        return record_example(self.engine, self._by(), build, held)

    def now(self) -> datetime:
        """The ledger's clock (UTC), as every step it records is dated."""
        return session_state.now()

    def approve(self, release_id: str) -> Release:
        """Approve a planned release (its caps are re-checked)."""
        return operations.change_status(self.engine, release_id, "approve", self._by())

    def publish(self, release_id: str, *, at: datetime | None = None) -> Release:
        """Publish an approved release (its caps are re-checked); `at` dates a publication that
        happened elsewhere (never in the future, never before the release was planned)."""
        if at is not None and at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return operations.change_status(self.engine, release_id, "publish", self._by(), at=at)

    def retract(self, release_id: str, *, reason: str | None = None) -> Release:
        """Retract a published release, saying why; it still counts."""
        return operations.change_status(self.engine, release_id, "retract", self._by(), reason=reason)

    def cancel(self, release_id: str, *, reason: str | None = None) -> Release:
        """Cancel a planned or approved release, saying why; it frees its reservation. A release
        whose output exists (run, or recorded with `output_digest`) stays charged: `Refused`."""
        return operations.change_status(self.engine, release_id, "cancel", self._by(), reason=reason)

    def set_cap(self, subset: Sequence[str] | str, *, epsilon: object = None, delta: object = None,
                rho: object = None, name: str | None = None, dataset: str | None = None,
                filter: str | None = None) -> list[budget.CapCheck]:  # noqa: A002
        """Add or replace a cap on variables, a group name, or "all"; returns the caps' checks.
        `filter` (a cap at a delta): "gaussian" or "renyi" (accounting/filters.py); by default
        chosen from the releases the cap already holds."""
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        entry: dict[str, Any] = {"subset": "all"} if subset == "all" else (
            {"name": subset} if isinstance(subset, str) else {"subset": list(subset)})
        if name:
            entry["name"] = name
        for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho), ("filter", filter)):
            if value is not None:
                entry[key] = value
        caps = operations.add_caps(self.engine, chosen.name, [entry], self._by(), "set_cap")
        with Session(self.engine) as session:
            return budget.check(caps, running_totals.cap_totals(session, chosen.name), [], {}, {}, only_touched=False)

    def solve(self, plan: str | Path | Mapping[str, Any], *, dataset: str | None = None) -> pd.DataFrame:
        """The noise of each planned release (a plan file, or its content as a dict) that uses the
        budget left as fully as every cap it touches allows (operations/solve.py): one row per
        release with its parameter, the cap that binds it and its expected error. The release
        file `check` accepts is `df.attrs["release_file"]`. Refused (`Refused`) when a cap has
        no room or an accuracy floor is not met; bad input raises `InputErrors`."""
        from .input.plan import read_plan
        from .operations.solve import solve

        parsed = read_plan(plan)
        chosen = choices.pick_dataset(self._light(), dataset or parsed.dataset, field="dataset")
        return _solved_frame(solve(self.engine, parsed, chosen, self._by()))

    def record_plan(self, plan: str | Path | Mapping[str, Any], *, name: str | None = None,
                    dataset: str | None = None) -> tuple[pd.DataFrame, operations.Recorded]:
        """Solve the plan and record its releases as planned (reserving their budget), all or none:
        `record` checks every cap again as it writes (`BudgetRefused` if the ledger moved). With
        `name`, the solved plan is stored as the next version of that plan (operations/plan_book.py,
        its releases recorded as NAME/vN/ID) in the same transaction; `df.attrs["plan"]` is then
        its `PlanVersion`."""
        from .input.plan import read_plan
        from .operations import plan_book

        if name is None:
            frame = self.solve(plan, dataset=dataset)
            return frame, self.record(frame.attrs["release_file"])
        plan_book.check_name(name)
        parsed = read_plan(plan)
        chosen = choices.pick_dataset(self._light(), dataset or parsed.dataset, field="dataset")
        solution, recorded, stored = plan_book.record(self.engine, parsed, chosen, name, self._by())
        frame = _solved_frame(solution)
        frame.attrs["plan"] = plan_book.version(self.engine, stored.name, stored.version)
        return frame, recorded

    def plans(self, dataset: str | None = None) -> list:
        """Every stored plan version (`plan_book.PlanVersion`: name, version, dataset, who recorded
        it and when, and each release's solved parameter, allocation, binding cap and error), in
        the order recorded; of one dataset when given."""
        from .operations import plan_book

        if dataset is not None:
            choices.pick_dataset(self._light(), dataset, field="dataset")
        return plan_book.versions(self.engine, dataset)

    def plan(self, name: str, version: int | None = None):
        """One stored plan version (its latest when `version` is None); `name` may be NAME@vN."""
        from .operations import plan_book

        parsed = plan_book.parse_label(name)
        if parsed is None:
            plan_book.check_name(name)
        found_name, found_version = parsed
        return plan_book.version(self.engine, found_name, version if version is not None else found_version)

    def plan_against_actual(self, dataset: str | None = None) -> list[tuple[Any, list]]:
        """Per stored plan version of the dataset, each planned release's allocation beside the
        recorded release (`plan_book.Actual`: its status, parameter and charge)."""
        from .operations import plan_book

        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        with Session(self.engine) as session:
            return plan_book.against_actual(session, chosen.name)

    def plan_diff(self, old: str | Path | Mapping[str, Any], new: str | Path | Mapping[str, Any]) -> pd.DataFrame:
        """Two stored plan versions (NAME@vN) or two solved release files (`plan solve --out`, or
        their content as dicts) side by side: one row per release of either (id, parameter, old,
        new, relative change; for stored versions also each side's binding cap and std, and the
        row's status: same, changed, added or removed); a release in one only has None on the
        other side. Stored versions are matched by the plan's own release id."""
        import pandas as pd

        from .operations import plan_book
        from .operations.plan_noise import solved_parameters

        labels = [_stored_label(source) for source in (old, new)]
        if all(labels):
            before, after = (plan_book.version(self.engine, *label) for label in labels)
            rows = [(c.key, c.parameter, c.old, c.new, c.change, c.old_binding, c.new_binding, c.old_std,
                     c.new_std, c.status) for c in plan_book.diff(before, after)]
            frame = pd.DataFrame(rows, columns=["id", "parameter", "old", "new", "change", "old_binding",
                                                "new_binding", "old_std", "new_std", "status"])
            frame.attrs.update(old=before.label, new=after.label)
            return frame
        before, after = (solved_parameters(_document(source)) for source in (old, new))
        rows = []
        for rid in [*before, *(i for i in after if i not in before)]:
            a, b = before.get(rid), after.get(rid)
            change = float(b[1] / a[1]) - 1 if a and b and a[0] == b[0] else None
            rows.append((rid, (b or a)[0], a and a[1], b and b[1], change))
        return pd.DataFrame(rows, columns=["id", "parameter", "old", "new", "change"])

    # -- figures ----------------------------------------------------------------

    @kept
    def caps(self, dataset: str | None = None, *, as_of: str | datetime | None = None) -> list[budget.CapCheck]:
        """Every cap of the dataset, its spend (reservations included), headroom and status: the
        figures `cap list` prints; `as_of`: the caps set then, as they stood (`cap list --as-of`)."""
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        when = as_of_moment(as_of)
        with Session(self.engine) as session:
            if when is None:
                return operations.cap_checks(session, chosen.name, configuration.caps(session, chosen.name))
            from .store.as_of import state_then

            _, caps, _ = state_then(session, chosen, when)
            return operations.cap_checks_as_of(session, chosen.name, caps, when)

    def headroom(self, variables: Iterable[str], *, dataset: str | None = None, delta: object = None,
                 mechanism: str = "any") -> budget.Headroom:
        """The largest epsilon (and rho) a new release reading exactly these variables could take:
        the figures `headroom` prints (`mechanism`: any, laplace or gaussian; `delta`: the rho
        headroom's epsilon is stated at it, the dataset's by default)."""
        from .operations.cap_accounting import HEADROOM_MECHANISMS

        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        names = choices.resolve_variables(chosen, _names(variables), field="variables")
        if mechanism not in HEADROOM_MECHANISMS:
            raise fail("headroom", "mechanism", f"must be one of {', '.join(HEADROOM_MECHANISMS)}. "
                                                f"Found {mechanism!r}.")
        return self.room(chosen.name, names, mechanism=mechanism,
                         delta=choices.parse_delta(delta, chosen, field="delta"))

    def room(self, dataset: str, variables: set[str], *, mechanism: str = "any", delta: Fraction | None = None,
             when: datetime | None = None) -> budget.Headroom:
        """`headroom` of a dataset and variables already chosen and resolved; `when`: as the ledger stood then."""
        return operations.headroom(self.engine, dataset, variables, when=when, mechanism=mechanism, delta=delta)

    @kept
    def subset(self, variables: Iterable[str], *, dataset: str | None = None, delta: object = None,
               accountant: str | None = None, as_of: str | datetime | None = None) -> SubsetLoss:
        """The privacy loss on one subset (variables or group names): the figure `subset` prints,
        the smallest valid one of the basic and Rényi accountants (or `accountant`'s; the PLD is
        information only, had the plan been fixed in advance); `as_of`: as `subset --as-of`."""
        from .operations.reasons import unbounded_reason
        from .operations.shown_figures import subset_accountants

        with self._indexed(dataset, as_of, subset=True) as (chosen, index):
            names = choices.resolve_variables(chosen, _names(variables), field="variables")
            chosen_delta = choices.parse_delta(delta, chosen, field="delta")
            _check_accountant(accountant, ACCOUNTANTS)
            cost = index.subset_cost(names, at_delta(chosen_delta))
            found, shown = subset_accountants(index, cost, chosen_delta, accountant)
            reason = unbounded_reason(index, names, chosen.public_names) if cost.spend.unbounded else None
        spend = cost.spend
        epsilon = shown.epsilon
        return SubsetLoss(
            dataset=chosen.name, variables=cost.subset, epsilon=safe_float(epsilon), exact=_exact(epsilon),
            delta=None if spend.unbounded or shown.delta is None else chosen_delta, rho=spend.zcdp_rho(),
            notion=spend.notion, releases=cost.releases, accountant=shown.accountant, case=shown.case,
            accountants=found, reason=reason)

    @kept
    def table(self, dataset: str | None = None, delta: object = None, *, whole_dataset: bool = False,
              accountant: str | None = None, as_of: str | datetime | None = None) -> pd.DataFrame:
        """Tan's Table 1: one row per charged release plus the total row ("All releases"),
        one column per variable (epsilon at the dataset's delta, safe floats, inf when
        unbounded); `whole_dataset=True` adds the whole-dataset column. The total row is the
        one `table` prints: per column the smallest valid figure (or `accountant`'s).
        `df.attrs` holds the dataset, the delta, the basis the figures are stated on, the
        accountant of each total and each release row's status. `as_of`: as `table --as-of`."""
        import pandas as pd

        from .operations.shown_figures import table_accountants

        with self._indexed(dataset, as_of) as (chosen, index):
            chosen_delta = choices.parse_delta(delta, chosen, field="delta")
            _check_accountant(accountant, ACCOUNTANTS)
            risk = index.table(chosen.name, at_delta(chosen_delta))
            accounts = table_accountants(index, risk, chosen_delta, accountant)
            view = accounts.apply(table_view(risk, chosen_delta))
            per_variable, wide = accounts.shown()
        rows = [[*row.values, row.dataset_wide] for row in view.rows] + [[*view.total, view.total_dataset_wide]]
        columns = [*view.variables, "whole dataset"]
        floats: dict[int, float] = {}  # (by identity: the rows repeat a few figure objects; each converted once)
        frame = pd.DataFrame([[floats[id(v)] if id(v) in floats else floats.setdefault(id(v), safe_float(v))
                               for v in row] for row in rows], columns=columns,
                             index=pd.Index([row.release for row in view.rows] + ["All releases"], name="release"))
        if not whole_dataset:
            frame = frame.drop(columns="whole dataset")
        frame.attrs.update(dataset=chosen.name, delta=None if view.basis.pure else chosen_delta,
                           basis=view.basis.label, statuses={row.release: row.status for row in view.rows},
                           accountants={**{name: f.accountant for name, f in zip(view.variables, per_variable)},
                                        "whole dataset": wide.accountant})
        return frame

    @kept
    def pairs(self, dataset: str | None = None, delta: object = None, *, accountant: str | None = None,
              as_of: str | datetime | None = None) -> pd.DataFrame:
        """The loss on every pair of variables: columns variable_1, variable_2, epsilon, accountant;
        the figure `pairs` prints: the smallest valid one of basic and rdp (the PLD figure is
        information only), as `subset` prints it; `as_of`: as `pairs --as-of`."""
        import pandas as pd

        from .operations.shown_figures import pair_accountants

        with self._indexed(dataset, as_of) as (chosen, index):
            chosen_delta = choices.parse_delta(delta, chosen, field="delta")
            _check_accountant(accountant, ("basic", "rdp", "pld"))
            result = pair_accountants(index, chosen_delta, accountant)
        return pd.DataFrame([(a, b, safe_float(shown.epsilon), shown.accountant)
                             for (a, b), (_, shown) in result.items()],
                            columns=["variable_1", "variable_2", "epsilon", "accountant"])

    @kept
    def worst_pair(self, dataset: str | None = None, delta: object = None, *, accountant: str | None = None,
                   as_of: str | datetime | None = None) -> pd.DataFrame:
        """The row of `pairs` (same arguments, same columns) with the largest figure, the first
        listed on a tie; no row with fewer than two variables. Only the pairs whose bound passes
        the worst so far get their figures made (accounting/worst_pair.py); asked for the PLD,
        every pair's (`pairs`)."""
        import pandas as pd

        from .accounting.worst_pair import BOUNDED, worst_pair
        from .operations.shown_figures import choose

        if accountant not in BOUNDED:
            every = self.pairs(dataset, delta, accountant=accountant, as_of=as_of)
            return every.loc[[every["epsilon"].idxmax()]].reset_index(drop=True) if len(every) else every
        with self._indexed(dataset, as_of) as (chosen, index):
            chosen_delta = choices.parse_delta(delta, chosen, field="delta")
            found = worst_pair(index, chosen_delta, accountant, choose)
            names = index.variables
        rows = [] if found is None else [(names[found[0]], names[found[1]], safe_float(found[2].epsilon),
                                          found[2].accountant)]
        return pd.DataFrame(rows, columns=["variable_1", "variable_2", "epsilon", "accountant"])

    # -- audit, report inputs, exports -------------------------------------------

    def verify(self) -> audit_verify.Verification:
        """Recompute the audit hash chain; `.ok`, `.events`, `.head`, `.problems` (one
        consistent snapshot, sessions.read_session)."""
        with sessions.read_session(self.engine) as session:
            return audit_verify.verify(session)

    def verify_chain(self, *, since_checkpoint: bool = False, head=None):
        """`audit verify`: the chain recomputed (from the last verified head with
        `since_checkpoint`), and whether it still holds a signed `head` (operations/audit_chain.py)."""
        from .operations.audit_chain import verify_chain

        return verify_chain(self.engine, since_checkpoint, head)

    def sign_checkpoint(self, private_key):
        """(the verification, the head signed, the checkpoint's text): never signed unless it verifies."""
        from .operations.audit_chain import sign_head

        return sign_head(self.engine, private_key)

    def retotal(self) -> list[str]:
        """Recompute every cap's running total from the releases (an audit event); the caps that differed."""
        from .operations.audit_chain import retotal

        return retotal(self.engine, self._by())

    def caps_over(self, release: Release) -> list[budget.CapCheck]:
        """The caps on what `release` reads that are over their limit, as `cap list` states them."""
        with sessions.read_session(self.engine) as session:
            caps = [cap for cap in configuration.caps(session, release.dataset) if cap.subset & release.reads]
            return [c for c in operations.cap_checks(session, release.dataset, caps) if c.status == "over"] \
                if caps else []

    def infinite_driver_reasons(self, checks: Sequence[budget.CapCheck], when: datetime | None = None) -> dict:
        """Per cap (dataset, name) with an ∞ driver, each driver's reason (cap_accounting)."""
        from .operations.cap_accounting import infinite_driver_reasons

        return infinite_driver_reasons(self.engine, checks, when)

    def registry_from_rows(self, dataset: str | None = None, *, tier: int = 2, field: str = "dataset"):
        """(the dataset, its DP Deployments Registry record) from the accounting rows, as
        `export registry` writes it (operations/registry_record.record_from_rows)."""
        from .operations.registry_record import record_from_rows

        return record_from_rows(self.engine, dataset, tier=tier, field=field)

    def report_inputs(self, dataset: str | None = None, *, delta: object = None,
                      since: str | datetime | None = None, as_of: str | datetime | None = None) -> ReportInputs:
        """Everything the dataset's report is computed from (operations/report_inputs.py): its releases
        and families, its caps as `cap list` decides them, the audit chain and its verification, at
        `delta` (the dataset's by default); `since` (a datetime, or ISO 8601 text as --since takes it):
        the meeting pack's date; `as_of`: the report shows the ledger as it stood then (`--as-of`).
        `ledger.reporting.write_report(book, out)` writes the report."""
        from dataclasses import replace

        from .operations.report_inputs import gather

        since_at, as_of_at = report_moments(since, as_of)
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        chosen_delta = choices.parse_delta(delta, chosen, field="delta")
        with Session(self.engine) as session:
            inputs = gather(session, chosen, chosen_delta, since_at)
        return inputs if as_of_at is None else replace(inputs, as_of=as_of_at)

    def changes(self, after: str | datetime, until: str | datetime | None = None, *,
                dataset: str | None = None) -> MeetingPack:
        """What changed after the moment `after` names, up to `until` (now when None): the releases
        recorded, approved, published, retracted and cancelled in between, and each cap's figure
        at both ends (the meeting pack of `report --since` with `--as-of`). A date alone names the
        end of its day at both ends, as `--as-of` does, so the figures `after` and `until` are those
        `subset/table/cap list --as-of` print for them."""
        from dataclasses import replace

        from .operations.meeting_pack import meeting_between
        from .operations.report_inputs import gather

        start, end = as_of_moment(after, "after"), as_of_moment(until, "until")
        if end is not None and start > end:
            raise fail("argument", "after", f"{after} is after until {until}")
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        with Session(self.engine) as session:
            # (the chain is not verified here: the pack reads no verification)
            inputs = gather(session, chosen, choices.parse_delta(None, chosen), start + JUST_AFTER,
                            chain=lambda: None)
        return meeting_between(replace(inputs, as_of=end))

    def export_registry(self, dataset: str | None = None, *, tier: int = 2) -> dict[str, Any]:
        """A DP Deployments Registry record of the dataset (see ledger.operations.registry_record)."""
        from .operations.registry_record import registry_record

        snapshot = self._full(dataset)
        chosen = choices.pick_dataset(snapshot, dataset, field="dataset")
        with Session(self.engine) as session:
            caps = configuration.caps(session, chosen.name)
            unit = dataset_writes.privacy_unit(session, chosen.name)
        return registry_record(snapshot, chosen, caps, tier=tier, privacy_unit=unit)


ACCOUNTANTS = ("basic", "rdp", "pld")
JUST_AFTER = timedelta(microseconds=1)  # the store's clock keeps microseconds at most


def as_of_moment(value: str | datetime | None, field: str = "as_of") -> datetime | None:
    """The moment an `as_of` names: a date-time (UTC when it has no zone), or text read as the
    command line's `--as-of` reads it (a date alone is the end of that day; never the future)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    from .operations.moments import parse_date

    try:
        return parse_date(value, field)
    except InputErrors as exc:  # (named as the argument it is, not as a command-line option)
        raise InputErrors([LedgerError("argument", e.field, e.message) for e in exc.errors]) from None


def report_moments(since: str | datetime | None, as_of: str | datetime | None
                   ) -> tuple[datetime | None, datetime | None]:
    """A report's `since` (read as --since reads it: a date alone is its start) and `as_of` (as
    `as_of_moment`), refused when `since` is after `as_of`."""
    from .operations.report_inputs import parse_since

    since_at = since if isinstance(since, datetime) or since is None else parse_since(since)
    as_of_at = as_of_moment(as_of)
    if since_at is not None and as_of_at is not None and since_at > as_of_at:
        raise fail("argument", "since", f"{since} is after as_of {as_of}")
    return since_at, as_of_at


RELEASE_EVENTS = ("release.recorded", "release.approved", "release.published", "release.retracted",
                  "release.cancelled")


def _reason(payload: Any) -> str | None:
    """The reason a retraction or cancellation gave (audit_chain.append_event keeps it beside the release)."""
    reason = payload.get("reason") if isinstance(payload, dict) else None
    return reason if isinstance(reason, str) else None


def _check_accountant(accountant: str | None, allowed: Sequence[str]) -> None:
    if accountant is not None and accountant not in allowed:
        raise fail("argument", "accountant", f"must be one of {', '.join(allowed)}, found {accountant!r}")


def _names(variables: Iterable[str]) -> list[str]:
    return [variables] if isinstance(variables, str) else list(variables)


def open(url: str | None = None, *, person: Person | None = None) -> Ledger:  # noqa: A001 (ledger.open)
    """Open (and, on first use, create) the ledger at `url`: any SQLAlchemy URL, default
    $LEDGER_DATABASE_URL, else sqlite:///ledger.db -- as the CLI's --db. Who acts is the
    database login on PostgreSQL, else the operating-system user; a front end that
    authenticated its user itself passes `person=front_end(name, how)` (on PostgreSQL the
    database then checks that its login may act as that person's role)."""
    chosen = choices.ledger_url(url)
    try:
        engine = engines.make_engine(chosen)
        schema_migrations.ensure_schema(engine)
    except Exception as exc:  # a bad URL or an unreachable server is bad input
        raise InputErrors([LedgerError("url", "url", f"cannot open ledger {chosen!r}: {exc}")]) from None
    return Ledger(chosen, engine, person=person)


def _solved_frame(solution) -> pd.DataFrame:
    """A solved plan (plan_noise.Solution) as `solve` returns it."""
    import pandas as pd

    frame = pd.DataFrame([(row.planned.id, row.planned.family, row.parameter, row.value, row.binding, row.std,
                           row.halfwidth95) for row in solution.rows],
                         columns=["id", "mechanism", "parameter", "value", "binding_cap", "std", "halfwidth95"])
    frame.attrs.update(dataset=solution.dataset, release_file=solution.release_file())
    return frame


def _stored_label(source: Any) -> tuple[str, int] | None:
    """(name, version) when `source` names a stored plan version, NAME@vN, and no file of that name
    exists; None otherwise (a file, or a dict)."""
    from .operations.plan_book import parse_label

    if not isinstance(source, str) or Path(source).exists():
        return None
    parsed = parse_label(source)
    return parsed if parsed is not None and parsed[1] is not None else None


def _document(source: str | Path | Mapping[str, Any]) -> Document:
    """A file read (InputErrors when it cannot be), or a dict as a document."""
    if isinstance(source, Mapping):
        return Document("<release document>", dict(source))
    document, errors = read_document(source)
    if document is None or errors:
        raise InputErrors(errors)
    return document


def _flat(sources: tuple) -> tuple:
    """`record(r1, r2)` and `record([r1, r2])` alike: a list or tuple among the sources stands for its
    items (the adapters return a list of releases)."""
    flat: list = []
    for source in sources:
        if isinstance(source, (list, tuple)):
            flat.extend(_flat(tuple(source)))
        else:
            flat.append(source)
    return tuple(flat)


def signing_key(path: str | Path):
    """The Ed25519 private key (PEM) a checkpoint is signed with (exit 2 when it is not one)."""
    from .operations.audit_chain import signing_key as read_key

    return read_key(Path(path))


def checkpoint_head(path: str | Path, public_key: str | Path):
    """A signed checkpoint's head, once its file, the key and the signature are all good."""
    from .operations.audit_chain import signed_head

    return signed_head(Path(path), Path(public_key))


def new_key_pair() -> tuple[bytes, bytes]:
    """An Ed25519 key pair for signing checkpoints: (private, public), each as PEM."""
    from .operations.audit_chain import new_key_pair as made

    return made()


def acting_person(url: str) -> str:
    """Who runs a command on the ledger at `url`, read before any file is created."""
    from .operations.opening import acting_person as who

    return who(url)


def guarded_target(out: str | Path, url: str, option: str, *, new: bool = False) -> Path:
    """An output path checked against the ledger at `url` (store/files.py: never the ledger, never
    anything but a regular file or a new path; exit 2 naming `option`)."""
    from .store import files

    return files.checked(out, url, option, new=new)


def guarded_write(path: Path, data, url: str, option: str, *, new: bool = False, mode: int | None = None) -> Path:
    """Write a whole output file (bytes, text, or an iterable of chunks) or nothing, under the guard."""
    from .store import files

    return files.write(path, data, url, option, new=new, mode=mode)


def release_document(release: Release) -> dict[str, Any]:
    """A release as its document in the file format (store/codec.py), as `releases --json` lists it."""
    from .store.codec import release_to_dict

    return release_to_dict(release)


def chain_status_at(url: str):
    """The audit chain's status as a report states it (operations/report_inputs.verify_for_report),
    read on an engine of its own (a forked helper never uses another process's connections)."""
    from .operations.report_inputs import verify_for_report

    engine = engines.make_engine(url)
    try:
        with sessions.read_session(engine) as session:
            return verify_for_report(session)
    finally:
        engine.dispose()


def load_verification() -> None:
    """Import what a verification of the chain uses (before forking helpers that share them)."""
    from .accounting import cap_states, ledger_index  # noqa: F401
    from .store import columns, verified_head  # noqa: F401
