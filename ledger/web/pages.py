"""The read pages: datasets, dashboard, Tan's table, subset explorer, release, audit, downloads.
Each asks the façade (people.ledger_for) and formats its answer (figures.py); none writes."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from . import figures
from .lineage import lineage
from .people import ledger_for
from .render import link, page


def _dataset(request: Request, book):
    """The dataset the query names (`?dataset=`), or the only one."""
    return book.dataset(request.query_params.get("dataset") or None)


def _moment(request: Request, book) -> dict:
    """The date a page shows the ledger at (`?as_of=`, "" for now) and the days its picker offers,
    by the ledger's own clock (`Ledger.dates`)."""
    first, today = book.dates()
    return {"as_of": request.query_params.get("as_of") or "", "first_day": first.isoformat() if first else "",
            "today": today.isoformat()}


async def home(request: Request) -> Response:
    book = ledger_for(request)
    datasets = book.datasets
    if len(datasets) == 1:
        return RedirectResponse(link("/dashboard", dataset=next(iter(datasets))), status_code=303)
    return page(request, "home.html", datasets=sorted(datasets.values(), key=lambda d: d.name))


async def dashboard(request: Request) -> Response:
    """The headline figures and the caps, now or as of a date (`?as_of=`); with `?since=`, the same
    figures at that earlier date beside them and the releases that changed in between."""
    book = ledger_for(request)
    chosen = _dataset(request, book)
    moment = _moment(request, book)
    as_of = moment["as_of"] or None
    since = request.query_params.get("since") or None
    _viewed(request, chosen.name)
    shown = headline(book, chosen, as_of)
    then = headline(book, chosen, since) if since else None
    changes = book.changes(since, as_of, dataset=chosen.name) if since else None
    return page(request, "dashboard.html", dataset=chosen, shown=shown, caps=shown.caps, then=then,
                changes=changes, since=since or "", comparison=figures.comparison(then, shown) if then else (),
                pack_since=_pack_since(since, as_of, moment["today"]), **moment)


def _pack_since(since: str | None, as_of: str | None, today: str) -> str | None:
    """The `--since` date of the period's meeting pack (the day after `since`), when the period
    holds a whole day after it."""
    start = figures.day_after(since, today) if since else None
    return start if start is not None and (not as_of or start <= as_of) else None


def headline(book, chosen, as_of: str | None) -> figures.Headline:
    """The dashboard's figures as the façade answers them, now or as of `as_of` (`--as-of`'s rules)."""
    protected = book.subset(["protected"], dataset=chosen.name, as_of=as_of) if chosen.protected_names else None
    frame = book.table(chosen.name, as_of=as_of, releases=False)  # (the totals: no release row is shown)
    return figures.Headline(protected=protected, totals=figures.totals(frame),
                            worst_variable=figures.worst_variable(frame),
                            worst_pair=figures.worst_pair(book.worst_pair(chosen.name, as_of=as_of)),
                            caps=tuple(book.caps(chosen.name, as_of=as_of)),
                            releases=book.release_count(chosen.name, as_of=as_of))


def warm(book, dataset: str) -> None:
    """The figures of `dataset` now that its dashboard and table pages ask for, built into the
    read cache (after a decision, or a write the server noticed: prebuild.py); a failure is
    logged, never shown: nobody waits for this build, and a viewer's request builds the figures
    again and shows its own error."""
    try:
        headline(book, book.dataset(dataset), None)
        table_frame(book, dataset, None)
    except Exception:  # (any: nobody waits for this build but the log)
        logging.getLogger(__name__).exception("the figures of %s were not built ahead of a viewer", dataset)


async def table(request: Request) -> Response:
    book = ledger_for(request)
    chosen = _dataset(request, book)
    _viewed(request, chosen.name)
    return table_page(request, book, chosen, request.query_params)


def _viewed(request: Request, dataset: str) -> None:
    """Tell the watcher, when one runs, that `dataset`'s figures were asked for (prebuild.py)."""
    watcher = request.app.state.watcher
    if watcher is not None:
        watcher.viewed(dataset)


