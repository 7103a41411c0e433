"""The moments a ledger keeps: an ISO 8601 date or date-time as an aware UTC moment.

Invariant: every moment returned lies within EARLIEST .. LATEST, in UTC (no zone means UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime

from .documents import EXCERPT_CHARS


# The moments a ledger keeps, in UTC: a day short of either end of Python's calendar, so that
# converting a moment to UTC and the as-of arithmetic (a day before a --since, a microsecond
# before an --as-of) never leave it.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)


class MomentOutOfRange(ValueError):
    """A date-time outside EARLIEST .. LATEST; the message says so, quoting it."""


def parse_moment(text: str) -> datetime | None:
    """An ISO 8601 date or date-time as an aware UTC moment (a date is its midnight; no
    zone means UTC); None when it is not one, or lies outside EARLIEST .. LATEST."""
    try:
        return utc_moment(text)
    except MomentOutOfRange:
        return None


def utc_moment(text: str) -> datetime | None:
    """`parse_moment`, raising MomentOutOfRange for a moment outside EARLIEST .. LATEST."""
    try:
        moment = datetime.fromisoformat(str(text).strip())
    except ValueError:
        return None
    try:
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 lies in year 0, in UTC
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise MomentOutOfRange(f"{str(text).strip()[:EXCERPT_CHARS]!r} is outside the moments a ledger keeps: "
                               f"{EARLIEST.date().isoformat()} to {LATEST.date().isoformat()}, UTC")
    return moment


def in_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
