"""`privacy-ledger mechanisms` (what a release may name) and `privacy-ledger demo` (Tan's
examples in the selected ledger)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..core.errors import did_you_mean, fail
from . import json_output as cli_json
from .context import actor as acting_person, book
from .options import JsonOption


def mechanisms_command(as_json: JsonOption = False) -> None:
    """The mechanisms a release names and the parameters each accepts, as a Markdown table."""
    from ..accounting.catalogue import PARAMETERS

    if as_json:
        typer.echo(json.dumps({name: {"needs": [list(need) for need in accepted.needs], "reads": list(accepted.reads),
                                      "describes": list(accepted.describes)}
                               for name, accepted in PARAMETERS.items()}, indent=2))
        return
    typer.echo("\n".join(mechanisms_markdown(PARAMETERS)))


def mechanisms_markdown(parameters: Mapping) -> list[str]:
    """`catalogue.PARAMETERS` as a Markdown table: the guarantee is derived from any one set of the
    second column; the third holds what the derivation or a claim's check also reads; the fourth,
    what is recorded only to describe the release. Any other parameter is refused."""
    def cell(names) -> str:
        return ", ".join(f"`{name}`" for name in names) or "-"

    lines = ["| mechanism | guarantee derived from (one of) | also read | recorded as description |",
             "|---|---|---|---|"]
    for name, accepted in parameters.items():
        needs = "; or ".join(" and ".join(f"`{n}`" for n in need) for need in accepted.needs) or "-"
        lines.append(f"| `{name}` | {needs} | {cell(accepted.reads)} | {cell(accepted.describes)} |")
    return lines


def demo(
    out: Annotated[Path, typer.Option(help="Where to write the HTML table.")] = Path("ledger-demo.html"),
    example: Annotated[str, typer.Option(help="census: Tan's Example 3.6 (Table 1); graduates: Tan's "
                                              "Algorithm 1 on Table 2.")] = "census",
    seed: Annotated[Optional[int], typer.Option(help="graduates: seed the noise (default: a secure seed).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: the example's text, and where the "
                                                         "HTML table was written.")] = False,
) -> None:
    """Tan's Example 3.6 in the selected ledger: Table 1, printed and written as HTML."""
    from .demo import run_demo, run_graduates_demo

    acting_person()  # (who acts, checked before the ledger is created: a refused name creates none)
    if example == "graduates":
        text = run_graduates_demo(book(create=True), seed=seed)
    elif example != "census":
        raise fail("command line", "--example", f"must be census or graduates{did_you_mean(example, ['census', 'graduates'])}, "
                                                f"found {example!r}")
    else:
        from .outputs import output_target

        output_target(out)
        text = run_demo(book(create=True), out)
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "example": example, "text": text,
                                   "html": str(out) if example == "census" else None}))
        return
    typer.echo(text)
