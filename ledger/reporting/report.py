"""Reports for review meetings and compliance files: the contexts templates render.

Pure functions from records and engine results to documented dataclasses
(STYLE 7): `build_report(ReportInputs) -> ReportContext`. Every figure a
report prints is computed here by the engine (`LedgerIndex`), the budget code
(`budget.check`, `budget.total_from_history`) or `Spend.epsilon`; templates in
`reports/` only loop and format, with the plain filters of `views`.

What a report holds (one `ReportContext`, the same for every format):
- `certificate`: dataset, generated at, ledger head hash and whether the audit
  chain verified, the notion and the zCDP conversion with its delta (where a figure went
  through it), the dataset-wide epsilon and rho;
- `meeting`: with `--since`, what changed since then (from the audit events)
  and how each cap moved (the cap figure recomputed as the ledger stood then);
- `risk`: Tan's Table 1, a row per charged release, a column per variable, the
  composed total row and the whole-dataset column, split into column blocks
  so that wide tables fit a printed page; past MATRIX_CELL_LIMIT cells the
  per-release rows are given sparsely (each release's non-zero cells);
- `caps`: spend, headroom (rounded down), status, driving releases;
- `pairs`: the loss on every pair of variables, as a heat map;
- `timeline`: the loss on each variable over time, as a chart;
- `register`: every release with its mechanism, guarantees and lifecycle;
- `pufferfish`: Pufferfish-family guarantees, never added into DP totals;
- `audit`: the audit events and the chain status.

Invariants: a printed bound is never below the true one (epsilon rounded
up, headroom rounded down, by the filters of `numbers`); exact values stay
exact (`293764/114921 (≈ 2.56)`); ∞ is "not protected", never a number.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from markupsafe import Markup

from ..accounting.budget import CapCheck, total_from_index
from ..accounting.charge_choice import at_delta
from ..accounting.ledger_index import LedgerIndex
from ..accounting.risk_table import RiskTable
from ..core.records import CHARGED_STATUSES
from ..operations.headline import Headline, best_headline, headline  # (computed below the API)
from ..operations.meeting_pack import (  # (computed below the API; the report shows it)
    MeetingPack,
    as_it_stood,
    charged_index_of,
    meeting_pack,
)
from ..operations.large_report import LargeReading  # (read below the API)
from ..operations.report_inputs import ChainStatus, ReportInputs  # (gathered below the API)
from ..operations.report_reading import lifecycle_steps  # (read below the API)
from .audit_section import AuditTrail, audit_trail
from .cap_section import CapEntry, CapHistoryEntry, cap_entry, cap_history
from .certificate import Certificate, certificate, with_conversion
from .chart_data import Pairs, Timeline
from .chart_figures import pair_figures, timeline_of
from .plan_view import plans_against_actual
from .register_section import PufferfishEntry, RegisterEntry, RegisterSummary, pufferfish_entries, register_entry
from .risk_view import RiskTableView, cells_of_rows, largest_rows, named_family_note, risk_table, total_reasons


COMPACT_REGISTER_FROM = 1_000  # in print, larger registers are one line per release (fast, ~65 a page)
# Past SUMMARY_FROM releases (LEDGER_REPORT_SUMMARY_FROM overrides it) a report to a file summarises
#: a register of a million rows is not a page anyone reads. The page keeps the headline,
# the risk table's total row by variable, caps, pairs, the timeline, the audit trail, and lists the
# LARGEST_LISTED largest releases; every release is in a complete register written beside it as CSV
# (`<out>.register.csv`), which the page links.
SUMMARY_FROM = 20_000
SUMMARY_ENV = "LEDGER_REPORT_SUMMARY_FROM"
LARGEST_LISTED = 50


@dataclass(frozen=True)
class ReportContext:
    """What every report template renders (`report` in the template)."""

    title: str
    certificate: Certificate
    meeting: MeetingPack | None
    risk: RiskTableView
    caps: tuple[CapEntry, ...]
    pairs: Pairs
    timeline: Timeline | None
    register: tuple[RegisterEntry, ...]
    pufferfish: tuple[PufferfishEntry, ...]
    audit: AuditTrail
    sparse: bool  # the register carries each release's cells (large ledgers)
    compact_register: bool  # in print, one line per release (more than COMPACT_REGISTER_FROM)
    # every value a cap has had, for caps changed or removed since they were set (cap_history)
    cap_history: tuple[CapHistoryEntry, ...] = ()
    # a large ledger: `register` lists the largest releases only, and the complete register is
    # a file beside the report (RegisterSummary); None: `register` is every release
    summary: RegisterSummary | None = None
    # per stored plan version of the dataset, its allocations beside the recorded releases (plan_view.py)
    plans: tuple = ()

    @property
    def cap_counts(self) -> dict[str, int]:
        """How many caps are ok, warn and over."""
        counts = Counter(cap.status for cap in self.caps)
        return {name: counts.get(name, 0) for name in ("ok", "warn", "over")}


# --------------------------------------------------------------------------
# Building it
# --------------------------------------------------------------------------


# Draws the two charts: given the contexts, starts drawing and returns a function that
# gives (heat map SVG, timeline SVG or ""). See `draw_here`, and cli_report.ChartsAlongside.
Draw = Callable[["Pairs", "Timeline | None"], Callable[[], tuple[str, str]]]
# Computes a part of the report that nothing else in it needs until the end (the pairs panel):
# given a function, starts it and returns a function that gives its result. See `here`, and
# cli_report.ForkedCall (a forked process, on another core).
Beside = Callable[[Callable[[], Any]], Callable[[], Any]]


def here(function: Callable[[], Any]) -> Callable[[], Any]:
    """Compute `function()` now, in this process."""
    result = function()
    return lambda: result


def draw_here(pairs: Pairs, timeline: Timeline | None) -> Callable[[], tuple[str, str]]:
    """Draw the charts in this process, now (charts.py, inline SVG)."""
    from . import charts

    drawn = (charts.heat_map_svg(pairs), charts.timeline_svg(timeline) if timeline else "")
    return lambda: drawn


def summary_from() -> int:
    """How many releases a ledger has before a report summarises it (SUMMARY_FROM, or
    $LEDGER_REPORT_SUMMARY_FROM, a whole number; unset or empty is SUMMARY_FROM, anything
    else bad input)."""
    text = os.environ.get(SUMMARY_ENV, "").strip()
    if not text:
        return SUMMARY_FROM
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        from ..core.errors import fail

        raise fail("environment", SUMMARY_ENV, f"must be a whole number of releases, such as 20000 (or unset: "
                                               f"{SUMMARY_FROM}); found {text[:40]!r}")
    return int(text)


def build_report(inputs: ReportInputs, *, charts: bool = True, draw: Draw = draw_here,
                 register_file: str | None = None, beside: Beside = here) -> ReportContext:
    """The whole report context; `charts=False` skips drawing (Markdown, LaTeX, CSV).
    `draw` may draw elsewhere, and `beside` may compute the pairs panel elsewhere while the
    rest (the risk table, the register, the timeline) is built here: the same functions on the
    same index, so the same figures; both charts are drawn once the pairs panel is back. With
    `register_file` (the name of the complete register beside the report), the register is
    summarised: `summary` gives every release one at a time, and `register` the largest only."""
    if inputs.as_of is not None:
        inputs = as_it_stood(inputs)
    dataset = inputs.dataset
    charged = tuple(r for r in inputs.releases if r.status in CHARGED_STATUSES)
    objective = at_delta(inputs.delta, dataset.allowance)
    index = charged_index_of(dataset, inputs.releases, inputs.families)
    if inputs.as_of is not None:  # the caps' running totals as the ledger stood, over the index's arrays
        inputs = replace(inputs, cap_totals={cap.name: total_from_index(cap, index) for cap in inputs.caps})

    def panels() -> Pairs:
        """The pairs panel (the accountants on every pair of variables): the longest part, computed
        `beside` while the rest is built here."""
        return pair_figures(index, inputs.delta, objective, protected=dataset.protected_names, best=True)

    panels_of = beside(panels)
    table = index.table_by_arrays(dataset.name, objective)
    summarised = register_file is not None
    accounts = shown_accounts(index, table, inputs.delta)
    risk = risk_table(table, inputs.delta, public=dataset.public_names, shown=accounts.shown(),
                      per_release=not summarised)
    risk = replace(risk, **total_reasons(risk, index))
    register, summary, sparse = _register_section(inputs, table, risk, register_file)
    checks = _cap_checks(inputs, index)
    caps = tuple(cap_entry(c, dataset.public_names, index) for c in checks)
    meeting = meeting_pack(inputs, checks) if inputs.since is not None else None
    timeline = timeline_of(index, inputs.delta, objective, inputs.as_of or inputs.generated_at,
                           public=dataset.public_names, caps=inputs.caps,
                           final=[f.epsilon for f in accounts.shown()[0]])
    pairs = panels_of()
    if charts:  # both charts, from the contexts (the same bytes wherever they are drawn)
        heat_map, timeline_chart = draw(pairs, timeline)()
        pairs = replace(pairs, svg=Markup(heat_map))
        timeline = replace(timeline, svg=Markup(timeline_chart)) if timeline else None
    chain = inputs.chain_status()  # last: the verification may still be running alongside
    return ReportContext(
        title=f"Privacy-loss report: {dataset.name}",
        certificate=with_conversion(replace(certificate(inputs, chain, table, charged, accounts),
                                            headline=best_headline(_headline(inputs, index, objective, table, pairs),
                                                                   index, inputs.delta, accounts, pairs)), caps),
        meeting=meeting,
        risk=risk,
        caps=caps,
        pairs=pairs,
        timeline=timeline,
        register=register,
        pufferfish=pufferfish_entries(inputs.releases),
        audit=audit_trail(inputs, chain),
        sparse=sparse,
        compact_register=len(register) > COMPACT_REGISTER_FROM,
        cap_history=cap_history(inputs),
        summary=summary,
        plans=plans_against_actual(inputs.events, inputs.releases, dataset.name),
    )


def _register_section(inputs: ReportInputs, table: RiskTable, risk: RiskTableView, register_file: str | None
                      ) -> tuple[tuple[RegisterEntry, ...], RegisterSummary | None, bool]:
    """`build_report`'s register: (the entries listed, the summary, whether they carry their cells).
    Every release; with `register_file`, the LARGEST_LISTED largest only, and a RegisterSummary
    giving every release one at a time (the complete register beside the report)."""
    sparse = risk.layout == "sparse"
    steps = lifecycle_steps(inputs.events)
    summary = None
    if register_file is not None:
        cells_of = cells_of_rows(table, risk)
        largest = largest_rows(table, risk, LARGEST_LISTED)
        by_id = {r.id: r for r in inputs.releases}
        register = tuple(register_entry(by_id[table.releases[k].id], inputs.families, *cells_of(k),
                                        **steps.get(table.releases[k].id, {})) for k in largest)
        row_of = {r.id: k for k, r in enumerate(table.releases)}
        releases, families = inputs.releases, inputs.families

        def entries() -> Iterator[RegisterEntry]:
            for r in releases:
                k = row_of.get(r.id)
                yield register_entry(r, families, *(cells_of(k) if k is not None else ((), None)),
                                     **steps.get(r.id, {}))

        summary = RegisterSummary(releases=len(inputs.releases), file=register_file, shown=len(register),
                                  entries=entries)
        sparse = True  # the releases listed carry their cells
    else:
        cells = {row.release: (row.cells, row.dataset_wide) for row in risk.sparse}
        register = tuple(register_entry(r, inputs.families, *cells.get(r.id, ((), None)), **steps.get(r.id, {}))
                         for r in inputs.releases)
    return register, summary, sparse


def _cap_checks(inputs: ReportInputs, index: LedgerIndex) -> tuple[CapCheck, ...]:
    """The caps as `cap list` decides them now; at --as-of, on the totals as the ledger stood then,
    the states from the index (cap_entries' figures)."""
    if inputs.cap_checks is not None and inputs.as_of is None:
        return tuple(inputs.cap_checks)
    from ..operations.cap_accounting import checks_from_index

    return tuple(checks_from_index(inputs.caps, index, inputs.cap_totals))


@dataclass(frozen=True)
class LargeInputs:
    """What a summarised report of a large ledger is computed from: the reading from the accounting
    rows (`reading`, operations/large_report.LargeReading: no Release decoded but the few listed, no
    audit event read but the ones shown) and the report's own views of it, made while the store is open:

    accounts: the table's figures as `shown_accounts` gives them (accountant_views.TableAccounts);
    stamps: each index release's charged_from moment in seconds (charged_from_stamps);
    trail: the audit trail (counted by SQL, the last AUDIT_EVENTS_LISTED events) given the chain's status;
    timeline: timeline_of with `stamps` (a ledger whose releases share one moment labels its points
        with release ids, read from the store);
    plans: the "Plan against actual" section (plan_view.plans_of)."""

    reading: LargeReading
    accounts: Any
    stamps: Any
    trail: Callable[[ChainStatus], AuditTrail]
    timeline: Timeline | None = None
    plans: tuple = ()


def large_inputs(reading: LargeReading) -> LargeInputs:
    """The LargeInputs of a large ledger's reading: the table's figures as `table` shows
    them, the charged-from stamps, the audit trail as a function of the chain's status, the plans'
    view and the timeline. Called while the store is open (the timeline may read release ids)."""
    from ..operations.shown_figures import TableAccounts
    from .audit_section import AuditEntry, audit_note
    from .chart_figures import charged_from_stamps
    from .plan_view import plans_of

    accounts = TableAccounts(reading.table.variables, reading.per_variable, reading.wide, None)
    stamps = charged_from_stamps(reading.events.recorded, reading.events.published)
    audit = reading.audit
    listed = tuple(AuditEntry(e.seq, e.at, e.actor, e.kind, e.subject, audit_note(e)) for e in audit.listed)

    def trail(chain: ChainStatus) -> AuditTrail:
        return AuditTrail(
            ok=chain.ok, head=chain.head, chain_events=chain.events, problems=chain.problems, events=audit.events,
            first_at=audit.first_at, last_at=audit.last_at, by_kind=audit.by_kind, by_actor=audit.by_actor,
            listed=listed, omitted=audit.events - len(listed))

    dataset, delta = reading.dataset, reading.delta
    return LargeInputs(
        reading=reading, accounts=accounts, stamps=stamps, trail=trail,
        plans=() if reading.plans is None else plans_of(reading.plans),
        timeline=timeline_of(reading.index, delta, at_delta(delta), reading.as_of or reading.generated_at,
                             public=dataset.public_names, caps=reading.caps, stamps=stamps,
                             final=[f.epsilon for f in accounts.shown()[0]]))


def build_large_report(large: LargeInputs, entries: Callable[[], Iterator[RegisterEntry]], register_file: str, *,
                       charts: bool = True, draw: Draw = draw_here) -> ReportContext:
    """`build_report` of a ledger past `summary_from()` releases from `LargeInputs`: the same
    sections and figures (the risk table's total row, the headline, pairs, caps as `cap list`
    decides them, the timeline, the largest releases), computed from the accounting rows.
    `entries` gives the complete register one release at a time (the CSV beside the report)."""
    reading = large.reading
    dataset, index, table, delta = reading.dataset, reading.index, reading.table, reading.delta
    objective = at_delta(delta)

    pairs = pair_figures(index, delta, objective, protected=dataset.protected_names, best=True)
    timeline = large.timeline
    drawn = draw(pairs, timeline) if charts else None
    whole = replace(table, releases=tuple(reading.largest[r.id] for r in table.releases))
    risk = risk_table(whole, delta, public=dataset.public_names, shown=large.accounts.shown(), per_release=False)
    risk = replace(risk, family_note=named_family_note(reading.families_named), **total_reasons(risk, index))
    cells_of = cells_of_rows(whole, risk)
    register = tuple(register_entry(r, reading.families, *cells_of(k), **reading.steps.get(r.id, {}))
                     for k, r in enumerate(whole.releases))
    summary = RegisterSummary(releases=reading.releases, file=register_file, shown=len(register), entries=entries)
    caps = tuple(cap_entry(c, dataset.public_names, index) for c in reading.cap_checks)
    if drawn is not None:
        heat_map, timeline_chart = drawn()
        pairs = replace(pairs, svg=Markup(heat_map))
        timeline = replace(timeline, svg=Markup(timeline_chart)) if timeline else None
    chain = reading.chain() if callable(reading.chain) else reading.chain
    shim = ReportInputs(dataset=dataset, releases=(), families=reading.families, caps=reading.caps, cap_totals={},
                        chain=chain, events=(reading.last_event,) if reading.last_event else (),
                        generated_at=reading.generated_at, delta=delta, as_of=reading.as_of)
    head = headline(index, dataset, delta, objective, table.total, table.total_dataset_wide,
                    worst_pair=_worst_pair(pairs))
    cert = replace(certificate(shim, chain, whole, (), large.accounts), releases=reading.releases,
                   charged=len(index.releases),
                   headline=best_headline(head, index, delta, large.accounts, pairs))
    # the basis over every cell of the table, not only the rows listed (as `certificate` over every row):
    # the values some cell holds (chunked_table.large_table's cell_value_ids), not every guarantee charged (a
    # release's guarantee that no cell takes, such as a rho beside a smaller pure one, is not a figure shown)
    cell_values = [index.values[int(i)] for i in index.cell_value_ids]
    if cert.basis.pure and not all(v.is_pure or v.unbounded for v in cell_values):
        cert = replace(cert, basis=replace(cert.basis, pure=False))
    return ReportContext(
        title=f"Privacy-loss report: {dataset.name}",
        certificate=with_conversion(cert, caps),
        meeting=reading.meeting,
        risk=risk,
        caps=caps,
        pairs=pairs,
        timeline=timeline,
        register=register,
        pufferfish=pufferfish_entries(reading.pufferfish),
        audit=large.trail(chain),
        sparse=True,
        compact_register=False,
        cap_history=cap_history(replace(shim, events=reading.cap_events)),
        summary=summary,
        plans=large.plans,
    )


def _worst_pair(pairs: Pairs):
    if pairs.protected_only and pairs.highest:
        best = pairs.highest[0]
        return (best.a, best.b, best.epsilon)
    return None


def shown_accounts(index: LedgerIndex, table: RiskTable, delta: Fraction):
    """The total row's figures as `table` shows them (table_view.table_figures with no accountant
    asked: the smallest valid figure per column), over the whole table a report of every release
    has in hand (its families' totals over arrays: `table_by_arrays`), without computing PLD figures
    that cannot be shown: the PLD is never valid (information had the plan been fixed in advance,
    docs/explanation/accounting.md) and `figure_validity.best` passes over a figure that is not valid, so basic and rdp
    decide every column; the figures shown are the same."""
    from ..accounting.index_figures import table_figures
    from ..operations.shown_figures import TableAccounts

    wanted = ["basic", "rdp"] + (["pld"] if len(table.releases) <= 20_000 else [])  # (marked not computed)
    per_variable, wide = table_figures(index, table, delta, wanted, invalid_pld=False)
    return TableAccounts(table.variables, per_variable, wide, None)


def _headline(inputs: ReportInputs, index: LedgerIndex, objective, table: RiskTable, pairs: Pairs) -> Headline:
    return headline(index, inputs.dataset, inputs.delta, objective, table.total, table.total_dataset_wide,
                    worst_pair=_worst_pair(pairs))
