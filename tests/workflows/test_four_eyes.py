"""Who acts is proven by what authenticates them, and four eyes hold in every route.

End to end with real operating-system users (created here; the suite runs as root): a steward
records, cannot approve their own release, and another user approves and publishes; the audit
trail names both. Each route by which a person could be named rather than authenticated fails
cleanly: the `--as` option is gone, $LEDGER_USER is ignored, a release file carrying an
approval is refused, and the API takes no `by=`. On PostgreSQL (LEDGER_TEST_POSTGRES_URL) the
person is the database login.
"""

from __future__ import annotations

import os
import pathlib
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap

import pytest
from sqlalchemy import create_engine, text
from support import acting_as, cli_main, cli_ok, dump_tables

import ledger
from ledger.core.errors import InputErrors
from ledger.store import identity

STEWARD, APPROVER = "ledger-test-steward", "ledger-test-approver"

DATASET = """\
dataset: survey
variables:
  - {name: income}
  - {name: region}
"""

PLAN = """\
dataset: survey
releases:
  - {id: r1, title: Mean income, reads: [income], mechanism: {name: laplace, epsilon: 0.5}}
"""


def _write(path, content: str):
    path.write_text(textwrap.dedent(content), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def os_users():
    """Two real operating-system users, created when missing (needs root; skipped otherwise)."""
    if os.geteuid() != 0:
        pytest.skip("creating operating-system users needs root")
    if shutil.which("useradd") is None:
        pytest.skip("no useradd on this system")
    for name in (STEWARD, APPROVER):
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", name], check=True)
    return STEWARD, APPROVER


# Run as the user from its first statement, the interpreter itself, where the user can read it (a
# checkout and its interpreter as CI has them); where it cannot (an interpreter under root's 0700
# home), the process starts as root, imports the command line, and gives up root for the user's
# uid and gid for good (setgroups, setgid, setuid) before it parses a single argument.
_BECOME = ("import importlib, os, pkgutil, sqlite3, sys, importlib.readers, ledger, yaml, jsonschema_rs; "
           "[importlib.import_module(m.name) for m in pkgutil.walk_packages(ledger.__path__, 'ledger.') "
           " if not m.name.endswith('__main__') and '.adapters' not in m.name]; "
           "os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[1])); "
           "sys.argv = ['privacy-ledger', *sys.argv[3:]]; ledger.cli.app.main()")


def _as_user(user: str, directory, *args):
    """`privacy-ledger ARGS` in a new process whose user is `user` (its uid and gid), in `directory`."""
    entry = pwd.getpwnam(user)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(HOME=str(directory), LEDGER_RESIDENT="0")
    argv = ["--db", f"sqlite:///{directory / 'ledger.db'}", *map(str, args)]
    if os.access(sys.executable, os.X_OK, effective_ids=False) and _readable_by(entry, sys.executable):
        command, extra = [sys.executable, "-m", "ledger", *argv], {"user": entry.pw_uid, "group": entry.pw_gid}
    else:
        command, extra = [sys.executable, "-c", _BECOME, str(entry.pw_uid), str(entry.pw_gid), *argv], {}
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=300, **extra)


def _readable_by(entry, path) -> bool:
    """Whether every directory above `path` lets others through (the user is not root)."""
    for parent in pathlib.Path(os.path.realpath(path)).parents:
        if not os.stat(parent).st_mode & 0o001:
            return False
    return True


def _events(path):
    connection = sqlite3.connect(path)
    try:
        return [tuple(r) for r in connection.execute("SELECT kind, subject, actor FROM audit_events ORDER BY seq")]
    finally:
        connection.close()


def test_a_steward_cannot_approve_their_own_release_and_another_user_publishes_it(os_users):
    steward, approver = os_users
    directory = pathlib.Path(tempfile.mkdtemp(prefix="ledger-four-eyes-"))  # (outside root's private tmp)
    os.chmod(directory, 0o777)
    try:
        _steward_records_and_approver_publishes(directory, steward, approver)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _shared(directory) -> None:
    """The ledger's files writable by both users (on a SQLite file, its permissions decide who
    may write at all)."""
    for path in directory.iterdir():
        os.chmod(path, 0o666)


