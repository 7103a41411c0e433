"""privacy-ledger: record every release of a confidential dataset and see its privacy loss per variable.

The command line over the same operations as the Python API (ledger.api).

Exit codes: 0 done; 1 a budget check refused (nothing written); 2 bad input
(every problem printed with its file and field; nothing written).
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import choices, cli_json, cli_style  # noqa: F401 (cli_style: help as people read it)
from .accounting import DEFAULT_DELTA
from .engine import LedgerIndex, at_delta
from .errors import InputErrors, LedgerError, fail
from .loader import LedgerSnapshot, build_caps, build_dataset, read_document
from .numbers import NumberError, format_delta, format_number, to_fraction, to_json
from .records import CHARGED_STATUSES, Dataset
from .lazy import lazy_callable, lazy_module
from .views import subset_json, table_view, text_table

# Imported on first use (issue 13): `--help` needs none of them, `record` not numpy.
budget = lazy_module(f"{__package__}.budget")
operations = lazy_module(f"{__package__}.operations")
store = lazy_module(f"{__package__}.store")
Session = lazy_callable("sqlmodel", "Session")
DEFAULT_URL = "sqlite:///ledger.db"  # store.DEFAULT_URL, without importing the store

# -h as well as --help, on every command; plain help (rich_markup_mode=None): rich's help
# formatter costs more to import than a whole `check` is allowed (issue 13, section 2).
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0],
                  context_settings=HELP_OPTIONS, rich_markup_mode=None)
dataset_app = typer.Typer(no_args_is_help=True, help="Datasets and their variables.", context_settings=HELP_OPTIONS,
                          rich_markup_mode=None)
audit_app = typer.Typer(no_args_is_help=True, help="The tamper-evident audit chain.", context_settings=HELP_OPTIONS,
                        rich_markup_mode=None)
cap_app = typer.Typer(no_args_is_help=True, help="Budget caps on variables, groups and the whole dataset.",
                      context_settings=HELP_OPTIONS, rich_markup_mode=None)
app.add_typer(dataset_app, name="dataset")
app.add_typer(audit_app, name="audit")
app.add_typer(cap_app, name="cap")


class State:
    url: str = DEFAULT_URL


state = State()

DatasetOption = Annotated[Optional[str], typer.Option("--dataset", "-d", help="Dataset (default: the only one).")]
DeltaOption = Annotated[Optional[str], typer.Option("--delta", help="Delta for epsilon figures "
                                                    "(default: the dataset's, else 1e-9).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.callback()
def main_options(
    db: Annotated[Optional[str], typer.Option("--db", metavar="URL", help="The ledger: a database URL "
                                              "(default: $LEDGER_DATABASE_URL, else sqlite:///ledger.db; "
                                              "postgres://user@host/db for a team).")] = None,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=lambda value: _print_version(value),
                                          help="Print the version and exit.")] = False,
) -> None:
    state.url = choices.ledger_url(db)


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"privacy-ledger {__version__}")
        raise typer.Exit()


def main() -> None:
    try:
        app()
    except InputErrors as exc:
        if cli_json.wants_json():
            cli_json.print_errors(exc.errors)
        else:
            report_errors(exc.errors)
        sys.exit(2)
    except operations.BudgetRefused as exc:
        if cli_json.wants_json():
            cli_json.print_refusal(exc)
        else:
            typer.echo(str(exc), err=True)
            typer.echo("nothing was written.", err=True)
        sys.exit(1)


def report_errors(errors: list[LedgerError]) -> None:
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    typer.echo(f"{len(errors)} problem{'s' if len(errors) != 1 else ''}; nothing was written.", err=True)


def _engine(create: bool = False):
    """The ledger's engine. Only `init`, `dataset add` and `demo` create a new SQLite file:
    any other command on a missing file is bad input and writes nothing."""
    if not create and state.url.startswith("sqlite:///") and state.url not in ("sqlite:///:memory:",):
        path = Path(state.url.removeprefix("sqlite:///"))
        if not path.exists():
            raise fail("--db", "url", f"no ledger at {path}; create one with `privacy-ledger init` "
                                      "or `privacy-ledger dataset add FILE`")
    try:
        engine = store.make_engine(state.url)
        store.ensure_schema(engine)
    except Exception as exc:  # a bad URL or an unreachable server is bad input
        raise fail("--db", "url", f"cannot open ledger {state.url!r}: {exc}") from None
    return engine


def _actor(by: str | None) -> str:
    return by or os.environ.get("LEDGER_USER") or getpass.getuser()


def _pick_dataset(snapshot: LedgerSnapshot, name: str | None) -> Dataset:
    return choices.pick_dataset(snapshot, name)


def _delta(option: str | None, dataset: Dataset) -> Fraction:
    return choices.parse_delta(option, dataset)


def _index(snapshot: LedgerSnapshot, dataset: Dataset) -> LedgerIndex:
    return choices.charged_index(snapshot, dataset)


def _read_light() -> LedgerSnapshot:
    """Datasets and families, without loading every release."""
    with Session(_engine()) as session:
        return store.write_context(session)


def _indexed(dataset: str | None, titles: bool = False,
             variables: list[str] | None = None) -> tuple[Dataset, LedgerIndex]:
    """The chosen dataset and the index of its charged releases, from the accounting rows
    (columns.py): no release is decoded but the few the exact path needs (issue 13)."""
    from . import columns

    with Session(_engine()) as session:
        light = store.write_context(session)
        chosen = _pick_dataset(light, dataset)
        touching = None if variables is None else _resolve_variables(chosen, variables)
        return chosen, columns.index_for(session, chosen.variable_names, chosen.name, light.families, titles,
                                         touching)


def _read(dataset: str | None = None) -> LedgerSnapshot:
    with Session(_engine()) as session:
        return store.snapshot(session, dataset)


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------


@app.command()
def init(as_json: JsonOption = False) -> None:
    """Create an empty ledger (the schema is also created on first use)."""
    _engine(create=True)
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "ledger": state.url}))
        return
    typer.echo(f"ledger ready at {state.url}")


@dataset_app.command("add")
def dataset_add(
    file: Annotated[Path, typer.Argument(help="Dataset file (YAML or JSON).")],
    by: Annotated[Optional[str], typer.Option(help="Who records it (default: $LEDGER_USER or login).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Add a dataset, its variables, groups and caps."""
    document, errors = read_document(file)
    dataset = None
    if document is not None:
        dataset, errors = build_dataset(document)
    if errors:
        raise InputErrors(errors)
    caps, errors = build_caps(document, dataset)
    if errors:
        raise InputErrors(errors)
    if not operations.add_dataset(_engine(create=True), dataset, caps, _actor(by), str(file),
                                  operations.declared_privacy_unit(document)):
        if as_json:
            typer.echo(cli_json.dumps({"ok": True, "dataset": dataset.name, "added": False}))
            return
        typer.echo(f"dataset {dataset.name} is already recorded, unchanged")
        return
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "dataset": dataset.name, "added": True,
                                   "variables": list(dataset.variable_names), "caps": [c.name for c in caps]}))
        return
    typer.echo(f"added dataset {dataset.name} with {len(dataset.variables)} variables"
               + (f" and {len(caps)} cap{'s' if len(caps) != 1 else ''}" if caps else ""))


