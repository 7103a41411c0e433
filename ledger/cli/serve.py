"""`privacy-ledger serve`: the review meeting in a browser (ledger/web, docs/how-to/review-meeting.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .context import open_engine, state


def serve(
    db: Annotated[Optional[str], typer.Option("--db", metavar="URL", help="The ledger (default: the one "
                                              "`privacy-ledger --db` names).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on; beyond loopback an --auth mode "
                                                     "is required.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8080,
    auth: Annotated[Optional[tuple[str, str]], typer.Option(
        "--auth", metavar="proxy-header NAME", help="Take the person from header NAME, set by the "
                                                   "organisation's authenticating proxy.")] = None,
    trusted_proxy: Annotated[Optional[str], typer.Option(
        "--trusted-proxy", metavar="ADDR", help="The proxy's address: the only client whose header is "
                                               "believed (every other request gets 403).")] = None,
    prebuild_every: Annotated[Optional[float], typer.Option(
        "--prebuild-every", metavar="SECONDS", min=0, help="How often to check whether the ledger changed "
                                                          "(a write from anywhere) and build the dashboard's "
                                                          "and table's figures before a viewer asks "
                                                          "(default: every second); 0: build them on "
                                                          "request only.")] = None,
) -> None:
    """Serve the ledger to a review board: dashboard, Tan's table, subsets, releases, what-if,
    audit, downloads, and the decisions (approve, publish, retract, cancel) as the person acting.
    By default it listens on 127.0.0.1 and the person is this machine's user."""
    from ..operations import choices
    from ..web.server import auth_from_options
    from ..web.server import serve as run_server

    mode, header = auth if auth and auth[0] is not None else (None, None)
    chosen = auth_from_options(host, mode, header, trusted_proxy)  # (refused before anything is opened)
    if db is not None:
        state.url = choices.ledger_url(db)
    open_engine().dispose()  # an existing ledger only: a mistyped path is refused, not created
    typer.echo(f"privacy-ledger serving {state.url} on http://{host}:{port}/ "
               f"({'person from ' + chosen.header if chosen.header else 'as the local user'})", err=True)
    run_server(state.url, host, port, chosen, prebuild_every)
