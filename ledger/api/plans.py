"""Plans through the façade: noise solved for a plan's caps, plan versions stored and read back,
and a plan compared with what was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InputErrors
from ..input.documents import Document, read_document
from ..operations import choices, transactions as operations
from ..store.sessions import Session

from .reading import Reading

if TYPE_CHECKING:
    import pandas as pd


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
    from ..operations.plan_book import parse_label

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


class Plans(Reading):
    """`Ledger`'s plans."""

    def solve(self, plan: str | Path | Mapping[str, Any], *, dataset: str | None = None) -> pd.DataFrame:
        """The noise of each planned release (a plan file, or its content as a dict) that uses the
        budget left as fully as every cap it touches allows (operations/solve.py): one row per
        release with its parameter, the cap that binds it and its expected error. The release
        file `check` accepts is `df.attrs["release_file"]`. Refused (`Refused`) when a cap has
        no room or an accuracy floor is not met; bad input raises `InputErrors`."""
        from ..input.plan import read_plan
        from ..operations.solve import solve

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
        from ..input.plan import read_plan
        from ..operations import plan_book

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
        from ..operations import plan_book

        if dataset is not None:
            choices.pick_dataset(self._light(), dataset, field="dataset")
        return plan_book.versions(self.engine, dataset)

    def plan(self, name: str, version: int | None = None):
        """One stored plan version (its latest when `version` is None); `name` may be NAME@vN."""
        from ..operations import plan_book

        parsed = plan_book.parse_label(name)
        if parsed is None:
            plan_book.check_name(name)
        found_name, found_version = parsed
        return plan_book.version(self.engine, found_name, version if version is not None else found_version)

    def plan_against_actual(self, dataset: str | None = None) -> list[tuple[Any, list]]:
        """Per stored plan version of the dataset, each planned release's allocation beside the
        recorded release (`plan_book.Actual`: its status, parameter and charge)."""
        from ..operations import plan_book

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

        from ..operations import plan_book
        from ..operations.plan_noise import solved_parameters

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
