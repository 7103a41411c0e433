"""Moments the façade's `as_of` and `since` arguments name, read as the command line reads them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..core.errors import InputErrors, LedgerError, fail


JUST_AFTER = timedelta(microseconds=1)  # the store's clock keeps microseconds at most


def as_of_moment(value: str | datetime | None, field: str = "as_of") -> datetime | None:
    """The moment an `as_of` names: a date-time (UTC when it has no zone), or text read as the
    command line's `--as-of` reads it (a date alone is the end of that day; never the future)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    from ..operations.moments import parse_date

    try:
        return parse_date(value, field)
    except InputErrors as exc:  # (named as the argument it is, not as a command-line option)
        raise InputErrors([LedgerError("argument", e.field, e.message) for e in exc.errors]) from None


def report_moments(since: str | datetime | None, as_of: str | datetime | None
                   ) -> tuple[datetime | None, datetime | None]:
    """A report's `since` (read as --since reads it: a date alone is its start) and `as_of` (as
    `as_of_moment`), refused when `since` is after `as_of`."""
    from ..operations.report_inputs import parse_since

    since_at = since if isinstance(since, datetime) or since is None else parse_since(since)
    as_of_at = as_of_moment(as_of)
    if since_at is not None and as_of_at is not None and since_at > as_of_at:
        raise fail("argument", "since", f"{since} is after as_of {as_of}")
    return since_at, as_of_at
