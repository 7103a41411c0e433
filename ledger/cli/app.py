"""privacy-ledger: record every release of a confidential dataset and see its privacy loss per variable.

The command line over the same operations as the Python API (ledger.api).

Exit codes: 0 done; 1 a budget check refused, or a cancel of a release whose output
exists (nothing written); 2 bad input (every problem printed with its file and field;
nothing written); 3 the ledger could not be reached, locked or written (nothing
recorded; retry later); 4 an unexpected failure (one line, details in a log).
"""

from __future__ import annotations

import math
import json
import os
import re
import sys
from collections.abc import Mapping
from contextlib import ExitStack, contextmanager
from copy import copy
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..operations import choices  # noqa: F401 (cli_style: help as people read it)
from . import json_output as cli_json, style as cli_style  # noqa: F401 (cli_style: help as people read it)
from .arguments import command_name as _command_name  # the command the arguments name
from .examples import add_examples
from .caps_output import check_json, check_lines, infinite_driver_reasons, rho_cap_epsilon_json
from ..core import failures  # noqa: F401 (cli_style: help as people read it)
from ..core.errors import InputErrors, LedgerError, Refused, fail
from ..core.numbers import (figure_fields, format_delta, format_number, is_infinite, safe_float)
from ..core.records import Dataset
from ..core.lazy import lazy_callable, lazy_module

if TYPE_CHECKING:
    from ..accounting.ledger_index import LedgerIndex
    from ..input.loader import LedgerSnapshot

# What the commands compute with, imported when a command runs, not for `--help` or
# `--version`.
at_delta = lazy_callable("ledger.accounting.charge_choice", "at_delta")
headline = lazy_callable("ledger.reporting.headline", "headline")
headline_lines = lazy_callable("ledger.reporting.headline", "text_lines")
LedgerSnapshot = lazy_callable("ledger.input.loader", "LedgerSnapshot")  # noqa: F811
dataset_and_caps = lazy_callable("ledger.input.loader", "dataset_and_caps")
read_document = lazy_callable("ledger.input.loader", "read_document")
release_json = lazy_callable("ledger.reporting.views", "release_json")
subset_json = lazy_callable("ledger.reporting.views", "subset_json")
infinity_text = lazy_callable("ledger.operations.reasons", "infinity_text")
table_view = lazy_callable("ledger.operations.table_view", "table_view")
text_table = lazy_callable("ledger.reporting.views", "text_table")

# Imported on first use: `--help` needs none of them, `record` not numpy.
budget = lazy_module("ledger.accounting.budget")
operations = lazy_module("ledger.operations.transactions")
people = lazy_module("ledger.operations.people")  # the ORM
audit_chain = lazy_module("ledger.store.audit_chain")
verify_ledger = lazy_callable("ledger.store.audit_verify", "verify")
configuration = lazy_module("ledger.store.configuration")
decoded_history = lazy_module("ledger.store.decoded_history")
role_grants = lazy_module("ledger.store.role_grants")
sessions = lazy_module("ledger.store.sessions")
Session = lazy_callable("sqlmodel", "Session")

EXIT_CODES_HELP = ("Exit codes: 0 done; 1 a budget check refused, or a cancel of a release whose output exists "
                   "(nothing written); 2 bad input (nothing "
                   "written); 3 the ledger could not be reached, locked or written (nothing recorded; retry "
                   "later); 4 an unexpected failure (details in the log file named).")
# -h as well as --help, on every command; plain help (rich_markup_mode=None): rich's help
# formatter costs more to import than a whole `check` is allowed.
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0] + "\n\n" + EXIT_CODES_HELP, context_settings=HELP_OPTIONS,
                  rich_markup_mode=None)
dataset_app = typer.Typer(no_args_is_help=True, help="Datasets and their variables.", context_settings=HELP_OPTIONS,
                          rich_markup_mode=None)
audit_app = typer.Typer(no_args_is_help=True, help="The tamper-evident audit chain.", context_settings=HELP_OPTIONS,
                        rich_markup_mode=None)
cap_app = typer.Typer(no_args_is_help=True, help="Budget caps on variables, groups and the whole dataset.",
                      context_settings=HELP_OPTIONS, rich_markup_mode=None)
role_app = typer.Typer(no_args_is_help=True, help="People's roles: admin, steward, approver, auditor.",
                       context_settings=HELP_OPTIONS, rich_markup_mode=None)
app.add_typer(dataset_app, name="dataset")
app.add_typer(role_app, name="role")
app.add_typer(audit_app, name="audit")
app.add_typer(cap_app, name="cap")


# which ledger (--db), how it is opened, the light read and the date options: shared by every cli_* module
from .context import DEFAULT_URL, State, as_of_json, as_of_lines, moment_text, parse_date, state  # noqa: E402,F401
from .context import open_engine as _engine  # noqa: E402
from .context import read_light as _read_light  # noqa: E402
from .context import actor as _actor  # noqa: E402

from .options import AsOfOption, DatasetOption, DeltaOption, JsonOption  # noqa: E402 (one definition each)
AccountantOption = Annotated[Optional[str], typer.Option(
    "--accountant", help="basic, rdp or pld: show this accountant's figure (default: the smallest valid one).")]


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
        from .. import __version__

        typer.echo(f"privacy-ledger {__version__}")
        raise typer.Exit()


# one BLAS thread unless the user says otherwise: the ledger's arrays are small, and two cores
# are shared with the database
THREAD_DEFAULTS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

_COMMAND = []
_ONE_COMMAND: dict[str, object] = {}


def command():
    """The click command of the application, built once per process (typer builds it from
    every command's signature: about 0.2 s)."""
    if not _COMMAND:
        built = typer.main.get_command(app)
        add_examples(built)
        _COMMAND.append(built)
    return _COMMAND[0]


