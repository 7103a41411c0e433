"""Accounting rows: what the read commands need of each release, readable without
decoding the release, and how a release becomes its row (`expected_row`).

A release row holds everything a steward recorded (JSON columns, the output, the
lifecycle); `subset`, `table` and `pairs` need only, per charged release, what it
reads and what its guarantees protect at which value. The store keeps that in
three tables, written in the same transaction as every record and status change
(accounting_writes.py):

- `guarantee_values`: each distinct guarantee value (notion, exact epsilon /
  delta / rho as fraction text, relation) once, with a small integer id;
- `release_accounting`: one row per release, keyed by its seq: id, dataset,
  status, family, title, the variables it reads as a bitset over the dataset's
  variable positions, its first guarantee as (value id, protects bitset) and any
  further guarantees as compact text ("id:hex;id:hex"); and what the accountants
  need (schema 6): the accounting event its mechanism's parameters
  describe (an id into `accounting_events`, with whether the release is charged
  through it: `dp_events.mechanism_event`), and its recording and publication
  moments (`accountants.note_times`, `published_moment`) as whole microseconds
  since 1970-01-01 UTC.
- `accounting_events`: each distinct accounting event key (`dp_events.Event.key`:
  exact fractions as text) once, with a small integer id.

The rows of each complete range of seqs are also kept sealed in one binary chunk
(sealed.py, schema 9). The rows are read into the engine's `LedgerIndex` by
index_from_rows.py, compared with their releases by accounting_check.py, and built
or refreshed by the schema migrations in accounting_migrations.py.

Invariants:
- every release row has exactly one accounting row, equal to `expected_row(release)`;
  `audit verify` recomputes them from the release rows and reports any difference;
- a guarantee value id, once given, never changes meaning (the table is append-only);
- an event id, likewise (`accounting_events` is append-only);
- a ledger made before these tables existed gets them built once, in place, by the
  schema 5 migration, and a ledger of schema 5 its event and time columns by the
  schema 6 migration (each an audit event, like every migration).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..core.records import Guarantee, Notion, Relation, Release
from .codec import canonical_json
from .row_arrays import micros
from .table_models import AccountingEventRow, AccountingReadRow, AccountingRow, GuaranteeValueRow

_READS = AccountingReadRow.__table__
_VALUES = GuaranteeValueRow.__table__
_ROWS = AccountingRow.__table__
_EVENTS = AccountingEventRow.__table__


def bitset(names: Iterable[str], position: Mapping[str, int], width: int) -> bytes:
    """The names' positions as a little-endian bitset of `width` variables (unknown names ignored)."""
    mask = 0
    for name in names:
        k = position.get(name)
        if k is not None:
            mask |= 1 << k
    return mask.to_bytes((width + 7) // 8 or 1, "little")


def value_body(guarantee: Guarantee) -> str:
    """A guarantee's value (everything but what it protects), as canonical JSON."""
    # cached by the exact values' integer pairs (a Fraction hashes in Python, an int in C)
    return _value_body(guarantee.notion, _pair(guarantee.epsilon), _pair(guarantee.delta), _pair(guarantee.rho),
                       guarantee.relation, guarantee.charged_in)


def _pair(x: Fraction | None) -> tuple[int, int] | None:
    return None if x is None else (x.numerator, x.denominator)


@lru_cache(maxsize=4096)  # a ledger repeats a few values over and over
def _value_body(notion: Notion, epsilon: tuple[int, int] | None, delta: tuple[int, int] | None,
                rho: tuple[int, int] | None, relation: Relation, charged_in: Relation | None = None) -> str:
    def exact(x: tuple[int, int] | None):
        return None if x is None else f"{x[0]}/{x[1]}"

    body = {"notion": notion.value, "epsilon": exact(epsilon), "delta": exact(delta), "rho": exact(rho),
            "relation": relation.value}
    if charged_in is not None:  # (only in an add/remove dataset: every earlier body is unchanged)
        body["charged_in"] = charged_in.value
    return canonical_json(body)


def guarantee_of(body: str) -> Guarantee:
    """The guarantee a value body describes (protecting nothing: only its value counts here)."""
    data = json.loads(body)

    def exact(text: str | None) -> Fraction | None:
        return None if text is None else Fraction(text)

    return Guarantee(protects=frozenset(), notion=Notion(data["notion"]), epsilon=exact(data["epsilon"]),
                     delta=exact(data["delta"]), rho=exact(data["rho"]), relation=Relation(data["relation"]),
                     charged_in=Relation(data["charged_in"]) if "charged_in" in data else None)


@dataclass(frozen=True)
class Expected:
    """An accounting row as recomputed from its release: value bodies, not ids."""

    release: str
    dataset: str
    status: str
    family: str | None
    title: str
    reads: bytes
    guarantees: tuple[tuple[str, bytes], ...]  # (value body, protects bitset), in the release's order
    event: str | None = None  # the mechanism's event key (dp_events.Event.key)
    charged_by_event: bool = False
    recorded_us: int | None = None
    published_us: int | None = None


def expected_row(release: Release, variables: Sequence[str]) -> Expected:
    """The accounting row `release` has, its bitsets over `variables` (its dataset's, in order)."""
    from ..accounting.dp_events import release_event

    position = _position(tuple(variables))
    width = len(variables)
    event, charged = release_event(release)
    return Expected(release=release.id, dataset=release.dataset, status=release.status.value, family=release.family,
                    title=release.title, reads=bitset(release.reads, position, width),
                    guarantees=tuple((value_body(g), bitset(g.protects, position, width)) for g in release.guarantees),
                    event=event, charged_by_event=charged, recorded_us=micros(release.recorded_at),
                    published_us=micros(release.published_at))


@lru_cache(maxsize=64)
def _position(variables: tuple[str, ...]) -> dict[str, int]:
    """Each variable's position (a dataset's variables, once, not once per release)."""
    return {name: k for k, name in enumerate(variables)}


def _positions(bits: bytes) -> list[int]:
    """The positions a little-endian bitset holds, lowest first."""
    mask = int.from_bytes(bits, "little")
    found = []
    while mask:  # one step per variable read, not per variable of the dataset
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found
