"""privacy-ledger: record every release of a confidential dataset and see its privacy loss per variable.

The command line over the same operations as the Python API (ledger.api).

Exit codes: 0 done; 1 a budget check refused (nothing written); 2 bad input
(every problem printed with its file and field; nothing written); 3 the ledger
could not be reached, locked or written (nothing recorded; retry later); 4 an
unexpected failure (one line, details in a log).
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
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError
from sqlmodel import Session

from . import budget, choices, cli_json, cli_style, failures, operations, store  # noqa: F401 (cli_style: help as people read it)
from .accounting import DEFAULT_DELTA
from .engine import LedgerIndex, at_delta
from .errors import InputErrors, LedgerError, fail
from .loader import LedgerSnapshot, build_caps, build_dataset, read_document
from .numbers import NumberError, format_delta, format_number, to_fraction, to_json
from .records import CHARGED_STATUSES, Dataset
from .views import subset_json, table_view, text_table

EXIT_CODES_HELP = ("Exit codes: 0 done; 1 a budget check refused (nothing written); 2 bad input (nothing "
                   "written); 3 the ledger could not be reached, locked or written (nothing recorded; retry "
                   "later); 4 an unexpected failure (details in the log file named).")
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # -h as well as --help, on every command
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0] + "\n\n" + EXIT_CODES_HELP, context_settings=HELP_OPTIONS)
dataset_app = typer.Typer(no_args_is_help=True, help="Datasets and their variables.", context_settings=HELP_OPTIONS)
audit_app = typer.Typer(no_args_is_help=True, help="The tamper-evident audit chain.", context_settings=HELP_OPTIONS)
cap_app = typer.Typer(no_args_is_help=True, help="Budget caps on variables, groups and the whole dataset.",
                      context_settings=HELP_OPTIONS)
app.add_typer(dataset_app, name="dataset")
app.add_typer(audit_app, name="audit")
app.add_typer(cap_app, name="cap")


class State:
    url: str = store.DEFAULT_URL


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
    """The console entry point: every failure ends in one exit code (ledger.failures)."""
    from .terminal import neutral_streams

    with neutral_streams():
        try:
            app()
        except SystemExit:
            raise
        except BaseException as exc:  # noqa: BLE001 -- every failure gets its exit code, never a traceback
            if isinstance(exc, KeyboardInterrupt):
                raise
            sys.exit(failures.handle(exc, ledger=state.url))


def _input_errors(exc: InputErrors) -> int:
    if cli_json.wants_json():
        cli_json.print_errors(exc.errors)
    else:
        report_errors(exc.errors)
    return failures.EXIT_BAD_INPUT


def _budget_refused(exc: operations.BudgetRefused) -> int:
    if cli_json.wants_json():
        cli_json.print_refusal(exc)
    else:
        typer.echo(str(exc), err=True)
        typer.echo("nothing was written.", err=True)
    return failures.EXIT_REFUSED


failures.register(InputErrors, _input_errors)
failures.register(operations.BudgetRefused, _budget_refused)


MAX_ERRORS_SHOWN = 50


def report_errors(errors: list[LedgerError]) -> None:
    """Each error on one line, quoting at most a short excerpt; at most MAX_ERRORS_SHOWN."""
    for error in errors[:MAX_ERRORS_SHOWN]:
        typer.echo(f"error: {failures.excerpt(str(error).replace(chr(10), ' '), 600)}", err=True)
    if len(errors) > MAX_ERRORS_SHOWN:
        typer.echo(f"... and {len(errors) - MAX_ERRORS_SHOWN} more", err=True)
    typer.echo(f"{len(errors)} problem{'s' if len(errors) != 1 else ''}; nothing was written.", err=True)


def _engine(create: bool = False):
    """The ledger's engine. Only `init`, `dataset add` and `demo` create a new SQLite file
    or a schema: any other command on a missing file, or on a database without the
    ledger's tables, is bad input and writes nothing. A ledger whose schema is current is
    opened without any lock (a reader never waits for a writer)."""
    path = store.sqlite_path(state.url)
    if path is not None:
        if not create and not path.exists():
            raise fail("--db", "url", f"no ledger at {path}; create one with `privacy-ledger init` "
                                      "or `privacy-ledger dataset add FILE`")
        store.check_sqlite_file(path)
    try:
        engine = store.make_engine(state.url)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise fail("--db", "url", f"cannot open ledger {failures.excerpt(state.url, 200)!r}: {exc}") from None
    try:
        found, version = store.schema_state(engine)
    except DatabaseError as exc:
        if failures.operational_reason(exc) is not None:
            raise
        raise fail("--db", "url", f"{failures.excerpt(state.url, 200)} is not a privacy-ledger ledger "
                                  f"(not a database it can read: {str(exc.orig).splitlines()[0]})") from None
    if found == "missing" and not create:
        raise fail("--db", "url", f"{failures.excerpt(state.url, 200)} holds no ledger (no ledger tables); "
                                  "create one with `privacy-ledger init`, or give the ledger's URL")
    if found == "newer":
        raise fail("--db", "url", f"this ledger has schema version {version}; this privacy-ledger knows up to "
                                  f"{store.SCHEMA_VERSION}. Upgrade privacy-ledger.")
    if found != "current":
        store.ensure_schema(engine)
    return engine


def _actor(by: str | None) -> str:
    from .limits import check_text

    actor = by or os.environ.get("LEDGER_USER") or getpass.getuser()
    errors = check_text(actor, "command line", "--by", "name")
    if errors:
        raise InputErrors(errors)
    return actor


def _pick_dataset(snapshot: LedgerSnapshot, name: str | None) -> Dataset:
    return choices.pick_dataset(snapshot, name)


def _delta(option: str | None, dataset: Dataset) -> Fraction:
    return choices.parse_delta(option, dataset)


def _index(snapshot: LedgerSnapshot, dataset: Dataset) -> LedgerIndex:
    return choices.charged_index(snapshot, dataset)


def _read_light() -> LedgerSnapshot:
    """Datasets and families, without loading every release."""
    with store.read_session(_engine()) as session:
        return store.write_context(session)


def _read(dataset: str | None = None) -> LedgerSnapshot:
    with store.read_session(_engine()) as session:
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
    with store.read_session(engine) as session:
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
    with store.read_session(engine) as session:
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


@app.command()
def table(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False) -> None:
    """The release-by-variable table (Tan, Table 1) with totals and the whole-dataset column."""
    from .progress import progress

    with progress("computing the release-by-variable table"):
        snapshot = _read(dataset)
        chosen = _pick_dataset(snapshot, dataset)
        chosen_delta = _delta(delta, chosen)
        view = table_view(_index(snapshot, chosen).table(chosen.name, at_delta(chosen_delta)), chosen_delta)
    if as_json:
        typer.echo(json.dumps(view.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo(f"dataset {chosen.name}: {view.basis.label}\n")
    typer.echo(text_table(view))


@app.command()
def subset(
    variables: Annotated[list[str], typer.Argument(help="Variables or named groups.")],
    dataset: DatasetOption = None,
    delta: DeltaOption = None,
    as_json: JsonOption = False,
) -> None:
    """The privacy loss on one subset of variables."""
    snapshot = _read(dataset)
    chosen = _pick_dataset(snapshot, dataset)
    names = _resolve_variables(chosen, variables)
    chosen_delta = _delta(delta, chosen)
    cost = _index(snapshot, chosen).subset_cost(names, at_delta(chosen_delta))
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
    snapshot = _read(dataset)
    chosen = _pick_dataset(snapshot, dataset)
    chosen_delta = _delta(delta, chosen)
    result = _index(snapshot, chosen).pairs(at_delta(chosen_delta))
    if as_json:
        typer.echo(json.dumps([{"subset": list(pair), "epsilon": to_json(spend.epsilon(chosen_delta))}
                               for pair, spend in result.items()], indent=2, ensure_ascii=False))
        return
    for (a, b), spend in result.items():
        typer.echo(f"{{{a}, {b}}}\t{format_number(spend.epsilon(chosen_delta))}")


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
        from .outputs import output_target

        output_target(out, state.url)
        text = run_demo(_engine(create=True), out, actor=_actor(None))
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "example": example, "text": text,
                                   "html": str(out) if example == "census" else None}))
        return
    typer.echo(text)


@audit_app.command("verify")
def audit_verify(as_json: JsonOption = False) -> None:
    """Recompute the hash chain and compare every row with its audit event (one consistent
    snapshot: writers may go on meanwhile). Exit 1 when anything is wrong, an empty chain included."""
    from .progress import progress

    with store.read_session(_engine()) as session, progress("verifying the audit chain"):
        result = store.verify(session)
    if as_json:
        typer.echo(cli_json.dumps({"ok": result.ok, "events": result.events, "head": result.head,
                                   "problems": list(result.problems)}))
        if not result.ok:
            raise typer.Exit(1)
        return
    if result.ok:
        typer.echo(f"audit chain intact: {result.events} events, head {result.head}")
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
