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

import math
from collections import Counter
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from markupsafe import Markup

from ..accounting import filters
from ..accounting.spend import CONVERSION_NAME
from ..accounting.budget import CapCheck, CapTotal, check, total_from_index
from ..accounting.charge_choice import at_delta
from ..accounting.ledger_index import LedgerIndex
from ..accounting.risk_table import RiskTable
from ..accounting.history import charged_from
from ..core.numbers import INF, Number, is_infinite
from ..core.records import CHARGED_STATUSES, Cap, Dataset, Family, Guarantee, Release, cap_unit_text
from .headline import Headline, headline
from .chart_data import PairFigure, Pairs, Timeline  # noqa: F401 (defined there: charts.py reads them too)
from ..operations import reasons
from .plan_view import plans_against_actual
from ..operations.table_view import Basis, basis_for
from .views import when_text
from ..core.lazy import lazy_module
from ..operations.report_inputs import AuditEvent, ChainStatus, ReportInputs  # noqa: F401 (gathered below the API)
from ..operations.meeting_pack import (  # (computed below the API; the report shows it)
    MeetingPack,
    as_it_stood,
    aware,
    cap_reasons,
    change_note,
    charged_index_of,
    dataset_events,
    meeting_pack,
)
from ..operations.report_reading import (  # (read below the API)
    DATASET_CHANGE_KINDS,
    Ending,
    lifecycle_steps,
)
from ..accounting.grid_figures import epsilon_floats  # (the report draws with it)

np = lazy_module("numpy")  # imported on first use: recording never needs it

MATRIX_CELL_LIMIT = 20_000  # release rows x variables shown as Tan's matrix; past it, sparse rows
BLOCK_VARIABLES = 10  # variables per column block of the risk table: fits a landscape page
# The risk table prints its variable names vertically when a header's longest word is wider than its
# column on a 1024-pixel screen, the narrowest laid out with the columns side by side (A4 is wider): a
# header ("{name}") breaks at its spaces only, never inside a word. 772 px of table beside the release
# column (968 px less 14rem) shared by a block's columns and the whole-dataset column, less a cell's
# padding (11 px), at ~7.6 px a character (the headers' bold 12 px DejaVu Sans; measured ~7.2). The
# rule was "more than 6 columns and a name over 12 characters": "{variable_000}" (14 with its braces)
# spilled out of its header into the next one.
HEADER_ROW_PX = 772
HEADER_PADDING_PX = 11
HEADER_CHARACTER_PX = 7.6
AUDIT_EVENTS_LISTED = 300  # the most recent events listed in full; the rest are counted by kind
COMPACT_REGISTER_FROM = 1_000  # in print, larger registers are one line per release (fast, ~65 a page)
PAIRS_ANNOTATED = 24  # up to this many variables, every heat-map cell carries its figure
HIGHEST_PAIRS = 15  # pairs listed with exact figures under the heat map
TIMELINE_POINTS = 200  # at most this many points per variable in the chart over time
TIMELINE_LABELLED = 8  # variables drawn in colour and named; the others in grey
TOTAL_LABEL = "All releases (composed)"
# Past SUMMARY_FROM releases (LEDGER_REPORT_SUMMARY_FROM overrides it) a report to a file summarises
#: a register of a million rows is not a page anyone reads. The page keeps the headline,
# the risk table's total row by variable, caps, pairs, the timeline, the audit trail, and lists the
# LARGEST_LISTED largest releases; every release is in a complete register written beside it as CSV
# (`<out>.register.csv`), which the page links.
SUMMARY_FROM = 20_000
SUMMARY_ENV = "LEDGER_REPORT_SUMMARY_FROM"
LARGEST_LISTED = 50

PUFFERFISH_KINDS = {
    "p-percent": "p% protection (Bailie 2020)",
    "dataset-attribute-privacy": "dataset attribute privacy (Zhang, Ohrimenko and Cummings)",
    "distributional-attribute-privacy": "distributional attribute privacy (Zhang, Ohrimenko and Cummings)",
    "perfect-sample-privacy": "perfect sample privacy (Rassouli, Rosas and Gündüz)",
    "pufferfish": "Pufferfish",
}



# --------------------------------------------------------------------------
# Inputs: what the report is computed from (gathered below the API, operations/report_inputs.py)
# --------------------------------------------------------------------------




def chain_scope(chain: ChainStatus) -> str:
    """What the verification covered, said beside its result in every report."""
    if not chain.since:
        return (f"every one of the {chain.events} events matches its SHA-256 link and every derived row "
                "its events")
    kept = "kept by the last passing audit verify" + (f", at {when_text(chain.head_at)}" if chain.head_at else "")
    if chain.events > chain.since:
        checked = (f"events {chain.since + 1} to {chain.events}, appended since the verified head (event "
                   f"{chain.since}, {kept}), match their SHA-256 links and the rows they name, and the running "
                   "totals and accountant states of the datasets they changed match those recomputed from the "
                   "accounting rows")
    else:
        checked = f"no event was appended since the verified head (event {chain.since}, {kept}), whose hash holds"
    checked += ("; every other derived row (accounting rows, sealed chunks, running totals, accountant states) "
                "matches the digest kept with that head")
    if chain.full_at is not None and chain.full_at == chain.head_at:
        earlier = f"events 1 to {chain.since} were verified in full by that run"
    elif chain.full_at is not None:
        earlier = (f"events 1 to {chain.since} were verified by that run and those before it (the last full "
                   f"verification ran at {when_text(chain.full_at)})")
    else:
        earlier = f"events 1 to {chain.since} were verified by that run"
    return (f"{checked}; {earlier}. The report does not recompute the releases untouched since that head: "
            "privacy-ledger audit verify does")


