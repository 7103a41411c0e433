"""What the ledger already holds, as the input checks need it (a store builds it).

Invariant: plain read-only data; the checks never write through it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..core.records import Dataset, Family, Release


@dataclass(frozen=True)
class LedgerSnapshot:
    """What the ledger already holds, as the input checks need it."""

    datasets: Mapping[str, Dataset] = field(default_factory=dict)
    releases: Mapping[str, Release] = field(default_factory=dict)  # may be a lazy lookup (store.ReleaseLookup)
    families: Mapping[str, Family] = field(default_factory=dict)
    # the charged recorded releases holding given (family, part) pairs: a function of the pairs asked
    # about, giving (family, part) -> release id (store.parts_held: under the write lock, reading only
    # those). None: found among `releases` (a snapshot that holds them all)
    parts_held: Callable[[Collection[tuple[str, str]]], Mapping[tuple[str, str], str]] | None = field(
        default=None, compare=False)
    # release id -> when it was retracted or cancelled (history.ended; store.snapshot reads it):
    # the `--as-of` views date a status by it. None: not read
    ended: Mapping[str, datetime] | None = field(default=None, compare=False)
