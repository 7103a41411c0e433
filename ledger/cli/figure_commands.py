"""The figures' commands: `table` (Tan's Table 1), `subset` (the loss on one subset) and `pairs`
(the loss on every pair of variables), each the smallest valid figure of the accountants.

Thin adapters (STYLE 8): Table 1 comes from the façade (Ledger.table_reading: its view, the
accountants' totals, the headline), the index of the charged releases for `subset` and `pairs`
too (Ledger.index_rows, from the accounting rows), their figures from the operations that every
interface shows (shown_figures), and these print them.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Annotated, Optional

import typer

from ..core.errors import fail
from ..core.lazy import lazy_callable
from ..core.numbers import figure_fields, format_delta, format_number, safe_float
from ..operations import choices
from ..operations.moments import parse_date
from .context import as_of_json, as_of_lines, book
from .options import AsOfOption, DatasetOption, DeltaOption, JsonOption

at_delta = lazy_callable("ledger.accounting.charge_choice", "at_delta")
headline_lines = lazy_callable("ledger.reporting.headline", "text_lines")
subset_json = lazy_callable("ledger.reporting.views", "subset_json")
infinity_text = lazy_callable("ledger.operations.reasons", "infinity_text")
text_table = lazy_callable("ledger.reporting.views", "text_table")

AccountantOption = Annotated[Optional[str], typer.Option(
    "--accountant", help="basic, rdp or pld: show this accountant's figure (default: the smallest valid one).")]


def _indexed(dataset: str | None, variables: list[str] | None = None, when=None):
    """The chosen dataset and the index of its charged releases, from the accounting rows: no
    release is decoded but the few the exact path needs; `when` (--as-of): the releases charged
    then, with the status each had then (store/as_of.py)."""
    with book().index_rows(dataset, variables=variables, as_of=when, field="--dataset") as found:
        return found


TABLE_CELL_LIMIT = 1_000_000  # release rows x variables printed as text; past it, the largest releases
TABLE_LARGEST = 25


def table(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False,
          accountant: AccountantOption = None, as_of: AsOfOption = None,
          all_rows: Annotated[bool, typer.Option("--all", help="Print every release row, however many.")] = False,
          ) -> None:
    """The release-by-variable table (Tan, Table 1) with totals and the whole-dataset column."""
    from ..core.progress import progress
    from ..reporting.accountant_views import table_totals_line

    when = parse_date(as_of, "--as-of")
    _check_accountant(accountant)
    # past TABLE_CELL_LIMIT cells a table is not one anyone reads: the text shows the largest releases
    # (by their whole-dataset cost) in recording order, and --json writes every row a chunk at a time
    # (cli/table_json.py), so neither holds every row's figures; the total row is over every release
    rows = 0 if as_json else None if all_rows else TABLE_LARGEST
    with progress("computing the release-by-variable table"), book().table_reading(
            dataset, delta, accountant=accountant, as_of=when, rows=rows, cells=TABLE_CELL_LIMIT, pld=as_json,
            fields=("--dataset", "--delta")) as (found, index):
        if as_json and found.limited:
            _stream_json(found, index)
            return
    view, head = found.view, found.headline
    if as_json:
        typer.echo(json.dumps({**view.to_json(), "headline": head.to_json(), **found.accounts.to_json(),
                               **({} if when is None else as_of_json(found.dataset.name, when))}, indent=2,
                              ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(found.dataset.name, when):
            typer.echo(line)
    typer.echo(f"dataset {found.dataset.name}: {view.basis.label}\n")
    for line in headline_lines(head):
        typer.echo(line)
    typer.echo("")
    typer.echo(text_table(found.shown))
    typer.echo("\n" + table_totals_line(found.accounts))
    if found.limited:
        typer.echo(f"\n{len(view.rows)} of {found.releases:,} release rows shown (the largest on the whole dataset); "
                   "the total row is over every release. --all prints every row; `report --format csv` writes the "
                   "table.")


def _stream_json(found, index) -> None:
    """`table --json` with every release row, written a chunk at a time (cli/table_json.py): the
    figures from the façade's answer, each row's cells from the index's chunks."""
    from . import table_json

    def heads(start: int, stop: int) -> list[tuple[str, str, str]]:
        releases = index.releases
        if hasattr(releases, "prefetch"):
            releases.prefetch(range(start, stop))
        heads = [(r.id, r.title, r.status.value) for r in releases[start:stop]]
        if hasattr(releases, "found"):
            releases.found.clear()  # (memory holds one chunk's heads)
        return heads

    wide_ids = index.cost_ids(range(len(index.variables)))  # (every row's, kept by large_table)
    used = table_json.used_values(index, wide_ids)
    document = table_json.document(found.view, found.table, found.headline.to_json(), found.accounts.to_json(), used,
                                   found.delta)
    table_json.write(sys.stdout.write, document, index, wide_ids, found.delta, heads)


