"""Who holds which role: read once per transaction (cached while the audit head stands), granted and
revoked with their audit events; on PostgreSQL a grant is also membership of a group role.
"""

from __future__ import annotations


from sqlalchemy import Connection
from sqlmodel import Session, select

from . import enforced
from ..core.errors import fail
from .audit_chain import append_event
from .process_caches import ROLES_CACHE
from .session_state import session_connection, ledger_key
from .table_models import RoleRow


_READ_ROLES = select(RoleRow.__table__.c.person, RoleRow.__table__.c.role)


def roles(session: Session) -> dict[str, frozenset[str]]:
    """Every person holding a role, and their roles (read once per transaction; a process
    that wrote the previous transaction itself reuses what it read, while the head is unmoved)."""
    found = session.info.get("roles")
    if found is not None:
        return found
    url = ledger_key(session)
    head = session.info.get("head_at_start")
    cached = ROLES_CACHE.get(url)
    if head is not None and "roles_changed" not in session.info and cached is not None and cached[0] == head:
        found = cached[1]
    else:
        held: dict[str, set[str]] = {}
        for person, role in session_connection(session).execute(_READ_ROLES):
            held.setdefault(person, set()).add(role)
        found = {person: frozenset(names) for person, names in held.items()}
        if head is not None and "roles_changed" not in session.info:
            ROLES_CACHE[url] = (head, found)
    session.info["roles"] = found
    return found


def set_role(session: Session, person: str, role: str, granted: bool, actor: str) -> None:
    """Grant or revoke one role, with its audit event."""
    connection = session_connection(session)
    if connection.dialect.name == "postgresql":
        _grant_login(connection, person, role, granted)
    session.info.pop("roles", None)
    session.info["roles_changed"] = True  # read from the table until this transaction ends
    row = session.get(RoleRow, (person, role))
    if granted and row is None:
        session.add(RoleRow(person=person, role=role))
    elif not granted and row is not None:
        session.delete(row)
    append_event(session, kind="role.granted" if granted else "role.revoked", subject=person, actor=actor,
                 payload={"role": {"person": person, "role": role, "granted": granted}})


def _grant_login(connection: Connection, person: str, role: str, granted: bool) -> None:
    """On PostgreSQL a person is a database login: granting a role makes it a member of the group
    role `ledger_<role>` (enforced.py), revoking one ends that. A name with no login is a name the
    tool alone knows: refused under a person's own login (database roles mode: the DBA makes each
    person's login first), kept by the tool on a ledger run by its owner's single login."""
    from sqlalchemy.exc import DBAPIError

    if not enforced.login_exists(connection, person):
        if enforced.database_roles_mode(connection):
            raise fail("command line", "PERSON", f"{person!r} has no database login on this server: people act "
                                                 "through their own logins, which the database administrator makes "
                                                 f"(CREATE ROLE \"{person}\" LOGIN) before roles are granted")
        return
    try:
        with connection.begin_nested():
            enforced.grant(connection, person, role, granted)
    except DBAPIError as exc:
        raise fail("command line", "ROLE", f"the database refused to {'grant' if granted else 'revoke'} "
                                           f"ledger_{role} {'to' if granted else 'from'} {person!r}: "
                                           f"{str(exc.orig).splitlines()[0]} (the granting login needs the "
                                           f"ledger_{role} role WITH ADMIN OPTION, or CREATEROLE)") from None
