"""Writing through the façade: datasets, releases recorded or checked against their caps, caps
set, and the lifecycle decisions (approve, publish, retract, cancel). Each is one transaction of
the same operations the CLI runs; a refused step writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..accounting import budget
from ..core.errors import fail
from ..core.records import Cap, Dataset, Release
from ..input.datasets import dataset_and_caps
from ..input.documents import Document, read_document
from ..operations import choices, transactions as operations
from ..store import running_totals, sessions
from ..store.sessions import Session

from .reading import Reading
from .values import PlanCheck

if TYPE_CHECKING:
    import pandas as pd


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


class Decisions(Reading):
    """`Ledger`'s writes and lifecycle decisions."""

    def bootstrap(self) -> bool:
        """Make the person acting the admin of a ledger that has no roles yet (every role, audit
        events); False when it has roles."""
        from ..operations import people

        with sessions.write_session(self.engine) as session:
            return people.bootstrap(session, self._by())

    def change_role(self, person: str, role: str, granted: bool) -> bool:
        """Grant or revoke a role (admins only; an audit event); False when already held."""
        from ..operations import people

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
        from ..operations.dataset_changes import apply_change

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
        from ..operations.recording import run_and_record

        return run_and_record(self.engine, mechanism, data, dataset=dataset, actor=self._by(), **options)

    def record_example(self, build, held) -> tuple[Dataset, bool]:
        """An example recorded in an empty ledger, by the person acting (operations/example_ledger.py):
        (its dataset, whether it was recorded now; False: the ledger already held it)."""
        from ..operations.example_ledger import record_example

        return record_example(self.engine, self._by(), build, held)

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
