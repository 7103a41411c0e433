"""`privacy-ledger plan`: plans whose noise is solved from the budgets left.

`plan solve PLAN.yaml` prints, per planned release, the parameter that uses the budget left
as fully as every cap it touches allows, the cap that binds it, and its expected error; with
`--out FILE` it writes the release file `check` and `record` read. It calls the façade
(`ledger.api.Ledger.solve`) and only formats what it returns.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Optional

import typer

from .context import open_engine, state
from .options import DatasetOption, JsonOption

plan_app = typer.Typer(no_args_is_help=True, help="Plans: the noise of planned releases, solved from the budgets "
                       "left.", context_settings={"help_option_names": ["-h", "--help"]}, rich_markup_mode=None)

COLUMNS = ("release", "mechanism", "parameter", "value", "binding cap", "std", "95% half-width")


@plan_app.command("solve")
def plan_solve(
    plan: Annotated[str, typer.Argument(metavar="PLAN.yaml", help="The plan file (schemas/plan.v1.schema.json).")],
    dataset: DatasetOption = None,
    out: Annotated[Optional[str], typer.Option("--out", "-o", metavar="FILE.yaml",
                                               help="Write the solved release file here (`-`: standard "
                                                    "output).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Solve a plan: each weighted release's noise from the budget left (water-filling over the caps it
    touches, each by its own filter), a release file `check` accepts at the boundary.

    Refused (exit 1, nothing written) when a cap has no room for its releases, or an accuracy
    floor (max_std, max_halfwidth95) needs more budget than the binding cap leaves."""
    import yaml

    from ..api import Ledger
    from .outputs import output_target, write_atomically

    target = None if out is None or out.strip() == "-" else output_target(out)
    frame = Ledger(state.url, open_engine()).solve(plan, dataset=dataset)
    text = yaml.safe_dump(frame.attrs["release_file"], sort_keys=False, allow_unicode=True, width=120)
    if target is not None:
        write_atomically(target, text.encode("utf-8"))
    if as_json:
        typer.echo(json.dumps({"ok": True, "dataset": frame.attrs["dataset"], "out": None if target is None
                               else str(target), "releases": [_row_json(row) for row in frame.itertuples()]},
                              indent=2, ensure_ascii=False))
        return
    if out is not None and target is None:
        typer.echo(text, nl=False)
        return
    typer.echo("\n".join(_table(frame)))
    if target is not None:
        typer.echo(f"wrote {len(frame)} releases of dataset {frame.attrs['dataset']} to {target}")


@plan_app.command("record")
def plan_record(
    plan: Annotated[str, typer.Argument(metavar="PLAN.yaml", help="The plan file (schemas/plan.v1.schema.json).")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Solve a plan and record its releases as planned, reserving their budget: all or none
    (every cap is checked again as they are written; exit 1 if the ledger moved since)."""
    from ..api import Ledger

    frame, recorded = Ledger(state.url, open_engine()).record_plan(plan, dataset=dataset)
    if as_json:
        typer.echo(json.dumps({"ok": True, "dataset": frame.attrs["dataset"], "recorded": list(recorded.ids),
                               "unchanged": [r.id for r in recorded.unchanged],
                               "releases": [_row_json(row) for row in frame.itertuples()]}, indent=2,
                              ensure_ascii=False))
        return
    typer.echo("\n".join(_table(frame)))
    typer.echo(f"recorded {len(recorded.ids)} planned releases of dataset {frame.attrs['dataset']}"
               + (f" ({len(recorded.unchanged)} already recorded exactly so)" if recorded.unchanged else ""))


@plan_app.command("diff")
def plan_diff(
    old: Annotated[str, typer.Argument(metavar="OLD.yaml", help="A solved release file (plan solve --out).")],
    new: Annotated[str, typer.Argument(metavar="NEW.yaml", help="Another solved release file.")],
    as_json: JsonOption = False,
) -> None:
    """Two solved release files side by side: each release's parameter before and after, and the
    relative change; a release in one file only is marked added or removed."""
    from ..api import Ledger

    frame = Ledger(state.url, open_engine()).plan_diff(old, new)
    if as_json:
        typer.echo(json.dumps([{"id": r.id, "parameter": r.parameter, "old": _exact(r.old), "new": _exact(r.new),
                                "change": None if _missing(r.change) else r.change}
                               for r in frame.itertuples()], indent=2, ensure_ascii=False))
        return
    rows = [("release", "parameter", "old", "new", "change")]
    for r in frame.itertuples():
        change = ("removed" if _missing(r.new) else "added" if _missing(r.old)
                  else "same" if r.old == r.new else f"{r.change:+.4%}")
        rows.append((r.id, r.parameter, _shown(r.old), _shown(r.new), change))
    typer.echo("\n".join(_aligned(rows)))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))  # (pandas: an absent value as NaN)


def _exact(value) -> str | None:
    return None if _missing(value) else str(value)


def _shown(value) -> str:
    return "-" if _missing(value) else f"{float(value):.6g}"


def _row_json(row) -> dict:
    return {"id": row.id, "mechanism": row.mechanism, "parameter": row.parameter, "value": str(row.value),
            "binding_cap": row.binding_cap if isinstance(row.binding_cap, str) else None, "std": row.std, "halfwidth95": row.halfwidth95}


def _table(frame) -> list[str]:
    return _aligned([COLUMNS] + [(row.id, row.mechanism, row.parameter, f"{float(row.value):.6g}",
                                  row.binding_cap if isinstance(row.binding_cap, str) else "fixed",
                                  f"{row.std:.4g}", f"{row.halfwidth95:.4g}") for row in frame.itertuples()])


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(r, widths)).rstrip() for r in rows]