def command_for(arguments: list[str]):
    """The click command that runs `arguments`: the whole application when it is built already
    (the tests) or when the arguments name no command of it (`--help`, a
    misspelt command: click lists every command); else the application with that one command or
    group, the same options and callback, built in a fraction of the time (typer inspects the
    signatures of the commands it builds: 50 ms of a fresh `check` for all of them,
    section 2). What runs is the same click command either way."""
    name = _command_name(arguments)
    if _COMMAND or name is None:
        return command()
    if name not in _ONE_COMMAND:
        only = copy(app)
        only.registered_commands = [info for info in app.registered_commands
                                    if typer.main.get_command_name(info.name or info.callback.__name__) == name]
        only.registered_groups = [info for info in app.registered_groups if info.name == name]
        if not only.registered_commands and not only.registered_groups:
            return command()
        built = typer.main.get_command(only)
        add_examples(built)
        _ONE_COMMAND[name] = built
    return _ONE_COMMAND[name]


def main() -> None:
    """The console entry point: every failure ends in one exit code (ledger.core.failures)."""
    from .terminal import neutral_streams

    for name, value in THREAD_DEFAULTS.items():  # one BLAS thread unless the user says otherwise
        os.environ.setdefault(name, value)

    with neutral_streams():
        try:
            _invoke()
        except SystemExit:
            raise
        except BaseException as exc:  # noqa: BLE001 -- every failure gets its exit code, never a traceback
            if isinstance(exc, KeyboardInterrupt):
                raise
            sys.exit(failures.handle(exc, ledger=state.url))


def _invoke() -> None:
    """Run the command line. With --json, a usage error (an unknown command or option, a missing
    argument) is printed in the JSON error shape on standard output too, with its exit code
    (README: "--json prints JSON, errors included"), not only as the usage text on stderr."""
    if not cli_json.wants_json():
        command_for(sys.argv[1:])()
        return
    from typer.exceptions import TyperException  # click's UsageError, as typer ships it

    try:
        code = command_for(sys.argv[1:]).main(standalone_mode=False)
    except TyperException as exc:
        code = getattr(exc, "exit_code", failures.EXIT_BAD_INPUT)
        context = getattr(exc, "ctx", None)
        where = context.command_path.removeprefix(context.find_root().info_name or "").strip() if context else ""
        cli_json.print_errors([LedgerError("command line", where, exc.format_message())], exit_code=code)
        sys.exit(code)
    sys.exit(code if isinstance(code, int) else 0)


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
        typer.echo(f"nothing was written. {NEXT_STEPS}", err=True)
    return failures.EXIT_REFUSED


NEXT_STEPS = ("What each cap has left: `privacy-ledger headroom VARIABLES`; what to do next: "
              "docs/how-to/exit-codes.md#exit-1-a-budget-check-refused.")


def _refused(exc: Refused) -> int:
    """A step the accounting refuses outside a cap check: one line, exit 1 (core.errors.Refused)."""
    if cli_json.wants_json():
        cli_json.print_refused(exc)
    else:
        error = exc.error
        line = f"{error.source}: {error.field}: {failures.short_quotes(error.message)}".replace(chr(10), " ")
        typer.echo(f"refused: {failures.excerpt(line, 1000)}", err=True)
        typer.echo("nothing was written.", err=True)
    return failures.EXIT_REFUSED


failures.register(InputErrors, _input_errors)
failures.register(Refused, _refused)
class _Refused(type):
    """isinstance(exc, BudgetRefused) without importing the operations for `--help`: no
    refusal can exist before they are imported."""

    def __instancecheck__(cls, exc) -> bool:
        module = sys.modules.get("ledger.operations.transactions")
        return module is not None and isinstance(exc, module.BudgetRefused)


failures.register(_Refused("BudgetRefused", (Exception,), {}), _budget_refused)


MAX_ERRORS_SHOWN = 50


def report_errors(errors: list[LedgerError]) -> None:
    """Each error on one line, quoting at most a short excerpt; at most MAX_ERRORS_SHOWN."""
    for error in errors[:MAX_ERRORS_SHOWN]:
        # (the source as given: a file's path; the field and the message quote at most 80 characters of a value)
        where = f"{error.source}: {failures.short_quotes(error.field)}" if error.field else error.source
        line = f"{where}: {failures.short_quotes(error.message)}".replace(chr(10), " ")
        typer.echo(f"error: {failures.excerpt(line, 600)}", err=True)
    if len(errors) > MAX_ERRORS_SHOWN:
        typer.echo(f"... and {len(errors) - MAX_ERRORS_SHOWN} more", err=True)
    typer.echo(f"{len(errors)} problem{'s' if len(errors) != 1 else ''}; nothing was written. "
               f"{where_to_read(errors)}", err=True)


FILE_SOURCE = re.compile(r".+\.(ya?ml|json)(:\d+)?$", re.IGNORECASE)  # "plan.yaml:5", a file's problem


def where_to_read(errors: list[LedgerError]) -> str:
    """The page of the documentation (docs/ in the repository) that the first error's field is
    explained on: a mechanism's parameters, a file's fields, or a command's arguments."""
    first = errors[0] if errors else None
    if first is not None and ".mechanism" in first.field:
        return "Mechanisms and their parameters: `privacy-ledger mechanisms`, docs/reference/mechanisms.md."
    if first is not None and FILE_SOURCE.match(first.source):
        return "File formats: docs/reference/file-formats.md."
    if first is not None and first.source == "person acting":
        return "Who may do what: `privacy-ledger role list`, docs/explanation/people.md."
    return "Commands and options: `privacy-ledger COMMAND -h`, docs/reference/commands.md."


def _pick_dataset(snapshot: LedgerSnapshot, name: str | None) -> Dataset:
    return choices.pick_dataset(snapshot, name)


def _delta(option: str | None, dataset: Dataset) -> Fraction:
    return choices.parse_delta(option, dataset)


def _index(snapshot: LedgerSnapshot, dataset: Dataset) -> LedgerIndex:
    return choices.charged_index(snapshot, dataset)


