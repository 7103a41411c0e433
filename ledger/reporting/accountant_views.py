"""What the CLI and the report show of the three accountants: the chosen figure as a line of text, the
total row's note, and the report's headline with the figures `subset`, `table` and `pairs` print.

The figures are chosen below the API (operations/shown_figures.py); here they are only put in words.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..accounting import every_pair, index_figures
from ..accounting.figure_validity import Figure
from ..accounting.grid_figures import epsilon_floats
from ..core.numbers import format_delta, format_number
from ..operations.shown_figures import ShownPairs, TableAccounts, choose, shown_pair_floats


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


def table_totals_line(accounts: TableAccounts) -> str:
    per_variable, wide = accounts.shown()
    used = sorted({f.accountant for f in [*per_variable, wide]})
    cases = sorted({f.case for f in [*per_variable, wide]})
    return ("All releases row: " + ("accountant " + accounts.accountant if accounts.accountant else
                                    "the smallest valid figure per column")
            + f" ({', '.join(used)}; {', '.join(cases)})")


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