@app.command()
def record(
    files: Annotated[list[Path], typer.Argument(help="Release files (YAML or JSON).")],
    by: Annotated[Optional[str], typer.Option(help="Who records them (default: $LEDGER_USER or login).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Record releases: every file and every cap is checked first; all are recorded or none."""
    actor = _actor(by)
    result = operations.record(_engine(), operations.release_builder(files, actor), actor)
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "recorded": [r.id for r in result.releases],
                                   "families": [f.id for f in result.families],
                                   "caps": [check_json(c) for c in result.checks]}))
        return
    count = len(result.releases)
    typer.echo(f"recorded {count} release{'s' if count != 1 else ''}"
               + (f" and {len(result.families)} famil{'ies' if len(result.families) != 1 else 'y'}"
                  if result.families else ""))
    for line in check_lines(result.checks):
        typer.echo(line)


@app.command("check")
def check_command(
    plans: Annotated[list[Path], typer.Argument(help="Planned releases, in the release file format.")],
    as_json: JsonOption = False,
) -> None:
    """Does a planned release keep every budget cap, and by how much? Exit 1 when any cap would break."""
    checks = operations.check(_engine(), operations.release_builder(plans, _actor(None)))
    if as_json:
        typer.echo(json.dumps({"ok": all(c.ok for c in checks), "caps": [check_json(c) for c in checks]},
                              indent=2, ensure_ascii=False))
    else:
        if not checks:
            typer.echo("no cap covers what this plan reads")
        for line in check_lines(checks):
            typer.echo(line)
        typer.echo("every cap holds" if all(c.ok for c in checks) else "REFUSED: a cap would break")
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


