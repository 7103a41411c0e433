"""Who acts: a person as authenticated by what already authenticates them, never a typed name.

- On PostgreSQL, the database login (`current_user`): each steward and approver has a login
  of their own, and the database decides what it may do.
- On a SQLite file, the operating-system user running the process (its effective uid, from
  the password database; never $USER, $LOGNAME or getpass, which read typed environment
  variables). The file's permissions decide who may write at all.
- A front end that authenticated the person itself (the web app behind a proxy that sets a
  user header; a local application) names them with `front_end`. On PostgreSQL every
  transaction then runs `SET LOCAL ROLE <name>`, so the database verifies the claim: the
  front end's login may take that role only where the database granted it.

Invariant: a name is checked by the ledger's rules for names (core/names.py) whatever
authenticated it, so one person is one name in every route.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from ..core.errors import fail
from ..core.names import check_person

OS_USER = "operating-system user"
DATABASE_LOGIN = "database login"
FRONT_END = "front end"
ROLE_OPTION = "ledger_person_role"  # execution option: the role each PostgreSQL transaction takes


@dataclass(frozen=True)
class Person:
    """A person and what authenticated them ("operating-system user", "database login",
    "front end: <how>")."""

    name: str
    authenticated_by: str


def os_user() -> Person:
    """The operating-system user this process runs as (its effective uid)."""
    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        raise fail(OS_USER, "uid", f"user id {uid} has no name in the password database; the ledger "
                                   "records every step under its person's name") from None
    return Person(check_person(name, "name", OS_USER), OS_USER)


def database_login(engine: Engine) -> Person:
    """The PostgreSQL role this engine's connections act as (`current_user`)."""
    with engine.connect() as connection:
        name = connection.execute(text("SELECT current_user")).scalar_one()
    return Person(check_person(name, "name", DATABASE_LOGIN), DATABASE_LOGIN)


def front_end(name: str, how: str) -> Person:
    """A person a front end authenticated (`how`: "proxy header X-Remote-User", "local user", ...)."""
    return Person(check_person(name, "name", f"{FRONT_END}: {how}"), f"{FRONT_END}: {how}")


def authenticated(engine: Engine, person: Person | None = None) -> Person:
    """Who acts on this engine: `person` when a front end named one, else the database login on
    PostgreSQL, else the operating-system user."""
    if person is not None:
        return person
    if engine.dialect.name == "postgresql":
        return database_login(engine)
    return os_user()


def acting_engine(engine: Engine, person: Person) -> Engine:
    """The engine a front end's person writes through. On PostgreSQL each transaction takes the
    person's role (`SET LOCAL ROLE`, store.write_session), so the database verifies the claim:
    refused here, once, when the front end's login may not take it. Elsewhere the engine as it is."""
    if engine.dialect.name != "postgresql" or not person.authenticated_by.startswith(FRONT_END):
        return engine
    statement = set_role_sql(engine, person.name)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(statement)
    except DBAPIError as exc:
        login = database_login(engine).name
        raise fail(person.authenticated_by, "name", f"database login {login!r} cannot act as {person.name!r} "
                                                    f"(SET ROLE refused: {str(exc.orig).splitlines()[0]}); "
                                                    f"the database must grant it: GRANT {person.name} TO "
                                                    f"{login}") from None
    return engine.execution_options(**{ROLE_OPTION: person.name})


def set_role_sql(engine_or_connection, name: str) -> str:
    """`SET LOCAL ROLE "name"`, the name quoted as an identifier."""
    return f"SET LOCAL ROLE {engine_or_connection.dialect.identifier_preparer.quote_identifier(name)}"


def role_statement(connection) -> str:
    """The `SET LOCAL ROLE` a write transaction on this connection starts with ("" when none)."""
    name = connection.get_execution_options().get(ROLE_OPTION)
    return "" if name is None else set_role_sql(connection, name) + "; "
