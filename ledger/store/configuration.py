"""What changes rarely, datasets, families and caps, read once per transaction and cached per process
by the ledger's configuration stamp (`config_seq` in ledger_meta, moved by every such change).

Invariant: a cached configuration serves a transaction only when the stamp that transaction read at
its start is the one the cache was made at; the same read takes the audit head and the running
totals' stamp (one round trip).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from sqlalchemy import text
from sqlmodel import Session

from . import driver
from ..accounting.spend import ALLOWANCE
from ..core.records import Cap, Dataset, Family, in_name_order
from ..input.snapshot import LedgerSnapshot
from .codec import GENESIS_HASH, cap_from_dict, family_from_dict
from .row_reads import ReleaseLookup, read_datasets, parts_held
from .row_dicts import cap_dict, family_dict, text_rows
from .session_state import session_connection, flush_pending, ledger_key
from .table_models import CapRow, FamilyRow, MetaRow


# the configuration stamp, the head of the audit chain and the running totals' stamp
# (stale_totals), in one round trip (SQL text, as text_rows says why)
STAMP_AND_HEAD_SQL = (
    """SELECT (SELECT value FROM ledger_meta WHERE "key" = 'config_seq'), """
    "(SELECT seq FROM audit_events ORDER BY seq DESC LIMIT 1), "
    "(SELECT hash FROM audit_events ORDER BY seq DESC LIMIT 1), "
    """(SELECT value FROM ledger_meta WHERE "key" = 'totals_head')""")
_STAMP_AND_HEAD = text(STAMP_AND_HEAD_SQL)


def dataset_variables(session: Session, names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each named dataset's variables, in order (the positions of the accounting bitsets)."""
    config = configuration(session)
    found = {name: config.variable_names(name) for name in names if name in config.datasets}
    missing = [name for name in names if name not in found]
    if missing:  # added in this transaction, after the configuration was read
        flush_pending(session)
        found.update({d.name: d.variable_names for d in read_datasets(session, missing)})
    return found


@dataclass(frozen=True)
class Configuration:
    """What changes rarely: datasets, families, caps. Cached per process and reloaded
    whenever the ledger's configuration stamp (bumped by every such change) moves."""

    datasets: Mapping[str, Dataset]
    families: Mapping[str, Family]
    caps: Mapping[str, tuple[Cap, ...]]
    # each dataset's variable names, in order, worked out once per configuration (a record asks
    # for them every time; a dataset's `variable_names` builds them afresh)
    variables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def variable_names(self, dataset: str) -> tuple[str, ...]:
        found = self.variables.get(dataset)
        return found if found is not None else self.datasets[dataset].variable_names


_CONFIGURATION_CACHE: dict[str, tuple[str, Configuration]] = {}  # by ledger URL (ledger_key)


def bump_config(session: Session) -> None:
    session.info.pop("configuration", None)
    row = session.get(MetaRow, "config_seq")
    session.merge(MetaRow(key="config_seq", value=str(int(row.value) + 1 if row else 1)))


def configuration(session: Session) -> Configuration:
    cached = session.info.get("configuration")  # once per transaction
    if cached is not None:
        return cached
    result = _configuration(session)
    session.info["configuration"] = result
    return result


def _configuration(session: Session) -> Configuration:
    url = ledger_key(session)
    read = session.info.pop("stamp_and_head", None)  # (read with the lock: write_session)
    if read is None:
        read = driver.query(session_connection(session), _STAMP_AND_HEAD).fetchone()
    stamp, seq, digest, totals_stamp = read
    stamp = stamp or "0"
    session.info.setdefault("totals_stamp", totals_stamp)  # as it was when this transaction began
    head = (0, GENESIS_HASH) if seq is None else (seq, digest)
    session.info.setdefault("head_at_start", head[1])
    if "audit_head" not in session.info:  # read under the write lock: it cannot move before commit
        session.info["audit_head"] = head
    cached = _CONFIGURATION_CACHE.get(url)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    datasets = {d.name: d for d in read_datasets(session)}  # (Core rows, as below: no ORM objects)
    connection = session_connection(session)
    families = {r.id: family_from_dict(family_dict(r)) for r in connection.execute(text_rows(FamilyRow.__table__))}
    caps_by_dataset: dict[str, list[Cap]] = {}
    for cap_row in connection.execute(text_rows(CapRow.__table__)):
        known = datasets.get(cap_row.dataset)
        order = known.variable_names if known is not None else ()
        caps_by_dataset.setdefault(cap_row.dataset, []).append(
            replace(cap_from_dict(cap_dict(cap_row), order), allowance=known.allowance if known else ALLOWANCE))
    # by dataset and name in Python's order, not SQL's: PostgreSQL's ORDER BY follows the database's collation
    result = Configuration(datasets, families, {k: in_name_order(v) for k, v in sorted(caps_by_dataset.items())},
                           {name: dataset.variable_names for name, dataset in datasets.items()})
    _CONFIGURATION_CACHE[url] = (stamp, result)
    return result


def write_context(session: Session) -> LedgerSnapshot:
    """Datasets and families in full (small, cached), releases and the parts their members hold
    by lookup (in a `write_session`: under the write lock, in the record's transaction)."""
    config = configuration(session)
    return LedgerSnapshot(datasets=config.datasets, releases=ReleaseLookup(session), families=config.families,
                          parts_held=lambda pairs: parts_held(session, pairs))


def caps(session: Session, dataset: str) -> list[Cap]:
    return list(configuration(session).caps.get(dataset, ()))