@app.command("headroom")
def headroom_command(
    variables: Annotated[list[str], typer.Argument(help="The variables a new release would read.")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """The largest epsilon (and rho) a new release reading exactly these variables could take."""
    snapshot = _read_light()
    chosen = _pick_dataset(snapshot, dataset)
    names = _resolve_variables(chosen, variables)
    room = operations.headroom(_engine(), chosen.name, names)
    if as_json:
        typer.echo(json.dumps({
            "variables": list(room.variables),
            "epsilon": to_json(room.epsilon, down=True), "epsilon_binding": room.epsilon_binding and room.epsilon_binding.name,
            "rho": to_json(room.rho, down=True), "rho_binding": room.rho_binding and room.rho_binding.name,
        }, indent=2, ensure_ascii=False))
        return
    label = "{" + ", ".join(room.variables) + "}"
    typer.echo(f"{label}: largest epsilon {format_number(room.epsilon, down=True)}"
               + (f" (binding cap: {room.epsilon_binding.name})" if room.epsilon_binding else " (no cap applies)"))
    typer.echo(f"{label}: largest rho {format_number(room.rho, down=True)}"
               + (f" (binding cap: {room.rho_binding.name})" if room.rho_binding else " (no cap applies)"))


def _lifecycle(action: str):
    def command(
        release: Annotated[str, typer.Argument(help="Release id.")],
        by: Annotated[Optional[str], typer.Option(help="Who does it (default: $LEDGER_USER or login).")] = None,
        as_json: JsonOption = False,
    ) -> None:
        changed = operations.change_status(_engine(), release, action, _actor(by))
        if as_json:
            typer.echo(cli_json.dumps({"ok": True, "release": changed.id, "status": changed.status.value}))
            return
        typer.echo(f"{changed.id}: {changed.status.value}")

    command.__doc__ = {
        "approve": "Approve a planned release (re-checks its caps).",
        "publish": "Publish an approved release (re-checks its caps).",
        "retract": "Retract a published release; it still counts (what was published cannot be unpublished).",
        "cancel": "Cancel a planned or approved release; frees its reservation.",
    }[action]
    return command


for _action in ("approve", "publish", "retract", "cancel"):
    app.command(_action)(_lifecycle(_action))


@cap_app.command("set")
def cap_set(
    subset: Annotated[list[str], typer.Argument(help="Variables, a group name, or `all`.")],
    epsilon: Annotated[Optional[str], typer.Option(help="Cap in epsilon.")] = None,
    delta: Annotated[Optional[str], typer.Option(help="With --epsilon: epsilon at this delta.")] = None,
    rho: Annotated[Optional[str], typer.Option(help="Cap in rho (zCDP).")] = None,
    name: Annotated[Optional[str], typer.Option(help="The cap's name.")] = None,
    dataset: DatasetOption = None,
    by: Annotated[Optional[str], typer.Option(help="Who sets it.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Add or replace a cap on a variable, a group, or the whole dataset."""
    snapshot = _read_light()
    chosen = _pick_dataset(snapshot, dataset)
    entry: dict = {}
    if subset == ["all"]:
        entry["subset"] = "all"
    elif len(subset) == 1 and chosen.group(subset[0]) is not None:
        entry["name"] = subset[0]
        if name:  # the group's variables, under another name
            entry["subset"] = sorted(chosen.group(subset[0]))
    else:
        entry["subset"] = subset
    if name:
        entry["name"] = name
    for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho)):
        if value is not None:
            entry[key] = value
    engine = _engine()
    caps = operations.add_caps(engine, chosen.name, [entry], _actor(by), "command line")
    with Session(engine) as session:
        checks = budget.check(caps, store.cap_totals(session, chosen.name), [], {}, {}, only_touched=False)
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "caps": [check_json(c) for c in checks]}))
        return
    for cap in caps:
        typer.echo(f"cap {cap.name} on {{{', '.join(sorted(cap.subset))}}}: {cap.unit} {format_number(cap.limit)}"
                   + (f" at delta {format_delta(cap.delta)}" if cap.delta is not None else ""))
    for line in check_lines(checks, planned=False):  # a cap below what is spent is over at once
        typer.echo(line)