# --------------------------------------------------------------------------
# The context
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Certificate:
    """The certificate-style header of a report."""

    dataset: str
    description: str
    variables: int
    releases: int  # recorded, any status
    charged: int  # counted in the totals: every status but cancelled
    generated_at: datetime
    head: str  # SHA-256 of the last audit event
    chain_ok: bool
    events: int  # events in the ledger's chain
    problems: tuple[str, ...]  # what verification found, first bad event first
    basis: Basis  # pure epsilon, or epsilon at delta (table_view.Basis)
    # the zCDP -> (epsilon, delta) conversion, named in every report whose figures it produced
    # (docs/explanation/model.md#composition, `conversion_of`); None: no figure shown went through it (a pure-only ledger's report)
    conversion: str | None
    delta: Fraction
    epsilon: Number  # the whole-dataset loss (U = V, Tan Prop 3.1) at delta
    rho: Number | None  # the same as rho-zCDP; None when it has (epsilon, delta) parts
    notion: str  # Spend.notion of the whole-dataset total: pure / approx / zcdp / mixed / unbounded
    self_approval: bool = False  # the dataset waives separation of duties (docs/explanation/model.md#people-duties-and-the-book-of-record): said in every report
    as_of: datetime | None = None  # the ledger as it stood then, by publication date (--as-of)
    # the headline (docs/explanation/model.md#public-and-protected-variables): the loss on the protected subset, its worst variable and pair,
    # the public variables apart (headline.Headline)
    headline: Headline | None = None
    verification: str = ""  # what the verification covered (chain_scope)
    chain_since: int = 0  # 0: in full; else the verified head it continued from (ChainStatus.since)
    computed_seq: int = 0  # the audit event the report was computed from (its head), and its hash:
    computed_head: str = ""  # a printed report is itself a checkpoint a board can keep
    # (--as-of) when the dataset was added to the ledger: after `as_of`, it did not exist then
    dataset_added: datetime | None = None

    @property
    def added_after(self) -> bool:
        """--as-of a moment before the dataset was added to the ledger (the report says so)."""
        return self.as_of is not None and self.dataset_added is not None and self.dataset_added > self.as_of


@dataclass(frozen=True)
class RiskRow:
    """One release in one column block: its epsilon on each variable of the block."""

    release: str
    title: str
    status: str
    values: tuple[Number, ...]
    dataset_wide: Number
    wide_public: bool = False  # its whole-dataset ∞ comes from public variables only: neutral
    family: str | None = None  # a member of a family: the family is charged once in the total (docs/explanation/model.md#families)

    @property
    def wide_why(self) -> str:
        """Why its whole-dataset figure is ∞, when it is (reasons.py)."""
        return reasons.PUBLIC if self.wide_public else reasons.NOT_PROTECTED


@dataclass(frozen=True)
class RiskBlock:
    """Columns first..last (1-based) of Tan's Table 1; the whole-dataset column is
    printed in the last block only (`wide`)."""

    first: int
    last: int
    variables: tuple[str, ...]
    rows: tuple[RiskRow, ...]  # empty in the sparse layout
    total: tuple[Number, ...]
    wide: bool


@dataclass(frozen=True)
class SparseRow:
    """A release's non-zero cells of Table 1 (the sparse layout for large ledgers)."""

    release: str
    title: str
    status: str
    cells: tuple[tuple[str, Number], ...]  # (variable, epsilon), in column order
    dataset_wide: Number


@dataclass(frozen=True)
class RiskTableView:
    """Tan's Table 1 with the whole-dataset column, as epsilons at `delta`.

    layout "matrix": every block has every release row. layout "sparse" (more than
    MATRIX_CELL_LIMIT cells): blocks carry the total row only, and `sparse` the
    non-zero cells of each release. `matrix` always holds the full table (for CSV):
    row i is release i's epsilon on each variable, then on the whole dataset.
    """

    variables: tuple[str, ...]
    layout: str
    blocks: tuple[RiskBlock, ...]
    sparse: tuple[SparseRow, ...]
    total_label: str
    total: tuple[Number, ...]
    total_dataset_wide: Number
    releases: tuple[str, ...]
    matrix: _Matrix  # the full table as value ids; `matrix.mapped(f)` formats it
    unprotected: tuple[str, ...]  # variables whose composed total is ∞
    public: tuple[str, ...] = ()  # variables classified public: their ∞ is expected (docs/explanation/model.md#public-and-protected-variables)
    total_wide_public: bool = False  # the total's whole-dataset ∞ comes from public variables only
    rotate: bool = False  # variable names too long for a column: headers printed vertically
    family_note: str = ""  # said under the table when some rows are members of a family
    # per variable whose total is ∞ for a keyed family's move (reasons.keyed_reason), that reason
    total_reasons: Mapping[str, str] = field(default_factory=dict)
    total_wide_reason: str | None = None  # the same for the total's whole-dataset figure

    @property
    def why(self) -> dict[str, str]:
        """Per variable, why an ∞ in its column is ∞ (reasons.variable_reason): a public variable
        is released exactly (neutral), a protected one is not protected (an alarm)."""
        public = set(self.public)
        return {name: reasons.variable_reason(name, public) for name in self.variables}

    @property
    def total_why(self) -> dict[str, str]:
        """`why` for the total row, where a keyed family's move may be the cause (total_reasons)."""
        return {**self.why, **self.total_reasons}

    @property
    def total_wide_why(self) -> str:
        if self.total_wide_reason is not None:
            return self.total_wide_reason
        return reasons.PUBLIC if self.total_wide_public else reasons.NOT_PROTECTED


@dataclass(frozen=True)
class CapEntry:
    """One cap as the ledger stands (budget.CapCheck of an empty plan). Figures in the cap's unit."""

    name: str
    subset: tuple[str, ...]
    whole_dataset: bool
    unit: str  # epsilon / epsilon at delta / rho
    delta: Fraction | None
    limit: Fraction
    current: Number
    headroom: Number  # limit - current; printed rounded down
    status: str  # ok / warn / over
    drivers: tuple[tuple[str, Number], ...]  # the releases driving the spend, largest first
    decided_by: str | None = None  # the accountant whose valid figure `current` is, and its case
    filter: str | None = None  # the filter a cap at a delta is (filters.short)
    current_why: str | None = None  # why `current` is ∞, when it is (reasons.py)
    driver_why: tuple[str | None, ...] = ()  # per driver, why its charge is ∞ (None: finite)

    @property
    def unit_text(self) -> str:
        """`epsilon at delta 1 × 10⁻⁹`: the one text of a cap's unit (records.cap_unit_text)."""
        return cap_unit_text(self.unit, self.delta)


@dataclass(frozen=True)
class GuaranteeText:
    protects: tuple[str, ...]
    notion: str  # pure / approx / zcdp
    epsilon: Fraction | None
    delta: Fraction | None
    rho: Fraction | None
    relation: str  # replace / add-remove


@dataclass(frozen=True)
class RegisterEntry:
    """One release as recorded, with its lifecycle. `cells`: its non-zero cells of Table 1
    (filled in the sparse layout, where the register carries them)."""

    id: str
    title: str
    status: str
    charged: bool
    recorded_at: datetime | None
    recorded_by: str
    approved_at: datetime | None
    approved_by: str | None
    published_at: datetime | None
    reads: tuple[str, ...]
    exact: tuple[str, ...]  # read without any guarantee: not protected
    mechanism: str
    parameters: tuple[tuple[str, Any], ...]
    guarantees: tuple[GuaranteeText, ...]
    family: str | None
    family_split: str  # "random split" / "partition by ..." / ""
    derived_from: tuple[str, ...]
    output_digest: str | None
    pufferfish: tuple[str, ...]  # labels of its Pufferfish-family guarantees (their own section)
    cells: tuple[tuple[str, Number], ...]
    dataset_wide: Number | None
    published_by: str | None = None  # who published it (the publish step's person; docs/explanation/model.md#people-duties-and-the-book-of-record)
    ended: Ending | None = None  # its retraction or cancellation: who, when, why
    part: str | None = None  # a family member's part of the records (docs/explanation/model.md#families)