def _indexed(dataset: str | None, titles: bool = False, variables: list[str] | None = None,
             accounts: bool = True, when=None) -> tuple[Dataset, LedgerIndex]:
    """The chosen dataset and the index of its charged releases, from the accounting rows
    (columns.py): no release is decoded but the few the exact path needs.
    `accounts=False`: without what the Rényi and PLD accountants read (`pairs`). `when`
    (--as-of): the releases charged then, with the status each had then (store/as_of.py)."""
    with _rows_index(dataset, titles, variables, accounts, when) as found:
        return found


@contextmanager
def _rows_index(dataset: str | None, titles: bool = False, variables: list[str] | None = None,
                accounts: bool = True, when=None):
    """`_indexed`, with the session kept open inside the block: the index reads release titles
    when first asked for them (only the rows a table shows, on a large ledger). With `when`,
    where the rows cannot state the ledger then exactly (as_of.rows_then: moments past about
    2112), the whole releases, each with the status it had then (ledger.accounting.history)."""
    with Session(_engine()) as session:
        light = configuration.write_context(session)
        chosen = _pick_dataset(light, dataset)
        if when is not None:  # (every row read, and the subset resolved against the dataset then)
            yield choices.index_as_of(session, chosen, light.families, when, titles=titles,
                                      touching=None if variables is None else set(), accounts=accounts)
            return
        from ..store import columns

        index = columns.index_for(session, chosen.variable_names, chosen.name, light.families, titles,
                                  _resolve_variables(chosen, variables) if variables is not None else None,
                                  accounts)
        yield chosen, index


def _read(dataset: str | None = None) -> LedgerSnapshot:
    with sessions.read_session(_engine()) as session:
        return decoded_history.snapshot(session, dataset)


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------


@app.command()
def init(as_json: JsonOption = False) -> None:
    """Create an empty ledger; its first user becomes its admin, holding every role."""
    actor = _actor()
    engine = _engine(create=True)
    with sessions.write_session(engine) as session:
        made = people.bootstrap(session, actor)
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "ledger": state.url, "admin": actor if made else None}))
        return
    typer.echo(f"ledger ready at {state.url}"
               + (f"; {actor} is its admin (roles: {', '.join(people.ROLES)})" if made else ""))


