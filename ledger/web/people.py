"""Who is acting, and the ledger opened as that person: the one place the web app decides it.

Two modes (docs/how-to/review-meeting.md):
- local (the default, loopback only): the person is the operating-system user running the server,
  as datasette and fava do; whoever can reach 127.0.0.1 on this machine is that user already;
- proxy-header: the organisation's authenticating proxy names the person in a header, which is
  believed only on a request whose client address is the trusted proxy's; any other request is
  refused (403), so a browser cannot name itself by sending the header.
The name is never typed into a form.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request

from .. import api

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


@dataclass(frozen=True)
class Auth:
    """How the person is known: mode "local" or "proxy-header" (with its header and proxy address)."""

    mode: str = "local"
    header: str | None = None
    trusted_proxy: str | None = None


def person_of(request: Request) -> str:
    """The person making `request`, or 403 when the request may not name anyone."""
    auth: Auth = request.app.state.auth
    if auth.mode == "local":
        return request.app.state.local_person
    client = request.client.host if request.client else None
    if client != auth.trusted_proxy:
        raise HTTPException(403, "requests are accepted only through the authenticating proxy")
    name = (request.headers.get(auth.header or "") or "").strip()
    if not name:
        raise HTTPException(403, f"the proxy named no person (header {auth.header})")
    return name


def ledger_for(request: Request) -> api.Ledger:
    """The façade as the person making `request`: every decision is recorded under that name.
    (The engine is opened once, at start; this makes a cheap Ledger over it.)"""
    base: api.Ledger = request.app.state.ledger
    auth: Auth = request.app.state.auth
    if auth.mode == "local" and not request.app.state.local_named:
        return base  # the person is whoever the store authenticates: the OS user, or the database login
    how = "local user" if auth.mode == "local" else f"proxy header {auth.header} from {auth.trusted_proxy}"
    return api.Ledger(base.url, base.engine, person=api.front_end(person_of(request), how))