@dataclass(frozen=True)
class PufferfishEntry:
    """A Pufferfish-family guarantee of one release (docs/explanation/model.md#pufferfish-guarantees), shown in its own section
    and never added into a DP total.

    kind: "p-percent", "dataset-attribute-privacy", "distributional-attribute-privacy",
        "perfect-sample-privacy" (label: PUFFERFISH_KINDS);
    release: the release id; protects: the variables it is about;
    secrets: what is kept secret, as stated (ppercent.PPercentGuarantee.secrets;
        the protected attributes' means for attribute.AttributePrivacyGuarantee);
    assumptions: the data model it holds under (`assumption` of those classes);
    epsilon, delta: its parameters, when it has them;
    parameters: every other parameter as (name, value) pairs, e.g. p, laplace_scale,
        contributor, sigma2, n.
    """

    kind: str
    release: str
    protects: tuple[str, ...]
    secrets: str
    assumptions: str
    epsilon: Number | None
    delta: Number | None
    parameters: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        return PUFFERFISH_KINDS.get(self.kind, self.kind)


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at: datetime
    actor: str
    kind: str
    subject: str
    note: str | None = None  # a retraction's or cancellation's reason; the role a role event grants or revokes


@dataclass(frozen=True)
class AuditTrail:
    """The dataset's audit events and the chain status (the chain is ledger-wide).

    listed: the AUDIT_EVENTS_LISTED most recent events of the dataset, oldest first;
    omitted: how many earlier ones are only counted in `by_kind`."""

    ok: bool
    head: str
    chain_events: int
    problems: tuple[str, ...]
    events: int  # events about this dataset
    first_at: datetime | None
    last_at: datetime | None
    by_kind: tuple[tuple[str, int], ...]
    by_actor: tuple[tuple[str, int], ...]
    listed: tuple[AuditEntry, ...]
    omitted: int


@dataclass(frozen=True)
class CapHistoryEntry:
    """One value a cap had (a `cap.set` event) or its removal (`cap.removed`), from the audit chain."""

    cap: str
    at: datetime
    actor: str
    action: str  # set / changed / removed
    value: str  # the cap as set (amend.cap_text), or what it was when removed
    reason: str | None


@dataclass(frozen=True)
class RegisterSummary:
    """The register of a ledger past `summary_from()` releases, summarised.

    releases: how many the complete register holds (every release, cancelled ones too);
    file: the complete register's file name, beside the report (the page links it);
    shown: how many of the largest releases (by the whole-dataset figure) the page lists;
    entries(): every release's RegisterEntry, in recording order, one at a time (the CSV
        is written from it in chunks; not for templates)."""

    releases: int
    file: str
    shown: int
    entries: Callable[[], Iterator[RegisterEntry]] = field(compare=False, repr=False)


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
    from .accountant_views import best_headline  # the smallest valid figures

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
    sparse = risk.layout == "sparse"
    steps = lifecycle_steps(inputs.events)
    summary = None
    if summarised:
        cells_of = _cells_of(table, risk)
        largest = _largest_rows(table, risk, LARGEST_LISTED)
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
    if inputs.cap_checks is not None and inputs.as_of is None:  # as `cap list` decides them now
        checks = tuple(inputs.cap_checks)
    else:  # on the totals (as the ledger stood at --as-of), the states from the index (cap_entries' figures)
        from ..operations.cap_accounting import checks_from_index

        checks = tuple(checks_from_index(inputs.caps, index, inputs.cap_totals))
    caps = tuple(_cap_entry(c, dataset.public_names, index) for c in checks)
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


@dataclass(frozen=True)
class LargeInputs:
    """What a summarised report of a large ledger is computed from: no Release is
    decoded but the few listed, and no audit event read but the ones shown.

    index: the charged releases' `LedgerIndex` from the accounting rows (columns.index_for,
        with the accountants' events and times); table, accounts: `columns.large_table` of it
        (the total row over every release, the LARGEST_LISTED largest rows) and its figures
        as `shown_accounts` gives them (accountant_views.TableAccounts);
    stamps: each index release's charged_from moment in seconds (charged_from_stamps);
    releases: how many the dataset has (any status); largest: the table's rows, read whole,
        with `steps` their lifecycle_steps; families_named: the families some charged release of the
        dataset is a member of (the risk table's note);
    audit: the audit trail (counted by SQL, the last AUDIT_EVENTS_LISTED events read);
    cap_events: the dataset's cap.set and cap.removed events (cap_history);
    pufferfish: the releases with Pufferfish-family guarantees;
    last_event: the chain's last event (the checkpoint the report was computed from)."""

    dataset: Dataset
    index: LedgerIndex
    table: RiskTable
    accounts: Any
    stamps: Any
    releases: int
    largest: Mapping[str, Release]
    steps: Mapping[str, dict]
    families: tuple[Family, ...]
    families_named: tuple[str, ...]
    caps: tuple[Cap, ...]
    cap_checks: tuple[CapCheck, ...]
    chain: ChainStatus | Callable[[], ChainStatus]
    audit: Callable[[ChainStatus], AuditTrail]
    cap_events: tuple[AuditEvent, ...]
    pufferfish: tuple[Release, ...]
    last_event: AuditEvent | None
    generated_at: datetime
    delta: Fraction
    wide_ids: Any = None  # each index release's whole-dataset value id (large_table's column)
    # the timeline (timeline_of with `stamps`), computed while the store is open: a ledger whose
    # releases share one moment labels its points with release ids, read from the store
    timeline: Timeline | None = None
    as_of: datetime | None = None  # --as-of: every field above is of the ledger as it stood then
    meeting: MeetingPack | None = None  # --since: what changed (cli_report.large_meeting)
    plans: tuple = ()  # the "Plan against actual" section (plan_view.plans_of)


