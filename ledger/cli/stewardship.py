"""Commands for a dataset that evolves and a chain head kept outside the database.

Thin adapters (STYLE 8) over `amend` (what a change to a dataset is, as audited
amendments), `checkpoint` (signed heads) and `store`:

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
budget = lazy_module("ledger.accounting.budget")
checkpoint = lazy_module("ledger.store.checkpoint")
audit_chain = lazy_module("ledger.store.audit_chain")
audit_verify = lazy_module("ledger.store.audit_verify")
cap_writes = lazy_module("ledger.store.cap_writes")
configuration = lazy_module("ledger.store.configuration")
dataset_writes = lazy_module("ledger.store.dataset_writes")
decoded_history = lazy_module("ledger.store.decoded_history")
running_totals = lazy_module("ledger.store.running_totals")
session_state = lazy_module("ledger.store.session_state")
sessions = lazy_module("ledger.store.sessions")
Session = lazy_callable("sqlmodel", "Session")
amend = lazy_module("ledger.operations.amend")
declared_privacy_unit = lazy_callable("ledger.operations.transactions", "declared_privacy_unit")
canonical_json = lazy_callable("ledger.store.codec", "canonical_json")
build_caps = lazy_callable("ledger.input.loader", "build_caps")
build_dataset = lazy_callable("ledger.input.loader", "build_dataset")
read_document = lazy_callable("ledger.input.loader", "read_document")
from ..operations import choices  # noqa: E402
from .context import actor as acting_person, open_engine  # noqa: E402
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


def apply_change(dataset: str | None, change: Change, *, source: str, actor: str, reason: str | None,
                 dry_run: bool = False, as_json: bool = False,
                 privacy_unit: dict[str, str] | None = None) -> list[amend.Amendment]:
    """Plan the amendments a change implies, print them, and (unless dry_run) write them
    with their audit events in one transaction. With `as_json`, one JSON document: the
    dataset, each change's kind and summary, whether it was a dry run and how many were applied."""
    lines: list[str] = []
    say = lines.append if as_json else typer.echo
    engine = open_engine()
    with (Session(engine) if dry_run else sessions.write_session(engine)) as session:
        context = configuration.write_context(session)
        chosen = choices.pick_dataset(context, dataset)
        caps = configuration.caps(session, chosen.name)
        wanted, wanted_caps = change(chosen, caps)
        removed = set(chosen.variable_names) - set(wanted.variable_names)
        history = decoded_history.snapshot(session, chosen.name) if removed else None
        amendments, errors = amend.plan(
            chosen, wanted, source=source, old_caps=caps, new_caps=wanted_caps,
            releases=history.releases.values() if history else (),
            families=[f for f in history.families.values() if f.dataset == chosen.name] if history else (),
            reason=reason, require_reason=not dry_run)
        if errors:
            raise InputErrors(errors)
        final_caps = {c.name: c for c in (wanted_caps if wanted_caps is not None else caps)}
        amendments += amend.caps_follow(amendments, list(final_caps.values()))
        if privacy_unit and privacy_unit != dataset_writes.privacy_unit(session, chosen.name):
            amendments.append(amend.Amendment(dataset_writes.PRIVACY_UNIT_EVENT, chosen.name, "declare the privacy unit: "
                                              + "; ".join(privacy_unit.values()), None, None, privacy_unit))
        def answer(applied: int) -> None:
            if as_json:
                _say(True, "", dataset=chosen.name, dry_run=dry_run, applied=applied,
                     changes=[{"kind": a.kind, "summary": a.summary} for a in amendments])

        if not amendments:
            say(f"dataset {chosen.name}: nothing to change")
            answer(0)
            return []
        say(f"dataset {chosen.name}: {len(amendments)} change{'s' if len(amendments) != 1 else ''}"
            + (" (dry run: nothing written)" if dry_run else ""))
        for amendment in amendments:
            say(f"  {amendment.kind:26} {amendment.summary}")
        if dry_run:
            answer(0)
            return amendments
        from ..operations import people

        # a dataset's shape, classifications and caps are an admin's: a variable reclassified
        # public leaves the protected headline and every `protected` cap
        people.require(session, actor, "amend a dataset")
        for amendment in amendments:
            if amendment.kind == "cap.set":
                cap_writes.set_cap(session, amendment.cap, actor)
            elif amendment.kind == dataset_writes.PRIVACY_UNIT_EVENT:
                dataset_writes.set_privacy_unit(session, chosen.name, amendment.change, actor)
            elif amendment.kind == "cap.removed":
                cap_writes.remove_cap(session, chosen.name, amendment.subject.split("/", 1)[1], actor, reason)
            else:
                dataset_writes.amend_dataset(session, amendment.dataset, actor, amendment.kind, amendment.change)
    say(f"applied {len(amendments)} change{'s' if len(amendments) != 1 else ''}, each an audit event")
    answer(len(amendments))
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
                 actor=acting_person(), reason=_reason(reason), dry_run=dry_run, as_json=as_json,
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
        from ..input.loader import RESERVED_SUBSETS, reserved_name

        if name in RESERVED_SUBSETS:
            raise fail("command line", "NAME", reserved_name(name))
        variable = Variable(name, classification.strip(), description, tuple(category) if category else None)
        return replace(chosen, variables=chosen.variables + (variable,)), None

    apply_change(dataset, change, source="command line", actor=acting_person(), reason=None, as_json=as_json)


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

    apply_change(dataset, change, source="command line", actor=acting_person(), reason=None, as_json=as_json)


