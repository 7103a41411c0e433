"""Commands for a dataset that evolves and a chain head kept outside the database.

Thin adapters (STYLE 8) over the façade (ledger.api.Ledger: `amend`, applying what
operations/amend.py says a change to a dataset is, as audited amendments; `sign_checkpoint`,
`retotal`) and its signed checkpoints (operations/audit_chain.py):

- `dataset amend FILE [--dry-run]`: a changed dataset file, applied as the
  amendments it implies, printed first; `dataset add-variable`,
  `add-categories`, `describe`, `reclassify` (with `--reason`); `group set`,
  `group remove`; `cap remove`;
- `audit keygen`, `audit checkpoint`, `audit verify --checkpoint`, and
  `audit retotal` (recompute every running total from the history).

Bad input exits 2 naming the file, field or argument; nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer
from ..core.lazy import lazy_callable, lazy_module

# imported on first use, so `--help` imports neither the ORM nor numpy nor cryptography
amend = lazy_module("ledger.operations.amend")
declared_privacy_unit = lazy_callable("ledger.operations.transactions", "declared_privacy_unit")
new_key_pair = lazy_callable("ledger.api.chain_keys", "new_key_pair")
signing_key = lazy_callable("ledger.api.chain_keys", "signing_key")
build_caps = lazy_callable("ledger.input.datasets", "build_caps")
build_dataset = lazy_callable("ledger.input.datasets", "build_dataset")
read_document = lazy_callable("ledger.input.documents", "read_document")
from .context import book  # noqa: E402
from ..core.errors import InputErrors, LedgerError, fail  # noqa: E402
from ..core.records import Cap, Dataset, Variable, misread_public  # noqa: E402

group_app = typer.Typer(no_args_is_help=True, help="Named groups of variables.")

from .options import DatasetOption, JsonOption  # noqa: E402 (one definition)


def _say(as_json: bool, text: str, **body) -> None:
    """The command's answer: its text, or with --json the JSON document {"ok": true, ...}."""
    if as_json:
        from . import json_output as cli_json

        typer.echo(cli_json.dumps({"ok": True, **body}))
    else:
        typer.echo(text)


def _reason(reason: str | None, required: bool = False) -> str | None:
    if reason is None:
        if required:
            raise fail("command line", "--reason", "a reason is required")
        return None
    if not reason.strip():
        raise fail("command line", "--reason", "the reason is empty; say why")
    return reason.strip()


# --------------------------------------------------------------------------
# Datasets that evolve
# --------------------------------------------------------------------------

Change = Callable[[Dataset, list[Cap]], tuple[Dataset, list[Cap] | None]]


def apply_change(dataset: str | None, change: Change, *, source: str, reason: str | None,
                 dry_run: bool = False, as_json: bool = False,
                 privacy_unit: dict[str, str] | None = None) -> list[amend.Amendment]:
    """Plan the amendments a change implies, print them, and (unless dry_run) write them
    with their audit events in one transaction (Ledger.amend). With `as_json`, one JSON document:
    the dataset, each change's kind and summary, whether it was a dry run and how many were applied."""
    lines: list[str] = []
    say = lines.append if as_json else typer.echo

    def shown(chosen: Dataset, amendments: list) -> None:  # (before anything is written)
        if not amendments:
            say(f"dataset {chosen.name}: nothing to change")
            return
        say(f"dataset {chosen.name}: {len(amendments)} change{'s' if len(amendments) != 1 else ''}"
            + (" (dry run: nothing written)" if dry_run else ""))
        for amendment in amendments:
            say(f"  {amendment.kind:26} {amendment.summary}")

    chosen, amendments = book().amend(dataset, change, source=source, reason=reason, dry_run=dry_run,
                                      privacy_unit=privacy_unit, shown=shown)
    applied = 0 if dry_run else len(amendments)
    if applied:
        say(f"applied {applied} change{'s' if applied != 1 else ''}, each an audit event")
    if as_json:
        _say(True, "", dataset=chosen.name, dry_run=dry_run, applied=applied,
             changes=[{"kind": a.kind, "summary": a.summary} for a in amendments])
    return amendments