def build_large_report(large: LargeInputs, entries: Callable[[], Iterator[RegisterEntry]], register_file: str, *,
                       charts: bool = True, draw: Draw = draw_here) -> ReportContext:
    """`build_report` of a ledger past `summary_from()` releases from `LargeInputs`: the same
    sections and figures (the risk table's total row, the headline, pairs, caps as `cap list`
    decides them, the timeline, the largest releases), computed from the accounting rows.
    `entries` gives the complete register one release at a time (the CSV beside the report)."""
    dataset, index, table, delta = large.dataset, large.index, large.table, large.delta
    objective = at_delta(delta)
    from .accountant_views import best_headline

    pairs = pair_figures(index, delta, objective, protected=dataset.protected_names, best=True)
    timeline = large.timeline
    drawn = draw(pairs, timeline) if charts else None
    whole = replace(table, releases=tuple(large.largest[r.id] for r in table.releases))
    risk = risk_table(whole, delta, public=dataset.public_names, shown=large.accounts.shown(), per_release=False)
    risk = replace(risk, family_note=_named_family_note(large.families_named), **total_reasons(risk, index))
    cells_of = _cells_of(whole, risk)
    register = tuple(register_entry(r, large.families, *cells_of(k), **large.steps.get(r.id, {}))
                     for k, r in enumerate(whole.releases))
    summary = RegisterSummary(releases=large.releases, file=register_file, shown=len(register), entries=entries)
    caps = tuple(_cap_entry(c, dataset.public_names, index) for c in large.cap_checks)
    if drawn is not None:
        heat_map, timeline_chart = drawn()
        pairs = replace(pairs, svg=Markup(heat_map))
        timeline = replace(timeline, svg=Markup(timeline_chart)) if timeline else None
    chain = large.chain() if callable(large.chain) else large.chain
    shim = ReportInputs(dataset=dataset, releases=(), families=large.families, caps=large.caps, cap_totals={},
                        chain=chain, events=(large.last_event,) if large.last_event else (),
                        generated_at=large.generated_at, delta=delta, as_of=large.as_of)
    head = headline(index, dataset, delta, objective, table.total, table.total_dataset_wide,
                    worst_pair=_worst_pair(pairs))
    cert = replace(certificate(shim, chain, whole, (), large.accounts), releases=large.releases,
                   charged=len(index.releases),
                   headline=best_headline(head, index, delta, large.accounts, pairs))
    # the basis over every cell of the table, not only the rows listed (as `certificate` over every row):
    # the values some cell holds (columns.large_table's cell_value_ids), not every guarantee charged (a
    # release's guarantee that no cell takes, such as a rho beside a smaller pure one, is not a figure shown)
    cell_values = [index.values[int(i)] for i in index.cell_value_ids]
    if cert.basis.pure and not all(v.is_pure or v.unbounded for v in cell_values):
        cert = replace(cert, basis=replace(cert.basis, pure=False))
    return ReportContext(
        title=f"Privacy-loss report: {dataset.name}",
        certificate=with_conversion(cert, caps),
        meeting=large.meeting,
        risk=risk,
        caps=caps,
        pairs=pairs,
        timeline=timeline,
        register=register,
        pufferfish=pufferfish_entries(large.pufferfish),
        audit=large.audit(chain),
        sparse=True,
        compact_register=False,
        cap_history=cap_history(replace(shim, events=large.cap_events)),
        summary=summary,
        plans=large.plans,
    )


def _worst_pair(pairs: Pairs):
    if pairs.protected_only and pairs.highest:
        best = pairs.highest[0]
        return (best.a, best.b, best.epsilon)
    return None


def shown_accounts(index: LedgerIndex, table: RiskTable, delta: Fraction):
    """The total row's figures as `table` shows them (shown_figures.table_accountants with no
    accountant asked: the smallest valid figure per column), without computing PLD figures that
    cannot be shown: the PLD is never valid (information had the plan been fixed in advance,
    docs/explanation/accounting.md) and `figure_validity.best` passes over a figure that is not valid, so basic and rdp
    decide every column; the figures shown are the same."""
    from .accountant_views import TableAccounts
    from ..accounting.index_figures import table_figures

    wanted = ["basic", "rdp"] + (["pld"] if len(table.releases) <= 20_000 else [])  # as table_accountants
    per_variable, wide = table_figures(index, table, delta, wanted, invalid_pld=False)
    return TableAccounts(table.variables, per_variable, wide, None)


def _cells_of(table: RiskTable, risk: RiskTableView) -> Callable[[int], tuple[tuple, Number]]:
    """Row k of Table 1 -> (its non-zero cells as (variable, epsilon), its whole-dataset epsilon)."""
    zero = np.asarray([v.is_zero for v in table.values], dtype=bool)
    epsilon_of = risk.matrix.epsilon_of
    variables = table.variables

    def cells(k: int) -> tuple[tuple, Number]:
        ids = table.cells[k]
        return (tuple((variables[j], epsilon_of[ids[j]]) for j in np.flatnonzero(~zero[ids]).tolist()),
                epsilon_of[table.dataset_wide[k]])

    return cells


def _largest_rows(table: RiskTable, risk: RiskTableView, count: int) -> list[int]:
    """The rows of the `count` largest releases on the whole dataset (∞ first), in recording order."""
    if not len(table.dataset_wide):
        return []
    by_value = np.asarray([math.inf if is_infinite(v) else float(v) for v in risk.matrix.epsilon_of])
    wide = by_value[table.dataset_wide]
    return sorted(np.argsort(-wide, kind="stable")[:count].tolist())


def certificate(inputs: ReportInputs, chain: ChainStatus, table: RiskTable,
                charged: Sequence[Release], accounts=None) -> Certificate:
    """`accounts`: the total row's figures by accountant (accountant_views.TableAccounts): the
    Notion line names the accountants whose figures it shows."""
    wide = table.total_dataset_wide
    used = {int(i) for i in np.unique(table.cells)} | {int(i) for i in np.unique(table.dataset_wide)}
    basis = basis_for([table.values[i] for i in used] + [*table.total, wide], inputs.delta, table.allowance)
    epsilon = wide.epsilon(inputs.delta, table.allowance)
    if accounts is not None:
        per_variable, whole = accounts.shown()
        basis = replace(basis, accountants=tuple(sorted({f.accountant for f in [*per_variable, whole]})))
        epsilon = whole.epsilon  # the figure `table` and the total row print (one accounting, docs/explanation/model.md#composition)
    return Certificate(
        dataset=inputs.dataset.name,
        description=inputs.dataset.description,
        variables=len(inputs.dataset.variables),
        releases=len(inputs.releases),
        charged=len(charged),
        generated_at=inputs.generated_at,
        head=chain.head,
        chain_ok=chain.ok,
        events=chain.events,
        problems=chain.problems,
        verification=chain_scope(chain),
        chain_since=chain.since,
        basis=basis,
        conversion=CONVERSION_NAME,
        delta=inputs.delta,
        epsilon=epsilon,
        rho=INF if wide.unbounded else wide.zcdp_rho(),
        notion=wide.notion,
        self_approval=inputs.dataset.self_approval,
        as_of=inputs.as_of,
        computed_seq=inputs.events[-1].seq if inputs.events else 0,
        # (--as-of a moment before any event: no head then, not today's)
        computed_head=inputs.events[-1].hash if inputs.events and inputs.events[-1].hash
        else "" if inputs.as_of is not None else chain.head,
    )


