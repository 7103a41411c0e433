"""What a report's page is read from, chosen inside the read it is read in.

One consistent read (the caller's session, sessions.read_session) counts the dataset's releases
and, past the summary threshold, reads the summarised report's reading from the accounting rows
(large_report.read_large); else, or when the rows cannot say it exactly, every release
(report_inputs.gather). The count that chooses and the page it chooses are of the same instant,
whatever writers commit meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from fractions import Fraction
from typing import Any

from ..core.lazy import lazy_module
from ..core.records import Dataset
from .report_inputs import ChainStatus, ReportInputs, gather, release_count

large_report = lazy_module("ledger.operations.large_report")  # (numpy and the index: past the threshold only)


@dataclass(frozen=True)
class Summary:
    """How a report past `above` releases is read: summarised (large_report.read_large, with the
    `listed` largest rows and the `audit_listed` most recent events), `inputs_of` of its reading.
    `indexed`: given what the complete register needs once the index is read (read_large);
    `starting`: given the count when it is past `above`, before the page is read (where the caller
    starts what works alongside, or refuses: a register needs a file)."""

    above: int
    inputs_of: Callable[[Any], Any]
    listed: int
    audit_listed: int
    indexed: Callable[[Any], None] | None = None
    starting: Callable[[int], None] | None = None


@dataclass(frozen=True)
class ReportReading:
    """A report's page as read: `releases` (the dataset's, any status, counted in the page's read)
    and either `large` (Summary.inputs_of of the summarised reading) or `inputs` (every release)."""

    releases: int
    inputs: ReportInputs | None = None
    large: Any = None


def read_report(session, dataset: Dataset, delta: Fraction, *, since: datetime | None = None,
                as_of: datetime | None = None, chain: Callable[[], ChainStatus] | None = None,
                generated_at: datetime | None = None, summary: Summary | None = None) -> ReportReading:
    """The dataset's report reading in `session`: summarised past `summary.above` releases (when the
    rows can say it exactly), else every release (`as_of` set on the inputs: build_report shows the
    ledger as it stood then). Without `summary`, every release at any size."""
    count = release_count(session, dataset.name)
    if summary is not None and count > summary.above:
        if summary.starting is not None:
            summary.starting(count)
        large = large_report.read_large(session, dataset, delta, summary.inputs_of, listed=summary.listed,
                                        audit_listed=summary.audit_listed, chain=chain,
                                        generated_at=generated_at, indexed=summary.indexed, as_of=as_of,
                                        since=since)
        if large is not None:
            return ReportReading(count, large=large)
    inputs = gather(session, dataset, delta, since, generated_at, chain)
    return ReportReading(count, inputs=inputs if as_of is None else replace(inputs, as_of=as_of))
