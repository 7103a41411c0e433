"""The table view: Tan's Table 1 with the whole-dataset column, as epsilons on one stated basis.

Computed here, below the API, so that the façade (ledger.api), the command line and the reports
show one table: each cell a release's own charge, the total row composed over every charged
release, each figure an epsilon at a stated delta with the conversion named (`Basis`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from fractions import Fraction
from typing import TYPE_CHECKING

from ..accounting.spend import ALLOWANCE, CONVERSION_NAME, Spend, allowance_words
from ..accounting.risk_table import RiskTable
from ..core.numbers import Number, figure_fields, format_delta, fraction_text, to_json
from ..core.lazy import lazy_module
from ..core.records import Dataset

if TYPE_CHECKING:
    from .headline import Headline
    from .shown_figures import TableAccounts

np = lazy_module("numpy")


@dataclass(frozen=True)
class Basis:
    """How a figure is stated: pure epsilon, or epsilon at `delta` by `conversion`."""

    pure: bool
    delta: Fraction
    accountants: tuple[str, ...] = ()  # the accountants whose figures the total row shows
    allowance: Fraction = ALLOWANCE  # the dataset's (Dataset.allowance)

    @property
    def notion(self) -> str:
        """The report's Notion line: the basis, and the accountants that decided the printed figures
        (the total row and the headline take the smallest valid figure per subset, docs/explanation/accounting.md)."""
        used = [name for name in ACCOUNTANT_WORDS if name in self.accountants]
        if not used or used == ["basic"]:
            return self.label
        return (f"epsilon at delta = {format_delta(self.delta)} where a figure at delta is the smallest valid "
                f"one (pure epsilon otherwise); the total row and the headline show, per subset, the smallest "
                f"valid figure of: " + "; ".join(ACCOUNTANT_WORDS[name] for name in used)
                + ". Each release's own cells are the same statement for that release alone")

    @property
    def label(self) -> str:
        if self.pure:
            return "pure epsilon (every charged guarantee is pure; Tan Prop 3.4 composition)"
        return (f"epsilon at delta = {format_delta(self.delta)}, valid under full adaptivity: approximate "
                f"deltas drawn from its allowance ({allowance_words(self.allowance)}), the rest by the "
                f"{CONVERSION_NAME}")

    def json_delta(self) -> object:
        return None if self.pure else to_json(self.delta)


ACCOUNTANT_WORDS = {
    "basic": "basic composition (Tan Prop 3.4; zCDP by Canonne, Kamath and Steinke 2020)",
    "rdp": "the Rényi DP accountant (Mironov 2017; converted by Canonne, Kamath and Steinke 2020, Prop 12)",
    "pld": "the privacy-loss-distribution accountant (dp_accounting, pessimistic; information only: the "
           "figure had the whole plan been fixed in advance)",
}


def basis_for(spends, delta: Fraction, allowance: Fraction = ALLOWANCE) -> Basis:
    return Basis(pure=all(s.is_pure or s.unbounded for s in spends), delta=delta, allowance=allowance)


@dataclass(frozen=True)
class TableRow:
    release: str
    title: str
    status: str
    values: tuple[Number, ...]  # one per variable
    dataset_wide: Number


@dataclass(frozen=True)
class TableView:
    """Tan's Table 1 with the whole-dataset column, as epsilons on one basis."""

    dataset: str
    variables: tuple[str, ...]
    rows: tuple[TableRow, ...]
    total: tuple[Number, ...]
    total_dataset_wide: Number
    basis: Basis
    converted: bool = False  # a figure shown went through the zCDP conversion (a rho in it)
    # the rows' figures as an array: row k's values and whole-dataset figure are
    # value_figures[cell_ids[k]], for a reader that takes the whole matrix at once (a DataFrame)
    value_figures: tuple[Number, ...] = field(default=(), compare=False, repr=False)
    cell_ids: Any = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict:
        def values(numbers):
            return {name: to_json(value) for name, value in zip(self.variables, numbers)}

        def exact(numbers):
            return {name: fraction_text(value) for name, value in zip(self.variables, numbers)}

        return {
            "dataset": self.dataset,
            "notion": "pure epsilon" if self.basis.pure else "epsilon at delta",
            **figure_fields("delta", None if self.basis.pure else self.basis.delta),
            "conversion": CONVERSION_NAME if self.converted else None,
            "variables": list(self.variables),
            "rows": [
                {"release": row.release, "title": row.title, "status": row.status, "values": values(row.values),
                 "exact": exact(row.values), **figure_fields("dataset_wide", row.dataset_wide)}
                for row in self.rows
            ],
            "total": {"values": values(self.total), "exact": exact(self.total),
                      **figure_fields("dataset_wide", self.total_dataset_wide)},
        }