CONVERTING_ACCOUNTANTS = ("rdp",)  # accountants whose figures are converted by CKS 2020 (its Prop 12)


def with_conversion(cert: Certificate, caps: Sequence[CapEntry]) -> Certificate:
    """The certificate naming the zCDP conversion only when a figure the report shows went through
    it: the cells are not all pure (rho totals are converted: Basis.label), an accountant shown
    converts (Basis.notion: the Rényi figures), or a cap's figure is such an accountant's. A pure-only
    ledger's figures are pure sums (Tan Prop 3.4): its certificate names no conversion."""
    converted = (not cert.basis.pure or any(a in CONVERTING_ACCOUNTANTS for a in cert.basis.accountants)
                 or any(c.decided_by is not None and c.decided_by.split(",")[0] in CONVERTING_ACCOUNTANTS
                        for c in caps))
    return replace(cert, conversion=CONVERSION_NAME if converted else None)


def _headline(inputs: ReportInputs, index: LedgerIndex, objective, table: RiskTable, pairs: Pairs) -> Headline:
    return headline(index, inputs.dataset, inputs.delta, objective, table.total, table.total_dataset_wide,
                    worst_pair=_worst_pair(pairs))


def total_reasons(risk: RiskTableView, index: LedgerIndex) -> dict:
    """The total row's reasons where they are not its classification's (a keyed family's move,
    reasons.keyed_reason: the words `subset` prints for the variable, or for the whole dataset):
    `total_reasons` and `total_wide_reason` of the RiskTableView."""
    public = set(risk.public)
    found = {}
    for name, value in zip(risk.variables, risk.total):
        if is_infinite(value):
            why = reasons.keyed_reason(index, (name,), public, reasons.variable_reason(name, public))
            if why != reasons.variable_reason(name, public):
                found[name] = why
    wide = None
    if is_infinite(risk.total_dataset_wide):
        why = reasons.keyed_reason(index, risk.variables, public, risk.total_wide_why)
        wide = why if why != risk.total_wide_why else None
    return {"total_reasons": found, "total_wide_reason": wide}


def risk_table(table: RiskTable, delta: Fraction, public: Sequence[str] = (), shown=None,
               per_release: bool = True) -> RiskTableView:
    """Tan's Table 1 (risk_table.RiskTable) as epsilons at `delta`, in column blocks. `public`:
    the variables classified public; a whole-dataset ∞ that comes from them only is neutral.
    `shown`: the total row's figures as `table` prints them (accountant_views.TableAccounts.shown:
    the smallest valid figure per column); else the basic composition.
    `per_release=False` (a summarised report): the total row only, in the sparse layout, with no
    per-release rows (the complete register carries each release's cells)."""
    variables = table.variables
    public_column = np.asarray([name in public for name in variables], dtype=bool)
    infinite_ids = np.asarray([value.unbounded for value in table.values], dtype=bool)
    protected_inf = (infinite_ids[table.cells] & ~public_column).any(axis=1) if len(table.cells) else \
        np.zeros(0, dtype=bool)
    allowance = table.allowance
    epsilon_of = [value.own_epsilon(delta, allowance) for value in table.values]  # one conversion per distinct value
    total = tuple(spend.epsilon(delta, allowance) for spend in table.total)
    total_wide = table.total_dataset_wide.epsilon(delta, allowance)
    if shown is not None:
        total, total_wide = tuple(f.epsilon for f in shown[0]), shown[1].epsilon
    n_rows, n_var = table.cells.shape
    layout = "matrix" if n_rows * n_var <= MATRIX_CELL_LIMIT and per_release else "sparse"
    wide = [epsilon_of[i] for i in table.dataset_wide]
    zero_ids = np.asarray([v.is_zero for v in table.values], dtype=bool)
    releases = table.releases
    blocks = []
    for start in range(0, max(n_var, 1), BLOCK_VARIABLES):
        stop = min(start + BLOCK_VARIABLES, n_var)
        last = stop >= n_var
        rows = ()
        if layout == "matrix":
            rows = tuple(
                RiskRow(release=r.id, title=r.title, status=r.status.value,
                        values=tuple(epsilon_of[i] for i in table.cells[k, start:stop]), dataset_wide=wide[k],
                        wide_public=bool(public_column.any() and is_infinite(wide[k]) and not protected_inf[k]),
                        family=r.family)
                for k, r in enumerate(releases)
            )
        blocks.append(RiskBlock(first=start + 1, last=stop, variables=variables[start:stop], rows=rows,
                                total=total[start:stop], wide=last))
    sparse = ()
    if layout == "sparse" and per_release:
        rows, columns = np.nonzero(~zero_ids[table.cells])  # row by row, each row's columns in order
        cells = list(zip([variables[j] for j in columns.tolist()],
                         [epsilon_of[i] for i in table.cells[rows, columns].tolist()]))
        starts = np.searchsorted(rows, np.arange(n_rows + 1)).tolist()  # row k: cells[starts[k]:starts[k + 1]]
        sparse = tuple(
            SparseRow(release=r.id, title=r.title, status=r.status.value,
                      cells=tuple(cells[starts[k]:starts[k + 1]]), dataset_wide=wide[k])
            for k, r in enumerate(releases)
        )
    return RiskTableView(
        variables=variables,
        layout=layout,
        blocks=tuple(blocks),
        sparse=sparse,
        total_label=TOTAL_LABEL,
        total=total,
        total_dataset_wide=total_wide,
        releases=tuple(r.id for r in releases),
        matrix=_Matrix(table.cells, table.dataset_wide, epsilon_of),
        unprotected=tuple(v for v, t in zip(variables, total) if is_infinite(t)),
        public=tuple(public),
        # neutral only when the whole dataset is ∞ and every protected total is finite (as each row's wide_public)
        total_wide_public=bool(public) and is_infinite(total_wide)
        and not any(is_infinite(t) for v, t in zip(variables, total) if v not in public),
        rotate=names_rotated(variables),
        family_note=_family_note(releases),
    )


def names_rotated(variables) -> bool:
    """Whether the risk table prints its variable names vertically: the longest word of a header
    (`{name}`) is wider than a column of a block (HEADER_ROW_PX and what follows it)."""
    if not variables:
        return False
    room = HEADER_ROW_PX / (min(len(variables), BLOCK_VARIABLES) + 1) - HEADER_PADDING_PX
    longest = max(len(word) for name in variables for word in ("{" + name + "}").split())
    return longest * HEADER_CHARACTER_PX > room


