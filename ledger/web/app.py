"""The ASGI application: routes, error pages, the safeguards around every request."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import api
from ..core.errors import InputErrors
from . import decisions, pages, prebuild
from .guard import LoopbackHost, SecureHeaders
from .people import Auth
from .render import error_page

LOG = logging.getLogger("ledger.web")
LOCAL = Auth()  # the default: the operating-system user, on loopback


def create_app(url: str | None = None, auth: Auth = LOCAL, *, local_person: str | None = None,
               prebuild_every: float | None = prebuild.INTERVAL) -> SecureHeaders:
    """The app serving the ledger at `url` (as --db), with `auth` deciding who acts.
    `local_person`: the person in local mode (default: the operating-system user).
    `prebuild_every`: while the app runs (its lifespan), every so many seconds it checks whether
    the ledger changed and builds the dashboard's and table's figures of the new state
    (prebuild.py); None: figures are built on request only."""
    app = Starlette(debug=False, lifespan=_prebuilding(prebuild_every), routes=[
        Route("/", pages.home),
        Route("/dashboard", pages.dashboard),
        Route("/table", pages.table),
        Route("/subset", pages.subset),
        Route("/release", pages.release),
        Route("/decide", decisions.decide, methods=["POST"]),
        Route("/decide-selection", decisions.decide_selection, methods=["POST"]),
        Route("/whatif", decisions.whatif_form, methods=["GET"]),
        Route("/whatif", decisions.whatif, methods=["POST"]),
        Route("/audit", pages.audit, methods=["GET"]),
        Route("/audit", decisions.verify, methods=["POST"]),
        Route("/downloads", pages.downloads),
        Route("/download", decisions.download),
        Route("/favicon.ico", _no_icon),
        Mount("/static", StaticFiles(packages=[("ledger.web", "static")]), name="static"),
    ], exception_handlers={HTTPException: _http_error, InputErrors: _input_error, Exception: _server_error})
    app.state.ledger = api.open(url)
    app.state.watcher = None
    app.state.auth = auth
    app.state.local_person = local_person or app.state.ledger.person.name
    app.state.local_named = local_person is not None  # (a name given to create_app: a front end's)
    return SecureHeaders(LoopbackHost(app) if auth.mode == "local" else app)


def _prebuilding(interval: float | None):
    """The app's lifespan: the watcher (prebuild.Watcher) from start to shutdown, when `interval`."""
    @asynccontextmanager
    async def lifespan(app: Starlette):
        if interval is None:
            yield
            return
        watcher = app.state.watcher = prebuild.Watcher(app.state.ledger, pages.warm, interval)
        watcher.start()
        try:
            yield
        finally:
            await run_in_threadpool(watcher.stop)  # (waits for a build under way, off the event loop)

    return lifespan


async def _no_icon(request: Request):
    return Response(status_code=204)


async def _http_error(request: Request, exc: HTTPException):
    return error_page(request, exc.status_code, exc.detail or "")


async def _input_error(request: Request, exc: InputErrors):
    """A name the ledger does not know (a dataset, a release, a variable): the façade's message."""
    return error_page(request, 404 if any(e.field in ("id", "dataset") for e in exc.errors) else 400, str(exc))


async def _server_error(request: Request, exc: Exception):
    LOG.exception("error serving %s", request.url.path)  # (the traceback goes to the server's log only)
    return error_page(request, 500, "the server could not answer this request; its log says why")
