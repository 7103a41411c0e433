"""What reports and the registry export are computed from, read through the façade in one
consistent read each: the report's inputs (small and summarised), its register, the changes between
two meetings and the registry record.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..core.errors import fail
from ..core.records import Dataset
from ..input.snapshot import LedgerSnapshot
from ..operations import choices
from ..store import audit_chain, configuration, dataset_writes, sessions
from ..store.sessions import Session

from .moments import JUST_AFTER, as_of_moment, report_moments
from .reading import Reading

if TYPE_CHECKING:
    from ..operations.meeting_pack import MeetingPack
    from ..operations.report_inputs import ReportInputs
    from ..operations.report_source import ReportReading
    from ..operations.report_source import Summary as ReportSummary


class Reports(Reading):
    """`Ledger`'s report inputs."""

    def registry_from_rows(self, dataset: str | None = None, *, tier: int = 2, field: str = "dataset"):
        """(the dataset, its DP Deployments Registry record) from the accounting rows, as
        `export registry` writes it (operations/registry_record.record_from_rows)."""
        from ..operations.registry_record import record_from_rows

        return record_from_rows(self.engine, dataset, tier=tier, field=field)

    def report_inputs(self, dataset: str | None = None, *, delta: object = None,
                      since: str | datetime | None = None, as_of: str | datetime | None = None) -> ReportInputs:
        """Everything the dataset's report is computed from (operations/report_inputs.py): its releases
        and families, its caps as `cap list` decides them, the audit chain and its verification, at
        `delta` (the dataset's by default); `since` (a datetime, or ISO 8601 text as --since takes it):
        the meeting pack's date; `as_of`: the report shows the ledger as it stood then (`--as-of`).
        `ledger.reporting.write_report(book, out)` writes the report."""
        since_at, as_of_at = report_moments(since, as_of)
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        chosen_delta = choices.parse_delta(delta, chosen, field="delta")
        return self.report_reading(chosen, chosen_delta, since=since_at, as_of=as_of_at).inputs

    def changes(self, after: str | datetime, until: str | datetime | None = None, *,
                dataset: str | None = None) -> MeetingPack:
        """What changed after the moment `after` names, up to `until` (now when None): the releases
        recorded, approved, published, retracted and cancelled in between, and each cap's figure
        at both ends (the meeting pack of `report --since` with `--as-of`). A date alone names the
        end of its day at both ends, as `--as-of` does, so the figures `after` and `until` are those
        `subset/table/cap list --as-of` print for them."""
        from ..operations.meeting_pack import meeting_between

        start, end = as_of_moment(after, "after"), as_of_moment(until, "until")
        if end is not None and start > end:
            raise fail("argument", "after", f"{after} is after until {until}")
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        # (the chain is not verified here: the pack reads no verification)
        inputs = self.report_reading(chosen, choices.parse_delta(None, chosen), since=start + JUST_AFTER, as_of=end,
                                     chain=lambda: None).inputs
        return meeting_between(inputs)

    def export_registry(self, dataset: str | None = None, *, tier: int = 2) -> dict[str, Any]:
        """A DP Deployments Registry record of the dataset (see ledger.operations.registry_record)."""
        from ..operations.registry_record import registry_record

        snapshot = self._full(dataset)
        chosen = choices.pick_dataset(snapshot, dataset, field="dataset")
        with Session(self.engine) as session:
            caps = configuration.caps(session, chosen.name)
            unit = dataset_writes.privacy_unit(session, chosen.name)
        return registry_record(snapshot, chosen, caps, tier=tier, privacy_unit=unit)

    def report_outset(self) -> tuple[LedgerSnapshot, int]:
        """(the light snapshot, the audit chain's length), in one read: what `report` decides from
        before reading the dataset."""
        with sessions.read_session(self.engine) as session:
            return configuration.write_context(session), audit_chain.last_event(session)[0]

    def report_reading(self, dataset: Dataset, delta: Fraction, *, since: datetime | None = None,
                       as_of: datetime | None = None, chain=None, generated_at: datetime | None = None,
                       summary: ReportSummary | None = None) -> ReportReading:
        """What the report of a chosen dataset is computed from, in one consistent read that also
        counts its releases and so chooses the path (operations/report_source.read_report): past
        `summary.above` releases the summarised reading from the accounting rows, else (or when the
        rows cannot say it exactly) every release. `chain`: a function giving the chain's
        verification (else verified in the read); `as_of`, `since`: --as-of, --since."""
        from ..operations.report_source import read_report

        with sessions.read_session(self.engine) as session:
            return read_report(session, dataset, delta, since=since, as_of=as_of, chain=chain,
                               generated_at=generated_at, summary=summary)

    def register_releases(self, large, *, head: tuple[int, str] | None = None, page: int | None = None):
        """A large report's register, release by release (operations/large_register.register_releases),
        read in a snapshot of its own, refused when the ledger's last event is no longer `head`."""
        from ..operations import large_register

        with sessions.read_session(self.engine) as session:
            yield from large_register.register_releases(session, large, head, page or large_register.REGISTER_PAGE)

    def register_figures(self, large):
        """A large report's register's figures of Table 1, page by page of `register_pages`
        (operations/large_register.RegisterFigures: value ids, the writer makes their texts)."""
        from ..operations.large_register import RegisterFigures

        return RegisterFigures(large)

    def register_pages(self, large, *, head: tuple[int, str] | None = None, page: int | None = None,
                       after: int = -1, upto: int | None = None):
        """A large report's register as pages of raw release rows (operations/large_register.register_pages),
        read in a snapshot of its own, refused when the ledger's last event is no longer `head`."""
        from ..operations import large_register

        with sessions.read_session(self.engine) as session:
            yield from large_register.register_pages(session, large, head, page or large_register.REGISTER_PAGE,
                                                     after, upto)