def _family_note(releases) -> str:
    """Under the risk table: the families whose members are rows, each charged once."""
    return _named_family_note({r.family for r in releases if r.family})


def _named_family_note(names) -> str:
    families = sorted(names)
    if not families:
        return ""
    return (f"Rows marked \"family\" are members of {', '.join(families)}: releases on disjoint parts of "
            "the records, charged once in the total (the worst member, or a record moving between parts; "
            "docs/explanation/model.md#families), not added row by row.")


class _Matrix:
    """Table 1 in full, kept as value ids (risk_table.RiskTable): row k is release k's epsilon
    on each variable, then on the whole dataset."""

    def __init__(self, cells: np.ndarray, wide: np.ndarray, epsilon_of: list[Number]):
        self.ids = np.column_stack([cells, wide]) if len(cells) else np.zeros((0, cells.shape[1] + 1), dtype=int)
        self.epsilon_of = epsilon_of

    def mapped(self, function) -> np.ndarray:
        """`function` of every cell's epsilon, evaluated once per distinct value."""
        lookup = np.empty(len(self.epsilon_of), dtype=object)
        lookup[:] = [function(value) for value in self.epsilon_of]
        return lookup[self.ids]

    def __iter__(self):
        return iter(self.mapped(lambda value: value).tolist())


def risk_frame(risk: RiskTableView):
    """Tan's Table 1 as a pandas DataFrame (the CSV export): a row per charged release and
    the composed total row. Numeric cells: first a float column per variable and the
    whole-dataset column (ordinary DP), each float at or above the exact loss
    (numbers.to_json), ∞ as inf; then the same columns exact ("293764/114921", "inf"), empty
    where the figure has no exact value (a zCDP conversion: JSON's null, numbers.fraction_text)."""
    import pandas as pd

    from ..core.numbers import fraction_text as exact_text, to_json

    def upper_float(value: Number) -> float:
        number = to_json(value)
        return math.inf if number == "inf" else float(number)

    names = ["{" + name + "}" for name in risk.variables] + ["whole dataset (ordinary DP)"]
    floats = risk.matrix.mapped(upper_float)
    exact = risk.matrix.mapped(exact_text)
    total = (*risk.total, risk.total_dataset_wide)
    float_rows = np.vstack([floats, [[upper_float(v) for v in total]]]) if len(floats) else \
        np.asarray([[upper_float(v) for v in total]], dtype=object)
    exact_rows = np.vstack([exact, [[exact_text(v) for v in total]]]) if len(exact) else \
        np.asarray([[exact_text(v) for v in total]], dtype=object)
    index = pd.Index([*risk.releases, risk.total_label], name="release")
    frame = pd.concat([pd.DataFrame(float_rows.astype(float), columns=names, index=index),
                       pd.DataFrame(exact_rows, columns=[f"{name} exact" for name in names], index=index)], axis=1)
    return frame


def cap_entries(caps: Sequence[Cap], totals: Mapping[str, CapTotal], releases: Sequence[Release] | None = None,
                families: Mapping[str, Family] | None = None) -> tuple[CapEntry, ...]:
    """Every cap against the stored running totals: the pre-release check of an empty plan.
    With the charged releases, each cap's figure is the one `cap list` prints: the smallest
    valid filter figure (cap_accounting.checks_from_history)."""
    if releases is None:
        return tuple(_cap_entry(c) for c in check(list(caps), totals, [], {}, {}, only_touched=False))
    from ..operations.cap_accounting import charged_index, checks_from_history

    checks = checks_from_history(list(caps), releases, families or {}, totals)
    index = charged_index(caps, releases, families or {})  # each ∞ driver's own reason (reasons.driver_reasons)
    return tuple(_cap_entry(c, (), index) for c in checks)


def family_map_of(inputs: ReportInputs) -> dict[str, Family]:
    return {f.id: f for f in inputs.families}


def _cap_entry(c: CapCheck, public: Collection[str] = (), index: LedgerIndex | None = None) -> CapEntry:
    current_why, driver_why = cap_reasons(c, public, index)
    return CapEntry(name=c.cap.name, subset=c.cap.ordered_subset, whole_dataset=c.cap.whole_dataset,
                    unit=c.cap.unit, delta=c.cap.delta, limit=c.cap.limit, current=c.current,
                    headroom=c.headroom, status=c.status, drivers=c.drivers,
                    current_why=current_why, driver_why=driver_why,
                    # a cap at a delta is where the accountants differ (a pure or rho cap: basic sums)
                    decided_by=None if c.decision is None or c.cap.unit != "epsilon at delta"
                    else f"{c.decision.accountant}, {c.decision.case}",
                    filter=filters.short(c.cap) if c.cap.unit == "epsilon at delta" else None)


def cap_history(inputs: ReportInputs) -> tuple[CapHistoryEntry, ...]:
    """The history of every cap of the dataset that was changed or removed: a changed cap
    keeps every value it had, each an audit event (cap.set, cap.removed)."""
    from ..operations.amend import cap_text
    from ..store.codec import cap_from_dict

    prefix = inputs.dataset.name + "/"
    by_cap: dict[str, list[CapHistoryEntry]] = {}
    for event in inputs.events:
        if event.kind not in ("cap.set", "cap.removed") or not event.subject.startswith(prefix):
            continue
        name = event.subject[len(prefix):]
        data = event.data()
        earlier = by_cap.setdefault(name, [])
        if event.kind == "cap.removed":
            was = data.get("was")
            entry = CapHistoryEntry(name, event.at, event.actor, "removed",
                                    cap_text(cap_from_dict(was)) if was else "", data.get("reason"))
        else:
            action = "changed" if earlier and earlier[-1].action != "removed" else "set"
            entry = CapHistoryEntry(name, event.at, event.actor, action, cap_text(cap_from_dict(data["cap"])), None)
        earlier.append(entry)
    return tuple(entry for entries in by_cap.values() if len(entries) > 1 or entries[-1].action == "removed"
                 for entry in entries)


def _pair_figure(index: LedgerIndex, a: str, b: str, spend, delta: Fraction, public: Sequence[str]) -> PairFigure:
    """One of the highest pairs; an unbounded one with its reason in the words `subset a b` prints
    (reasons.unbounded_reason; the headline's worst pair is given its reason the same way)."""
    why = reasons.unbounded_reason(index, (a, b), public) if spend.unbounded else None
    return PairFigure(a, b, spend.epsilon(delta, index.allowance), why)


