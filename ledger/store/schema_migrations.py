"""The schema, created on first use and upgraded from any earlier version.

MIGRATIONS is the ordered list of steps (version, function, what it changes) that `ensure_schema`
walks from a ledger's version to SCHEMA_VERSION, under the write lock, each recorded in the audit
chain (`ledger.migrated`). New tables of a version are made by `create_all`. A read never creates
or upgrades a schema (`schema_state` first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
import json

from sqlalchemy import Connection, Engine, inspect
from sqlmodel import SQLModel, Session, select

from . import accounting_migrations, accounting_rows, enforced, sealed
from ..accounting.budget import total_from_index
from ..accounting.cap_decisions import choose_filter
from ..accounting.cap_states import state_from_index
from .codec import cap_to_dict
from .append_only import LIFECYCLE_TRIGGER, install_append_only
from .audit_chain import append_event
from .running_totals import caps_index, save_accountant_states, save_totals
from .configuration import bump_config, caps
from .row_reads import is_empty
from .sessions import read_session, write_session
from .decoded_history import snapshot
from .table_models import AccountingRow, AuditEventRow, CapRow, EVENT_INDEX, EVENT_INDEX_9, MetaRow, PART_INDEX, ReleaseRow


SCHEMA_VERSION = 20  # the last step's version (MIGRATIONS); 1: the releases, the audit chain


def ensure_schema(engine: Engine) -> None:
    """Create the tables on first use, or upgrade a ledger made by an earlier version.

    Runs under the write lock, so concurrent first uses do not race. New tables
    of a version are created by `create_all`; a version's other changes are its step
    in MIGRATIONS, run in order, each recorded in the audit chain.
    """
    with write_session(engine) as session:
        connection = session.connection()
        fresh = not inspect(connection).has_table(AuditEventRow.__tablename__)
        SQLModel.metadata.create_all(connection)
        stamp = session.get(MetaRow, "schema_version")
        if fresh or stamp is None:
            version = SCHEMA_VERSION if fresh else 1  # version 1 ledgers carry no stamp of their own
            session.merge(MetaRow(key="schema_version", value=str(version)))
            if fresh:
                install_append_only(connection)
                enforced.install(connection)
                return
        else:
            version = int(stamp.value)
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"this ledger has schema version {version}; this privacy-ledger knows up to "
                               f"{SCHEMA_VERSION}. Upgrade privacy-ledger.")
        for added_in, add in _MODEL_COLUMNS:
            if version < added_in:
                add(connection)
        for step in MIGRATIONS:
            if step.version <= version:
                continue
            step.run(session)
            session.merge(MetaRow(key="schema_version", value=str(step.version)))
            if not is_empty(session):
                append_event(session, kind="ledger.migrated", subject=f"schema {step.version}",
                             actor="privacy-ledger", payload={"from": step.version - 1, "to": step.version})


def _v3_release_outputs(session: Session) -> None:
    """Releases gain their Pufferfish guarantees, output digest and output; variables
    their public categories."""
    connection = session.connection()
    columns = {column["name"] for column in inspect(connection).get_columns("releases")}
    if "pufferfish" not in columns:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN pufferfish JSON NOT NULL DEFAULT '[]'")
    if "output_digest" not in columns:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN output_digest VARCHAR")
    if "output" not in columns:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN output TEXT")
    if "categories" not in {column["name"] for column in inspect(connection).get_columns("variables")}:
        connection.exec_driver_sql("ALTER TABLE variables ADD COLUMN categories JSON")


def _v4_people(session: Session) -> None:
    """Datasets gain their self-approval waiver (the roles table is made by create_all);
    on PostgreSQL the audit events and releases become append-only."""
    connection = session.connection()
    if "self_approval" not in {column["name"] for column in inspect(connection).get_columns("datasets")}:
        connection.exec_driver_sql("ALTER TABLE datasets ADD COLUMN self_approval BOOLEAN NOT NULL DEFAULT FALSE")
    install_append_only(connection)


def _dataset_relation_column(connection) -> None:
    """Datasets gain their neighbour relation (schema 18): every earlier dataset is replace-one."""
    if "relation" not in {column["name"] for column in inspect(connection).get_columns("datasets")}:
        connection.exec_driver_sql("ALTER TABLE datasets ADD COLUMN relation VARCHAR NOT NULL DEFAULT 'replace'")


def _v5_accounting_rows(session: Session) -> None:
    """Every release gains its accounting row (accounting_migrations.build_all), built once from the release rows."""
    accounting_migrations.build_all(session)


def _v6_accounting_events(session: Session) -> None:
    """The accounting rows gain what the accountants read: each release's accounting
    event and its recording and publication moments (accounting_migrations.add_event_columns), built once from the release rows."""
    accounting_migrations.add_event_columns(session)


def _v7_sampled_events(session: Session) -> None:
    """A Laplace or geometric release run on a sample keeps its sampling event for the Rényi and
    PLD accountants: its accounting row is brought to that event; and the
    caps' running accountant states, whose version this changes, are rebuilt once here, so no
    read has to recompute them from the whole history on every call until a write saves them."""
    accounting_migrations.refresh_sampled_events(session)
    _rebuild_accountant_states(session)


def _rebuild_accountant_states(session: Session) -> None:
    """Every cap at a delta gets its accountant state from the history (as
    cap_accounting.current_states computes a missing one), saved beside its running total."""
    from ..accounting import cap_states

    datasets = sorted(set(session.exec(select(CapRow.dataset).where(CapRow.delta.is_not(None))).all()))
    if not datasets:
        return
    history = snapshot(session)
    for dataset in datasets:
        stated = [cap for cap in caps(session, dataset) if cap.delta is not None and cap.rho is None]
        releases = [r for r in history.releases.values() if r.dataset == dataset]
        families = {f.id: f for f in history.families.values() if f.dataset == dataset}
        save_accountant_states(session, dataset, {cap.name: cap_states.state_from_history(cap, releases, families)
                                                  for cap in stated})


def _v8_verified_head_time(session: Session) -> None:
    """The verified head kept by `audit verify` (ledger_meta) gains when it was verified and when
    the last full verification ran: JSON where it was "seq:hash"; a head kept before has no
    time (unknown), and the next verification stamps its own."""
    row = session.get(MetaRow, "verified_head")  # (verified_head.CHECKPOINT_KEY; its reader: verified_head.parse)
    if row is not None and not row.value.startswith("{"):
        seq, digest = row.value.split(":", 1)
        row.value = json.dumps({"seq": int(seq), "hash": digest, "at": None, "full_at": None}, sort_keys=True)
        session.add(row)


def _v9_event_index(session: Session) -> None:
    """The audit events gain their index by (kind, subject, actor) (since schema 12 with their
    moment: EVENT_INDEX), built once."""
    index = next(i for i in AuditEventRow.__table__.indexes if i.name == EVENT_INDEX)
    index.create(session.connection(), checkfirst=True)


def _v12_event_index_at(session: Session) -> None:
    """The audit events' index gains their moment (EVENT_INDEX: kind, subject, actor, at), built
    once; the schema 9 index it extends (EVENT_INDEX_9) is dropped (a ledger upgraded from before
    schema 9 never had it: _v9_event_index built this one)."""
    connection = session.connection()
    connection.exec_driver_sql(f"DROP INDEX IF EXISTS {EVENT_INDEX_9}")
    _v9_event_index(session)


def _v10_sealed_chunks(session: Session) -> None:
    """The accounting rows of every complete range of seqs are sealed in binary chunks
    (sealed.py), built once from the accounting rows."""
    sealed.build_all(session)


def _v11_implied_gaussian_events(session: Session) -> None:
    """A Gaussian release declared only by (epsilon, delta) gets the accounting event of the
    smallest multiplier its claim allows (accounting_migrations.refresh_implied_gaussian_events); the sealed
    chunks, which hold the event column, are sealed again when a row changed."""
    if accounting_migrations.refresh_implied_gaussian_events(session):
        sealed.build_all(session)


def _v13_filter_shares(session: Session) -> None:
    """An epsilon at a delta is a filter figure at its statement's share of the delta (spend.py);
    a cap at a delta keeps its figure in its running total, so every such cap's total is computed
    again from its accounting rows (budget.total_from_index, as `cap set` does)."""
    _caps_at_a_delta_again(session, states=False)


def _v15_odometer(session: Session) -> None:
    """What a cap at a delta is held to changed (spend.py: the Rényi orders fixed in advance take
    the delta, 1/22 each), so every cap at a delta has its running total and accountant state
    computed again from its accounting rows; the accounting rows' (dataset, status) index is built
    first (it finds a dataset's cancelled rows)."""
    status_index = next(i for i in AccountingRow.__table__.indexes if i.name == "ix_release_accounting_status")
    status_index.create(session.connection(), checkfirst=True)
    _caps_at_a_delta_again(session, states=True)


def _caps_at_a_delta_again(session: Session, states: bool) -> None:
    from ..accounting.cap_states import state_from_index

    for dataset in sorted(set(session.exec(select(CapRow.dataset).where(CapRow.delta.is_not(None),
                                                                     CapRow.rho.is_(None))).all())):
        stated = [cap for cap in caps(session, dataset) if cap.delta is not None and cap.rho is None]
        index = caps_index(session, dataset, stated)
        save_totals(session, dataset, {cap.name: total_from_index(cap, index) for cap in stated})
        if states:
            save_accountant_states(session, dataset, {cap.name: state_from_index(cap, index) for cap in stated})


def _v14_fixed_sides(session: Session) -> None:
    """A release with an (epsilon, delta) guarantee beside a pure or rho one (or several (epsilon,
    delta) ones) is charged by one side fixed by the release (cost_rule.charge_options), no longer by the
    combination the history favours; such releases have several guarantees (an accounting row's
    `more`), so in each dataset holding one, every cap's running total and accountant state is
    computed again from the accounting rows (as `cap set` does)."""
    from ..accounting.cap_states import state_from_index

    found = session.connection().execute(
        select(accounting_rows._ROWS.c.dataset).where(accounting_rows._ROWS.c.more.is_not(None)).distinct())
    for dataset in sorted(found.scalars()):
        stated = caps(session, dataset)
        if not stated:
            continue
        index = caps_index(session, dataset, stated)
        save_totals(session, dataset, {cap.name: total_from_index(cap, index) for cap in stated})
        save_accountant_states(session, dataset, {cap.name: state_from_index(cap, index) for cap in stated
                                                  if cap.delta is not None and cap.rho is None})


def _release_part_column(connection: Connection) -> None:
    """The release rows gain their `part` column (schema 16), empty."""
    if "part" not in {column["name"] for column in inspect(connection).get_columns("releases")}:
        connection.exec_driver_sql("ALTER TABLE releases ADD COLUMN part VARCHAR")


def _v16_parts(session: Session) -> None:
    """A family member names the part of the records it is computed on (docs/explanation/model.md#families), and the
    charged members of a family hold distinct parts. Every member recorded before is given its own
    id as its part: the ledger charged each as a part of its own (which the new rule can no longer
    let two members on one part claim). Its audit event is untouched: a release dict without `part`
    reads back with its id as its part (codec.release_from_dict), so `verify` finds the row and the
    event the same release. On PostgreSQL the append-only trigger, which lets an update change only
    a release's lifecycle, is disabled for this one statement, in the migration's transaction. The
    index the record's check reads by (PART_INDEX) is built after."""
    connection = session.connection()
    _release_part_column(connection)
    trigger = connection.dialect.name == "postgresql" and connection.exec_driver_sql(
        f"SELECT 1 FROM pg_trigger WHERE tgname = '{LIFECYCLE_TRIGGER}' AND tgrelid = 'releases'::regclass"
    ).first() is not None
    if trigger:
        connection.exec_driver_sql(f"ALTER TABLE releases DISABLE TRIGGER {LIFECYCLE_TRIGGER}")
    connection.exec_driver_sql("UPDATE releases SET part = id WHERE family IS NOT NULL AND part IS NULL")
    if trigger:
        connection.exec_driver_sql(f"ALTER TABLE releases ENABLE TRIGGER {LIFECYCLE_TRIGGER}")
    index = next(i for i in ReleaseRow.__table__.indexes if i.name == PART_INDEX)
    index.create(connection, checkfirst=True)


def _v17_declared_share(session: Session) -> None:
    """The delta of a figure is split before any release between the statements of a plan declared
    in advance (the PLD, the Rényi curve at its best order: half) and the Rényi filter's orders (the
    other half, 1/44 each; spend.DECLARED_SHARE), since one history prints both kinds (the review's
    R1). Every cap at a delta has its running total and accountant state computed again from its
    accounting rows (its PLD memo, made at the whole delta, no longer matches its digest)."""
    _caps_at_a_delta_again(session, states=True)


def _cap_filter_column(connection: Connection) -> None:
    """The cap rows gain their `filter` column (schema 18), empty."""
    if "filter" not in {column["name"] for column in inspect(connection).get_columns("caps")}:
        connection.exec_driver_sql("ALTER TABLE caps ADD COLUMN filter VARCHAR")


def _v18_filters(session: Session) -> None:
    """Every figure is fully adaptive and a cap at a delta is a privacy filter of a recorded kind
    (accounting/filters.py): each such cap is given its filter from the releases it holds now
    (cap_decisions.choose_filter), written as a `cap.set` event by privacy-ledger, and every cap's
    running total and state computed again from its accounting rows."""
    for dataset in sorted(set(session.exec(select(CapRow.dataset)).all())):
        stated = caps(session, dataset)
        index = caps_index(session, dataset, stated)
        for cap in stated:
            if cap.delta is not None and cap.rho is None and not cap.filter:
                cap = replace(cap, filter=choose_filter(cap, state_from_index(cap, index)))
                row = session.get(CapRow, (dataset, cap.name))
                row.filter = cap.filter
                session.add(row)
                append_event(session, kind="cap.set", subject=f"{dataset}/{cap.name}", actor="privacy-ledger",
                             payload={"cap": cap_to_dict(cap), "reason": "schema 18: the cap's privacy filter"})
        session.flush()
        bump_config(session)
        stated = caps(session, dataset)
        save_totals(session, dataset, {cap.name: total_from_index(cap, index) for cap in stated})
        save_accountant_states(session, dataset, {cap.name: state_from_index(cap, index) for cap in stated
                                                  if cap.delta is not None and cap.rho is None})


def _v19_enforced(session: Session) -> None:
    """PostgreSQL refuses, at INSERT, an audit event whose lifecycle step lifecycle.TRANSITIONS does
    not allow, and, under a person's own login, an event of a duty the login's group role does not
    hold (enforced.py); the group roles are made when missing. Nothing on SQLite."""
    enforced.install(session.connection())


def _v20_plan_versions(session: Session) -> None:
    """A solved plan's version is recorded as a `plan.recorded` event (operations/plan_book.py), a
    steward's duty: PostgreSQL's event check is made again from enforced.EVENT_ROLES, which names
    the new kind (else it would need the admin role). Nothing on SQLite."""
    enforced.install(session.connection())


def _tables_only(_session: Session) -> None:
    """A version whose changes are new tables only, made by `create_all`."""


@dataclass(frozen=True)
class Migration:
    """One step of the schema: what `ensure_schema` runs to bring a ledger from `version` - 1 to
    `version`, and what it changes, in a line."""

    version: int
    run: Callable[[Session], None]
    description: str


# The steps, in order, one per version from 2 to SCHEMA_VERSION (tests/store/test_store.py checks).
MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, _tables_only, "caps and their running totals (tables); existing ledgers have no caps yet"),
    Migration(3, _v3_release_outputs, "Pufferfish guarantees and outputs of releases, public categories of variables"),
    Migration(4, _v4_people, "people's roles, the self-approval waiver of a dataset, PostgreSQL append-only triggers"),
    Migration(5, _v5_accounting_rows, "accounting rows (accounting_rows.py)"),
    Migration(6, _v6_accounting_events, "their accounting events and lifecycle moments"),
    Migration(7, _v7_sampled_events, "a subsampled release's accounting event is its sampling event"),
    Migration(8, _v8_verified_head_time, "the verified head (verified_head.py) keeps when it was verified"),
    Migration(9, _v9_event_index, "audit events indexed by (kind, subject, actor): EVENT_INDEX"),
    Migration(10, _v10_sealed_chunks, "the accounting rows sealed in binary chunks (sealed.py)"),
    Migration(11, _v11_implied_gaussian_events,
              "a Gaussian declared only by (epsilon, delta) has its implied multiplier's event (catalogue)"),
    Migration(12, _v12_event_index_at, "the audit events' index holds their moment too: EVENT_INDEX (kind, subject, "
                                       "actor, at)"),
    Migration(13, _v13_filter_shares,
              "the figures of caps at a delta are filter figures at their statement's share of it (spend.py)"),
    Migration(14, _v14_fixed_sides,
              "a release offering (epsilon, delta) beside pure or rho is charged by a side fixed in advance"),
    Migration(15, _v15_odometer, "an epsilon at a delta of a composition is an odometer; a declared plan cut short "
                                 "by a cancellation after a publication is adaptive"),
    Migration(16, _v16_parts, "a family member names its part of the records (releases.part, PART_INDEX); "
                              "members recorded before are their own part"),
    Migration(17, _v17_declared_share, "a plan declared in advance is stated at half the delta, the filter's orders "
                                       "at the other half: the caps at a delta decided again"),
    Migration(18, _v18_filters, "a cap at a delta is a filter of a recorded kind (caps.filter); a dataset states its "
                                "neighbour relation (datasets.relation; earlier ones are replace-one)"),
    Migration(19, _v19_enforced, "PostgreSQL refuses an event whose lifecycle step or duty is not allowed "
                                 "(enforced.py)"),
    Migration(20, _v20_plan_versions, "a plan's version is an audit event (plan.recorded), a steward's duty on "
                                      "PostgreSQL"),
)

# Columns the current row models name, added to a ledger older than their version before any step
# runs: the steps before that version read those rows through the current models.
_MODEL_COLUMNS: tuple[tuple[int, Callable[[Connection], None]], ...] = (
    (16, _release_part_column),
    (18, _cap_filter_column),
    (18, _dataset_relation_column),
)


def schema_state(engine: Engine) -> tuple[str, int | None]:
    """("missing", None) when there are no ledger tables (not a ledger), else ("current" |
    "older" (needs an upgrade, which writes) | "newer", the schema version): read without
    any lock and without writing."""
    with read_session(engine) as session:
        connection = session.connection()
        if not inspect(connection).has_table(AuditEventRow.__tablename__) or \
                not inspect(connection).has_table(MetaRow.__tablename__):
            return "missing", None
        # a Core read of the one value: an ORM `get` would configure every mapper first (a few
        # milliseconds of a fresh `check`, which reads no ORM object)
        stamp = connection.execute(select(MetaRow.__table__.c.value).where(
            MetaRow.__table__.c["key"] == "schema_version")).scalar()
    version = 1 if stamp is None else int(stamp)
    if version == SCHEMA_VERSION:
        return "current", version
    return ("older" if version < SCHEMA_VERSION else "newer"), version