def dataset_describe(
    variable: Annotated[str, typer.Argument(help="The variable.")],
    description: Annotated[str, typer.Argument(help="Its new description.")],
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change a variable's description."""
    _check_names((description, "DESCRIPTION", "text"))
    apply_change(dataset, _changed_variable(variable, description=description), source="command line",
                 actor=acting_person(), reason=None, as_json=as_json)


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
                 source="command line", actor=acting_person(), reason=why, as_json=as_json)


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
        from ..input.loader import RESERVED_SUBSETS

        if name in chosen.variable_names or name in RESERVED_SUBSETS:
            raise fail("command line", "NAME", f"{name!r} is a variable or a reserved subset name")
        groups = tuple((g, m) for g, m in chosen.groups if g != name) + ((name, frozenset(variables)),)
        return replace(chosen, groups=groups), None

    apply_change(dataset, change, source="command line", actor=acting_person(), reason=None, as_json=as_json)


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

    apply_change(dataset, change, source="command line", actor=acting_person(), reason=None, as_json=as_json)


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

    apply_change(dataset, change, source="command line", actor=acting_person(), reason=why, as_json=as_json)


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
    private, public = checkpoint.generate_key()
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
    from ..store import verified_head

    target = output_target(out)
    private = checkpoint.load_private_key(key)
    engine = open_engine()
    with sessions.read_session(engine) as session:
        kept = verified_head.read_head(session)
        result = audit_verify.verify(session) if kept is None else \
            verified_head.verify_since(session, (kept.seq, kept.hash), kept.derived)
        found = audit_chain.chain_head(session)
    if not result.ok:
        typer.echo(f"checkpoint refused: the audit chain does not verify ({result.problems[0]}); nothing was "
                   "signed or written. Run `privacy-ledger audit verify` to see every problem", err=True)
        raise typer.Exit(1)
    verified_head.remember(engine, result, full=result.full, previous=kept)
    head = checkpoint.Head(found.seq, found.hash, found.at, found.events,
                           result.derived if result.events == found.seq else None)
    document = checkpoint.sign(head, private, session_state.now().isoformat())
    write_atomically(target, (canonical_json(document) + "\n").encode())
    _say(as_json, f"checkpoint of event {head.seq} ({head.events} events), head {head.hash}, signed, "
                  f"written to {target}", checkpoint=str(target), seq=head.seq, events=head.events, hash=head.hash)


def read_checkpoint(path: Path, public_key: Path) -> checkpoint.Head:
    """The checkpoint's head, once its file, the key and the signature are all good (else exit 2)."""
    key = checkpoint.load_public_key(public_key)
    document = checkpoint.load_document(path)
    return checkpoint.signed_head(document, key, str(path))


def check_checkpoint(session: Session, head: checkpoint.Head) -> str | None:
    """Why the ledger no longer holds a checkpointed head (None: it does)."""
    return checkpoint.compare(head, audit_chain.event_at(session, head.seq) if head.seq else None,
                              audit_chain.chain_head(session).events)


def audit_retotal(as_json: JsonOption = False) -> None:
    """Recompute every cap's running total from the releases (after `audit verify` found
    them wrong, or a decision refused stale totals), as an audit event."""
    actor = acting_person()
    changed = []
    from ..operations import people

    with sessions.write_session(open_engine()) as session:
        people.require(session, actor, "recompute the running totals")
        config = configuration.configuration(session)
        for dataset, caps in config.caps.items():
            history = decoded_history.snapshot(session, dataset)
            stored = running_totals.cap_totals(session, dataset)
            totals = {cap.name: budget.total_from_history(cap, history.releases.values(), history.families)
                      for cap in caps}
            from ..store.codec import cap_total_to_dict

            differ = sorted(name for name, total in totals.items()
                            if name not in stored or cap_total_to_dict(stored[name]) != cap_total_to_dict(total))
            running_totals.save_totals(session, dataset, totals)
            changed += [f"{dataset}/{name}" for name in differ]
        audit_chain.append_event(session, kind="ledger.retotalled", subject="cap totals", actor=actor,
                           payload={"changed": changed})
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
