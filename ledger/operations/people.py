"""People and duties (docs/explanation/model.md#people-duties-and-the-book-of-record): every step is done by a named person holding a role.

Roles, stored in the ledger (table_models.RoleRow), each grant and revocation an audit event:
- admin: datasets, caps, roles;
- steward: records and cancels releases;
- approver: approves, publishes and retracts releases;
- auditor: reads and verifies (reading is open to anyone who can open the ledger;
  the role names the board's auditors in the ledger itself), and recomputes the caps'
  running totals (`audit retotal`, which an admin may also do).

Invariants:
- the first person to write to a ledger that has no roles yet (`init`, `dataset
  add`, or any first write: the operating-system user, or the database login) becomes its
  admin and is granted every role, so a one-person ledger works as before; every later
  person needs a grant by an admin;
- separation of duties by default: the approver of a release is never the person
  who recorded it, unless its dataset waives it explicitly (`self_approval: true`,
  which every report then states); approving is always the step `approve`, never a field of
  what is recorded: a release is recorded planned, and recorded approved or published only
  as its recorder's own approval where its dataset waives separation of duties;
- a retraction or a cancellation carries a reason (who, when and why are in its
  audit event);
- the ledger always keeps an admin: the last admin's admin role cannot be revoked;
- a person is one name, whatever its encoding: every name is NFC-normalized before use
  ("José" typed as e + combining acute is José); a name mixing scripts (Latin "grace" with
  a Cyrillic "а") is refused, and so is a new name that looks like a person's already in
  the ledger (the same `skeleton`, after the Unicode confusable-detection idea of UTS #39):
  a look-alike would approve as "another" person.

Who acts is authenticated, never typed (store/identity.py): on PostgreSQL the person is the
database login (a front end such as the web app acts as the role of the person it
authenticated, which the database lets it take only when granted); on a SQLite file the
person is the operating-system user running the process, and the file's permissions decide
who may write at all. On a SQLite file these rules are kept by this tool only: anyone who
can write the file can bypass them (the hash chain detects what it cannot prevent). A team
that needs separation of duties enforced uses PostgreSQL, with a login for each person: there
the audit events and release history are append-only by the database's own triggers
(append_only.APPEND_ONLY_SQL).
"""

from __future__ import annotations

import unicodedata

from ..store import role_grants, sessions
from ..store.sessions import Session
from ..core.errors import fail
from ..core.names import control_characters
from ..core.records import Dataset, Release, Status

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
    "recompute the running totals": ("auditor", "admin"),  # (audit retotal: either role)
}

REASON_LIMIT = 2000
PERSON_SOURCE = "person acting"  # (who acts is authenticated, never typed: store/identity.py)


# Letters of Cyrillic and Greek drawn as Latin ones (from Unicode's confusables.txt, UTS #39):
# each mapped to the Latin letter it is mistaken for.
_CONFUSABLES = str.maketrans({
    # Cyrillic
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T",
    "У": "Y", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y", "Һ": "H",
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ј": "j",
    "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ү": "y", "ѵ": "v",
    # Greek
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    "ο": "o", "ι": "i", "ν": "v", "α": "a", "ρ": "p", "υ": "u", "χ": "x", "γ": "y", "κ": "k",
})


def skeleton(name: str) -> str:
    """What `name` looks like: NFKC (compatibility forms, such as fullwidth letters, as their
    letters), look-alike letters as the Latin ones, then case folded. Two names of one skeleton
    are taken for one another by a reader (UTS #39's skeleton, with a small map)."""
    return unicodedata.normalize("NFKC", name).translate(_CONFUSABLES).casefold()


def look_alike(name: str, known) -> str | None:
    """A name among `known`, other than `name`, that looks like it (the same skeleton)."""
    shape = skeleton(name)
    return next((other for other in sorted(known) if other != name and skeleton(other) == shape), None)


def check_new_person(person: str, known, field: str, source: str = "command line") -> None:
    """Refuse a name not in `known` (the persons holding roles) that looks like one that is."""
    if person in known:
        return
    other = look_alike(person, known)
    if other is not None:
        raise fail(source, field, f"{person!r} looks like {other!r}, who holds a role in this ledger (the same "
                                  "letters to a reader): a person is named one way; use that name, or one that "
                                  "cannot be taken for it")


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
    if control_characters(cleaned):
        raise fail("command line", "--reason", "the reason contains control characters")
    return cleaned


