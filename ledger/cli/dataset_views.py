"""`dataset list` and `dataset show`: what the ledger holds, read through the façade.

A steward who has forgotten a variable's exact name, or which datasets a ledger holds, asks here
rather than in the file they added long ago: the ledger's own record is the answer (amendments
included), and the same names every other command accepts.
"""

from __future__ import annotations

import json

import typer

from ..core.lazy import lazy_callable
from .context import open_engine, state
from .options import DatasetOption, JsonOption

Ledger = lazy_callable("ledger.api", "Ledger")  # (the ORM behind it: imported when a command runs, not for --help)


def _book():
    return Ledger(state.url, open_engine())


def dataset_list(as_json: JsonOption = False) -> None:
    """The datasets the ledger holds: variables and groups of each (no release is read)."""
    datasets = _book().datasets
    if as_json:
        typer.echo(json.dumps([{"dataset": d.name, "variables": len(d.variables), "groups": len(d.groups),
                                "description": d.description}
                               for d in datasets.values()], indent=2, ensure_ascii=False))
        return
    if not datasets:
        typer.echo("the ledger holds no dataset yet; add one with `privacy-ledger dataset add FILE`")
    for d in datasets.values():
        typer.echo(f"{d.name}\t{len(d.variables)} variables, {len(d.groups)} groups"
                   + (f"\t{d.description}" if d.description else ""))


def dataset_show(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """A dataset's variables (with their classification), its groups and whether it waives
    separation of duties: the names `subset`, `headroom` and release files take."""
    chosen = _book().dataset(dataset, field="--dataset")
    if as_json:
        typer.echo(json.dumps({
            "dataset": chosen.name, "description": chosen.description, "self_approval": chosen.self_approval,
            "variables": [{"name": v.name, "classification": v.classification, "description": v.description}
                          for v in chosen.variables],
            "groups": {name: sorted(members) for name, members in chosen.groups},
        }, indent=2, ensure_ascii=False))
        return
    typer.echo(f"dataset {chosen.name}" + (f": {chosen.description}" if chosen.description else ""))
    for v in chosen.variables:
        typer.echo(f"  {v.name}\t{v.classification}" + (f"\t{v.description}" if v.description else ""))
    for name, members in chosen.groups:
        typer.echo(f"  group {name} = {{{', '.join(sorted(members))}}}")
    typer.echo("  (groups every dataset has: protected, the variables not classified public; all, every variable)")
    if chosen.self_approval:
        typer.echo("  separation of duties waived (self_approval: true)")
