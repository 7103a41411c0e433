"""What the CLI shows of the three accountants (ledger/accounting/accountants.py): the figure chosen for
a subset or a total row, with its accountant, case, theorem, conversion and delta.

Only formatting and choosing; every number is computed by `accountants`. The figure shown
by default is the smallest *valid* one (docs/explanation/accounting.md); `--accountant NAME` shows one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from ..accounting import every_pair, figure_validity, index_figures
from ..accounting.figure_validity import Figure
from ..core.numbers import format_delta, format_number, to_json
from ..accounting.grid_figures import epsilon_floats


def choose(found: dict[str, Figure], accountant: str | None) -> Figure:
    """The accountant asked for, else the smallest valid figure."""
    if accountant is not None:
        return found[accountant]
    return figure_validity.best(found)


def figure_line(figure: Figure) -> str:
    """`epsilon 4.9842 at delta 1 × 10⁻⁶ (rdp: ...conversion...)`."""
    if figure.delta is None:
        return f"epsilon {format_number(figure.epsilon)} (pure)"
    text = f"epsilon {format_number(figure.epsilon)} at delta {format_delta(figure.delta)}"
    if figure.conversion:
        text += f" ({figure.accountant}: {figure.conversion})"
    if not figure.available:
        text += f" [not available: {figure.note}]"
    elif not figure.valid:
        text += " [not valid: the releases may have been chosen adaptively]"
    return text


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


def table_accountants(index, table, delta: Fraction, accountant: str | None, every: bool = False) -> TableAccounts:
    """The total row by accountant: basic and rdp always, pld when asked (or for JSON). The
    default text shows the smallest valid figure, never the PLD (information only), so it
    composes none (a figure marked not computed stands in its place)."""
    wanted = ["basic", "rdp", "pld"]
    per_variable, wide = index_figures.table_figures(index, table, delta, wanted,
                                                   invalid_pld=every or accountant == "pld")
    return TableAccounts(table.variables, per_variable, wide, accountant)


def table_totals_line(accounts: TableAccounts) -> str:
    per_variable, wide = accounts.shown()
    used = sorted({f.accountant for f in [*per_variable, wide]})
    cases = sorted({f.case for f in [*per_variable, wide]})
    return ("All releases row: " + ("accountant " + accounts.accountant if accounts.accountant else
                                    "the smallest valid figure per column")
            + f" ({', '.join(used)}; {', '.join(cases)})")


def pair_accountants(index, delta: Fraction, accountant: str | None = None, grid=None
                     ) -> dict[tuple[str, str], tuple[dict[str, Figure], Figure]]:
    """Every pair (in `LedgerIndex.pairs()` order): its basic, rdp and pld figures and the one to
    show (the asked accountant, else the smallest valid one; accountants.pair_figures). Asked for
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
    figure kept unless rdp is smaller by more than PURE_PREFERENCE (as `accountants.best`). The
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


def best_headline(head, index, delta: Fraction, accounts: TableAccounts, pairs=None, grid=None):
    """The headline with the figures `subset` and `table` print: the protected subset's smallest
    valid figure, the worst variable by the total row shown, the worst protected pair by the
    figures `pairs` prints (from the report's pairs panel when given), the whole dataset's."""
    import numpy as np

    from ..accounting.charge_choice import at_delta
    from ..core.numbers import is_infinite

    per_variable, wide = accounts.shown()
    loss = {name: f.epsilon for name, f in zip(accounts.variables, per_variable)}
    changes = {"dataset_wide": wide.epsilon,
               "public_losses": tuple((name, loss[name]) for name, _ in head.public_losses)}
    chosen = accounts.accountant  # `--accountant NAME`: every figure of the headline is that accountant's
    if head.protected:
        spend = index.subset_spend(frozenset(head.protected), at_delta(delta))  # (its releases are not listed)
        if not spend.unbounded:
            changes["epsilon"] = choose(index_figures.subset_figures(index, head.protected, delta, spend,
                                                                   invalid_pld=chosen == "pld"), chosen).epsilon
        column = {name: k for k, name in enumerate(accounts.variables)}
        worst = max(head.protected, key=lambda name: (float(loss[name]), -column[name]))
        changes["worst_variable"] = (worst, loss[worst])
    if head.worst_pair is not None and not is_infinite(head.worst_pair[2]):
        if pairs is not None and pairs.protected_only and pairs.highest:
            top = pairs.highest[0]
            changes["worst_pair"] = (top.a, top.b, top.epsilon)
        elif pairs is not None and pairs.highest and len(head.protected) == len(accounts.variables):
            top = pairs.highest[0]
            changes["worst_pair"] = (top.a, top.b, top.epsilon)
        else:

            if grid is None:
                grid = index.pair_matrix(at_delta(delta))
            rdp = every_pair.pair_rdp(index, delta, grid, pld_limit=0)  # (the PLD is never shown)
            shown = shown_pair_floats(grid, rdp, epsilon_floats(grid, delta, index.allowance))
            names = list(index.variables)
            ids = np.asarray([names.index(name) for name in head.protected])
            sub = shown[np.ix_(ids, ids)]
            upper = np.triu_indices(len(ids), k=1)
            best = int(np.argmax(sub[upper]))  # the first of the largest, in dataset order
            i, j = int(ids[upper[0][best]]), int(ids[upper[1][best]])
            figure = ShownPairs(index, delta, grid, rdp).figure(i, j)
            changes["worst_pair"] = (names[i], names[j], figure.epsilon)
    if chosen is not None and changes.get("worst_pair", head.worst_pair) is not None:
        a, b, value = changes.get("worst_pair", head.worst_pair)
        if not is_infinite(value):  # the pair's figure by the accountant asked for, as `subset A B --accountant`
            pair_spend = index.subset_spend(frozenset((a, b)), at_delta(delta))
            changes["worst_pair"] = (a, b, choose(index_figures.subset_figures(
                index, (a, b), delta, pair_spend, invalid_pld=chosen == "pld"), chosen).epsilon)
    if head.protected and not is_infinite(changes.get("epsilon", head.epsilon)):
        from ..accounting.risk import figure_risks, short_sentence

        stated = None if spend.is_pure else delta  # (a pure figure holds at delta 0)
        changes["in_words"] = short_sentence(figure_risks(float(changes.get("epsilon", head.epsilon)), stated))
    from .headline import with_reasons

    return with_reasons(replace(head, **changes), index)