def pair_figures(index: LedgerIndex, delta: Fraction, objective, protected: Sequence[str] | None = None,
                 best: bool = False) -> Pairs:
    """Every pair of variables: exact figures for the highest pairs (and for every pair of
    a small dataset), float epsilons for the heat map's colours. With `protected` (the
    variables not classified public, docs/explanation/model.md#public-and-protected-variables), the highest pairs are pairs of protected
    variables, and `unprotected` counts those only: a public variable's ∞ is expected.
    `best`: each pair's figure is the one `pairs` prints, the smallest valid one of the basic,
    Rényi and PLD accountants (every_pair.pair_figures)."""
    variables = index.variables
    n = len(variables)
    grid = index.pair_matrix(objective)
    colour = epsilon_floats(grid, delta, index.allowance)
    if best and n >= 2:
        from ..operations.shown_figures import best_pair_grid

        grid, colour = best_pair_grid(index, delta, grid, colour)
    upper = np.triu_indices(n, k=1)
    public: tuple[str, ...] = ()
    if protected is not None and len(protected) < n:
        keep = np.isin(np.asarray(variables, dtype=object), np.asarray(list(protected), dtype=object))
        both = keep[upper[0]] & keep[upper[1]]
        upper = (upper[0][both], upper[1][both])
        public = tuple(v for v, k in zip(variables, keep) if not k)
    values = colour[upper]
    order = np.lexsort((upper[1], upper[0], -values))[:HIGHEST_PAIRS]  # largest first, ∞ first of all
    highest = tuple(_pair_figure(index, variables[upper[0][k]], variables[upper[1][k]],
                                 grid.spend(upper[0][k], upper[1][k]), delta, public) for k in order)
    matrix = None
    if n <= PAIRS_ANNOTATED:
        figures = {}
        for i in range(n):
            for j in range(i, n):
                figures[i, j] = figures[j, i] = grid.spend(i, j).epsilon(delta, index.allowance)
        matrix = tuple(tuple(figures[i, j] for j in range(n)) for i in range(n))
    pairs = Pairs(variables=variables, count=n * (n - 1) // 2, unprotected=int(np.isinf(values).sum()),
                  highest=highest, matrix=matrix, colour=colour, svg="", protected_only=bool(public), public=public)
    if matrix is not None and any(family.partition for family in index.families.values()):
        # a keyed family's move may be why a cell is ∞ (reasons.keyed_reason): the words `subset` prints
        by_classification = pairs.why
        pairs = replace(pairs, reasons=tuple(
            tuple(reasons.keyed_reason(index, {variables[i], variables[j]}, public, by_classification[i][j])
                  if is_infinite(matrix[i][j]) else by_classification[i][j] for j in range(n)) for i in range(n)))
    return pairs


def timeline_of(index: LedgerIndex, delta: Fraction, objective, now: datetime,
                public: Sequence[str] = (), caps: Sequence[Cap] = (), stamps: np.ndarray | None = None,
                final: Sequence[Number] | None = None) -> Timeline | None:
    """The loss on each variable over time, by publication date (None with no charged release).

    A release enters when it started to count (history.charged_from): its publication
    date, or the date it was planned when that came first (a reservation), so history
    recorded late is drawn when it was published. Caps in epsilon are drawn as lines.
    `stamps` (a large ledger): those moments as seconds since 1970 (nan: unknown),
    from the stored accounting rows (`charged_from_stamps`), instead of each Release's.
    `final`: the running figure per variable the risk table shows now; each point is the smaller of
    the basic composition then and it (both bound the running figure then, which only grows), so
    the line ends on the table's figure."""
    releases = index.releases
    if not releases or not index.variables:
        return None
    if stamps is not None:
        order, ends, distinct = _order_by_stamps(np.asarray(stamps, dtype=np.float64))
        times = _StampTimes(stamps)
    else:
        times = [charged_from(r) for r in releases]
        known = all(t is not None for t in times)
        order = sorted(range(len(releases)), key=lambda i: (times[i], i) if known else (0, i))
        distinct = known and len({times[i] for i in order}) > 1
        if distinct:
            # a checkpoint after the last release of each recording instant
            ends = [k + 1 for k in range(len(order))
                    if k + 1 == len(order) or times[order[k + 1]] != times[order[k]]]
        else:
            ends = list(range(1, len(order) + 1))
    envelope = len(ends) > TIMELINE_POINTS
    if envelope:
        picks = np.unique(np.linspace(0, len(ends) - 1, TIMELINE_POINTS).round().astype(int))
        ends = [ends[k] for k in picks]
    grid = index.running_totals(order, ends, objective)
    y = epsilon_floats(grid, delta, index.allowance)
    if final is not None:
        y = np.minimum(y, np.asarray([float(v) for v in final], dtype=np.float64)[None, :])
    if distinct:
        x = tuple(aware(times[order[e - 1]]) for e in ends)
        labels = ()
    else:
        x = tuple(ends)
        labels = tuple(releases[order[e - 1]].id for e in ends)
    final = y[-1]
    # protected variables first: a public variable's ∞ is expected (docs/explanation/model.md#public-and-protected-variables), drawn in grey
    ranked = sorted(range(len(index.variables)), key=lambda j: (index.variables[j] in public, -final[j], j))
    highlighted = tuple(index.variables[j] for j in ranked[:TIMELINE_LABELLED]
                        if final[j] > 0 and index.variables[j] not in public)
    lines = tuple((cap.name, float(round_down_float(cap.limit))) for cap in caps
                  if cap.rho is None and cap.limit is not None)
    return Timeline(axis="time" if distinct else "order", x=x, labels=labels, variables=index.variables, y=y,
                    envelope=envelope, highlighted=highlighted, end=aware(now), svg="", public=tuple(public),
                    caps=lines)


class _StampTimes:
    """Moments by release position, from seconds since 1970 (read only at the points drawn)."""

    def __init__(self, stamps: np.ndarray):
        self.stamps = stamps

    def __getitem__(self, i: int) -> datetime:
        return datetime.fromtimestamp(float(self.stamps[i]), UTC)


def _order_by_stamps(stamps: np.ndarray) -> tuple[list[int], list[int], bool]:
    """`timeline_of`'s order, checkpoints and whether the moments differ, over arrays: by
    moment then position when every moment is known, else by position."""
    n = len(stamps)
    known = not np.isnan(stamps).any()
    order = np.lexsort((np.arange(n), stamps)) if known else np.arange(n)
    ordered = stamps[order]
    changes = ordered[1:] != ordered[:-1]
    distinct = bool(known and changes.any())
    if distinct:  # a checkpoint after the last release of each recording instant
        ends = (np.flatnonzero(np.append(changes, True)) + 1).tolist()
    else:
        ends = list(range(1, n + 1))
    return order.tolist(), ends, distinct