def bootstrap(session: Session, person: str) -> bool:
    """On a ledger without roles, make `person` its admin with every role (audit events).
    Returns whether it did. Runs inside the write session of the first write."""
    if role_grants.roles(session):
        return False
    for role in ROLES:
        role_grants.set_role(session, person, role, True, person)
    return True


def require(session: Session, person: str, step: str, role: str | None = None) -> None:
    """Refuse (exit 2, naming the role) unless `person` holds the role `step` needs (one of them,
    where DUTIES names several)."""
    needed = role or DUTIES[step]
    accepted = (needed,) if isinstance(needed, str) else needed
    everyone = role_grants.roles(session)
    if not everyone:  # the ledger's first writer
        bootstrap(session, person)
        everyone = role_grants.roles(session)
    check_new_person(person, everyone, "name", PERSON_SOURCE)
    held = everyone.get(person, frozenset())
    if not held & set(accepted):
        raise fail(PERSON_SOURCE, "role", f"{person!r} cannot {step}: it needs the {' or '.join(accepted)} role "
                                           f"({person!r} holds {', '.join(sorted(held)) or 'no role'}); "
                                           f"an admin grants it with `privacy-ledger role grant {person} "
                                           f"{accepted[0]}`")


def may(session: Session, person: str, step: str) -> bool:
    """Whether `person` holds the role `step` needs (DUTIES), as `require` would decide it, without
    writing: on a ledger with no roles yet, anyone may (its first writer is granted every role)."""
    if step not in DUTIES:
        raise fail("argument", "step", f"unknown step {step!r}; steps: {', '.join(DUTIES)}")
    needed = DUTIES[step]
    accepted = {needed} if isinstance(needed, str) else set(needed)
    everyone = role_grants.roles(session)
    if not everyone:
        return True
    return bool(everyone.get(person, frozenset()) & accepted)


def check_recorded(session: Session, person: str, releases: list[Release], datasets) -> None:
    """The roles recording needs: steward. Four eyes: a release is recorded planned (or
    planned with its output, `run`); one recorded approved or published is its recorder's own
    approval, which needs the approver role and a dataset that waives separation of duties
    (`self_approval: true`); elsewhere another person approves it with `approve`."""
    require(session, person, "record")
    stated = [r for r in releases if r.status in (Status.APPROVED, Status.PUBLISHED)]
    for release in stated:
        dataset = datasets.get(release.dataset)
        if not (dataset is not None and dataset.self_approval):
            where = release.source or f"release {release.id}"
            field = f"{release.source_field}.status" if release.source_field else "status"
            raise fail(where, field, f"status {release.status.value} would be its recorder's own approval "
                                     "(separation of duties): record it planned and approve it with "
                                     f"`privacy-ledger approve {release.id}` as another person, or let dataset "
                                     f"{release.dataset} allow self_approval: true")
    if stated:
        require(session, person, f"record a release as {stated[0].status.value}", "approver")


def separation_message(person: str, dataset: str) -> str:
    return (f"{person!r} recorded this release and cannot also approve it: separation of duties "
            f"(another approver must approve it, or dataset {dataset!r} must allow self_approval: true)")


def check_approver(release: Release, person: str, dataset: Dataset | None) -> None:
    """Separation of duties at `approve`: the approver is not the recorder (docs/explanation/model.md#people-duties-and-the-book-of-record)."""
    if person == release.recorded_by and not (dataset is not None and dataset.self_approval):
        raise fail(f"release {release.id}", "approver", separation_message(person, release.dataset))


def roles(engine) -> dict[str, frozenset[str]]:
    """Every person and the roles they hold."""
    with sessions.read_session(engine) as session:
        return role_grants.roles(session)


def change_role(engine, person: str, role: str, granted: bool, actor: str) -> bool:
    """Grant or revoke `role` (admins only; an audit event); False when `person` already holds
    it (nothing written). The last admin stays admin."""
    with sessions.write_session(engine) as session:
        require(session, actor, "change roles")
        held = role_grants.roles(session)
        if granted:
            check_new_person(person, held, "PERSON")
        if granted and role in held.get(person, frozenset()):
            return False
        if not granted:
            if person not in held:
                raise fail("command line", "PERSON", f"unknown person {person!r}: holds no role in this ledger")
            if role not in held[person]:
                raise fail("command line", "ROLE", f"{person!r} does not hold the {role} role")
            if role == "admin" and [p for p, r in held.items() if "admin" in r] == [person]:
                raise fail("command line", "ROLE", f"{person!r} is the ledger's only admin; grant admin to "
                                                   "another person first")
        role_grants.set_role(session, person, role, granted, actor)
    return True
