"""`privacy-ledger plan`: plans whose noise is solved from the budgets left.

`plan solve PLAN.yaml` prints, per planned release, the parameter that uses the budget left
as fully as every cap it touches allows, the cap that binds it, and its expected error; with
`--out FILE` it writes the release file `check` and `record` read. It calls the façade
(`ledger.api.Ledger.solve`) and only formats what it returns.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Annotated, Optional

import typer

from .context import open_engine, state
from .options import DatasetOption, JsonOption

plan_app = typer.Typer(no_args_is_help=True, help="Plans: the noise of planned releases, solved from the budgets "
                       "left.", context_settings={"help_option_names": ["-h", "--help"]}, rich_markup_mode=None)

PlanArgument = Annotated[str, typer.Argument(metavar="PLAN.yaml", help="The plan file (schemas/plan.v1.schema.json).")]

COLUMNS = ("release", "mechanism", "parameter", "value", "binding cap", "std", "95% half-width")


@plan_app.command("solve")
def plan_solve(
    plan: PlanArgument,
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
    plan: PlanArgument,
    dataset: DatasetOption = None,
    name: Annotated[Optional[str], typer.Option("--name", "-n", metavar="NAME",
                                                help="Store the solved plan as the next version of this plan "
                                                     "(its releases recorded as NAME/vN/ID).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Solve a plan and record its releases as planned, reserving their budget: all or none
    (every cap is checked again as they are written; exit 1 if the ledger moved since). With
    --name, the solved plan is stored as a numbered version (v1, v2, ...) in the same transaction."""
    from ..api import Ledger

    frame, recorded = Ledger(state.url, open_engine()).record_plan(plan, name=name, dataset=dataset)
    stored = frame.attrs.get("plan")
    if as_json:
        typer.echo(json.dumps({"ok": True, "dataset": frame.attrs["dataset"], "recorded": list(recorded.ids),
                               "unchanged": [r.id for r in recorded.unchanged],
                               "plan": None if stored is None else stored.label,
                               "releases": [_row_json(row) for row in frame.itertuples()]}, indent=2,
                              ensure_ascii=False))
        return
    typer.echo("\n".join(_table(frame)))
    typer.echo(f"recorded {len(recorded.ids)} planned releases of dataset {frame.attrs['dataset']}"
               + (f" ({len(recorded.unchanged)} already recorded exactly so)" if recorded.unchanged else "")
               + ("" if stored is None else f" as plan {stored.label}"))


@plan_app.command("list")
def plan_list(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """The stored plan versions: name@version, dataset, releases, who recorded it and when."""
    from ..api import Ledger

    found = Ledger(state.url, open_engine()).plans(dataset)
    if as_json:
        typer.echo(json.dumps([{"plan": v.label, "name": v.name, "version": v.version, "dataset": v.dataset,
                                "releases": len(v.releases), "recorded_by": v.actor, "recorded_at": v.at,
                                "event": v.seq} for v in found], indent=2, ensure_ascii=False))
        return
    if not found:
        typer.echo("no plan is stored in this ledger")
        return
    rows = [("plan", "dataset", "releases", "recorded by", "recorded at")]
    rows += [(v.label, v.dataset, str(len(v.releases)), v.actor, v.at) for v in found]
    typer.echo("\n".join(_aligned(rows)))


@plan_app.command("show")
def plan_show(
    label: Annotated[str, typer.Argument(metavar="NAME[@vN]", help="A stored plan (its latest version by "
                                                                  "default).")],
    as_json: JsonOption = False,
) -> None:
    """One stored plan version: each release's solved parameter, the epsilon or rho allocated to it,
    the cap that binds it and its expected error."""
    from ..api import Ledger

    found = Ledger(state.url, open_engine()).plan(label)
    if as_json:
        typer.echo(json.dumps({"plan": found.label, "dataset": found.dataset, "recorded_by": found.actor,
                               "recorded_at": found.at, "event": found.seq, "source": found.source,
                               "releases": list(found.releases)}, indent=2, ensure_ascii=False))
        return
    typer.echo(f"plan {found.label} of dataset {found.dataset}, recorded by {found.actor} at {found.at} "
               f"(audit event {found.seq})")
    rows = [("release", "recorded as", "mechanism", "parameter", "value", "allocated", "binding cap", "std")]
    for r in found.releases:
        (unit, share), = r["allocated"].items()
        rows.append((r["key"], r["id"], r["mechanism"], r["parameter"], f"{float(Fraction(r['value'])):.6g}",
                     f"{unit} {float(Fraction(share)):.6g}", r["binding"] or "fixed", f"{r['std']:.4g}"))
    typer.echo("\n".join(_aligned(rows)))


@plan_app.command("diff")
def plan_diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="A stored plan version (NAME@vN) or a solved release "
                                                           "file (plan solve --out).")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="Another stored version, or another solved file.")],
    as_json: JsonOption = False,
) -> None:
    """Two stored plan versions (NAME@v1 NAME@v2), or two solved release files, side by side: each
    release's parameter before and after and the relative change (for stored versions, its binding
    cap and expected std too); a release in one only is marked added or removed."""
    from ..api import Ledger

    frame = Ledger(state.url, open_engine()).plan_diff(old, new)
    if "status" in frame.columns:
        _stored_diff(frame, as_json)
        return
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


def _stored_diff(frame, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"old": frame.attrs["old"], "new": frame.attrs["new"], "releases": [
            {"id": r.id, "status": r.status, "parameter": r.parameter, "old": _exact(r.old), "new": _exact(r.new),
             "change": None if _missing(r.change) else r.change, "old_binding": _text(r.old_binding),
             "new_binding": _text(r.new_binding), "old_std": None if _missing(r.old_std) else r.old_std,
             "new_std": None if _missing(r.new_std) else r.new_std} for r in frame.itertuples()]},
            indent=2, ensure_ascii=False))
        return
    typer.echo(f"plan {frame.attrs['old']} -> {frame.attrs['new']}")
    rows = [("release", "status", "parameter", "old", "new", "change", "binding cap", "std")]
    for r in frame.itertuples():
        change = "" if _missing(r.change) else f"{r.change:+.4%}"
        binding = _text(r.old_binding) or "-", _text(r.new_binding) or "-"
        stds = ("-" if _missing(r.old_std) else f"{r.old_std:.4g}"), ("-" if _missing(r.new_std) else f"{r.new_std:.4g}")
        rows.append((r.id, r.status, r.parameter, _shown(r.old), _shown(r.new), change,
                     binding[0] if binding[0] == binding[1] else f"{binding[0]} -> {binding[1]}",
                     stds[0] if stds[0] == stds[1] else f"{stds[0]} -> {stds[1]}"))
    typer.echo("\n".join(_aligned(rows)))


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


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
