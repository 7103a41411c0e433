"""The certificate-style header of a report: the dataset, the audit chain's state and what its
verification covered, the notion and the conversion its figures went through.

Invariant: the conversion is named exactly when a figure the report shows went through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from fractions import Fraction

from ..accounting.risk_table import RiskTable
from ..accounting.spend import CONVERSION_NAME
from ..core.lazy import lazy_module
from ..core.numbers import INF, Number
from ..core.records import Release
from ..operations.report_inputs import ChainStatus, ReportInputs
from ..operations.table_view import Basis, basis_for
from .cap_section import CapEntry
from ..operations.headline import Headline
from .views import when_text

np = lazy_module("numpy")  # imported on first use: recording never needs it


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


def certificate(inputs: ReportInputs, chain: ChainStatus, table: RiskTable,
                charged: Sequence[Release], accounts=None) -> Certificate:
    """`accounts`: the total row's figures by accountant (shown_figures.TableAccounts): the
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