@dataset_app.command("add")
def dataset_add(
    file: Annotated[Path, typer.Argument(help="Dataset file (YAML or JSON).")],
    as_json: JsonOption = False,
) -> None:
    """Add a dataset, its variables, groups and caps."""
    document, errors = read_document(file)
    dataset, caps = dataset_and_caps(document, errors)
    actor = _actor()  # (read before the ledger is created)
    if not operations.add_dataset(_engine(create=True), dataset, caps, actor, str(file),
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
    count = len(dataset.variables)
    typer.echo(f"added dataset {dataset.name} with {count} variable{'s' if count != 1 else ''}"
               + (f" and {len(caps)} cap{'s' if len(caps) != 1 else ''}" if caps else ""))


@app.command()
def record(
    files: Annotated[list[Path], typer.Argument(help="Release files (YAML or JSON).")],
    as_json: JsonOption = False,
) -> None:
    """Record releases: every file and every cap is checked first; all are recorded or none.
    A release without status is planned. A release already recorded with identical content
    is left as it is (a safe retry); one recorded with other content is refused."""
    actor = _actor()
    result = operations.record(_engine(), operations.release_builder(files, actor), actor)
    if as_json:
        why = infinite_driver_reasons(result.checks)
        typer.echo(cli_json.dumps({"ok": True, "recorded": [r.id for r in result.releases],
                                   "families": [f.id for f in result.families],
                                   "unchanged": [r.id for r in result.unchanged],  # identical retries
                                   "conversions": _conversions(result.releases),
                                   "caps": [check_json(c, why) for c in result.checks]}))
        return
    if result.unchanged:
        ids = ", ".join(r.id for r in result.unchanged)
        typer.echo(f"already recorded, identical: {ids} (nothing written for "
                   f"{'it' if len(result.unchanged) == 1 else 'them'})")
        if not result.releases and not result.families:
            return
    count = len(result.releases)
    typer.echo(f"recorded {count} release{'s' if count != 1 else ''}"
               + (f" and {len(result.families)} famil{'ies' if len(result.families) != 1 else 'y'}"
                  if result.families else ""))
    for conversion in _conversions(result.releases):
        typer.echo(conversion["text"])
    for line in check_lines(result.checks, why=infinite_driver_reasons(result.checks)):
        typer.echo(line)


def _conversions(releases) -> list[dict]:
    """The guarantees charged in their dataset's relation other than as stated (docs/explanation/model.md#variables-subsets-and-neighbours)."""
    from ..accounting.relation import conversions

    return [found for release in releases for found in conversions(release)]


@app.command("check")
def check_command(
    plans: Annotated[list[Path], typer.Argument(help="Planned releases, in the release file format.")],
    as_json: JsonOption = False,
) -> None:
    """Does a planned release keep every budget cap, and by how much? Exit 1 when any cap would break."""
    checks, releases = operations.check_plan(_engine(), operations.release_builder(plans, _actor()))
    if as_json:
        why = infinite_driver_reasons(checks)
        typer.echo(json.dumps({"ok": all(c.ok for c in checks), "conversions": _conversions(releases),
                               "caps": [check_json(c, why) for c in checks]}, indent=2, ensure_ascii=False))
    else:
        for conversion in _conversions(releases):
            typer.echo(conversion["text"])
        if not checks:
            typer.echo("no cap covers what this plan reads")
        for line in check_lines(checks, why=infinite_driver_reasons(checks)):
            typer.echo(line)
        typer.echo("every cap holds" if all(c.ok for c in checks) else f"REFUSED: a cap would break. {NEXT_STEPS}")
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


@app.command("headroom")
def headroom_command(
    variables: Annotated[list[str], typer.Argument(help="The variables a new release would read.")],
    dataset: DatasetOption = None,
    delta: DeltaOption = None,
    as_json: JsonOption = False,
    as_of: AsOfOption = None,
    mechanism: Annotated[str, typer.Option(
        "--mechanism", help="What the new release is: any (any epsilon-DP or rho-zCDP mechanism, the worst "
                            "case; the default), laplace (a Laplace release of that epsilon) or gaussian (a "
                            "Gaussian: the smallest sigma / sensitivity). `check` of such a plan draws the "
                            "same boundary.")] = "any",
) -> None:
    """The largest epsilon (and rho) a new release reading exactly these variables could take such
    that every cap's enforcement (the decision `record` makes, with the smallest valid filter
    figure) would still admit it; --as-of: as the ledger stood then; --delta: the delta the rho
    headroom is also stated at as an epsilon (the dataset's by default)."""
    from ..operations.cap_accounting import HEADROOM_MECHANISMS

    when = parse_date(as_of, "--as-of")
    if mechanism not in HEADROOM_MECHANISMS:
        raise fail("command line", "--mechanism", f"must be one of {', '.join(HEADROOM_MECHANISMS)}. "
                                                  f"Found {mechanism!r}.")
    engine = _engine()  # (opened once: the dataset's names and the caps' totals from the same ledger)
    with sessions.read_session(engine) as session:
        chosen = _pick_dataset(configuration.write_context(session), dataset)
        if when is not None:  # its variables and groups as they stood then (history.state_as_of)
            from ..store.as_of import state_then

            chosen = state_then(session, chosen, when)[0]
    names = _resolve_variables(chosen, variables)
    room = operations.headroom(engine, chosen.name, names, when=when, mechanism=mechanism,
                               delta=_delta(delta, chosen))
    if as_json:
        typer.echo(json.dumps({
            "variables": list(room.variables),
            "mechanism": room.mechanism,
            "assumes": HEADROOM_ASSUMES[room.mechanism],
            **figure_fields("epsilon", room.epsilon, down=True),
            "epsilon_binding": room.epsilon_binding and room.epsilon_binding.name,
            "epsilon_accountant": room.epsilon_accountant,
            **figure_fields("rho", room.rho, down=True),
            "rho_binding": room.rho_binding and room.rho_binding.name,
            "rho_accountant": room.rho_accountant,
            **({} if room.multiplier is None else figure_fields("multiplier", room.multiplier)),
            **figure_fields("delta", room.delta),
            **figure_fields("rho_epsilon", room.rho_epsilon),
            **({} if when is None else as_of_json(chosen.name, when)),
        }, indent=2, ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    label = "{" + ", ".join(room.variables) + "}"

    def binding(cap, accountant) -> str:
        if cap is None:
            return " (no cap applies)"
        return f" (binding cap: {cap.name}" + (f", decided by {accountant}" if accountant not in (None, "basic")
                                                else "") + ")"

    as_epsilon = (f"; as epsilon at delta {format_delta(room.delta)}: {format_number(room.rho_epsilon)}"
                  if room.rho_epsilon is not None and room.rho and not is_infinite(room.rho) else "")
    if room.epsilon is not None:
        typer.echo(f"{label}: largest epsilon {format_number(room.epsilon, down=True)}"
                   + binding(room.epsilon_binding, room.epsilon_accountant))
    if room.multiplier is not None:
        smallest = ("no Gaussian fits" if is_infinite(room.multiplier)
                    else f"smallest sigma / sensitivity {format_number(room.multiplier)}")
        typer.echo(f"{label}: {smallest}, largest rho {format_number(room.rho, down=True)}{as_epsilon}"
                   + binding(room.rho_binding, room.rho_accountant))
    elif room.rho is not None and room.rho == 0 and room.rho_binding is not None and room.rho_binding.delta is None \
            and room.rho_binding.rho is None:
        typer.echo(f"{label}: no Gaussian (rho) release fits: cap {room.rho_binding.name} is in pure epsilon, which "
                   "a Gaussian never meets (a cap with a delta or in rho would admit one)")
    elif room.rho is not None:
        typer.echo(f"{label}: largest rho {format_number(room.rho, down=True)}{as_epsilon}"
                   + binding(room.rho_binding, room.rho_accountant))
    typer.echo(f"  (a new release of at most this much, reading exactly these variables, is admitted by every "
               f"cap's enforcement, as `record` decides; the largest epsilon and rho are that threshold itself, "
               f"to 10⁻⁹ and rounded down, not rounded to 4 decimals as other figures are; it assumes "
               f"{HEADROOM_ASSUMES[room.mechanism]}"
               + (f"; the ledger as of {moment_text(when)}" if when is not None else "") + ")")


HEADROOM_ASSUMES = {
    "any": "any mechanism with that epsilon (the worst case: randomized response) or that rho; "
           "--mechanism laplace or gaussian answers for that mechanism, as `check` would",
    "laplace": "a Laplace release of that epsilon (its own Rényi curve and privacy loss distribution)",
    "gaussian": "a Gaussian release of that sigma / sensitivity (rho = 1 / (2 (sigma / sensitivity)^2))",
}


ReasonOption = Annotated[Optional[str], typer.Option(
    "--reason", help="Why (required; kept in the audit trail and the register).")]
AtOption = Annotated[Optional[str], typer.Option(
    "--at", metavar="DATE", help="When it was published, for a publication that happened elsewhere "
                 "(ISO 8601, UTC unless it says otherwise; a date alone is its start, 00:00; never in the "
                 "future, never before it was planned).")]
ReleaseArgument = Annotated[str, typer.Argument(help="Release id.")]


def _change_status(action: str, release: str, as_json: bool, reason: str | None = None,
                   at: str | None = None) -> None:
    """approve, publish, retract, cancel: each command takes only the options its step uses
    (publish --at; retract and cancel --reason)."""
    moment = parse_date(at, "--at", start=True) if at is not None else None
    changed = operations.change_status(_engine(), release, action, _actor(), reason=reason, at=moment)
    over = _caps_over(changed) if action == "cancel" else []
    if as_json:
        body = {"ok": True, "release": changed.id, "status": changed.status.value}
        if action == "publish":
            body["published_at"] = changed.published_at.isoformat()
        if action == "cancel":
            why = infinite_driver_reasons(over)
            body["caps_over"] = [check_json(c, why) for c in over]
        typer.echo(cli_json.dumps(body))
        return
    typer.echo(f"{changed.id}: {changed.status.value}"
               + (f" (published at {changed.published_at.isoformat()})" if action == "publish" else ""))
    if over:
        typer.echo(f"warning: {len(over)} cap{'s are' if len(over) != 1 else ' is'} over its limit after this "
                   "cancellation:")
        for line in check_lines(over, planned=False, why=infinite_driver_reasons(over)):
            typer.echo(line)


def _caps_over(release) -> list:
    """The caps on what `release` reads that are over their limit, as `cap list` states them
    (the same checks)."""
    with sessions.read_session(_engine()) as session:
        caps = [cap for cap in configuration.caps(session, release.dataset) if cap.subset & release.reads]
        return [c for c in operations.cap_checks(session, release.dataset, caps) if c.status == "over"] if caps else []


@app.command("approve")
def approve(release: ReleaseArgument, as_json: JsonOption = False) -> None:
    """Approve a planned release (re-checks its caps)."""
    _change_status("approve", release, as_json)


@app.command("publish")
def publish(release: ReleaseArgument, at: AtOption = None, as_json: JsonOption = False) -> None:
    """Publish an approved release (re-checks its caps); --at: when, for a publication that happened elsewhere."""
    _change_status("publish", release, as_json, at=at)


@app.command("retract")
def retract(release: ReleaseArgument, reason: ReasonOption = None,
            as_json: JsonOption = False) -> None:
    """Retract a published release; it still counts (what was published cannot be unpublished)."""
    _change_status("retract", release, as_json, reason=reason)


@app.command("cancel")
def cancel(release: ReleaseArgument, reason: ReasonOption = None,
           as_json: JsonOption = False) -> None:
    """Cancel a planned or approved release whose output was never computed; frees its reservation
    (a release run, or recorded with its output digest, stays charged: refused, exit 1)."""
    _change_status("cancel", release, as_json, reason=reason)


@cap_app.command("set")
def cap_set(
    subset: Annotated[list[str], typer.Argument(help="Variables, a group name, or `all`.")],
    epsilon: Annotated[Optional[str], typer.Option(help="Cap in epsilon.")] = None,
    delta: Annotated[Optional[str], typer.Option(help="With --epsilon: epsilon at this delta.")] = None,
    rho: Annotated[Optional[str], typer.Option(help="Cap in rho (zCDP).")] = None,
    name: Annotated[Optional[str], typer.Option(help="The cap's name.")] = None,
    filter_: Annotated[Optional[str], typer.Option("--filter", help=(
        "With --delta: running (the subset's running figure stays within the cap), gaussian (Gaussian DP, "
        "exact for Gaussian releases) or renyi (one Rényi order fixed now, tight near the cap for many "
        "similar releases). Default: gaussian when the releases it already holds are all Gaussian, else "
        "running."))] = None,
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add or replace a cap on a variable, a group, or the whole dataset. A cap is a privacy
    filter fixed when it is set: it admits releases while its statement holds, whatever order
    they come in.
"""
    snapshot = _read_light()
    chosen = _pick_dataset(snapshot, dataset)
    entry: dict = {}
    if subset == ["all"]:
        entry["subset"] = "all"
    elif subset == ["protected"] and chosen.group("protected") is None and "protected" not in chosen.variable_names:
        entry["subset"] = "protected"
    elif len(subset) == 1 and chosen.group(subset[0]) is not None:
        entry["name"] = subset[0]
        if name:  # the group's variables, under another name
            entry["subset"] = sorted(chosen.group(subset[0]))
    else:
        entry["subset"] = subset
    if name:
        entry["name"] = name
    for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho), ("filter", filter_)):
        if value is not None:
            entry[key] = value
    engine = _engine()
    try:
        caps = operations.add_caps(engine, chosen.name, [entry], _actor(), "command line")
    except InputErrors as exc:  # named as the steward typed them: --epsilon, SUBSET (not caps[0].epsilon)
        raise InputErrors([LedgerError(e.source, _cap_option(e.field), e.message) for e in exc.errors]) from None
    with sessions.read_session(engine) as session:
        checks = operations.cap_checks(session, chosen.name, caps)
    if as_json:
        why = infinite_driver_reasons(checks)
        typer.echo(cli_json.dumps({"ok": True, "caps": [check_json(c, why) for c in checks]}))
        return
    for cap in caps:
        typer.echo(f"cap {cap.name} on {{{', '.join(cap.ordered_subset)}}}: {cap.limit_text}")
    for line in check_lines(checks, planned=False, why=infinite_driver_reasons(checks)):  # a cap below what is spent is over at once
        typer.echo(line)


def _cap_option(field: str) -> str:
    """`cap set`'s one entry's field ("caps[0].epsilon", "caps[0].subset[1]") as its option or argument."""
    if not field.startswith("caps[0]."):
        return field
    key = field.removeprefix("caps[0].").split("[")[0]
    return "SUBSET" if key == "subset" else f"--{key}"


@cap_app.command("list")
def cap_list(dataset: DatasetOption = None, as_json: JsonOption = False, as_of: AsOfOption = None) -> None:
    """Every cap, its spend (reservations included), headroom and status; --as-of: as it stood then."""
    when = parse_date(as_of, "--as-of")
    snapshot = _read_light()
    chosen = _pick_dataset(snapshot, dataset)
    engine = _engine()
    with sessions.read_session(engine) as session:
        caps = configuration.caps(session, chosen.name)
        if when is None:
            checks = operations.cap_checks(session, chosen.name, caps)
        else:  # the caps as they stood then: set by then, with the limit each had (history.state_as_of)
            from ..store.as_of import state_then

            _, caps, _ = state_then(session, chosen, when)
            # the same accountants as `cap list`: totals and states as the ledger stood,
            # from the accounting rows of the releases charged then
            checks = operations.cap_checks_as_of(session, chosen.name, caps, when)
    delta = choices.parse_delta(None, chosen)
    if as_json:  # (a list, as without --as-of: each cap states the moment)
        why = infinite_driver_reasons(checks, when)
        typer.echo(json.dumps([{**check_json(c, why), **rho_cap_epsilon_json(c.cap, delta),
                                **({} if when is None else as_of_json(chosen.name, when))}
                               for c in checks], indent=2, ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    if not checks:
        typer.echo(f"dataset {chosen.name} has no caps" + (" then" if when is not None else ""))
    for line in check_lines(checks, planned=False, why=infinite_driver_reasons(checks, when), rho_at_delta=delta):
        typer.echo(line)


def _resolve_variables(chosen: Dataset, names: list[str]) -> set[str]:
    return choices.resolve_variables(chosen, names)



@app.command()
def releases(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """List recorded releases."""
    # the releases decoded a page at a time (decoded_history.release_pages), with the steps of that page's
    # releases alone, never the whole ledger at once: a million releases held as Release objects
    # took gigabytes; the output is the same (the text table keeps each release's cells,
    # a line of text, until every column's width is known)
    with sessions.read_session(_engine()) as session:
        if as_json:
            _releases_json(session, decoded_history.release_pages(session, dataset))
            return
        import zlib

        from ..reporting.views import RELEASES_HEADER, release_cells, releases_line, releases_widths

        datasets = configuration.write_context(session).datasets
        # the table's cells kept a page at a time as one compressed text (each cell ended by a
        # separator no cell holds; else that page's cells themselves), the columns' widths found
        # on the way, then the lines: at a million releases the rows as texts held 422 MB
        pages: list = []
        widths = None
        ended_lines = []
        for page in decoded_history.release_pages(session, dataset):
            steps = _steps(session, [r.id for r in page])
            cells = [release_cells(r, datasets) for r in page]
            widths = releases_widths(cells, widths)
            text = "".join(cell + _SEPARATOR for line in cells for cell in line)
            pages.append(zlib.compress(text.encode("utf-8"), 1) if text.count(_SEPARATOR) == sum(map(len, cells))
                         else cells)
            del text
            for release in page:  # who retracted or cancelled, when, and why (docs/explanation/model.md#people-duties-and-the-book-of-record)
                ended = next((s for s in reversed(steps.get(release.id, [])) if s.get("reason") is not None), None)
                if ended:
                    ended_lines.append(f"{release.id}: {ended['step']} by {ended['by']} at {ended['at']}: "
                                       f"{ended['reason']}")
    if widths is None:
        typer.echo("no releases" + (f" in dataset {dataset}" if dataset else ""))
        return
    widths = releases_widths([RELEASES_HEADER], widths)
    typer.echo(releases_line(RELEASES_HEADER, widths))
    n_cells = len(RELEASES_HEADER)
    for kept in pages:
        if isinstance(kept, bytes):
            cells = zlib.decompress(kept).decode("utf-8").split(_SEPARATOR)[:-1]
            kept = [cells[k:k + n_cells] for k in range(0, len(cells), n_cells)]
        typer.echo("\n".join(releases_line(row, widths) for row in kept))
    for line in ended_lines:
        typer.echo(line)


_SEPARATOR = "\x1f"  # (the unit separator) between a `releases` row's cells while its widths are found


def _releases_json(session, pages) -> None:
    """`releases --json`, a page at a time: the text json.dumps(list, indent=2) gives (each
    element is its own dump, indented one level more)."""
    from ..store.codec import release_to_dict

    from ..reporting.views import release_charge_json

    datasets = configuration.write_context(session).datasets
    first = True
    for page in pages:
        steps = _steps(session, [r.id for r in page])
        # the charge the text table shows (its column), as a figure
        items = [json.dumps({**release_json(release_to_dict(r)), **release_charge_json(r, datasets.get(r.dataset)),
                             "steps": steps.get(r.id, [])}, indent=2,
                            ensure_ascii=False).replace("\n", "\n  ") for r in page]
        typer.echo(("[\n  " if first else ",\n  ") + ",\n  ".join(items), nl=False)
        first = False
    typer.echo("[]" if first else "\n]")


def _steps(session, ids: list[str]) -> dict[str, list[dict]]:
    """Release id -> its lifecycle steps after recording: who, when, and why (docs/explanation/model.md#people-duties-and-the-book-of-record)."""
    kinds = ["release.approved", "release.published", "release.retracted", "release.cancelled"]
    found: dict[str, list[dict]] = {}
    for seq, kind, subject, at, actor, payload in audit_chain.lifecycle_events(session, kinds, ids):
        step = {"step": kind.removeprefix("release."), "by": actor, "at": at, "event": seq}
        if kind in ("release.retracted", "release.cancelled"):
            step["reason"] = json.loads(payload).get("reason")
        found.setdefault(subject, []).append(step)
    return found


TABLE_CELL_LIMIT = 1_000_000  # release rows x variables printed as text; past it, the largest releases
TABLE_LARGEST = 25


@app.command()
def table(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False,
          accountant: AccountantOption = None, as_of: AsOfOption = None,
          all_rows: Annotated[bool, typer.Option("--all", help="Print every release row, however many.")] = False,
          ) -> None:
    """The release-by-variable table (Tan, Table 1) with totals and the whole-dataset column."""
    from ..operations.shown_figures import table_accountants
    from ..reporting.accountant_views import best_headline, table_totals_line

    when = parse_date(as_of, "--as-of")
    from ..core.progress import progress

    _check_accountant(accountant)
    with progress("computing the release-by-variable table"), ExitStack() as stack:
        # the accounting rows, with the accountants' events and times; --as-of: the
        # releases charged then, each with the status it had then (store/as_of.py)
        chosen, index = stack.enter_context(_rows_index(dataset, when=when))
        chosen_delta = _delta(delta, chosen)
        n_rel = len(index.releases)
        fits = n_rel * max(len(index.variables), 1) <= TABLE_CELL_LIMIT
        streamed = as_json and not fits  # every row, written a chunk at a time (cli/table_json.py)
        small = not streamed and (as_json or all_rows or fits)
        if small:
            risk = index.table(chosen.name, at_delta(chosen_delta))
            view = table_view(risk, chosen_delta)
            accounts = table_accountants(index, risk, chosen_delta, accountant, every=as_json)
        else:
            # a million rows is not a table anyone reads: the largest releases (by their whole-dataset
            # cost) in recording order, and the total row over every release, computed a chunk of
            # releases at a time
            from ..reporting.accountant_views import TableAccounts
            from ..store.columns import large_table

            # the PLD (information only, never the figure shown) for JSON or `--accountant pld` alone,
            # as shown_figures.table_accountants chooses
            wanted = ["basic", "rdp"] + (["pld"] if streamed or accountant == "pld" else [])
            risk, per_variable, wide = large_table(index, chosen.name, at_delta(chosen_delta), chosen_delta,
                                                   TABLE_LARGEST, wanted)
            view = table_view(risk, chosen_delta)
            accounts = TableAccounts(risk.variables, per_variable, wide, accountant)
            wide_ids = index.cost_ids(range(len(index.variables)))  # (every row's, kept by large_table)
        head = headline(index, chosen, chosen_delta, at_delta(chosen_delta), risk.total, risk.total_dataset_wide)
        head = best_headline(head, index, chosen_delta, accounts)  # the figures `subset` and `pairs` print
        if streamed:
            from . import table_json

            def heads(start: int, stop: int) -> list[tuple[str, str, str]]:
                releases = index.releases
                if hasattr(releases, "prefetch"):
                    releases.prefetch(range(start, stop))
                found = [(r.id, r.title, r.status.value) for r in releases[start:stop]]
                if hasattr(releases, "found"):
                    releases.found.clear()  # (memory holds one chunk's heads)
                return found

            used = table_json.used_values(index, wide_ids)
            document = table_json.document(view, risk, head.to_json(), accounts.to_json(), used, chosen_delta)
            table_json.write(sys.stdout.write, document, index, wide_ids, chosen_delta, heads)
            return
    if as_json:
        typer.echo(json.dumps({**view.to_json(), "headline": head.to_json(), **accounts.to_json(),
                               **({} if when is None else as_of_json(chosen.name, when))}, indent=2,
                              ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    typer.echo(f"dataset {chosen.name}: {view.basis.label}\n")
    for line in headline_lines(head):
        typer.echo(line)
    typer.echo("")
    typer.echo(text_table(accounts.apply(view)))
    typer.echo("\n" + table_totals_line(accounts))
    if not small:
        typer.echo(f"\n{len(view.rows)} of {n_rel:,} release rows shown (the largest on the whole dataset); the "
                   "total row is over every release. --all prints every row; `report --format csv` writes the table.")


def _check_accountant(accountant: str | None) -> None:
    from ..accounting.figure_validity import ACCOUNTANTS

    if accountant is not None and accountant not in ACCOUNTANTS:
        raise fail("command line", "--accountant", f"must be one of {', '.join(ACCOUNTANTS)}, found {accountant!r}")


@app.command()
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
    names = _resolve_variables(chosen, variables)
    chosen_delta = _delta(delta, chosen)
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
        from ..operations.explain import figure_explanation

        if cost.spend.unbounded:
            figure, theorem = infinity_text(why), None
        else:
            figure, theorem = f"epsilon {format_number(shown.epsilon)}" + (
                " (pure)" if shown.delta is None else f" at delta {format_delta(shown.delta)}"), shown.theorem
        typer.echo("  in words: " + figure_explanation(cost.subset, cost.releases, figure, risks,
                                                       theorem=theorem, case=shown.case))


@app.command()
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
    chosen_delta = _delta(delta, chosen)
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


def pair_spends(index: LedgerIndex, objective) -> dict[tuple[str, str], object]:
    """The loss on every pair, in `LedgerIndex.pairs()` order, from one `pair_matrix`
    (the report's array path: the same figures without a subset query per pair)."""
    grid = index.pair_matrix(objective)
    names = index.variables
    return {(names[i], names[j]): grid.spend(i, j)
            for i in range(len(names)) for j in range(i + 1, len(names))}


@app.command("mechanisms")
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

    actor = _actor()  # (read before the ledger is created)
    if example == "graduates":
        text = run_graduates_demo(_engine(create=True), actor=actor, seed=seed)
    elif example != "census":
        raise fail("command line", "--example", f"must be census or graduates{choices.did_you_mean(example, ['census', 'graduates'])}, "
                                                f"found {example!r}")
    else:
        from .outputs import output_target

        output_target(out)
        text = run_demo(_engine(create=True), out, actor=actor)
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
                                   "rows they name, and every derived row against the digest kept with the "
                                   "head); with --checkpoint, since its signed head; a full verification when "
                                   "there is none yet.")] = False,
    checkpoint: Annotated[Optional[Path], typer.Option(help="A signed checkpoint (`audit checkpoint`): also "
                                                       "prove the ledger still holds its head.")] = None,
    public_key: Annotated[Optional[Path], typer.Option(help="The checkpoint signer's public key (PEM).")] = None,
) -> None:
    """Recompute the hash chain and compare every row with its audit event (one consistent
    snapshot: writers may go on meanwhile; exit 1 when anything is wrong, an empty chain included);
    with --checkpoint, prove the chain still holds the signed head at its position (no truncation,
    no rewrite); with --since-checkpoint, check only what was appended since the last verified head."""
    from ..store import verified_head
    from .stewardship import check_checkpoint, read_checkpoint
    from ..core.progress import progress

    if (checkpoint is None) != (public_key is None):
        raise fail("command line", "--public-key" if checkpoint else "--checkpoint",
                   "--checkpoint and --public-key go together")
    head = read_checkpoint(checkpoint, public_key) if checkpoint is not None else None
    engine = _engine()
    with sessions.read_session(engine) as session, progress("verifying the audit chain"):
        kept = verified_head.read_head(session) if since_checkpoint else None
        if since_checkpoint and head is not None and head.derived is not None:
            kept = verified_head.VerifiedHead(head.seq, head.hash, full_at=None if kept is None else kept.full_at,
                                              derived=head.derived)  # the signed head, not the one in the database
        mark = None if kept is None else (kept.seq, kept.hash)
        result = verify_ledger(session) if mark is None else verified_head.verify_since(session, mark, kept.derived)
        lost = check_checkpoint(session, head) if head is not None else None
    if result.ok:  # the next --since-checkpoint starts here (not kept when busy or read-only: no wait)
        verified_head.remember(engine, result, full=result.full, previous=kept)
    if as_json:
        typer.echo(cli_json.dumps({"ok": result.ok and lost is None, "events": result.events, "head": result.head,
                                   "problems": list(result.problems),
                                   "checkpoint": None if head is None else
                                   {"seq": head.seq, "hash": head.hash, "held": lost is None, "why": lost}}))
        if not result.ok or lost is not None:
            raise typer.Exit(1)
        return
    if lost is not None:
        typer.echo(f"checkpoint NOT held: {lost}", err=True)
        raise typer.Exit(1)
    if head is not None:
        # head.at is when the head event was written (the signing time is the file's made_at)
        typer.echo(f"checkpoint held: event {head.seq} has hash {head.hash} "
                   f"({'written ' + head.at if head.at else 'empty ledger'})")
    if result.ok:
        scope = "" if mark is None or result.full else (
            f" (events {mark[0] + 1}-{result.events} checked, appended since the last verified head, event "
            f"{mark[0]})" if result.events > mark[0]
            else f" (no event appended since the last verified head, event {mark[0]})")
        typer.echo(f"audit chain intact: {result.events} events, head {result.head}{scope}")
        return
    typer.echo(f"audit chain BROKEN: first bad event: {result.problems[0]}", err=True)
    for problem in result.problems[1:]:
        typer.echo(f"  also: {problem}", err=True)
    raise typer.Exit(1)


@role_app.command("grant")
def role_grant(person: Annotated[str, typer.Argument(help="The person.")],
               role: Annotated[str, typer.Argument(help="admin, steward, approver or auditor.")], as_json: JsonOption = False) -> None:
    """Grant a role (admins only; an audit event)."""
    _change_role(person, role, True, as_json)


@role_app.command("revoke")
def role_revoke(person: Annotated[str, typer.Argument(help="The person.")],
                role: Annotated[str, typer.Argument(help="admin, steward, approver or auditor.")], as_json: JsonOption = False) -> None:
    """Revoke a role (admins only; an audit event). The last admin stays admin."""
    _change_role(person, role, False, as_json)


def _change_role(person: str, role: str, granted: bool, as_json: bool = False) -> None:
    person = people.check_person(person, "PERSON")
    role = people.check_role(role)
    actor = _actor()
    with sessions.write_session(_engine()) as session:
        people.require(session, actor, "change roles")
        held = role_grants.roles(session)
        if granted:
            people.check_new_person(person, held, "PERSON")
        if granted and role in held.get(person, frozenset()):
            if as_json:
                typer.echo(cli_json.dumps({"ok": True, "person": person, "role": role, "granted": True,
                                           "changed": False}))
                return
            typer.echo(f"{person} already holds the {role} role; nothing written")
            return
        if not granted:
            if person not in held:
                raise fail("command line", "PERSON", f"unknown person {person!r}: holds no role in this ledger")
            if role not in held[person]:
                raise fail("command line", "ROLE", f"{person!r} does not hold the {role} role")
            if role == "admin" and [p for p, r in held.items() if "admin" in r] == [person]:
                raise fail("command line", "ROLE", f"{person!r} is the ledger's only admin; grant admin to "
                                                   "another person first")
        role_grants.set_role(session, person, role, granted, actor)
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "person": person, "role": role, "granted": granted, "changed": True}))
        return
    typer.echo(f"{'granted' if granted else 'revoked'}: {person} {role}")


@role_app.command("list")
def role_list(as_json: JsonOption = False) -> None:
    """Every person and the roles they hold."""
    with Session(_engine()) as session:
        held = role_grants.roles(session)
    if as_json:
        typer.echo(json.dumps({person: [r for r in people.ROLES if r in roles]  # the text's order
                               for person, roles in sorted(held.items())}, indent=2, ensure_ascii=False))
        return
    if not held:
        typer.echo("no roles yet: the first person to write to this ledger becomes its admin")
    for person, roles in sorted(held.items()):
        typer.echo(f"{person}\t{', '.join(r for r in people.ROLES if r in roles)}")


from .run import assess, run, sample_privacy  # noqa: E402

app.command("run")(run)
app.command("assess")(assess)
app.command("sample-privacy")(sample_privacy)

from .report import report  # noqa: E402

app.command("report")(report)

from .serve import serve  # noqa: E402

app.command("serve")(serve)

from .export import export_app  # noqa: E402

app.add_typer(export_app, name="export")

from .plan import plan_app  # noqa: E402

app.add_typer(plan_app, name="plan")

from . import stewardship as cli_stewardship  # noqa: E402
from .dataset_views import dataset_list, dataset_show  # noqa: E402

dataset_app.command("list")(dataset_list)
dataset_app.command("show")(dataset_show)

dataset_app.command("amend")(cli_stewardship.dataset_amend)
dataset_app.command("add-variable")(cli_stewardship.dataset_add_variable)
dataset_app.command("add-categories")(cli_stewardship.dataset_add_categories)
dataset_app.command("describe")(cli_stewardship.dataset_describe)
dataset_app.command("reclassify")(cli_stewardship.dataset_reclassify)
app.add_typer(cli_stewardship.group_app, name="group")
cap_app.command("remove")(cli_stewardship.cap_remove)
audit_app.command("keygen")(cli_stewardship.audit_keygen)
audit_app.command("checkpoint")(cli_stewardship.audit_checkpoint)
audit_app.command("retotal")(cli_stewardship.audit_retotal)
