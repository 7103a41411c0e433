"""The ledger's SQLModel tables (the accounting rows' and sealed chunks' tables are described in accounting_rows.py
and sealed.py), and the names of the indexes a migration builds.

Invariant: the ledger never updates or deletes an `AuditEventRow`; a release row changes only in
its LIFECYCLE_COLUMNS (on PostgreSQL the triggers of append_only.py refuse anything else).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, JSON, LargeBinary, String, Text, UniqueConstraint, false
from pydantic import ConfigDict
from sqlmodel import Field, SQLModel



# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


class TableModel(SQLModel):
    """The base of the ledger's tables: each table's pydantic validator is built when first
    used, not when the module is imported. The store writes and reads rows through SQLAlchemy
    (a table model is constructed without validation), so a `check` or a `record` never builds
    one, and building all of them cost about 15 ms of every command's start-up."""

    model_config = ConfigDict(defer_build=True)


class MetaRow(TableModel, table=True):
    __tablename__ = "ledger_meta"
    key: str = Field(primary_key=True)
    value: str


class DatasetRow(TableModel, table=True):
    __tablename__ = "datasets"
    name: str = Field(primary_key=True)
    description: str = ""
    delta: str | None = None  # exact fraction text
    groups: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime
    # schema version 4: separation of duties waived for this dataset (docs/explanation/model.md#people-duties-and-the-book-of-record)
    self_approval: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=false()))
    # schema version 18: the neighbour relation its figures are in (docs/explanation/model.md#variables-subsets-and-neighbours), fixed once recorded
    relation: str = Field(default="replace", sa_column=Column(String, nullable=False, server_default="replace"))


class VariableRow(TableModel, table=True):
    __tablename__ = "variables"
    __table_args__ = (UniqueConstraint("dataset", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset: str = Field(foreign_key="datasets.name", index=True)
    name: str
    classification: str
    description: str = ""
    position: int
    categories: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # schema version 3


class FamilyRow(TableModel, table=True):
    __tablename__ = "families"
    id: str = Field(primary_key=True)
    dataset: str = Field(foreign_key="datasets.name")
    partition: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # None: random split
    description: str = ""


PART_INDEX = "ix_releases_family_part"  # (schema 16) a record finds the members holding its parts by it


class ReleaseRow(TableModel, table=True):
    __tablename__ = "releases"
    __table_args__ = (Index(PART_INDEX, "family", "part"),)
    id: str = Field(primary_key=True)
    seq: int = Field(index=True)
    dataset: str = Field(foreign_key="datasets.name", index=True)
    title: str = ""
    reads: list = Field(sa_column=Column(JSON, nullable=False))
    mechanism_name: str
    mechanism_params: dict = Field(sa_column=Column(JSON, nullable=False))
    guarantees: list = Field(sa_column=Column(JSON, nullable=False))
    derived_from: list = Field(sa_column=Column(JSON, nullable=False))
    family: str | None = Field(default=None, foreign_key="families.id")
    status: str
    recorded_by: str
    recorded_at: str | None = None
    approved_by: str | None = None
    approved_at: str | None = None
    published_at: str | None = None
    # schema version 3
    pufferfish: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False, server_default="[]"))
    output_digest: str | None = None
    output: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # schema version 16: a family member's part of the records (docs/explanation/model.md#families); None outside a family
    part: str | None = None


class RoleRow(TableModel, table=True):
    """Who holds which role (ledger.operations.people.ROLES); every grant and revocation is an audit
    event (role.granted / role.revoked), and `verify` compares this table with them."""

    __tablename__ = "roles"
    person: str = Field(primary_key=True)
    role: str = Field(primary_key=True)


class CapRow(TableModel, table=True):
    __tablename__ = "caps"
    dataset: str = Field(foreign_key="datasets.name", primary_key=True)
    name: str = Field(primary_key=True)
    subset: list = Field(sa_column=Column(JSON, nullable=False))
    whole_dataset: bool = False
    epsilon: str | None = None  # exact fraction text
    delta: str | None = None
    rho: str | None = None
    filter: str | None = None  # a cap at a delta: its privacy filter (accounting/filters.py)


class CapTotalRow(TableModel, table=True):
    """The running total of a cap (budget.CapTotal), updated with every record."""

    __tablename__ = "cap_totals"
    dataset: str = Field(primary_key=True)
    cap: str = Field(primary_key=True)
    total: dict = Field(sa_column=Column(JSON, nullable=False))