def charged_from_stamps(recorded: np.ndarray, published: np.ndarray) -> np.ndarray:
    """history.charged_from over the stored times (index_figures.IndexEvents: recorded in seconds,
    -inf unknown; published in seconds, inf none, -inf datetime.min): the earlier of the two
    known moments, nan when neither is. A publication at datetime.min is the accountants' reading
    of a release recorded as published with neither moment (`published_moment`); its
    `published_at` is None, so `charged_from` knows no moment of it: unknown here too."""
    recorded = np.where(recorded == -np.inf, np.inf, recorded)
    published = np.where(published == -np.inf, np.inf, published)
    moment = np.minimum(recorded, published)
    return np.where(np.isinf(moment), np.nan, moment)


def round_down_float(value: Fraction) -> float:
    """A cap's limit as a float not above it (a cap is rounded down)."""
    result = float(value)
    return result if Fraction(result) <= value else math.nextafter(result, -math.inf)


def register_entry(release: Release, families: Sequence[Family], cells=(), dataset_wide=None,
                   **steps) -> RegisterEntry:
    """One release of the register; `steps`: its later lifecycle (lifecycle_steps: published_by,
    ended), given here rather than by `dataclasses.replace`, which cost a fifth of a large register."""
    family = None if release.family is None else next((f for f in families if f.id == release.family), None)
    split = ""
    if family is not None:
        split = "random split" if family.partition is None else "partition by " + ", ".join(sorted(family.partition))
    return RegisterEntry(
        id=release.id,
        title=release.title,
        status=release.status.value,
        charged=release.status in CHARGED_STATUSES,
        recorded_at=aware(release.recorded_at),
        recorded_by=release.recorded_by,
        approved_at=aware(release.approved_at),
        approved_by=release.approved_by,
        published_at=aware(release.published_at),
        reads=tuple(sorted(release.reads)),
        exact=tuple(sorted(release.exact_variables)),
        mechanism=release.mechanism.name,
        parameters=tuple(release.mechanism.params),
        guarantees=tuple(guarantee_text_of(g) for g in release.guarantees),
        family=release.family,
        family_split=split,
        part=release.part,
        derived_from=tuple(release.derived_from),
        output_digest=getattr(release, "output_digest", None),
        pufferfish=tuple(PUFFERFISH_KINDS.get(g.kind, g.kind) for g in getattr(release, "pufferfish", ()) or ()),
        cells=tuple(cells),
        dataset_wide=dataset_wide,
        **steps,
    )


def guarantee_text_of(g: Guarantee) -> GuaranteeText:
    """A guarantee as the report's register shows it (`GuaranteeText`: its exact numbers kept)."""
    # no cache: a key holds what the guarantee protects, which differs from release to release
    # (the cache missed on nearly every one), and hashing its exact Fractions cost more than
    # this dataclass does
    return GuaranteeText(protects=tuple(sorted(g.protects)), notion=g.notion.value, epsilon=g.epsilon,
                         delta=g.delta, rho=g.rho, relation=g.relation.value)


def pufferfish_entries(releases: Sequence[Release]) -> tuple[PufferfishEntry, ...]:
    """The Pufferfish-family guarantees recorded with releases."""
    return tuple(pufferfish_entry(release.id, guarantee)
                 for release in releases for guarantee in getattr(release, "pufferfish", ()) or ())


def pufferfish_entry(release: str, guarantee) -> PufferfishEntry:
    """From a recorded Pufferfish guarantee (kind, protects, secrets, assumptions,
    epsilon, delta, parameters)."""
    return PufferfishEntry(
        kind=guarantee.kind,
        release=release,
        protects=tuple(sorted(guarantee.protects)),
        secrets=guarantee.secrets,
        assumptions=guarantee.assumptions,
        epsilon=getattr(guarantee, "epsilon", None),
        delta=getattr(guarantee, "delta", None),
        parameters=tuple(getattr(guarantee, "parameters", ()) or ()),
    )


def from_p_percent(release: str, guarantee) -> PufferfishEntry:
    """From ledger.mechanisms.ppercent.PPercentGuarantee (Bailie 2020)."""
    return PufferfishEntry(
        kind="p-percent", release=release, protects=tuple(guarantee.linked_variables),
        secrets=guarantee.secrets, assumptions=guarantee.assumption, epsilon=guarantee.epsilon, delta=None,
        parameters=(("p", guarantee.p), ("laplace_scale", guarantee.laplace_scale),
                    ("contributor", guarantee.contributor),
                    ("protected_contributors", guarantee.protected_contributors),
                    ("discriminative pairs", guarantee.pairs)),
    )


def from_attribute_privacy(release: str, guarantee) -> PufferfishEntry:
    """From ledger.mechanisms.attribute.AttributePrivacyGuarantee (Zhang et al., Def. 3)."""
    return PufferfishEntry(
        kind=guarantee.notion, release=release, protects=tuple(guarantee.secrets),
        secrets="the mean of each of " + ", ".join(guarantee.secrets), assumptions=guarantee.assumption,
        epsilon=guarantee.epsilon, delta=guarantee.delta,
        parameters=(("query", guarantee.query), ("sigma2", guarantee.sigma2), ("n", guarantee.n)),
    )


def audit_trail(inputs: ReportInputs, chain: ChainStatus) -> AuditTrail:
    events = dataset_events(inputs)
    listed = events[-AUDIT_EVENTS_LISTED:]
    return AuditTrail(
        ok=chain.ok,
        head=chain.head,
        chain_events=chain.events,
        problems=chain.problems,
        events=len(events),
        first_at=events[0].at if events else None,
        last_at=events[-1].at if events else None,
        by_kind=tuple(sorted(Counter(e.kind for e in events).items())),
        by_actor=tuple(sorted(Counter(e.actor for e in events).items())),
        listed=tuple(AuditEntry(e.seq, e.at, e.actor, e.kind, e.subject, audit_note(e)) for e in listed),
        omitted=len(events) - len(listed),
    )


def audit_note(event: AuditEvent) -> str | None:
    """The note the audit trail shows beside an event: a retraction's or cancellation's reason, the
    role a role event names, a dataset change in words; None for the others."""
    if event.kind in ("release.retracted", "release.cancelled"):
        return event.data().get("reason")
    if event.kind.startswith("role."):
        return (event.data().get("role") or {}).get("role")
    if event.kind.startswith(DATASET_CHANGE_KINDS):
        return change_note(event.data().get("change") or {})
    return None


# --------------------------------------------------------------------------
# Epsilon over arrays, for colours and curves only
# --------------------------------------------------------------------------


def cks_floats(rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """cks_conversion.cks_floats (where `pairs` uses it too)."""
    from ..accounting.cks_conversion import cks_floats as over_arrays

    return over_arrays(rho, delta)
