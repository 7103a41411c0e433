"""What the pages show of the façade's answers: figures as the command line prints them, and the
few summaries a page needs (the worst variable, the worst pair, the table's rows sorted and filtered).
Nothing here computes a loss: every number comes from `ledger.api`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from fractions import Fraction
from typing import Any

from ..core.numbers import format_delta, format_number

STATUSES = ("planned", "approved", "published", "retracted", "cancelled")
PAGE_ROWS = 100  # releases on one page of the table: a ledger of thousands stays a page a browser opens


def figure(value) -> str:
    """A loss as the command line prints it (rounded up; ∞ when unbounded)."""
    if value is None:
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return format_number(value)


def headroom_text(value) -> str:
    """A headroom, rounded down as `cap list` prints it."""
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return format_number(value, down=True)


def delta_text(value: Fraction | None) -> str:
    return "" if value is None else format_delta(value)


@dataclass(frozen=True)
class TableView:
    """Tan's Table 1 as a page shows it: rows (release id, its status, its figures), the total row,
    and the sort and filter that chose the rows."""

    variables: tuple[str, ...]
    rows: tuple[tuple[str, str, tuple[float, ...]], ...]
    total: tuple[float, ...]
    sort: str
    order: str
    status: str
    page: int = 1
    pages: int = 1
    count: int = 0  # the releases the filter keeps, on every page
    first: int = 0  # the position of the page's first row among them (from 0)


def table_view(frame, statuses: dict[str, str], sort: str | None, order: str | None,
               status: str | None, page: str | None = None) -> TableView:
    """The façade's table (`Ledger.table`) with its release rows filtered by status and sorted by a
    column ("release" or a variable); unknown choices fall back to the table's own order. The total
    row is the façade's: the loss of every charged release, whatever the filter shows. `page`: which
    PAGE_ROWS of the sorted rows to show (the first page when it is not a page number). Only the
    page's rows are built: the filter and the sort read one column each. (The frame is read as
    arrays: pandas' own selections copy its attrs, a status per release, each time.)"""
    variables = tuple(str(c) for c in frame.columns)
    is_total = frame.index == "All releases"
    values = frame.to_numpy()
    body, total_row = values[~is_total], values[is_total][0]
    ids = [str(rid) for rid in frame.index[~is_total]]
    status_of = [statuses.get(rid, "") for rid in ids]
    chosen_status = status if status in STATUSES else ""
    kept = [k for k, s in enumerate(status_of) if s == chosen_status] if chosen_status else list(range(len(ids)))
    chosen_sort = sort if sort == "release" or sort in variables else ""
    chosen_order = "desc" if order == "desc" else "asc"
    if chosen_sort:
        column = ids if chosen_sort == "release" else body[:, variables.index(chosen_sort)].tolist()
        kept.sort(key=column.__getitem__, reverse=chosen_order == "desc")  # (stable: ties keep the table's order)
    pages = max(1, -(-len(kept) // PAGE_ROWS))
    chosen_page = min(max(int(page), 1), pages) if page and page.isdigit() and len(page) < 10 else 1
    first = (chosen_page - 1) * PAGE_ROWS
    shown = kept[first:first + PAGE_ROWS]
    cells = body[shown].tolist() if shown else []
    rows = tuple((ids[k], status_of[k], tuple(row)) for k, row in zip(shown, cells))
    total = tuple(float(v) for v in total_row)
    return TableView(variables, rows, total, chosen_sort, chosen_order, chosen_status, chosen_page, pages,
                     len(kept), first)


def worst_variable(frame) -> tuple[str, float] | None:
    """The variable with the largest total loss (the first in dataset order on a tie)."""
    if frame.shape[1] == 0:
        return None
    total = frame.loc["All releases"]
    name = max(frame.columns, key=lambda c: (float(total[c]), -list(frame.columns).index(c)))
    return str(name), float(total[name])


def worst_pair(pairs) -> tuple[str, str, float] | None:
    """The pair of variables with the largest loss in rows of `Ledger.pairs` (`Ledger.worst_pair`'s
    one row), the first listed on a tie."""
    if pairs.empty:
        return None
    row = pairs.loc[pairs["epsilon"].idxmax()]
    return str(row["variable_1"]), str(row["variable_2"]), float(row["epsilon"])


@dataclass(frozen=True)
class Headline:
    """The dashboard's figures at one moment, each the façade's answer: the protected subset's
    loss (`Ledger.subset`, None when every variable is public), each variable's total (the
    table's total row), the worst variable and pair, every cap's check, how many releases."""

    protected: Any
    totals: tuple[tuple[str, float], ...]
    worst_variable: tuple[str, float] | None
    worst_pair: tuple[str, str, float] | None
    caps: tuple[Any, ...]
    releases: int


def totals(frame) -> tuple[tuple[str, float], ...]:
    """(variable, its total loss) from the table's total row."""
    return tuple((str(name), float(value)) for name, value in frame.loc["All releases"].items())


@dataclass(frozen=True)
class Compared:
    """One figure at both dates: its label, then, now (None: no such figure at that date)."""

    key: str
    label: str
    then: float | None
    now: float | None

    @property
    def change(self) -> float | None:
        """now - then (None when either is missing, or both are unbounded)."""
        if self.then is None or self.now is None or (math.isinf(self.then) and math.isinf(self.now)):
            return None
        return self.now - self.then


def comparison(then: Headline, now: Headline) -> tuple[Compared, ...]:
    """The figures of two headlines side by side: the protected subset, each variable's total (a
    variable of only one date has no figure at the other), the releases in the ledger."""
    rows = [Compared("protected", "Protected subset ε", then.protected and then.protected.epsilon,
                     now.protected and now.protected.epsilon)]
    before, after = dict(then.totals), dict(now.totals)
    rows += [Compared(f"variable:{name}", f"{name} ε", before.get(name), after.get(name))
             for name in [*after, *(n for n in before if n not in after)]]
    rows.append(Compared("releases", "Releases in the ledger", then.releases, now.releases))
    return tuple(rows)


def change_text(value) -> str:
    """A change of a figure, signed; a loss's change rounded up as the figure is."""
    if value is None:
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "+∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "−") + format_number(abs(value))


def day_after(day: str, today: str) -> str | None:
    """The date after `day` (a date alone), where a meeting pack from the end of `day` starts
    (`report --since` reads a date as its start); None when that is after `today` (the ledger's)
    or `day` is not a date alone."""
    try:
        after = date.fromisoformat(day) + timedelta(days=1)
    except ValueError:
        return None
    return after.isoformat() if after.isoformat() <= today else None


def parameter_text(value) -> str:
    if isinstance(value, Fraction):
        return format_number(value)
    return str(value)
