"""A release's lifecycle after it was recorded, as `releases` lists it: who approved, published,
retracted or cancelled it, when, and why (docs/explanation/model.md#people-duties-and-the-book-of-record).

The releases are read a page at a time (decoded_history.release_pages), each page with the steps of its
releases alone: a million releases are never held at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from ..core.records import Release
from ..input.snapshot import LedgerSnapshot
from ..store import audit_chain, configuration, decoded_history, sessions

STEP_KINDS = ("release.approved", "release.published", "release.retracted", "release.cancelled")


def release_steps(session, ids: list[str]) -> dict[str, list[dict]]:
    """Release id -> its lifecycle steps after recording: step, by, at, event (and the reason
    of a retraction or a cancellation)."""
    found: dict[str, list[dict]] = {}
    for seq, kind, subject, at, actor, payload in audit_chain.lifecycle_events(session, list(STEP_KINDS), ids):
        step = {"step": kind.removeprefix("release."), "by": actor, "at": at, "event": seq}
        if kind in ("release.retracted", "release.cancelled"):
            step["reason"] = json.loads(payload).get("reason")
        found.setdefault(subject, []).append(step)
    return found


def pages_with_steps(engine, dataset: str | None = None
                     ) -> Iterator[tuple[LedgerSnapshot, list[Release], dict[str, list[dict]]]]:
    """(the datasets and families, a page of releases in recording order, their steps), one
    consistent read; every release when `dataset` is None."""
    with sessions.read_session(engine) as session:
        light = configuration.write_context(session)
        for page in decoded_history.release_pages(session, dataset):
            yield light, page, release_steps(session, [r.id for r in page])
