"""Writing releases and families: recorded (with their accounting rows, accounting_writes.py, in the same
transaction) and their lifecycle changes; each with its audit event carrying the release's state.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert
from sqlmodel import Session

from . import accounting_writes, driver
from ..core.records import Family, Release
from .codec import family_to_dict, release_to_dict
from .audit_chain import append_event
from .process_caches import known_ids
from .configuration import bump_config, dataset_variables
from .row_dicts import release_values
from .session_state import session_connection
from .table_models import FamilyRow, LIFECYCLE_COLUMNS, ReleaseRow


_RELEASES = ReleaseRow.__table__


_INSERT_RELEASE = insert(_RELEASES)


def add_releases(session: Session, releases: Sequence[Release], families: Sequence[Family], actor: str,
                 decisions: Sequence[dict] = ()) -> None:
    for family in families:
        session.add(FamilyRow(**family_to_dict(family)))
        append_event(session, kind="family.added", subject=family.id, actor=actor,
                     payload={"family": family_to_dict(family)})
    if families:
        bump_config(session)
        session.flush()  # families before the releases that name them
    rows = []
    for release in releases:
        body = release_to_dict(release)
        payload = {"release": body}
        if decisions:  # which accountant admitted it, under which case and theorem
            payload["budget_decisions"] = list(decisions)
        seq, _ = append_event(session, kind="release.recorded", subject=release.id, actor=actor,
                              payload=payload)
        rows.append(release_values(body, seq))  # a release's seq is that of its recording event
        session.info.setdefault("release_exists", {})[release.id] = True  # (ReleaseLookup)
    if rows:
        driver.execute_many(session_connection(session), _INSERT_RELEASE, rows, columns=True)
        accounting_writes.insert_rows(session_connection(session), [(row["seq"], r) for row, r in zip(rows, releases)],
                            dataset_variables(session, {r.dataset for r in releases}), known_ids(session))


def set_status(session: Session, release: Release, actor: str, kind: str, decisions: Sequence[dict] = (),
               reason: str | None = None) -> None:
    """Write a lifecycle change (the release already carries its new status); a retraction
    or cancellation carries its reason in the event, an enforcing step its budget decisions."""
    row = session.get(ReleaseRow, release.id)
    body = release_to_dict(release)
    for name in LIFECYCLE_COLUMNS:
        setattr(row, name, body[name])
    session.add(row)
    payload = {"release": body} if reason is None else {"release": body, "reason": reason}
    if decisions:
        payload["budget_decisions"] = list(decisions)
    append_event(session, kind=kind, subject=release.id, actor=actor, payload=payload)
    accounting_writes.set_status(session_connection(session), release.id, release.status, release.published_at)  #
