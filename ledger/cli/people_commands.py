"""`privacy-ledger role grant|revoke|list`: who holds which role (operations/people.py).

Thin adapters (STYLE 8) over the façade (Ledger.change_role, Ledger.roles).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..core.lazy import lazy_module
from ..core.names import check_person
from . import json_output as cli_json
from .context import book
from .options import JsonOption

people = lazy_module("ledger.operations.people")  # the roles


def role_grant(person: Annotated[str, typer.Argument(help="The person.")],
               role: Annotated[str, typer.Argument(help="admin, steward, approver or auditor.")], as_json: JsonOption = False) -> None:
    """Grant a role (admins only; an audit event)."""
    _change_role(person, role, True, as_json)


def role_revoke(person: Annotated[str, typer.Argument(help="The person.")],
                role: Annotated[str, typer.Argument(help="admin, steward, approver or auditor.")], as_json: JsonOption = False) -> None:
    """Revoke a role (admins only; an audit event). The last admin stays admin."""
    _change_role(person, role, False, as_json)


def _change_role(person: str, role: str, granted: bool, as_json: bool = False) -> None:
    person = check_person(person, "PERSON")
    role = people.check_role(role)
    if not book().change_role(person, role, granted):
        if as_json:
            typer.echo(cli_json.dumps({"ok": True, "person": person, "role": role, "granted": True,
                                       "changed": False}))
            return
        typer.echo(f"{person} already holds the {role} role; nothing written")
        return
    if as_json:
        typer.echo(cli_json.dumps({"ok": True, "person": person, "role": role, "granted": granted, "changed": True}))
        return
    typer.echo(f"{'granted' if granted else 'revoked'}: {person} {role}")


def role_list(as_json: JsonOption = False) -> None:
    """Every person and the roles they hold."""
    held = book().roles()
    if as_json:
        typer.echo(json.dumps({person: [r for r in people.ROLES if r in roles]  # the text's order
                               for person, roles in sorted(held.items())}, indent=2, ensure_ascii=False))
        return
    if not held:
        typer.echo("no roles yet: the first person to write to this ledger becomes its admin")
    for person, roles in sorted(held.items()):
        typer.echo(f"{person}\t{', '.join(r for r in people.ROLES if r in roles)}")