class CapAccountantRow(TableModel, table=True):
    """A cap's running accountant state (accountants.state_*): event counts and lifecycle
    times on its subset, for the Rényi filter and the declared-in-advance case.
    A cache of the releases: missing or stale rows are recomputed from the history."""

    __tablename__ = "cap_accountant_state"
    dataset: str = Field(primary_key=True)
    cap: str = Field(primary_key=True)
    state: dict = Field(sa_column=Column(JSON, nullable=False))


# (schema 9) The audit events by kind and subject, with the actor: a report reads a few kinds of
# event (publications, retractions and cancellations, cap changes, the events of some releases)
# and counts the dataset's events by kind and actor. Without it each of those read every event,
# payloads and all (about 4 GB at a million releases); with it they are index searches, and the
# counts a scan of the index alone (it holds every column they read: the seq is the row id).
# (schema 12) With the moment: a report --as-of or --since counts the events dated by then (or
# since), which read every event's row for its `at` (12 s cold at a million releases); with `at`
# in the index those counts are a scan of the index alone too. It replaces the schema 9 index
# (EVENT_INDEX_9), of which it is an extension: every search that one served, this one serves.
EVENT_INDEX = "ix_audit_events_kind_subject_at"
EVENT_INDEX_9 = "ix_audit_events_kind_subject"


class AuditEventRow(TableModel, table=True):
    __tablename__ = "audit_events"
    __table_args__ = (Index(EVENT_INDEX, "kind", "subject", "actor", "at"),)
    seq: int = Field(primary_key=True)
    at: str
    actor: str
    kind: str  # dataset.added, family.added, release.recorded, ...
    subject: str  # the dataset or release it is about
    payload: str = Field(sa_column=Column(Text, nullable=False))  # canonical JSON
    prev_hash: str
    hash: str = Field(index=True)


# The lifecycle columns: the only columns of a release row that ever change (lifecycle.py).
LIFECYCLE_COLUMNS = ("status", "approved_by", "approved_at", "published_at")


# The accounting rows (accounting_rows.py): what the accounting needs of each release, beside its row


class GuaranteeValueRow(TableModel, table=True):
    """A distinct guarantee value, by id (append-only)."""

    __tablename__ = "guarantee_values"
    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    body: str = Field(sa_column=Column(Text, nullable=False, unique=True))  # canonical JSON


class AccountingRow(TableModel, table=True):
    """What the accounting needs of one release (see the module docstring)."""

    __tablename__ = "release_accounting"
    seq: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    release: str = Field(index=True, unique=True)
    dataset: str = Field(index=True)
    status: str
    family: str | None = None
    title: str = ""
    reads: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    value: int | None = None  # the first guarantee's value id (None: no guarantee)
    protects: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    more: str | None = None  # further guarantees, "id:hex;id:hex" (hex: the protects bitset)
    # (schema 6) the event the mechanism's parameters describe (accounting_events id; None: none)
    event: int | None = None
    # whether the release is charged through that event (its guarantees are the ones the
    # parameters imply: dp_events.mechanism_event), else through its guarantees
    charged_by_event: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, default=False))
    recorded_us: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))  # recorded_at
    published_us: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))  # published_at

    __table_args__ = (Index("ix_release_accounting_event", "dataset", "event", "status", "seq"),
                      # the cancelled rows of a dataset (schema_migrations._v15_odometer builds it in a ledger
                      # made before it)
                      Index("ix_release_accounting_status", "dataset", "status"))


class AccountingEventRow(TableModel, table=True):
    """A distinct accounting event key (dp_events.Event.key), by id (append-only)."""

    __tablename__ = "accounting_events"
    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    key: str = Field(sa_column=Column(Text, nullable=False, unique=True))


class AccountingReadRow(TableModel, table=True):
    """One variable one release reads (an inverted index of the reads bitsets): a subset
    query fetches only the releases that read some variable of the subset, since the
    others cost 0 on it (Tan Prop 3.3), alone or in a family (docs/explanation/model.md#families)."""

    __tablename__ = "release_reads"
    dataset: str = Field(primary_key=True)
    position: int = Field(primary_key=True)
    seq: int = Field(primary_key=True)
