"""PostgreSQL enforces the book of record itself (docs/explanation/model.md#people-duties-and-the-book-of-record):
whatever role the ledger runs as, an audit event can be inserted and never updated, deleted or
truncated; a release row is never deleted, and an update may change its lifecycle columns only.
On SQLite the tool alone keeps these rules.
"""

from __future__ import annotations


from sqlalchemy import Connection



# (statements run through the driver: a percent sign is written %%)
# PostgreSQL enforces the book of record itself (docs/explanation/model.md#people-duties-and-the-book-of-record): whatever role the ledger runs
# as, an audit event can be inserted and never updated, deleted or truncated; a release row
# is never deleted, and an update may change its lifecycle columns only; what an appended event may
# say -- its lifecycle step, and under a person's login its duty -- is judged by enforced.py. (The table owner or
# a superuser can still drop a trigger: that is what the hash chain, and a checkpoint kept
# outside the database, detect.)
APPEND_ONLY_SQL = [
    """CREATE OR REPLACE FUNCTION privacy_ledger_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'privacy-ledger: %% on %% refused: the ledger is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
    END $$""",
    """CREATE OR REPLACE FUNCTION privacy_ledger_release_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF (to_jsonb(OLD) - ARRAY['status', 'approved_by', 'approved_at', 'published_at'])
         IS DISTINCT FROM (to_jsonb(NEW) - ARRAY['status', 'approved_by', 'approved_at', 'published_at']) THEN
        RAISE EXCEPTION 'privacy-ledger: UPDATE of a recorded release refused: only its lifecycle changes'
          USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN NEW;
    END $$""",
    "CREATE OR REPLACE TRIGGER privacy_ledger_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
    "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_events_no_truncate BEFORE TRUNCATE ON audit_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_releases_no_delete BEFORE DELETE ON releases "
    "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_releases_no_truncate BEFORE TRUNCATE ON releases "
    "FOR EACH STATEMENT EXECUTE FUNCTION privacy_ledger_refuse()",
    "CREATE OR REPLACE TRIGGER privacy_ledger_releases_lifecycle_only BEFORE UPDATE ON releases "
    "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_release_update()",
]


def install_append_only(connection: Connection) -> None:
    """Install the append-only triggers (PostgreSQL; on SQLite the tool alone keeps the rules)."""
    if connection.dialect.name != "postgresql":
        return
    for statement in APPEND_ONLY_SQL:
        connection.exec_driver_sql(statement)


LIFECYCLE_TRIGGER = "privacy_ledger_releases_lifecycle_only"  # (APPEND_ONLY_SQL)
