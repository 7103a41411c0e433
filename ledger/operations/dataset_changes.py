"""A change to a dataset applied as audited amendments (operations/amend.py says what each is):
its variables, categories, descriptions, classifications, groups, separation of duties, privacy
unit and caps.

Invariants: every amendment is planned and shown before any is written; they are written in one
transaction, each with its audit event, by an admin, or not at all; a dry run writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import InputErrors
from ..core.records import Cap, Dataset
from ..store import cap_writes, configuration, dataset_writes, decoded_history, sessions
from ..store.sessions import Session
from . import amend, choices

Change = Callable[[Dataset, list[Cap]], tuple[Dataset, list[Cap] | None]]


def apply_change(engine, dataset: str | None, change: Change, *, source: str, actor: str, reason: str | None,
                 dry_run: bool = False, privacy_unit: dict[str, str] | None = None,
                 shown: Callable[[Dataset, list[amend.Amendment]], None] = lambda _d, _a: None
                 ) -> tuple[Dataset, list[amend.Amendment]]:
    """(the dataset chosen, the amendments `change` implies), written unless `dry_run`; `shown` is
    called with them before anything is written (and before the admin role is required)."""
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
        shown(chosen, amendments)
        if not amendments or dry_run:
            return chosen, amendments
        _write(session, chosen, amendments, actor, reason)
    return chosen, amendments


def _write(session, chosen: Dataset, amendments: list[amend.Amendment], actor: str, reason: str | None) -> None:
    from . import people

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
