"""The days a ledger spans by its own clock: the day of its first audit event and today (UTC, the
store's clock, the one every `--as-of` is refused past). A reader offering `as_of` dates offers
these: an earlier day holds nothing, a later one is in the future."""

from __future__ import annotations

from datetime import date

from ..core.lazy import lazy_module

session_state = lazy_module("ledger.store.session_state")
report_queries = lazy_module("ledger.store.report_queries")


def date_span(session) -> tuple[date | None, date]:
    """(the day of the first audit event, None in a ledger without one; today)."""
    from ..input.utc_moments import parse_moment

    first = report_queries.first_event_moment_text(session)
    return (None if first is None else parse_moment(first).date()), session_state.now().date()
