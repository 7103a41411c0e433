"""What PostgreSQL itself refuses: a lifecycle step the ledger does not allow, and, for a person's
own login, an event of a duty the person's database role does not hold (docs/explanation/model.md#people-duties-and-the-book-of-record).

The append-only triggers (append_only.APPEND_ONLY_SQL) keep every event once written; they cannot
refuse a forged *append*: a published release turned "cancelled", its budget refunded, the totals
recomputed and the event chained correctly is an INSERT. The triggers made here judge each
event as it is inserted:

- a release's lifecycle: an event `release.<status>` (other than `release.recorded`) moves the
  release from the status of its previous release event to `<status>` only along
  lifecycle.TRANSITIONS (the SQL table is generated from it, so the two cannot drift): a
  published release is never cancelled, only a planned or approved one is, and only when no
  output of it exists (lifecycle.FREEING, output_exists); the event's release is the previous one
  but for its lifecycle columns; `release.recorded` names a release no event named before.
  An UPDATE of a release row's status follows the same table.
- duties, in "database roles" mode: an event inserted by a login that is not the owner of the
  audit events table (nor a superuser, a member of every role) needs the group role of its duty,
  EVENT_ROLES (`ledger_admin`, `ledger_steward`, `ledger_approver`, `ledger_auditor`, NOLOGIN,
  made here when missing; a DBA grants them, as `role grant` does). The owner's login is the
  ledger's administrator: a ledger run by one login, as a single-user ledger or a service is,
  keeps working unchanged, its roles kept by the tool.

On SQLite nothing refuses a raw write: the tool keeps these rules (lifecycle.transition,
operations.people), and the hash chain with the derived rows' digest (derived.py) detects what it
cannot prevent, at the next `audit verify`. A team that needs separation of duties enforced uses
PostgreSQL with a login per person.
"""

from __future__ import annotations

from ..accounting.lifecycle import FREEING, TRANSITIONS

GROUP_ROLES = ("admin", "steward", "approver", "auditor")  # each the database role ledger_<name>
LIFECYCLE_COLUMNS = ("status", "approved_by", "approved_at", "published_at")

# event kind -> the roles any one of which may write it (operations.people.DUTIES, by event:
# tests/store/test_enforced_transitions.py checks the two agree); a kind not named needs admin
EVENT_ROLES: dict[str, tuple[str, ...]] = {
    "dataset.added": ("admin",),
    "cap.set": ("admin",),
    "cap.removed": ("admin",),
    "role.granted": ("admin",),
    "role.revoked": ("admin",),
    "release.recorded": ("steward",),
    "plan.recorded": ("steward",),
    "family.added": ("steward",),
    "release.cancelled": ("steward",),
    "release.approved": ("approver",),
    "release.published": ("approver",),
    "release.retracted": ("approver",),
    "ledger.retotalled": ("auditor", "admin"),
}
# the duty each kind is (people.DUTIES' keys), for the agreement test and the refusal's words
EVENT_DUTIES = {"dataset.added": "add a dataset", "cap.set": "set a cap", "cap.removed": "set a cap",
                "role.granted": "change roles", "role.revoked": "change roles", "release.recorded": "record",
                "plan.recorded": "record", "family.added": "record", "release.cancelled": "cancel", "release.approved": "approve",
                "release.published": "publish", "release.retracted": "retract",
                "ledger.retotalled": "recompute the running totals"}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _array(items) -> str:
    return "ARRAY[" + ", ".join(_quote(item) for item in items) + "]::text[]"


def release_kinds() -> list[str]:
    return ["release.recorded"] + sorted({f"release.{target.value}" for _, target in TRANSITIONS.values()})


def allowed_pairs() -> list[str]:
    """'from>to' for every allowed lifecycle step (lifecycle.TRANSITIONS)."""
    return sorted(f"{source.value}>{target.value}" for sources, target in TRANSITIONS.values() for source in sources)


def freeing_targets() -> list[str]:
    return sorted(TRANSITIONS[action][1].value for action in FREEING)