@cap_app.command("list")
def cap_list(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """Every cap, its spend (reservations included), headroom and status."""
    snapshot = _read_light()
    chosen = _pick_dataset(snapshot, dataset)
    engine = _engine()
    with Session(engine) as session:
        caps = store.caps(session, chosen.name)
        checks = budget.check(caps, store.cap_totals(session, chosen.name), [], {}, {}, only_touched=False)
    if as_json:
        typer.echo(json.dumps([check_json(c) for c in checks], indent=2, ensure_ascii=False))
        return
    if not checks:
        typer.echo(f"dataset {chosen.name} has no caps")
    for line in check_lines(checks, planned=False):
        typer.echo(line)


def check_lines(checks, planned: bool = True) -> list[str]:
    lines = []
    for c in checks:
        unit = c.cap.unit + (f" {format_delta(c.cap.delta)}" if c.cap.delta is not None else "")
        figures = [f"spent {format_number(c.current)}"]
        if planned:
            figures += [f"this plan +{format_number(c.charge)}", f"after {format_number(c.after)}"]
        figures += [f"cap {format_number(c.cap.limit)}", f"headroom {format_number(c.headroom, down=True)}"]
        lines.append(f"[{c.status}] cap {c.cap.name} ({unit}) on {{{', '.join(sorted(c.cap.subset))}}}: "
                     + ", ".join(figures))
        if c.drivers:
            lines.append("      driven by: " + ", ".join(f"{rid} ({format_number(v)})" for rid, v in c.drivers))
    return lines


def check_json(c) -> dict:
    return {
        "cap": c.cap.name,
        "dataset": c.cap.dataset,
        "subset": sorted(c.cap.subset),
        "unit": c.cap.unit,
        "delta": to_json(c.cap.delta),
        "limit": to_json(c.cap.limit, down=True),
        "current": to_json(c.current),
        "charge": to_json(c.charge),
        "after": to_json(c.after),
        "headroom": to_json(c.headroom, down=True),
        "status": c.status,
        "drivers": [{"release": rid, "value": to_json(v)} for rid, v in c.drivers],
    }


def _resolve_variables(chosen: Dataset, names: list[str]) -> set[str]:
    return choices.resolve_variables(chosen, names)



@app.command()
def releases(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """List recorded releases."""
    snapshot = _read(dataset)
    rows = [r for r in snapshot.releases.values() if dataset is None or r.dataset == dataset]
    if as_json:
        from .codec import release_to_dict

        typer.echo(json.dumps([release_to_dict(r) for r in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        typer.echo("no releases" + (f" in dataset {dataset}" if dataset else ""))
        return
    from .views import releases_text

    typer.echo(releases_text(rows, snapshot.datasets))


TABLE_CELL_LIMIT = 1_000_000  # release rows x variables printed as text; past it, the largest releases
TABLE_LARGEST = 25


@app.command()
def table(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False,
          all_rows: Annotated[bool, typer.Option("--all", help="Print every release row, however many.")] = False,
          ) -> None:
    """The release-by-variable table (Tan, Table 1) with totals and the whole-dataset column."""
    from .progress import progress

    with progress("computing the release-by-variable table"):
        chosen, index = _indexed(dataset, titles=True)
        chosen_delta = _delta(delta, chosen)
        n_rel = len(index.releases)
        small = as_json or all_rows or n_rel * max(len(index.variables), 1) <= TABLE_CELL_LIMIT
        if small:
            view = table_view(index.table(chosen.name, at_delta(chosen_delta)), chosen_delta)
        else:
            # a million rows is not a table anyone reads: the largest releases (by their whole-dataset
            # cost) in recording order, and the total row over every release, in bounded memory (issue 13)
            from .columns import table_in_chunks

            risk = table_in_chunks(index, chosen.name, at_delta(chosen_delta), chosen_delta, TABLE_LARGEST)
            view = table_view(risk, chosen_delta)
    if as_json:
        typer.echo(json.dumps(view.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo(f"dataset {chosen.name}: {view.basis.label}\n")
    typer.echo(text_table(view))
    if not small:
        typer.echo(f"\n{len(view.rows)} of {n_rel:,} release rows shown (the largest on the whole dataset); the "
                   "total row is over every release. --all prints every row; `report --format csv` writes the table.")


@app.command()
def subset(
    variables: Annotated[list[str], typer.Argument(help="Variables or named groups.")],
    dataset: DatasetOption = None,
    delta: DeltaOption = None,
    as_json: JsonOption = False,
) -> None:
    """The privacy loss on one subset of variables."""
    chosen, index = _indexed(dataset, variables=variables)  # only the releases that read the subset
    names = _resolve_variables(chosen, variables)
    chosen_delta = _delta(delta, chosen)
    cost = index.subset_cost(names, at_delta(chosen_delta))
    result = subset_json(cost, chosen_delta)
    if as_json:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    label = "{" + ", ".join(cost.subset) + "}"
    if cost.spend.unbounded:
        typer.echo(f"{label}: ∞ (not protected)")
    elif cost.spend.is_pure:
        typer.echo(f"{label}: epsilon {format_number(cost.spend.pure)} (pure)")
    else:
        typer.echo(f"{label}: epsilon {format_number(cost.spend.epsilon(chosen_delta))} at delta "
                   f"{format_delta(chosen_delta)} ({result['conversion'] or 'basic composition'})")
        if result["rho"] is not None:
            typer.echo(f"  rho (zCDP): {format_number(cost.spend.zcdp_rho())}")
    typer.echo(f"  charged by: {', '.join(cost.releases) or 'no release'}")


@app.command()
def pairs(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False) -> None:
    """The privacy loss on every pair of variables."""
    chosen, index = _indexed(dataset)
    chosen_delta = _delta(delta, chosen)
    result = pair_spends(index, at_delta(chosen_delta))
    if as_json:
        typer.echo(json.dumps([{"subset": list(pair), "epsilon": to_json(spend.epsilon(chosen_delta))}
                               for pair, spend in result.items()], indent=2, ensure_ascii=False))
        return
    for (a, b), spend in result.items():
        typer.echo(f"{{{a}, {b}}}\t{format_number(spend.epsilon(chosen_delta))}")


def pair_spends(index: LedgerIndex, objective) -> dict[tuple[str, str], object]:
    """The loss on every pair, in `LedgerIndex.pairs()` order, from one `pair_matrix`
    (the report's array path: the same figures without a subset query per pair)."""
    grid = index.pair_matrix(objective)
    names = index.variables
    return {(names[i], names[j]): grid.spend(i, j)
            for i in range(len(names)) for j in range(i + 1, len(names))}


@app.command()
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

    if example == "graduates":
        text = run_graduates_demo(_engine(create=True), actor=_actor(None), seed=seed)
    elif example != "census":
        raise fail("command line", "--example", f"must be census or graduates{choices.did_you_mean(example, ['census', 'graduates'])}, "
                                                f"found {example!r}")
    else:
        text = run_demo(_engine(create=True), out, actor=_actor(None))
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "example": example, "text": text,
                                   "html": str(out) if example == "census" else None}))
        return
    typer.echo(text)


@audit_app.command("verify")
def audit_verify(
    as_json: JsonOption = False,
    since_checkpoint: Annotated[bool, typer.Option(
        "--since-checkpoint", help="Check only the events appended since the last verified head (and the "
                                   "rows they name); a full verification when there is none yet.")] = False,
) -> None:
    """Recompute the hash chain and compare every row with its audit event."""
    from . import checkpoint
    from .progress import progress

    engine = _engine()
    with Session(engine) as session, progress("verifying the audit chain"):
        mark = checkpoint.read(session) if since_checkpoint else None
        result = store.verify(session) if mark is None else checkpoint.verify_since(session, mark)
    if result.ok:
        checkpoint.remember(engine, result)  # the next --since-checkpoint starts here
    if as_json:
        typer.echo(cli_json.dumps({"ok": result.ok, "events": result.events, "head": result.head,
                                   "problems": list(result.problems)}))
        if not result.ok:
            raise typer.Exit(1)
        return
    if result.ok:
        scope = "" if mark is None else f" (events {mark[0] + 1}-{result.events} checked since the checkpoint)"
        typer.echo(f"audit chain intact: {result.events} events, head {result.head}{scope}")
        return
    typer.echo(f"audit chain BROKEN: first bad event: {result.problems[0]}", err=True)
    for problem in result.problems[1:]:
        typer.echo(f"  also: {problem}", err=True)
    raise typer.Exit(1)


from .cli_run import assess, run, sample_privacy  # noqa: E402  (issue 5)

app.command("run")(run)
app.command("assess")(assess)
app.command("sample-privacy")(sample_privacy)

from .cli_report import report  # noqa: E402  (issue 4)

app.command("report")(report)

from .cli_export import export_app  # noqa: E402  (issue 14)

app.add_typer(export_app, name="export")