def dataset_amend(
    file: Annotated[Path, typer.Argument(help="The dataset file, changed (YAML or JSON).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the changes; write nothing.")] = False,
    reason: Annotated[Optional[str], typer.Option(help="Why (required when a variable is reclassified or "
                                                       "separation of duties waived or restored).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Apply a changed dataset file as audited changes: variables, categories, descriptions,
    classifications, groups, separation of duties (`self_approval`), the declared privacy unit
    and (when the file has `caps`) caps. Printed first."""
    document, errors = read_document(file)
    wanted = None
    if document is not None:
        wanted, errors = build_dataset(document)
    if errors:
        raise InputErrors(errors)
    wanted_caps = None
    if "caps" in document.data:
        wanted_caps, errors = build_caps(document, wanted)
        if errors:
            raise InputErrors(errors)
    apply_change(wanted.name, lambda _old, _caps: (wanted, wanted_caps), source=str(file),
                 reason=_reason(reason), dry_run=dry_run, as_json=as_json,
                 privacy_unit=declared_privacy_unit(document))


def _variable(chosen: Dataset, name: str, argument: str = "VARIABLE") -> Variable:
    for variable in chosen.variables:
        if variable.name == name:
            return variable
    raise fail("command line", argument, f"unknown variable {name!r} in dataset {chosen.name!r} "
                                         f"(variables: {', '.join(chosen.variable_names)})")


def _changed_variable(name: str, **changes) -> Change:
    def change(chosen: Dataset, _caps):
        from dataclasses import replace

        old = _variable(chosen, name)
        return replace(chosen, variables=tuple(replace(old, **changes) if v.name == name else v
                                               for v in chosen.variables)), None

    return change


def dataset_add_variable(
    name: Annotated[str, typer.Argument(help="The new variable's name.")],
    classification: Annotated[str, typer.Option(help="public, identifying, sensitive, ...")] = "unclassified",
    description: Annotated[str, typer.Option(help="What it holds.")] = "",
    category: Annotated[Optional[list[str]], typer.Option("--category", help="A public category "
                                                          "(repeat for each).")] = None,
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a variable to a recorded dataset (an audit event)."""
    if not name.strip():
        raise fail("command line", "NAME", "the variable name is empty")
    _check_names((name, "NAME", "name"), (classification, "--classification", "name"),
                 (description, "--description", "text"), *((c, "--category", "name") for c in category or ()))
    if not classification.strip():
        raise fail("command line", "--classification", "empty")
    if misread_public(classification.strip()):
        raise fail("command line", "--classification", misread_public(classification.strip()))

    def change(chosen: Dataset, _caps):
        from dataclasses import replace

        if name in chosen.variable_names or chosen.group(name) is not None:
            raise fail("command line", "NAME", f"{name!r} is already a variable or group of {chosen.name!r}")
        from ..input.datasets import RESERVED_SUBSETS, reserved_name

        if name in RESERVED_SUBSETS:
            raise fail("command line", "NAME", reserved_name(name))
        variable = Variable(name, classification.strip(), description, tuple(category) if category else None)
        return replace(chosen, variables=chosen.variables + (variable,)), None

    apply_change(dataset, change, source="command line", reason=None, as_json=as_json)


def dataset_add_categories(
    variable: Annotated[str, typer.Argument(help="The variable.")],
    categories: Annotated[list[str], typer.Argument(help="Categories to add.")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Declare more public categories of a variable (categories are never removed)."""
    _check_names(*((c, "CATEGORIES", "name") for c in categories))
    def change(chosen: Dataset, caps):
        old = _variable(chosen, variable)
        merged = tuple(old.categories or ()) + tuple(c for c in categories if c not in (old.categories or ()))
        return _changed_variable(variable, categories=merged)(chosen, caps)

    apply_change(dataset, change, source="command line", reason=None, as_json=as_json)


def dataset_describe(
    variable: Annotated[str, typer.Argument(help="The variable.")],
    description: Annotated[str, typer.Argument(help="Its new description.")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change a variable's description."""
    _check_names((description, "DESCRIPTION", "text"))
    apply_change(dataset, _changed_variable(variable, description=description), source="command line",
                 reason=None, as_json=as_json)


def dataset_reclassify(
    variable: Annotated[str, typer.Argument(help="The variable.")],
    classification: Annotated[str, typer.Argument(help="Its new classification (public: released exactly "
                                                       "by design, outside the protected headline).")],
    reason: Annotated[Optional[str], typer.Option(help="Why (required).")] = None,
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reclassify a variable, with a reason (an audit event)."""
    why = _reason(reason, required=True)
    _check_names((classification, "CLASSIFICATION", "name"), (why, "--reason", "text"))
    if not classification.strip():
        raise fail("command line", "CLASSIFICATION", "empty")
    if misread_public(classification.strip()):
        raise fail("command line", "CLASSIFICATION", misread_public(classification.strip()))
    apply_change(dataset, _changed_variable(variable, classification=classification.strip()),
                 source="command line", reason=why, as_json=as_json)


@group_app.command("set")
def group_set(
    name: Annotated[str, typer.Argument(help="The group's name.")],
    variables: Annotated[list[str], typer.Argument(help="Its variables.")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add or change a named group of variables."""
    _check_names((name, "NAME", "name"))
    def change(chosen: Dataset, _caps):
        from dataclasses import replace

        for variable in variables:
            _variable(chosen, variable, "VARIABLES")
        from ..input.datasets import RESERVED_SUBSETS

        if name in chosen.variable_names or name in RESERVED_SUBSETS:
            raise fail("command line", "NAME", f"{name!r} is a variable or a reserved subset name")
        groups = tuple((g, m) for g, m in chosen.groups if g != name) + ((name, frozenset(variables)),)
        return replace(chosen, groups=groups), None

    apply_change(dataset, change, source="command line", reason=None, as_json=as_json)


@group_app.command("remove")
def group_remove(
    name: Annotated[str, typer.Argument(help="The group's name.")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a named group (caps set on it keep their variables)."""
    def change(chosen: Dataset, _caps):
        from dataclasses import replace

        if chosen.group(name) is None:
            raise fail("command line", "NAME", f"no group {name!r} in dataset {chosen.name!r}")
        return replace(chosen, groups=tuple((g, m) for g, m in chosen.groups if g != name)), None

    apply_change(dataset, change, source="command line", reason=None, as_json=as_json)


def cap_remove(
    name: Annotated[str, typer.Argument(help="The cap's name (as `cap list` shows it).")],
    reason: Annotated[Optional[str], typer.Option(help="Why.")] = None,
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a cap; the audit chain and the report keep every value it had."""
    why = _reason(reason)

    def change(chosen: Dataset, caps: list[Cap]):
        if name not in {c.name for c in caps}:
            raise fail("command line", "NAME", f"no cap {name!r} in dataset {chosen.name!r} (caps: "
                                               f"{', '.join(c.name for c in caps) or 'none'})")
        return chosen, [c for c in caps if c.name != name]

    apply_change(dataset, change, source="command line", reason=why, as_json=as_json)


# --------------------------------------------------------------------------
# Signed checkpoints
# --------------------------------------------------------------------------


def audit_keygen(
    out: Annotated[Path, typer.Option("--out", help="The private key file; the public key goes to OUT.pub.")],
    as_json: JsonOption = False,
) -> None:
    """Make an Ed25519 key pair for signing checkpoints: OUT (private, PEM) and OUT.pub."""
    from .outputs import output_target, write_atomically

    public_path = Path(str(out) + ".pub")
    for path in (out, public_path):  # a key is never overwritten
        output_target(path, new=True)
    private, public = new_key_pair()
    write_atomically(out, private, new=True, mode=0o600)
    write_atomically(public_path, public, new=True)
    _say(as_json, f"wrote the private key to {out} (keep it secret) and the public key to {public_path}",
         private_key=str(out), public_key=str(public_path))


def audit_checkpoint(
    key: Annotated[Path, typer.Option("--key", help="The Ed25519 private key (PEM), from `audit keygen`.")],
    out: Annotated[Path, typer.Option("--out", help="The checkpoint file to write.")],
    as_json: JsonOption = False,
) -> None:
    """Sign the current head of the audit chain (seq, hash, time, event count) and write it to OUT,
    once the chain verifies (from the last verified head, as `audit verify --since-checkpoint`, else
    in full): a chain that does not verify is never signed (exit 1, nothing written)."""
    from .outputs import output_target, write_atomically

    target = output_target(out)
    private = signing_key(key)
    result, head, document = book().sign_checkpoint(private)
    if not result.ok:
        typer.echo(f"checkpoint refused: the audit chain does not verify ({result.problems[0]}); nothing was "
                   "signed or written. Run `privacy-ledger audit verify` to see every problem", err=True)
        raise typer.Exit(1)
    write_atomically(target, document.encode())
    _say(as_json, f"checkpoint of event {head.seq} ({head.events} events), head {head.hash}, signed, "
                  f"written to {target}", checkpoint=str(target), seq=head.seq, events=head.events, hash=head.hash)


def audit_retotal(as_json: JsonOption = False) -> None:
    """Recompute every cap's running total from the releases (after `audit verify` found
    them wrong, or a decision refused stale totals), as an audit event."""
    changed = book().retotal()
    _say(as_json, f"running totals recomputed; {len(changed)} differed" + (f": {', '.join(changed)}" if changed else ""),
         differed=changed)


def _check_names(*named: tuple[str, str, str]) -> None:
    """Names, categories and descriptions given on the command line meet the limits a file's do
    (input.limits: a name at most 200 characters, no control character): (value, argument, kind)."""
    from ..input.limits import check_text

    errors = [e for value, argument, kind in named for e in check_text(value, "command line", argument, kind)]
    if errors:
        raise InputErrors(errors)


def _errors(*errors: LedgerError) -> InputErrors:
    return InputErrors(list(errors))