def _check_accountant(accountant: str | None) -> None:
    from ..accounting.figure_validity import ACCOUNTANTS

    if accountant is not None and accountant not in ACCOUNTANTS:
        raise fail("command line", "--accountant", f"must be one of {', '.join(ACCOUNTANTS)}, found {accountant!r}")


def subset(
    variables: Annotated[list[str], typer.Argument(help="Variables or named groups.")],
    dataset: DatasetOption = None,
    delta: DeltaOption = None,
    as_json: JsonOption = False,
    accountant: AccountantOption = None,
    as_of: AsOfOption = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Say the figure in words: what was composed, by which statement, and the "
                          "strongest attack it allows at 1% and 5% false positives.")] = False,
) -> None:
    """The privacy loss on one subset of variables: the smallest valid figure of the basic and
    Rényi accountants, with its theorem (the PLD had the plan been fixed in advance beside it, as
    information), and the attack it allows (--json's `risk`, --explain); --as-of: as the ledger
    stood then."""
    from ..accounting.risk import figure_risks
    from ..operations.shown_figures import subset_accountants
    from ..reporting.accountant_views import figure_line

    when = parse_date(as_of, "--as-of")
    # the accounting rows of the releases that read the subset; --as-of: of the
    # releases charged then, each with the status it had then (store/as_of.py)
    chosen, index = _indexed(dataset, variables=variables, when=when)
    names = choices.resolve_variables(chosen, variables)
    chosen_delta = choices.parse_delta(delta, chosen)
    _check_accountant(accountant)
    cost = index.subset_cost(names, at_delta(chosen_delta))
    why = None
    if cost.spend.unbounded:  # the reason from the releases charged (a keyed family's move included)
        from ..operations.reasons import unbounded_reason

        why = unbounded_reason(index, names, chosen.public_names)
    result = subset_json(cost, chosen_delta, why, index.allowance)
    found, shown = subset_accountants(index, cost, chosen_delta, accountant, every=as_json)
    # the attack the figure shown allows, from its own epsilon and delta, as floats that still bound them
    risks = figure_risks(safe_float(shown.epsilon), None if shown.delta is None else safe_float(shown.delta))
    if as_json:
        result.update({**figure_fields("epsilon", shown.epsilon), **figure_fields("delta", shown.delta),
                       "accountant": shown.accountant, "case": shown.case, "theorem": shown.theorem,
                       "accountants": {name: figure.to_json() for name, figure in found.items()},
                       "risk": [{"fpr": risk.fpr, "tpr": risk.tpr} for risk in risks]})
        if shown.accountant != "basic":
            result["conversion"] = shown.conversion
        if when is not None:
            result.update(as_of_json(chosen.name, when))
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    label = "{" + ", ".join(cost.subset) + "}"
    if cost.spend.unbounded:
        typer.echo(f"{label}: {infinity_text(why)}")
    elif shown.accountant == "basic" and cost.spend.is_pure:
        typer.echo(f"{label}: epsilon {format_number(cost.spend.pure)} (pure)")
    elif shown.accountant == "basic":
        typer.echo(f"{label}: epsilon {format_number(cost.spend.epsilon(chosen_delta, index.allowance))} at delta "
                   f"{format_delta(chosen_delta)} ({result['conversion'] or 'basic composition'})")
    else:
        typer.echo(f"{label}: {figure_line(shown)}")
    if not cost.spend.unbounded:
        typer.echo(f"  accountant: {shown.accountant} ({shown.case}); {shown.theorem}")
        if accountant is None:
            others = ", ".join(f"{name} {format_number(f.epsilon)}"
                               for name, f in found.items() if name != shown.accountant and f.valid and f.available)
            if others:
                typer.echo(f"  other valid statements: {others}")
            pld = found["pld"]
            if pld.available and math.isfinite(float(pld.epsilon)):
                typer.echo(f"  had the whole plan been fixed in advance (information only, not a bound under "
                           f"adaptive choices): pld {format_number(pld.epsilon)} at the whole delta")
    if result["rho"] is not None and not cost.spend.unbounded:
        typer.echo(f"  rho (zCDP): {format_number(cost.spend.zcdp_rho())}")
    typer.echo(f"  charged by: {', '.join(cost.releases) or 'no release'}")
    if explain:
        typer.echo("  in words: " + _in_words(cost, shown, why, risks))