def _roles_case() -> str:
    lines = [f"      WHEN {_quote(kind)} THEN {_array('ledger_' + r for r in roles)}"
             for kind, roles in sorted(EVENT_ROLES.items())]
    return "CASE NEW.kind\n" + "\n".join(lines) + "\n      ELSE ARRAY['ledger_admin']::text[] END"


def statements() -> list[str]:
    """The functions and triggers (PostgreSQL), and the group roles when missing. (Run through the
    driver: a percent sign is written %%.)"""
    written = _role_statements() + [_grants_statement(), _event_check_function(), _status_check_function()]
    return [statement.replace("%", "%%") for statement in written] + list(_TRIGGERS)


def _role_statements() -> list[str]:
    """Each group role (GROUP_ROLES), created when missing."""
    return [f"""DO $$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ledger_{name}') THEN
        CREATE ROLE ledger_{name} NOLOGIN;
      END IF;
    EXCEPTION WHEN duplicate_object OR unique_violation OR insufficient_privilege THEN NULL;
    END $$""" for name in GROUP_ROLES]


def _grants_statement() -> str:
    """The group roles' use of the schema and its tables, granted where the installer may."""
    return f"""DO $$ DECLARE r text; BEGIN
      FOREACH r IN ARRAY {_array('ledger_' + name for name in GROUP_ROLES)} LOOP
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
          EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), r);
          EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I',
                         current_schema(), r);
        END IF;
      END LOOP;
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END $$"""


def _event_check_function() -> str:
    """The check of every audit event written: a person's own login holds its duty's role
    (EVENT_ROLES), and a release's event is a lifecycle step the ledger allows (TRANSITIONS)
    that changes nothing of the release but its lifecycle."""
    lifecycle = _array(LIFECYCLE_COLUMNS + ("part",))
    return f"""CREATE OR REPLACE FUNCTION privacy_ledger_event_check() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      body jsonb;
      previous jsonb;
      target text;
      needed text[];
      owner oid;
      step int;
    BEGIN
      SELECT relowner INTO owner FROM pg_class WHERE oid = TG_RELID;
      IF NOT pg_has_role(current_user, owner, 'MEMBER') THEN  -- a person's own login: its duty's role
        needed := {_roles_case()};
        FOR step IN 1..2 LOOP
          IF NOT EXISTS (SELECT 1 FROM unnest(needed) AS r(name) JOIN pg_roles ON rolname = r.name
                         WHERE pg_has_role(current_user, pg_roles.oid, 'MEMBER')) THEN
            RAISE EXCEPTION 'privacy-ledger: % may not write a % event: it needs the role %',
              current_user, NEW.kind, array_to_string(needed, ' or ')
              USING ERRCODE = 'insufficient_privilege';
          END IF;
          -- a release recorded as put out (published) is an approver's duty as well
          EXIT WHEN NEW.kind <> 'release.recorded'
            OR (NEW.payload::jsonb)->'release'->>'status' NOT IN ('published', 'retracted');
          needed := ARRAY['ledger_approver']::text[];
        END LOOP;
      END IF;
      IF NEW.kind = ANY({_array(release_kinds())}) THEN
        body := (NEW.payload::jsonb)->'release';
        SELECT (payload::jsonb)->'release' INTO previous FROM audit_events
          WHERE kind = ANY({_array(release_kinds())}) AND subject = NEW.subject AND seq < NEW.seq
          ORDER BY seq DESC LIMIT 1;
        IF NEW.kind = 'release.recorded' THEN
          IF previous IS NOT NULL THEN
            RAISE EXCEPTION 'privacy-ledger: release % is recorded already: it is never recorded again', NEW.subject
              USING ERRCODE = 'integrity_constraint_violation';
          END IF;
          RETURN NEW;
        END IF;
        target := substr(NEW.kind, length('release.') + 1);
        IF previous IS NULL OR body IS NULL THEN
          RAISE EXCEPTION 'privacy-ledger: % of release %: no such release', NEW.kind, NEW.subject
            USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF NOT (previous->>'status') || '>' || target = ANY({_array(allowed_pairs())})
           OR body->>'status' IS DISTINCT FROM target THEN
          RAISE EXCEPTION 'privacy-ledger: release % cannot go from % to %', NEW.subject, previous->>'status', target
            USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF target = ANY({_array(freeing_targets())})
           AND (coalesce(jsonb_typeof(previous->'output_digest'), 'null') <> 'null'
                OR coalesce(jsonb_typeof(previous->'output'), 'null') <> 'null') THEN
          RAISE EXCEPTION 'privacy-ledger: release % has an output: it stays charged and is never %',
            NEW.subject, target USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        -- the release is the previous one but for its lifecycle: every field it had is kept, and a field
        -- an earlier format did not write (its default: null or empty) is all an event may add
        IF EXISTS (SELECT 1 FROM jsonb_each(previous - {lifecycle}) AS p(k, v) WHERE body->p.k IS DISTINCT FROM p.v)
           OR EXISTS (SELECT 1 FROM jsonb_each(body - {lifecycle}) AS b(k, v)
                      WHERE NOT previous ? b.k AND b.v NOT IN ('null'::jsonb, '[]'::jsonb)) THEN
          RAISE EXCEPTION 'privacy-ledger: % of release % changes more than its lifecycle', NEW.kind, NEW.subject
            USING ERRCODE = 'integrity_constraint_violation';
        END IF;
      END IF;
      RETURN NEW;
    END $$"""