def table_page(request: Request, book, chosen, query, status_code: int = 200, **extra) -> Response:
    """Tan's table as `query` sorts, filters and lays it out, now or as of a date (`as_of`: as
    `table --as-of`, each release with the status it had then; no decision is offered on the past),
    also after a decision on a selection."""
    moment = _moment(request, book)
    moment["as_of"] = query.get("as_of") or ""
    frame = table_frame(book, chosen.name, moment["as_of"] or None)
    view = figures.table_view(frame, frame.attrs["statuses"], query.get("sort"), query.get("order"), query.get("status"),
                              query.get("page"))
    return page(request, "table.html", status_code=status_code, dataset=chosen, view=view,
                deciding=() if moment["as_of"] else allowed(book),
                basis=frame.attrs.get("basis", ""), transposed=query.get("layout") == "variables",
                charged=frame.attrs.get("releases", 0), rows_held=len(frame.index) - 1,
                accountants=frame.attrs.get("accountants", {}), outcomes=extra.pop("outcomes", None),
                **moment, **extra)


TABLE_CELLS = 20_000_000  # release rows x variables the table page sorts and pages; past it, the largest
TABLE_LARGEST = 1_000  # release rows (by their whole-dataset cost) the page holds past TABLE_CELLS


def table_frame(book, dataset: str, as_of: str | None):
    """Tan's table as the table page asks the façade for it (`warm` asks the same question): every
    release row, or past TABLE_CELLS cells the TABLE_LARGEST largest on the whole dataset, as
    `table` prints the largest past its own bound; the total row is always over every release."""
    return book.table(dataset, as_of=as_of, rows=TABLE_LARGEST, cells=TABLE_CELLS)


async def subset(request: Request) -> Response:
    book = ledger_for(request)
    chosen = _dataset(request, book)
    picked = [name for name in request.query_params.getlist("v") if name]
    moment = _moment(request, book)
    loss = book.subset(picked, dataset=chosen.name, as_of=moment["as_of"] or None) if picked else None
    # (headroom is a figure of now: what a new release could take; the past page shows none)
    room = book.headroom(loss.variables, dataset=chosen.name) if loss and not moment["as_of"] else None
    driving = loss.releases if loss else ()
    return page(request, "subset.html", dataset=chosen, picked=picked, loss=loss, room=room,
                drivers=[book.release(rid) for rid in driving[:DRIVERS_SHOWN]], more=len(driving) - DRIVERS_SHOWN,
                **moment)


DRIVERS_SHOWN = 100  # the releases a subset page lists (each read alone; the rest counted)


async def release(request: Request) -> Response:
    book = ledger_for(request)
    found = book.release(request.query_params.get("id", ""))
    return release_page(request, book, found)


def release_page(request: Request, book, found, status_code: int = 200, **extra) -> Response:
    """A release: its facts, guarantees, lineage (drawn), audit events and the decisions the person
    may take (also after a decision)."""
    siblings = book.lineage(found.id)  # (the relatives, not every release of the dataset)
    return page(request, "release.html", status_code=status_code, dataset=book.dataset(found.dataset),
                release=found, events=book.events(found.id),
                children=[r.id for r in siblings if found.id in r.derived_from],
                graph=lineage(siblings, found.id), actions=allowed(book, found.status.value), **extra)


ACTIONS = {  # the decisions a release's status allows (accounting/lifecycle.py), in the order offered
    "planned": ("approve", "cancel"),
    "approved": ("publish", "cancel"),
    "published": ("retract",),
}
REASONED = ("retract", "cancel")
DECISIONS = ("approve", "publish", "retract", "cancel")


def allowed(book, status: str | None = None) -> tuple[str, ...]:
    """The decisions the person acting may take (their ledger roles, `Ledger.may`): on a release of
    `status`, or on any release (the table's selection) when None. A viewer's is empty: no button."""
    offered = DECISIONS if status is None else ACTIONS.get(status, ())
    return tuple(action for action in offered if book.may(action))


async def audit(request: Request) -> Response:
    return page(request, "audit.html", verification=None)


async def downloads(request: Request) -> Response:
    book = ledger_for(request)
    return page(request, "downloads.html", dataset=_dataset(request, book))
