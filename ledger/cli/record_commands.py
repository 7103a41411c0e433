"""The commands that write the record: `init`, `dataset add`, `record`, `check` (its dry run), and
the lifecycle steps `approve`, `publish`, `retract` and `cancel`.

Thin adapters (STYLE 8): each parses its arguments, calls the façade (ledger.api.Ledger) and
prints what it returns; every cap is checked by the operations below it, all or nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..core.lazy import lazy_callable, lazy_module
from . import json_output as cli_json
from .caps_output import NEXT_STEPS, check_json, check_lines, infinite_driver_reasons
from ..operations.moments import parse_date
from .context import actor as acting_person, book, state
from .options import JsonOption

dataset_and_caps = lazy_callable("ledger.input.datasets", "dataset_and_caps")
read_document = lazy_callable("ledger.input.documents", "read_document")
declared_privacy_unit = lazy_callable("ledger.operations.transactions", "declared_privacy_unit")
people = lazy_module("ledger.operations.people")  # the roles' names


def init(as_json: JsonOption = False) -> None:
    """Create an empty ledger; its first user becomes its admin, holding every role."""
    actor = acting_person()
    made = book(create=True).bootstrap()
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "ledger": state.url, "admin": actor if made else None}))
        return
    typer.echo(f"ledger ready at {state.url}"
               + (f"; {actor} is its admin (roles: {', '.join(people.ROLES)})" if made else ""))


def dataset_add(
    file: Annotated[Path, typer.Argument(help="Dataset file (YAML or JSON).")],
    as_json: JsonOption = False,
) -> None:
    """Add a dataset, its variables, groups and caps."""
    document, errors = read_document(file)
    dataset, caps = dataset_and_caps(document, errors)
    acting_person()  # (who acts, checked before the ledger is created: a refused name creates none)
    if not book(create=True).add_dataset_records(dataset, caps, str(file), declared_privacy_unit(document)):
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


def record(
    files: Annotated[list[Path], typer.Argument(help="Release files (YAML or JSON).")],
    as_json: JsonOption = False,
) -> None:
    """Record releases: every file and every cap is checked first; all are recorded or none.
    A release without status is planned. A release already recorded with identical content
    is left as it is (a safe retry); one recorded with other content is refused."""
    result = book().record_files(files)
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


def check_command(
    plans: Annotated[list[Path], typer.Argument(help="Planned releases, in the release file format.")],
    as_json: JsonOption = False,
) -> None:
    """Does a planned release keep every budget cap, and by how much? Exit 1 when any cap would break."""
    checks, releases = book().check_files(plans)
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
    ledger = book()
    changed = getattr(ledger, action)(release, **({"at": moment} if action == "publish" else
                                                  {"reason": reason} if action in ("retract", "cancel") else {}))
    over = ledger.caps_over(changed) if action == "cancel" else []
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


def approve(release: ReleaseArgument, as_json: JsonOption = False) -> None:
    """Approve a planned release (re-checks its caps)."""
    _change_status("approve", release, as_json)


def publish(release: ReleaseArgument, at: AtOption = None, as_json: JsonOption = False) -> None:
    """Publish an approved release (re-checks its caps); --at: when, for a publication that happened elsewhere."""
    _change_status("publish", release, as_json, at=at)


def retract(release: ReleaseArgument, reason: ReasonOption = None,
            as_json: JsonOption = False) -> None:
    """Retract a published release; it still counts (what was published cannot be unpublished)."""
    _change_status("retract", release, as_json, reason=reason)


def cancel(release: ReleaseArgument, reason: ReasonOption = None,
           as_json: JsonOption = False) -> None:
    """Cancel a planned or approved release whose output was never computed; frees its reservation
    (a release run, or recorded with its output digest, stays charged: refused, exit 1)."""
    _change_status("cancel", release, as_json, reason=reason)
