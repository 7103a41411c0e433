"""What the forms do: a lifecycle decision on a release, a plan checked, the audit chain verified,
a report downloaded. Every POST passes guard.checked_form first (size, CSRF); a refusal of the
ledger's rules (a cap, separation of duties, a missing reason) is shown as a message on the page,
and the façade has written nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from .. import api
from ..core.errors import InputErrors, Refused
from ..reporting import write_report
from .guard import checked_form
from .pages import REASONED, release_page, table_page, warm
from .people import ledger_for, person_of
from .render import page

REFUSALS = (InputErrors, Refused, api.BudgetRefused)
PLAN_NAME = "plan.yaml"  # how messages name an uploaded or pasted plan (never the temporary file's path)


async def decide(request: Request) -> Response:
    """Approve, publish, retract or cancel one release as the person acting."""
    form = await checked_form(request)
    action, release_id = _action(form), str(form.get("id", ""))
    book = ledger_for(request)
    _may(book, request, action)
    problem = _apply(book, action, release_id, form)
    message = None if problem else f"{release_id}: {DONE[action]} by {person_of(request)}"
    found = book.release(release_id)
    response = release_page(request, book, found, status_code=200 if problem is None else 409,
                            message=message, problem=problem)
    return response if problem else warmed(response, book, found.dataset)


def warmed(response: Response, book: api.Ledger, dataset: str) -> Response:
    """`response`, after which (sent, in the server's thread pool) the dashboard's and the table's
    figures of the new state are built: the first viewer after a decision finds them built, or
    waits for the build under way (the read cache builds a question once)."""
    response.background = BackgroundTask(warm, book, dataset)
    return response


DONE = {"approve": "approved", "publish": "published", "retract": "retracted", "cancel": "cancelled"}


def _action(form) -> str:
    action = str(form.get("action", ""))
    if action not in DONE:
        raise HTTPException(400, "unknown decision")
    return action


def _may(book: api.Ledger, request: Request, action: str) -> None:
    """403, before anything is read or written, unless the person's ledger role allows `action`
    (a viewer sees every page and takes no decision)."""
    if not book.may(action):
        raise HTTPException(403, f"{person_of(request)} may not {action}: their roles in this ledger do not "
                                 "allow it (an admin grants roles with `privacy-ledger role grant`); nothing "
                                 "was written")


def _apply(book: api.Ledger, action: str, release_id: str, form) -> str | None:
    """One decision through the façade; None when done, else why it was refused (nothing written)."""
    reason = str(form.get("reason", "")).strip() or None
    try:
        if action in REASONED:
            getattr(book, action)(release_id, reason=reason)
        else:
            getattr(book, action)(release_id)
    except REFUSALS as exc:
        return f"{action} refused, nothing written: {exc}"
    return None


async def decide_selection(request: Request) -> Response:
    """One decision on each selected release of the table, each in its own transaction: each is
    done or refused (and then writes nothing) on its own, and the page lists what happened."""
    form = await checked_form(request)
    action = _action(form)
    book = ledger_for(request)
    _may(book, request, action)
    chosen = book.dataset(str(form.get("dataset", "")) or None)
    ids = [str(value) for value in form.getlist("id")]
    if not ids:
        return table_page(request, book, chosen, form, status_code=400, problem="no release selected")
    outcomes = [(rid, _apply(book, action, rid, form)) for rid in ids]
    outcomes = [(rid, why or f"{DONE[action]} by {person_of(request)}", why is None) for rid, why in outcomes]
    response = table_page(request, book, chosen, form, status_code=200 if all(ok for *_, ok in outcomes) else 409,
                          outcomes=outcomes)
    return warmed(response, book, chosen.name) if any(ok for *_, ok in outcomes) else response


async def whatif_form(request: Request) -> Response:
    book = ledger_for(request)
    chosen = book.dataset(request.query_params.get("dataset") or None)
    return page(request, "whatif.html", dataset=chosen, result=None, plan="")


async def whatif(request: Request) -> Response:
    """`check` of a pasted or uploaded plan: each cap's verdict, nothing recorded."""
    form = await checked_form(request)
    book = ledger_for(request)
    chosen = book.dataset(str(form.get("dataset", "")) or None)
    upload = form.get("file")
    text = str(form.get("plan", ""))
    if isinstance(upload, UploadFile) and upload.filename:
        text = (await upload.read()).decode("utf-8", errors="replace")
    result, problem = None, None
    if not text.strip():
        problem = "paste a plan or choose a plan file"
    else:
        try:
            result = _check(book, text)
        except REFUSALS as exc:
            problem = str(exc)
    return page(request, "whatif.html", status_code=200 if problem is None else 400, dataset=chosen,
                result=result, plan=text, problem=problem)


def _check(book: api.Ledger, text: str) -> api.PlanCheck:
    """The plan checked from a file of our own making (the loader's size and shape limits apply),
    deleted after; messages name it `plan.yaml`."""
    with tempfile.TemporaryDirectory(prefix="ledger-web-") as directory:
        path = Path(directory) / PLAN_NAME
        path.write_text(text, encoding="utf-8")
        try:
            return book.check(path)
        except InputErrors as exc:
            raise InputErrors([type(e)(e.source.replace(str(path), PLAN_NAME), e.field, e.message)
                               for e in exc.errors]) from None


async def verify(request: Request) -> Response:
    await checked_form(request)
    return page(request, "audit.html", verification=ledger_for(request).verify())


DOWNLOADS = {  # what may be downloaded: a fixed name each, never a path from the request
    "report.html": ("html", "text/html; charset=utf-8"),
    "report.pdf": ("pdf", "application/pdf"),  # printed by Chromium, as `report --format pdf`
    "report.md": ("md", "text/markdown; charset=utf-8"),
    "register.csv": ("csv", "text/csv; charset=utf-8"),
}


async def download(request: Request) -> Response:
    """The report (written from the façade by reporting.write_report, into a temporary directory) as an attachment."""
    name = request.query_params.get("what", "")
    if name not in DOWNLOADS:
        raise HTTPException(404, "no such download")
    fmt, media = DOWNLOADS[name]
    book = ledger_for(request)
    chosen = book.dataset(request.query_params.get("dataset") or None)
    since = request.query_params.get("since") or None  # a meeting pack: what changed since that date
    as_of = request.query_params.get("as_of") or None  # the ledger as it stood then
    with tempfile.TemporaryDirectory(prefix="ledger-web-") as directory:
        target = write_report(book, os.path.join(directory, name), format=fmt, dataset=chosen.name, since=since,
                              as_of=as_of)
        body = target.read_bytes()
    headers = {"content-disposition": f'attachment; filename="{name}"'}
    if fmt == "html":  # (the report inlines its style and charts: its own policy, never scripts)
        headers["content-security-policy"] = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return Response(body, media_type=media, headers=headers)
