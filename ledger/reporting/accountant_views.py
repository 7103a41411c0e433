"""What the CLI and the report show of the three accountants: the chosen figure as a line of text
and the total row's note.

The figures are chosen below the API (operations/shown_figures.py, operations/headline.py); here
they are only put in words.
"""

from __future__ import annotations

from ..accounting.figure_validity import Figure
from ..core.numbers import format_delta, format_number
from ..operations.shown_figures import TableAccounts


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
