"""When a release's output became public, and release times as numbers (seconds since the epoch, naive times read as UTC).

Invariant: a release recorded as already published without a publication time was published when
recorded (at the latest); an unknown time is -inf, a release not yet public +inf.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..core.lazy import lazy_module
from ..core.records import Release, Status

np = lazy_module("numpy")  # imported on first use


def _naive(moment: datetime) -> datetime:
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)  # naive: UTC


def published_moment(release: Release) -> datetime | None:
    """When a charged release's output became public: its publication time; a release
    recorded as already published without one was published when recorded (at the latest)."""
    if release.published_at is not None:
        return release.published_at
    if release.status in (Status.PUBLISHED, Status.RETRACTED):
        return release.recorded_at or datetime.min
    return None


_EPOCH = datetime(1970, 1, 1)


from datetime import UTC as _UTC  # noqa: E402


def _stamp(moment: datetime) -> float:
    """Seconds since the epoch, a naive time read as UTC."""
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=_UTC)).timestamp()


def _stamps(moments) -> np.ndarray:
    """`_stamp` of each moment (None: -inf); a run of the same object converted once (a file's
    releases share their recording time)."""
    out = np.empty(len(moments), dtype=np.float64)
    last, value = None, -np.inf
    for k, moment in enumerate(moments):
        if moment is not last:  # the same object as the previous release's: converted once
            last = moment
            value = -np.inf if moment is None else (
                moment.timestamp() if moment.tzinfo is not None else moment.replace(tzinfo=_UTC).timestamp())
        out[k] = value
    return out