def converts(spends: Sequence[Spend]) -> bool:
    """Whether a figure of these went through the zCDP conversion: only a rho does (Spend.epsilon,
    own_epsilon); pure and (epsilon, delta) figures are sums (Tan Prop 3.4; basic composition)."""
    return any(s.rho and not s.unbounded for s in spends)


def table_view(table: RiskTable, delta: Fraction, rows: Sequence[int] | None = None) -> TableView:
    """The view of a RiskTable; `rows` (indices into its releases) limits the release rows shown
    (the total row is always over every release)."""
    spends = [*table.values, *table.total, table.total_dataset_wide]
    used = set(np.unique(table.cells).tolist()) | set(np.unique(table.dataset_wide).tolist())
    basis = basis_for([table.values[i] for i in used] + spends[len(table.values):], delta, table.allowance)
    converted = converts([table.values[i] for i in used] + spends[len(table.values):])
    shown = range(len(table.releases)) if rows is None else rows
    value_epsilon = [v.own_epsilon(delta, table.allowance) for v in table.values]  # (each a release's own charge)
    epsilon_of = value_epsilon.__getitem__
    picked = list(shown)
    ids = np.column_stack([table.cells[picked], np.asarray(table.dataset_wide)[picked]]) if picked else None
    cells = table.cells[picked].tolist() if picked else []  # (Python ints: a row is one map, not a loop)
    wide = np.asarray(table.dataset_wide)[picked].tolist() if picked else []
    rows = tuple(
        TableRow(
            release=release.id,
            title=release.title,
            status=release.status.value,
            values=tuple(map(epsilon_of, cells[k])),
            dataset_wide=value_epsilon[wide[k]],
        )
        for k, release in enumerate(table.releases[r] for r in picked)
    )
    return TableView(
        dataset=table.dataset,
        variables=table.variables,
        rows=rows,
        total=tuple(s.epsilon(delta, table.allowance) for s in table.total),
        total_dataset_wide=table.total_dataset_wide.epsilon(delta, table.allowance),
        basis=basis,
        converted=converted,
        value_figures=tuple(value_epsilon),
        cell_ids=ids,
    )


@dataclass(frozen=True)
class TableFigures:
    """Tan's Table 1 as every reader shows it (`table_figures`): `view` with the total row as
    composed (`shown`: with the accountants' choice in it), `accounts` the total row's figures by
    accountant, `headline` (None when not asked for), `releases` the charged releases the total
    row is over, `limited` whether `view` lists fewer rows than that; `table` the RiskTable of
    the rows kept (its total row over every release)."""

    dataset: Dataset
    delta: Fraction
    table: RiskTable
    view: TableView
    accounts: TableAccounts
    headline: Headline | None
    releases: int
    limited: bool

    @property
    def shown(self) -> TableView:
        return self.accounts.apply(self.view)


def table_figures(index, dataset: Dataset, delta: Fraction, *, accountant: str | None = None,
                  rows: int | None = None, pld: bool = False, headline: bool = True) -> TableFigures:
    """Table 1 of `index` (the dataset's charged releases): the total row over every release, the
    `rows` largest release rows on the whole dataset in recording order (every row: None), each
    accountant's total (basic and rdp; the PLD, information only, with `pld` or asked for as
    `accountant`) and the headline with the figures `subset` and `pairs` print. One computation
    at any size, a chunk of releases at a time (accounting/chunked_table.large_table)."""
    from ..accounting.charge_choice import at_delta
    from ..accounting.chunked_table import large_table
    from . import headline as headlines
    from .shown_figures import TableAccounts

    n_rel = len(index.releases)
    kept = n_rel if rows is None else min(rows, n_rel)
    wanted = ["basic", "rdp"] + (["pld"] if pld or accountant == "pld" else [])
    objective = at_delta(delta, dataset.allowance)  # (the adversary picks a release's choice by the dataset's allowance)
    risk, per_variable, wide = large_table(index, dataset.name, objective, delta, kept, wanted)
    accounts = TableAccounts(risk.variables, per_variable, wide, accountant)
    head = None
    if headline:
        head = headlines.headline(index, dataset, delta, objective, risk.total, risk.total_dataset_wide)
        head = headlines.best_headline(head, index, delta, accounts)  # (the figures `subset` and `pairs` print)
    return TableFigures(dataset=dataset, delta=delta, table=risk, view=table_view(risk, delta), accounts=accounts,
                        headline=head, releases=n_rel, limited=kept < n_rel)