def _status_check_function() -> str:
    """The check of every change of a release row's status: an allowed step, and never freeing a
    release that has an output."""
    return f"""CREATE OR REPLACE FUNCTION privacy_ledger_status_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.status IS DISTINCT FROM OLD.status THEN
        IF NOT OLD.status || '>' || NEW.status = ANY({_array(allowed_pairs())}) THEN
          RAISE EXCEPTION 'privacy-ledger: release % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF NEW.status = ANY({_array(freeing_targets())}) AND (OLD.output_digest IS NOT NULL OR OLD.output IS NOT NULL)
        THEN
          RAISE EXCEPTION 'privacy-ledger: release % has an output: it stays charged and is never %',
            OLD.id, NEW.status USING ERRCODE = 'integrity_constraint_violation';
        END IF;
      END IF;
      RETURN NEW;
    END $$"""


_TRIGGERS = (
    ("CREATE OR REPLACE TRIGGER privacy_ledger_events_checked BEFORE INSERT ON audit_events "
     "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_event_check()"),
    ("CREATE OR REPLACE TRIGGER privacy_ledger_releases_status BEFORE UPDATE OF status ON releases "
     "FOR EACH ROW EXECUTE FUNCTION privacy_ledger_status_check()"),
)


def install(connection) -> None:
    """Install the triggers (PostgreSQL only; SQLite keeps the rules in the tool)."""
    if connection.dialect.name != "postgresql":
        return
    for statement in statements():
        connection.exec_driver_sql(statement)


def login_exists(connection, name: str) -> bool:
    return connection.exec_driver_sql("SELECT 1 FROM pg_roles WHERE rolname = %(n)s", {"n": name}).first() is not None


def database_roles_mode(connection) -> bool:
    """Whether the ledger runs under a person's own login: the current login is not (a member of)
    the owner of the audit events table."""
    return connection.exec_driver_sql(
        "SELECT NOT pg_has_role(current_user, relowner, 'MEMBER') FROM pg_class "
        "WHERE oid = 'audit_events'::regclass").scalar()


def grant(connection, person: str, role: str, granted: bool) -> None:
    """`role grant`/`revoke` on PostgreSQL: the person's login joins (leaves) the group role."""
    group = f"ledger_{role}"
    quoted = connection.dialect.identifier_preparer.quote_identifier
    if granted:
        connection.exec_driver_sql(f"GRANT {quoted(group)} TO {quoted(person)}")
    else:
        connection.exec_driver_sql(f"REVOKE {quoted(group)} FROM {quoted(person)}")
