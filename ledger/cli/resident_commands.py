"""`privacy-ledger resident start|stop|status`: the resident process (resident.py), by hand.

A pipeline that calls the command line once per release starts it once (or sets
LEDGER_RESIDENT=1, which starts it on the first call); every call after that is handed to
it. These commands always run in their own process (entry.py).
"""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from . import resident

resident_app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
                           help="A resident process that has imported everything once, so that each call "
                                "starts in milliseconds (opt in; LEDGER_RESIDENT=1 starts it on first use).")
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _path() -> str:
    try:
        return resident.socket_path()
    except OSError as exc:
        from ..core.errors import fail

        raise fail("resident", resident.DIR_ENV, str(exc)) from None


def _describe(status: dict) -> str:
    uptime = time.time() - status["started"]
    return (f"resident process {status['pid']} at {status['socket']}: up {uptime:.0f} s, {status['calls']} "
            f"call{'s' if status['calls'] != 1 else ''}, {status['running']} running, ends after "
            f"{status['idle_s']:.0f} s idle")


@resident_app.command("start")
def start(as_json: JsonOption = False) -> None:
    """Start the resident process for this user and this install (nothing if it runs)."""
    path = _path()
    status = resident.control("status", path)
    started = status is None
    if started:
        status = resident.start(path, wait=True)
    if status is None:
        from ..core.failures import LedgerUnavailable

        raise LedgerUnavailable(f"the resident process did not answer within {resident.START_WAIT_S:.0f} s "
                                f"(its log: {path[:-len('.sock')]}.log)")
    if as_json:
        typer.echo(json.dumps({**status, "started_now": started}, indent=2))
        return
    typer.echo(("started " if started else "already running: ") + _describe(status))
    for failure in status["not_preloaded"]:
        typer.echo(f"  not preloaded (imported on use): {failure}")


@resident_app.command("status")
def status(as_json: JsonOption = False) -> None:
    """Whether the resident process runs (exit 0 either way: exit 1 is a refused check; --json says
    "running": true or false)."""
    answer = resident.control("status", _path())
    if as_json:
        typer.echo(json.dumps({"running": answer is not None, **(answer or {})}, indent=2))
    else:
        typer.echo(_describe(answer) if answer else "no resident process: each call imports what it needs")


@resident_app.command("stop")
def stop(as_json: JsonOption = False) -> None:
    """Stop the resident process: it takes no new call; calls in progress finish."""
    answer = resident.control("stop", _path())
    if as_json:
        typer.echo(json.dumps({"stopped": answer is not None, **(answer or {})}, indent=2))
        return
    typer.echo(f"stopped resident process {answer['pid']}" if answer else "no resident process was running")
