"""People and duties (DESIGN 2.12): every step is done by a named person holding a role.

Roles, stored in the ledger (store.RoleRow), each grant and revocation an audit event:
- admin: datasets, caps, roles;
- steward: records and cancels releases;
- approver: approves, publishes and retracts releases;
- auditor: reads and verifies (reading is open to anyone who can open the ledger;
  the role names the board's auditors in the ledger itself).

Invariants:
- the first person to write to a ledger that has no roles yet (`init`, `dataset
  add`, or any first write) becomes its admin and is granted every role, so a
  one-person ledger works as before; every later person needs a grant by an admin;
- separation of duties by default: the approver of a release is never the person
  who recorded it, unless its dataset waives it explicitly (`self_approval: true`,
  which every report then states);
- a retraction or a cancellation carries a reason (who, when and why are in its
  audit event);
- the ledger always keeps an admin: the last admin's admin role cannot be revoked.

On a SQLite file these rules are kept by this tool only: anyone who can write the
file can bypass them (the hash chain detects what it cannot prevent). On
PostgreSQL the audit events and release history are append-only by the
database's own triggers (store._APPEND_ONLY_SQL).
"""

from __future__ import annotations

import getpass
import os
import unicodedata

from sqlmodel import Session

from ..store import database as store
from ..core.errors import fail
from ..core.records import Dataset, Release

ROLES = ("admin", "steward", "approver", "auditor")

# what each step needs
DUTIES = {
    "add a dataset": "admin",
    "set a cap": "admin",
    "amend a dataset": "admin",
    "change roles": "admin",
    "record": "steward",
    "cancel": "steward",
    "approve": "approver",
    "publish": "approver",
    "retract": "approver",
}

NAME_LIMIT = 200
REASON_LIMIT = 2000
USER_ENV = "LEDGER_USER"


def _control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\n\t" for ch in text)


def actor_name(option: str | None, field: str = "--as") -> str:
    """Who does this step: `--as NAME`, else $LEDGER_USER, else the operating-system user."""
    source, name = (field, option) if option is not None else (USER_ENV, os.environ.get(USER_ENV))
    if name is None:
        source = "operating-system user"
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            raise fail("command line", "--as", "no user name: give --as NAME or set LEDGER_USER") from None
    return check_person(name, source)


def check_person(name: str, field: str) -> str:
    """A person's name: not empty, one line, no control characters, at most NAME_LIMIT characters."""
    cleaned = name.strip()
    if not cleaned:
        raise fail("command line", field, "a person's name cannot be empty")
    if len(cleaned) > NAME_LIMIT:
        raise fail("command line", field, f"a person's name is at most {NAME_LIMIT} characters")
    if _control(cleaned) or "\n" in cleaned or "\t" in cleaned:
        raise fail("command line", field, f"a person's name is one line without control characters: {cleaned!r}")
    return cleaned


def check_role(role: str, field: str = "ROLE") -> str:
    chosen = role.strip().lower()
    if chosen not in ROLES:
        raise fail("command line", field, f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    return chosen


def check_reason(reason: str | None, action: str, release_id: str = "") -> str:
    """A retraction's or cancellation's reason: required, not blank, bounded."""
    if reason is None:
        raise fail("command line", "--reason", f"{action} {release_id} needs --reason: say why (it is kept in "
                                               "the audit trail)".replace("  ", " "))
    cleaned = reason.strip()
    if not cleaned:
        raise fail("command line", "--reason", "the reason is empty; say why")
    if len(cleaned) > REASON_LIMIT:
        raise fail("command line", "--reason", f"the reason is at most {REASON_LIMIT} characters")
    if _control(cleaned):
        raise fail("command line", "--reason", "the reason contains control characters")
    return cleaned


def bootstrap(session: Session, person: str) -> bool:
    """On a ledger without roles, make `person` its admin with every role (audit events).
    Returns whether it did. Runs inside the write session of the first write."""
    if store.roles(session):
        return False
    for role in ROLES:
        store.set_role(session, person, role, True, person)
    return True


def require(session: Session, person: str, step: str, role: str | None = None) -> None:
    """Refuse (exit 2, naming the role) unless `person` holds the role `step` needs."""
    needed = role or DUTIES[step]
    everyone = store.roles(session)
    if not everyone:  # the ledger's first writer
        bootstrap(session, person)
        everyone = store.roles(session)
    held = everyone.get(person, frozenset())
    if needed not in held:
        raise fail("command line", "--as", f"{person!r} cannot {step}: it needs the {needed} role "
                                           f"({person!r} holds {', '.join(sorted(held)) or 'no role'}); "
                                           f"an admin grants it with `privacy-ledger role grant {person} {needed}`")


def check_recorded(session: Session, person: str, releases: list[Release], datasets) -> None:
    """The roles recording needs: steward; a release recorded as published was put out,
    which is an approver's duty; a named approver holds the approver role and is not
    the recorder, unless the dataset waives separation of duties."""
    require(session, person, "record")
    if any(r.status.value == "published" for r in releases):
        require(session, person, "record a release as published", "approver")
    if all(release.approved_by is None for release in releases):
        return
    held = store.roles(session)
    for release in releases:
        if release.approved_by is None:
            continue
        where = release.source or f"release {release.id}"
        field = f"{release.source_field}.approved_by" if release.source_field else "approved_by"
        if "approver" not in held.get(release.approved_by, frozenset()):
            known = "unknown person" if release.approved_by not in held else "does not hold the approver role"
            raise fail(where, field, f"{release.approved_by!r}: {known}; an approval is given by a person holding "
                                     "the approver role")
        dataset = datasets.get(release.dataset)
        if release.approved_by == release.recorded_by and not (dataset is not None and dataset.self_approval):
            raise fail(where, field, separation_message(release.recorded_by, release.dataset))


def separation_message(person: str, dataset: str) -> str:
    return (f"{person!r} recorded this release and cannot also approve it: separation of duties "
            f"(another approver must approve it, or dataset {dataset!r} must allow self_approval: true)")


def check_approver(release: Release, person: str, dataset: Dataset | None) -> None:
    """Separation of duties at `approve`: the approver is not the recorder (DESIGN 2.12)."""
    if person == release.recorded_by and not (dataset is not None and dataset.self_approval):
        raise fail(f"release {release.id}", "--as", separation_message(person, release.dataset))
