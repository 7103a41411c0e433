"""privacy-ledger: record every release of a confidential dataset and see its privacy loss per variable.

The command line over the same operations as the Python API (ledger.api).

Exit codes: 0 done; 1 a budget check refused, or a cancel of a release whose output
exists (nothing written); 2 bad input (every problem printed with its file and field;
nothing written); 3 the ledger could not be reached, locked or written (nothing
recorded; retry later); 4 an unexpected failure (one line, details in a log).
"""

from __future__ import annotations

import os
import re
import sys
from copy import copy
from typing import Annotated, Optional

import typer

from ..operations import choices
from . import json_output as cli_json, style as cli_style  # noqa: F401 (cli_style, imported for its effect: help as people read it)
from .arguments import command_name as _command_name  # the command the arguments name
from .examples import add_examples
from .caps_output import NEXT_STEPS
from ..core import failures
from ..core.errors import InputErrors, LedgerError, Refused

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


# which ledger (--db): shared by every command module
from .context import state  # noqa: E402


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


def _budget_refused(exc) -> int:
    if cli_json.wants_json():
        cli_json.print_refusal(exc)
    else:
        typer.echo(str(exc), err=True)
        typer.echo(f"nothing was written. {NEXT_STEPS}", err=True)
    return failures.EXIT_REFUSED




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


# The commands, one module per group, registered in the order `--help` lists them
from . import (audit_commands, caps_commands, figure_commands, people_commands,  # noqa: E402
               record_commands, reference_commands, releases_command)

app.command()(record_commands.init)
dataset_app.command("add")(record_commands.dataset_add)
app.command()(record_commands.record)
app.command("check")(record_commands.check_command)
app.command("headroom")(caps_commands.headroom_command)
app.command("approve")(record_commands.approve)
app.command("publish")(record_commands.publish)
app.command("retract")(record_commands.retract)
app.command("cancel")(record_commands.cancel)
cap_app.command("set")(caps_commands.cap_set)
cap_app.command("list")(caps_commands.cap_list)
app.command()(releases_command.releases)
app.command()(figure_commands.table)
app.command()(figure_commands.subset)
app.command()(figure_commands.pairs)
app.command("mechanisms")(reference_commands.mechanisms_command)
app.command()(reference_commands.demo)
audit_app.command("verify")(audit_commands.audit_verify)
role_app.command("grant")(people_commands.role_grant)
role_app.command("revoke")(people_commands.role_revoke)
role_app.command("list")(people_commands.role_list)


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