def _in_words(cost, shown, why: str | None, risks) -> str:
    """`subset --explain`: the figure shown in one sentence (operations/explain.py)."""
    from ..operations.explain import figure_explanation

    if cost.spend.unbounded:
        figure, theorem = infinity_text(why), None
    else:
        figure, theorem = f"epsilon {format_number(shown.epsilon)}" + (
            " (pure)" if shown.delta is None else f" at delta {format_delta(shown.delta)}"), shown.theorem
    return figure_explanation(cost.subset, cost.releases, figure, risks, theorem=theorem, case=shown.case)


def pairs(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False,
          accountant: Annotated[Optional[str], typer.Option(
              "--accountant", help="basic, rdp or pld: show this accountant's figure (default: the smallest "
                                   "valid one, as `subset A B` prints it; pld, information only, composes "
                                   "every pair's PLD, one per distinct pair)."
          )] = None, as_of: AsOfOption = None) -> None:
    """The privacy loss on every pair of variables: the smallest valid figure of the basic and
    Rényi accountants, as `subset A B` prints it."""
    from ..operations.shown_figures import pair_accountants
    from ..accounting.figure_validity import ACCOUNTANTS
    from ..accounting.every_pair import PAIR_PLD_LIMIT

    if accountant is not None and accountant not in ACCOUNTANTS:
        raise fail("command line", "--accountant", f"must be basic, rdp or pld, found {accountant!r}")
    when = parse_date(as_of, "--as-of")
    # the accounting rows, with the accountants' events and lifecycle moments;
    # with --as-of, the releases charged then, each with the status it had then (store/as_of.py)
    chosen, index = _indexed(dataset, when=when)
    chosen_delta = choices.parse_delta(delta, chosen)
    result = pair_accountants(index, chosen_delta, accountant)
    if as_json:
        typer.echo(json.dumps([{"subset": [a, b], **figure_fields("epsilon", shown.epsilon),
                                **figure_fields("delta", shown.delta), "accountant": shown.accountant,
                                "case": shown.case,
                                "accountants": {name: f.to_json() for name, f in found.items()},
                                **({} if when is None else as_of_json(chosen.name, when))}
                               for (a, b), (found, shown) in result.items()], indent=2, ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    for (a, b), (_, shown) in result.items():
        typer.echo(f"{{{a}, {b}}}\t{format_number(shown.epsilon)}\t{shown.accountant}")
    skipped = sum(1 for found, _ in result.values() if found["pld"].note.startswith("not computed: pairs"))
    typer.echo(f"(each pair: {'the ' + accountant + ' accountant' if accountant else 'the smallest valid figure of basic and rdp'}"
               f" at delta {format_delta(chosen_delta)}"
               + (f"; {skipped} pairs without a pld figure: at most {PAIR_PLD_LIMIT} distinct PLD compositions per "
                  "run; `pairs --accountant pld` computes every pair's, `subset A B` one pair's)" if skipped else ")"))
