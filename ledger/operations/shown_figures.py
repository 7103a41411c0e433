"""The figure shown of the three accountants (ledger/accounting/index_figures.py, every_pair.py): the one chosen for
a subset, a total row or a pair, with its accountant, case, theorem, conversion and delta.

Only choosing; every number is computed by `accountants`; the API, the command line and the
reports all show the figure chosen here. The figure shown
by default is the smallest *valid* one (docs/explanation/accounting.md); `--accountant NAME` shows one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from ..accounting import every_pair, figure_validity, index_figures
from ..accounting.figure_validity import Figure
from ..core.numbers import to_json


def choose(found: dict[str, Figure], accountant: str | None) -> Figure:
    """The accountant asked for, else the smallest valid figure."""
    if accountant is not None:
        return found[accountant]
    return figure_validity.best(found)


def subset_accountants(index, cost, delta: Fraction, accountant: str | None, every: bool = True):
    """Every accountant's figure for a subset and the one to show. `every=False` (the default
    text of `subset`): a PLD figure that is not valid here is not computed (it cannot be the
    one shown), unless `--accountant pld` asks for it."""
    found = index_figures.subset_figures(index, cost.subset, delta, cost.spend,
                                         invalid_pld=every or accountant == "pld")
    return found, choose(found, accountant)


@dataclass(frozen=True)
class TableAccounts:
    variables: tuple[str, ...]
    per_variable: list[dict[str, Figure]]
    dataset_wide: dict[str, Figure]
    accountant: str | None

    def shown(self) -> tuple[list[Figure], Figure]:
        return ([choose(found, self.accountant) for found in self.per_variable],
                choose(self.dataset_wide, self.accountant))

    def apply(self, view):
        """The table view with its total row from the chosen figures."""
        per_variable, wide = self.shown()
        return replace(view, total=tuple(f.epsilon for f in per_variable), total_dataset_wide=wide.epsilon)

    def to_json(self) -> dict:
        per_variable, wide = self.shown()
        names = list(self.per_variable[0]) if self.per_variable else list(self.dataset_wide)
        return {
            "total_shown": {
                "values": {name: to_json(f.epsilon) for name, f in zip(self.variables, per_variable)},
                "accountants": {name: f.accountant for name, f in zip(self.variables, per_variable)},
                "dataset_wide": to_json(wide.epsilon), "dataset_wide_accountant": wide.accountant,
            },
            "accountants": {
                accountant: {
                    "values": {name: found[accountant].to_json() for name, found in zip(self.variables,
                                                                                         self.per_variable)},
                    "dataset_wide": self.dataset_wide[accountant].to_json(),
                }
                for accountant in names
            },
        }


def pair_accountants(index, delta: Fraction, accountant: str | None = None, grid=None
                     ) -> dict[tuple[str, str], tuple[dict[str, Figure], Figure]]:
    """Every pair (in `LedgerIndex.pairs()` order): its basic, rdp and pld figures and the one to
    show (the asked accountant, else the smallest valid one; every_pair.pair_figures). Asked for
    pld, every pair's PLD figure is composed (no PAIR_PLD_LIMIT: the steward asked for
    exactly that figure, and it costs a PLD composition per distinct pair)."""
    limit = None if accountant == "pld" else 0  # (information only: composed when asked for)
    found = every_pair.pair_figures(index, delta, grid, pld_limit=limit)
    names = index.variables
    return {(names[i], names[j]): (figures, choose(figures, accountant)) for (i, j), figures in found.items()}


class _Shown:
    """A chosen figure where the report expects a Spend (`.epsilon(delta)`, `.unbounded`: the
    pair left without a certified bound, as `pair_rdp` has it)."""

    def __init__(self, value, unbounded: bool = False):
        self.value = value
        self.unbounded = unbounded

    def epsilon(self, delta, allowance=None):
        return self.value


def shown_pair_floats(grid, rdp, basic_floats):
    """Per pair, the float of the figure `pairs` shows: the smaller of basic and rdp, a pure basic
    figure kept unless rdp is smaller by more than PURE_PREFERENCE (as `figure_validity.best`). The
    PLD, information only, is never the figure shown (docs/explanation/accounting.md)."""
    import numpy as np

    fields = grid.floats()
    pure = (fields["approx_epsilon"] == 0) & (fields["approx_delta"] == 0) & (fields["rho"] == 0)
    basic = np.asarray(basic_floats, dtype=np.float64)
    tighter = rdp.epsilon
    keep_basic = pure & (tighter >= basic * (1 - figure_validity.PURE_PREFERENCE))
    return np.where(keep_basic, basic, np.minimum(basic, tighter))


class ShownPairs:
    """The report's pair grid with each cell the figure `pairs` prints (`spend(i, j).epsilon(delta)`),
    each exact figure made when asked (the highest pairs, the matrix of a small dataset)."""

    def __init__(self, index, delta: Fraction, grid, rdp):
        self.index, self.delta, self.grid, self.rdp = index, delta, grid, rdp

    def figure(self, i: int, j: int) -> Figure:
        return figure_validity.best(every_pair.pair_figure(self.index, self.delta, self.grid, self.rdp, int(i), int(j)))

    def spend(self, i: int, j: int) -> _Shown:
        unbounded = self.rdp.unbounded  # (pair_rdp's: the grid's unbounded pairs and the families')
        return _Shown(self.figure(i, j).epsilon, bool(unbounded[i, j]) if unbounded is not None
                      else self.grid.spend(i, j).unbounded)


def best_pair_grid(index, delta: Fraction, grid, colour):
    """The pair grid and its colours with every cell (diagonal included) the smallest valid
    figure of basic and rdp, as `pairs` and `subset A B` print them (rdp over arrays). No PLD
    figure is composed: it is information only, never the one shown."""
    rdp = every_pair.pair_rdp(index, delta, grid, pld_limit=0)
    return ShownPairs(index, delta, grid, rdp), shown_pair_floats(grid, rdp, colour)
