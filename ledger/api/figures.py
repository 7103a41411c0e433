"""The figures through the façade: a subset's loss, Tan's Table 1, the pairs, the caps with their
spend and headroom. One function answers each question; every reader prints what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from datetime import datetime
from fractions import Fraction
from typing import TYPE_CHECKING

from ..accounting import budget
from ..accounting.charge_choice import at_delta
from ..core.errors import fail
from ..core.numbers import safe_float
from ..operations import choices, transactions as operations
from ..operations.read_cache import kept
from ..operations.table_view import TableFigures, table_figures
from ..store import configuration
from ..store.sessions import Session

from .moments import as_of_moment
from .reading import Reading
from .values import SubsetLoss, exact_fraction

if TYPE_CHECKING:
    import pandas as pd


ACCOUNTANTS = ("basic", "rdp", "pld")


def _check_accountant(accountant: str | None, allowed: Sequence[str]) -> None:
    if accountant is not None and accountant not in allowed:
        raise fail("argument", "accountant", f"must be one of {', '.join(allowed)}, found {accountant!r}")


def _names(variables: Iterable[str]) -> list[str]:
    return [variables] if isinstance(variables, str) else list(variables)


class Figures(Reading):
    """`Ledger`'s figures."""

    @kept
    def caps(self, dataset: str | None = None, *, as_of: str | datetime | None = None) -> list[budget.CapCheck]:
        """Every cap of the dataset, its spend (reservations included), headroom and status: the
        figures `cap list` prints; `as_of`: the caps set then, as they stood (`cap list --as-of`)."""
        chosen = choices.pick_dataset(self._light(), dataset, field="dataset")
        when = as_of_moment(as_of)
        with Session(self.engine) as session:
            if when is None:
                return operations.cap_checks(session, chosen.name, configuration.caps(session, chosen.name))
            from ..store.as_of import state_then

            _, caps, _ = state_then(session, chosen, when)
            return operations.cap_checks_as_of(session, chosen.name, caps, when)

    def headroom(self, variables: Iterable[str], *, dataset: str | None = None, delta: object = None,
                 mechanism: str = "any") -> budget.Headroom:
        """The largest epsilon (and rho) a new release reading exactly these variables could take:
        the figures `headroom` prints (`mechanism`: any, laplace or gaussian; `delta`: the rho
        headroom's epsilon is stated at it, the dataset's by default)."""
        from ..operations.cap_accounting import HEADROOM_MECHANISMS

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
        from ..operations.reasons import unbounded_reason
        from ..operations.shown_figures import subset_accountants

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
            dataset=chosen.name, variables=cost.subset, epsilon=safe_float(epsilon), exact=exact_fraction(epsilon),
            delta=None if spend.unbounded or shown.delta is None else chosen_delta, rho=spend.zcdp_rho(),
            notion=spend.notion, releases=cost.releases, accountant=shown.accountant, case=shown.case,
            accountants=found, reason=reason)

    @contextmanager
    def table_reading(self, dataset: str | None = None, delta: object = None, *, accountant: str | None = None,
                      as_of: str | datetime | None = None, rows: int | None = None, cells: int = 0,
                      pld: bool = False, headline: bool = True, fields: tuple[str, str] = ("dataset", "delta")):
        """(`table_figures`' answer, the index of the charged releases it was computed from), the
        store open inside the block: for a reader that writes every release row a chunk at a time
        (`table --json` past a million cells)."""
        _check_accountant(accountant, ACCOUNTANTS)
        with self.index_rows(dataset, as_of=as_of_moment(as_of), field=fields[0]) as (chosen, index):
            chosen_delta = choices.parse_delta(delta, chosen, field=fields[1])
            over = len(index.releases) * max(len(index.variables), 1) > cells
            yield table_figures(index, chosen, chosen_delta, accountant=accountant, rows=rows if over else None,
                                pld=pld, headline=headline), index

    def table_figures(self, dataset: str | None = None, delta: object = None, *, accountant: str | None = None,
                      as_of: str | datetime | None = None, rows: int | None = None, cells: int = 0,
                      pld: bool = False, headline: bool = True) -> TableFigures:
        """Tan's Table 1 as every reader shows it (operations/table_view.TableFigures): the view,
        the total row by accountant and the one shown (the smallest valid figure per column, or
        `accountant`'s), the headline (`headline=False`: not computed), how many releases the total
        row is over, and whether the rows are limited. `rows`: only the `rows` largest release rows
        on the whole dataset (in recording order) when the table has more than `cells` cells
        (releases x variables); every row when None. `pld`: the PLD figures too (information
        only). `as_of`: as `table --as-of`. The same computation at any size, from the accounting rows."""
        with self.table_reading(dataset, delta, accountant=accountant, as_of=as_of, rows=rows, cells=cells, pld=pld,
                                headline=headline) as (found, _):
            return found

    @kept
    def table(self, dataset: str | None = None, delta: object = None, *, whole_dataset: bool = False,
              accountant: str | None = None, as_of: str | datetime | None = None,
              releases: bool = True, rows: int | None = None, cells: int = 0) -> pd.DataFrame:
        """Tan's Table 1: one row per charged release plus the total row ("All releases"),
        one column per variable (epsilon at the dataset's delta, safe floats, inf when
        unbounded); `whole_dataset=True` adds the whole-dataset column. The total row is the
        one `table` prints: per column the smallest valid figure (or `accountant`'s).
        `df.attrs` holds the dataset, the delta, the basis the figures are stated on, the
        accountant of each total and each release row's status. `as_of`: as `table --as-of`.
        `releases=False`: the total row alone (no release row made, `statuses` empty), the
        same figures for a reader that shows only the totals. `rows`, `cells`: as `table_figures`,
        only the `rows` largest release rows of a table over `cells` cells (`attrs["releases"]`: how
        many charged releases the total row is over). `table_figures` formatted as a DataFrame."""
        import numpy as np
        import pandas as pd

        found = self.table_figures(dataset, delta, accountant=accountant, as_of=as_of,
                                   rows=rows if releases else 0, cells=cells if releases else 0, headline=False)
        view = found.shown
        per_variable, wide = found.accounts.shown()
        columns = [*view.variables, "whole dataset"]
        total = np.array([[safe_float(v) for v in (*view.total, view.total_dataset_wide)]], dtype=np.float64)
        # (each distinct figure converted once; the rows take them by the view's value ids)
        body = (np.array([safe_float(v) for v in view.value_figures], dtype=np.float64)[view.cell_ids]
                if view.rows else np.zeros((0, len(columns))))
        frame = pd.DataFrame(np.vstack([body, total]), columns=columns,
                             index=pd.Index([row.release for row in view.rows] + ["All releases"], name="release"))
        if not whole_dataset:
            frame = frame.drop(columns="whole dataset")
        frame.attrs.update(dataset=found.dataset.name, delta=None if view.basis.pure else found.delta,
                           basis=view.basis.label, statuses={row.release: row.status for row in view.rows},
                           releases=found.releases,
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

        from ..operations.shown_figures import pair_accountants

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

        from ..accounting.worst_pair import BOUNDED, worst_pair
        from ..operations.shown_figures import choose

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