def _steward_records_and_approver_publishes(directory, steward, approver):
    _write(directory / "survey.yaml", DATASET)
    _write(directory / "plan.yaml", PLAN)
    for args in (("dataset", "add", "survey.yaml"), ("role", "grant", approver, "approver"),
                 ("record", "plan.yaml")):
        done = _as_user(steward, directory, *args)
        assert done.returncode == 0, done.stderr
        _shared(directory)
    refused = _as_user(steward, directory, "approve", "r1")
    assert refused.returncode == 2
    assert "separation of duties" in refused.stderr and f"{steward!r} recorded this release" in refused.stderr
    for args in (("approve", "r1"), ("publish", "r1")):
        done = _as_user(approver, directory, *args)
        assert done.returncode == 0, done.stderr
        _shared(directory)
    lifecycle = [e for e in _events(directory / "ledger.db") if e[1] == "r1"]
    assert [(kind, actor) for kind, _, actor in lifecycle] == [
        ("release.recorded", steward), ("release.approved", approver), ("release.published", approver)]


def test_the_as_option_is_gone(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with acting_as("ana"):
        assert cli_main(url, "init").code == 0
    before = dump_tables(url)
    for args in (("approve", "r1", "--as", "grace"), ("role", "grant", "mallory", "admin", "--by", "ana")):
        result = cli_main(url, *args)
        assert result.code == 2 and "No such option" in result.err, result.err
    assert dump_tables(url) == before


def test_ledger_user_is_ignored_and_the_event_names_the_operating_system_user(tmp_path, monkeypatch):
    user = pwd.getpwuid(os.geteuid()).pw_name
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("LEDGER_USER", "mallory")
    assert cli_main(url, "init").code == 0
    assert cli_main(url, "dataset", "add", _write(tmp_path / "survey.yaml", DATASET)).code == 0
    actors = {actor for _, _, actor in _events(tmp_path / "ledger.db")}
    assert actors == {user}


@pytest.mark.parametrize("extra, field", [
    (", status: approved, approved_by: grace, approved_at: \"2024-01-01\"", "releases[0].approved_by"),
    (", status: published, published_at: \"2024-02-01\", approved_by: grace, approved_at: \"2024-01-01\"",
     "releases[0].approved_by"),
    (", status: approved", "releases[0].status"),
    (", status: published, published_at: \"2024-02-01\"", "releases[0].status"),
])
def test_a_release_file_carrying_an_approval_is_refused_and_writes_nothing(tmp_path, extra, field):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with acting_as("ana"):
        assert cli_main(url, "dataset", "add", _write(tmp_path / "survey.yaml", DATASET)).code == 0
        assert cli_main(url, "role", "grant", "grace", "approver").code == 0
        before = dump_tables(url)
        plan = _write(tmp_path / "plan.yaml", PLAN.replace("epsilon: 0.5}", "epsilon: 0.5}" + extra))
        result = cli_main(url, "record", plan)
    assert result.code == 2, result.err
    assert "plan.yaml" in result.err and field in result.err, result.err
    assert "privacy-ledger approve" in result.err and "as another person" in result.err
    assert dump_tables(url) == before


def test_history_is_recorded_published_by_its_recorder_where_the_dataset_waives_separation(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    waived = DATASET.replace("dataset: survey\n", "dataset: survey\nself_approval: true\n")
    plan = PLAN.replace("epsilon: 0.5}", "epsilon: 0.5}, status: published, published_at: \"2024-02-01\"")
    with acting_as("ana"):
        assert cli_main(url, "dataset", "add", _write(tmp_path / "survey.yaml", waived)).code == 0
        assert cli_main(url, "record", _write(tmp_path / "plan.yaml", plan)).code == 0
        (release,) = cli_main(url, "releases", "--json").json()
    assert (release["status"], release["recorded_by"], release["published_at"][:10]) == (
        "published", "ana", "2024-02-01")


def test_the_api_takes_no_by_and_acts_as_the_person_authenticated(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    plan = {"dataset": "survey", "releases": [
        {"id": rid, "reads": ["income"], "mechanism": {"name": "laplace", "epsilon": "1/2"}} for rid in ("r1", "r2")]}
    with acting_as("ana"):
        book = ledger.open(url)
        book.add_dataset({"dataset": "survey", "variables": [{"name": "income"}]})
        book.record(plan)
        assert cli_main(url, "role", "grant", "grace", "approver").code == 0
        with pytest.raises(TypeError):
            book.approve("r1", by="grace")  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            ledger.open(url, actor="grace")  # type: ignore[call-arg]
        with pytest.raises(InputErrors, match="separation of duties"):
            book.approve("r2")
    grace = ledger.open(url, person=ledger.api.front_end("grace", "test"))
    assert grace.approve("r1").approved_by == "grace"


def test_a_person_object_names_what_authenticated_them():
    user = pwd.getpwuid(os.geteuid()).pw_name
    assert identity.os_user() == identity.Person(user, "operating-system user")
    assert identity.front_end("Jose\u0301", "proxy header") == identity.Person("José", "front end: proxy header")


# --------------------------------------------------------------------------
# PostgreSQL: the person is the database login
# --------------------------------------------------------------------------


@pytest.fixture
def login_roles(ledger_url):
    """Login roles grace and bob on the test server (trust authentication on 127.0.0.1), granted
    what a ledger user needs on the test's database."""
    if not ledger_url.startswith("postgresql"):
        pytest.skip("a database login is PostgreSQL's")
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(ledger_url)
    admin_url = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for role in ("grace", "bob"):
            exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if not exists:
                admin.execute(f'CREATE ROLE "{role}" LOGIN')
            admin.execute(f'GRANT ALL ON DATABASE "{url.database}" TO "{role}"')
            admin.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
    ledger.open(ledger_url)  # the schema, made by the server's admin login
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for role in ("grace", "bob"):
            admin.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
            admin.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    return {role: url.set(username=role, password=None).render_as_string(hide_password=False)
            for role in ("grace", "bob")}


def test_on_postgresql_the_person_is_the_database_login(ledger_url, login_roles):
    engine = create_engine(login_roles["grace"])
    try:
        assert identity.authenticated(engine) == identity.Person("grace", "database login")
    finally:
        engine.dispose()
    owner = create_engine(ledger_url)
    try:
        with pytest.raises(Exception, match="refused to grant ledger_admin"):  # no login makes itself admin
            ledger.open(login_roles["grace"]).add_dataset({"dataset": "survey", "variables": [{"name": "income"}]})
        cli_ok(ledger_url, "role", "grant", "grace", "admin")  # the tables' owner: the ledger's first admin
        book = ledger.open(login_roles["grace"])
        assert book.person.name == "grace"
        assert book.add_dataset({"dataset": "survey", "variables": [{"name": "income"}]})
        with owner.connect() as connection:
            actors = {row[0] for row in connection.execute(text("SELECT DISTINCT actor FROM audit_events "
                                                                "WHERE kind = 'dataset.added'"))}
    finally:
        owner.dispose()
    assert actors == {"grace"}


def test_on_postgresql_a_front_end_acts_as_a_person_only_where_the_database_grants_it(ledger_url, login_roles):
    with pytest.raises(Exception, match="cannot act as 'bob'"):
        ledger.open(login_roles["grace"], person=ledger.api.front_end("bob", "proxy header"))
    import psycopg
    from sqlalchemy.engine import make_url

    admin_url = make_url(ledger_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute('GRANT "bob" TO "grace"')
    cli_ok(ledger_url, "role", "grant", "bob", "admin")  # by the tables' owner, the first admin
    try:
        book = ledger.open(login_roles["grace"], person=ledger.api.front_end("bob", "proxy header"))
        assert book.add_dataset({"dataset": "survey", "variables": [{"name": "income"}]})
        assert book.person == identity.Person("bob", "front end: proxy header")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute('REVOKE "bob" FROM "grace"')
