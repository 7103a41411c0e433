"""The moments a reader names (`--as-of`, `--since`, `publish --at`, the API's `since`): an ISO 8601
date or date-time read as an aware UTC moment, and the moment used, in words.

Invariants: no zone means UTC (the ledger states no zone of its own); a date alone names a whole
day (its end for `--as-of`, its start for `--since`); a moment in the future is refused unless asked.
"""

from __future__ import annotations

from ..core import failures
from ..core.errors import fail
from ..core.lazy import lazy_module

session_state = lazy_module("ledger.store.session_state")


def parse_date(text: str | None, option: str, *, start: bool = False, future: bool = False):
    """An ISO 8601 date or date-time from the command line (`--as-of`, `--since`, `--at`), as an
    aware UTC moment; no zone means UTC (the ledger states no zone of its own).

    A date alone names a whole day: for `--as-of` its end, 23:59:59.999999, so everything dated
    that day is included and `--as-of` today is accepted (a date is in the future only after
    today, UTC); with `start` (`--since`, and `publish --at`, which stamps a moment) its
    beginning, 00:00. A moment in the future is refused unless `future`. `moment_text` states
    the moment used."""
    from datetime import UTC, datetime, time

    from ..input.utc_moments import MomentOutOfRange, utc_moment

    if text is None:
        return None
    stripped = str(text).strip()
    try:
        moment = utc_moment(stripped)  # (a date alone: its midnight, in range exactly when its day is)
    except MomentOutOfRange as exc:
        raise fail("command line", option, str(exc)) from None
    day = _date_only(stripped)
    if day is not None:
        moment = datetime.combine(day, time.min if start else time.max, tzinfo=UTC)
        if not future and (day > session_state.now().date() if not start else moment > session_state.now()):
            raise fail("command line", option, f"{day.isoformat()} is in the future (today is "
                                               f"{session_state.now().date().isoformat()}, UTC)")
        return moment
    if moment is None:
        raise fail("command line", option, f"not a date: {failures.excerpt(stripped, 80)!r} (write it as "
                                           "2024-05-01 or 2024-05-01T09:30, UTC unless it says otherwise)")
    if not future and moment.replace(microsecond=0) > session_state.now():  # (the store's clock keeps whole seconds)
        raise fail("command line", option, f"{moment_text(moment)} is in the future")
    return moment


def _date_only(text: str):
    """The date `text` names when it is a date alone (2024-05-01), else None."""
    from datetime import date

    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def moment_text(moment) -> str:
    """The moment a date option stands for, in words: `the end of 2026-11-24 UTC` (a date
    alone given to --as-of), `the start of 2026-11-24 UTC` (to --since), else
    `2026-11-24 09:30:00 UTC` (with its microseconds when it has any)."""
    from datetime import UTC, time

    moment = moment.astimezone(UTC)
    if moment.timetz().replace(tzinfo=None) == time.max:
        return f"the end of {moment.date().isoformat()} UTC"
    if moment.timetz().replace(tzinfo=None) == time.min:
        return f"the start of {moment.date().isoformat()} UTC"
    return moment.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if moment.microsecond else "")) + " UTC"
