"""A family member names its part of the records (docs/explanation/model.md#families).

A family's members are charged in parallel: the family costs its worst member, which is valid only
for releases on disjoint parts of the records. Two releases on one part compose sequentially (their
losses add), so a member says which part it is computed on (`part`), and the charged members of a
family hold distinct parts: a second member on a held part is bad input (exit 2, nothing written),
whether the part is held by a recorded member (read under the write lock, on SQLite and on
PostgreSQL) or by another release of the same record. A cancelled member frees its part; a
retracted one was published and still holds it. A member recorded before parts were named is its
own part (its id), and its audit event, written without a part, still verifies.

The figures asserted are the closed forms of pure epsilon composition (Tan, Prop 3.4; docs/explanation/model.md#families):
members on parts north (1) and south (1/2) cost max(1, 1/2) = 1; a release on north outside the
family adds its 1: 2.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from fractions import Fraction as F
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, inspect, text
from support import cli_main, dump_tables

from ledger.api import front_end
from ledger.core.records import Dataset, Family, Guarantee, Mechanism, Notion, Release, Status, Variable
from ledger.input.batch import finish_batch
from ledger.input.documents import Document
from ledger.input.releases import build_releases
from ledger.input.snapshot import LedgerSnapshot
from ledger.store import engines, release_writes, schema_migrations, sessions, table_models

WHEN = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)

SURVEY = """\
dataset: survey
self_approval: true
variables:
  - {name: region, classification: public}
  - {name: income}
caps:
  - {subset: [income], epsilon: 10}
"""


def write(directory: Path, name: str, content: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(content), encoding="utf-8")
    return path


def releases(*entries: str) -> str:
    """A release file of survey declaring family by-region (partition by region)."""
    return ("dataset: survey\nfamilies:\n  - {id: by-region, partition: [region]}\nreleases:\n"
            + "".join(f"  - {entry}\n" for entry in entries))


def member(release_id: str, part: str | None, epsilon: str, status: str = "planned") -> str:
    named = "" if part is None else f", part: {part}"
    published = ', published_at: "2026-01-05T10:00:00Z"' if status == "published" else ""
    return (f"{{id: {release_id}, reads: [region, income], family: by-region{named}, status: {status}{published}, "
            f"mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}}}")


def outside(release_id: str, epsilon: str) -> str:
    return f"{{id: {release_id}, reads: [region, income], mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}}}"


def run(url: str, *args):
    return cli_main(url, *args)


def ok(result):
    assert result.code == 0, result.err
    return result


def income(url: str) -> F:
    return F(run(url, "subset", "income", "--json").json()["epsilon_exact"])


def errors_of(result) -> str:
    return "\n".join(line for line in result.err.splitlines() if line.startswith("error: "))


def refused(url: str, path: Path):
    """`record path`: exit 2, every table as it was, and the error lines."""
    before = dump_tables(url)
    result = run(url, "record", path)
    assert result.code == 2, (result.out, result.err)
    assert dump_tables(url) == before, "a refused record wrote something"
    assert "nothing was written" in result.err
    return errors_of(result)


@pytest.fixture
def survey(ledger_url, tmp_path) -> str:
    ok(run(ledger_url, "dataset", "add", write(tmp_path, "survey.yaml", SURVEY)))
    return ledger_url


def test_two_members_on_one_part_in_one_file_are_refused_naming_file_field_family_and_holder(survey, tmp_path):
    path = write(tmp_path, "members.yaml", releases(member("m1", "region=north", "1"),
                                                    member("m2", "region=north", "1")))
    text_ = refused(survey, path)
    assert f"{path}:6: releases[1].part: " in text_, text_  # (m2's line: the file's sixth)
    assert "part 'region=north' of family 'by-region' is already held by release 'm1'" in text_, text_
    assert "compose sequentially" in text_ and "outside the family" in text_, text_
    assert "releases[0]" not in text_  # the first holder is not at fault


def test_a_member_on_a_part_a_recorded_member_holds_is_refused_and_belongs_outside_the_family(survey, tmp_path):
    ok(run(survey, "record", write(tmp_path, "one.yaml", releases(member("m1", "region=north", "1")))))
    assert income(survey) == 1
    path = write(tmp_path, "two.yaml", releases(member("m2", "region=north", "1")))
    text_ = refused(survey, path)
    assert f"{path}:5: releases[0].part: " in text_, text_
    assert "already held by release 'm1', recorded and charged" in text_, text_
    assert "compose sequentially" in text_, text_
    # recorded as the message says, outside the family, it composes sequentially: 1 + 1
    ok(run(survey, "record", write(tmp_path, "three.yaml", releases(outside("m2", "1")))))
    assert income(survey) == 2
    # a member on another part is in parallel with m1: max(1, 1/2) + 1
    ok(run(survey, "record", write(tmp_path, "four.yaml", releases(member("m3", "region=south", "1/2")))))
    assert income(survey) == 2
    assert ok(run(survey, "audit", "verify"))


def test_a_cancelled_members_part_is_free_again_and_a_retracted_members_is_not(survey, tmp_path):
    ok(run(survey, "record", write(tmp_path, "one.yaml", releases(member("m1", "region=north", "1")))))
    ok(run(survey, "cancel", "m1", "--reason", "a test"))
    ok(run(survey, "record", write(tmp_path, "two.yaml", releases(member("m2", "region=north", "1/2")))))
    assert income(survey) == F(1, 2)  # m1 cancelled, charged nothing; m2 alone

    ok(run(survey, "record", write(tmp_path, "three.yaml",
                                   releases(member("r1", "region=south", "1/4", status="published")))))
    ok(run(survey, "retract", "r1", "--reason", "a test"))
    text_ = refused(survey, write(tmp_path, "four.yaml", releases(member("r2", "region=south", "1/4"))))
    assert "already held by release 'r1'" in text_, text_
    assert income(survey) == F(1, 2)  # max(1/2, 1/4): r1 retracted still counts
    assert ok(run(survey, "audit", "verify"))


def test_a_retry_of_a_recorded_member_is_not_refused_by_its_own_part(survey, tmp_path):
    path = write(tmp_path, "one.yaml", releases(member("m1", "region=north", "1")))
    ok(run(survey, "record", path))
    before = dump_tables(survey)
    ok(run(survey, "record", path))  # the same release again: a no-op
    assert dump_tables(survey) == before
    assert income(survey) == 1


@pytest.mark.parametrize("entry, fragments", [
    (member("m1", None, "1"), ["releases[0].part: ", "family 'by-region' but names no part",
                               "charged in parallel", "compose sequentially"]),
    (outside("x", "1").replace("reads:", "part: region=north, reads:"),
     ["releases[0].part: ", "part 'region=north' given, but the release is in no family"]),
])
def test_a_missing_part_and_a_part_outside_any_family_are_bad_input(survey, tmp_path, entry, fragments):
    path = write(tmp_path, "bad.yaml", releases(entry))
    text_ = refused(survey, path)
    assert f"{path}:5: " in text_, text_
    for fragment in fragments:
        assert fragment in text_, text_


def test_a_part_is_a_short_name_on_one_line(survey, tmp_path):
    path = write(tmp_path, "bad.yaml", releases(member("m1", '" north"', "1")))
    assert "releases[0].part" in refused(survey, path)


# --------------------------------------------------------------------------
# A ledger recorded before parts were named (schema 15)
# --------------------------------------------------------------------------


def _old_member(release_id: str, epsilon: F, family: str | None = "by-region") -> Release:
    reads = frozenset({"region", "income"})
    return Release(release_id, "survey", reads, Mechanism("laplace", (("epsilon", epsilon),)),
                   (Guarantee(reads, Notion.PURE, epsilon=epsilon),), family=family, status=Status.PLANNED,
                   recorded_by="ana", recorded_at=WHEN)


def make_schema_15(url: str) -> None:
    """Members recorded as schema 15 wrote them: their events and rows without a part (the store's
    own writes of releases without one), then the part column and its index gone, stamped 15."""
    engine = engines.make_engine(url)
    try:
        with sessions.write_session(engine) as session:
            release_writes.add_releases(session, [_old_member("m1", F(1)), _old_member("m2", F(1, 2)),
                                         _old_member("x", F(1, 4), family=None)],
                               [Family("by-region", "survey", frozenset({"region"}))], "ana")
    finally:
        engine.dispose()
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"DROP INDEX {table_models.PART_INDEX}"))
            connection.execute(text("ALTER TABLE releases DROP COLUMN part"))
            connection.execute(text("UPDATE ledger_meta SET value = '15' WHERE key = 'schema_version'"))
    finally:
        engine.dispose()


def query(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql))]
    finally:
        engine.dispose()


@pytest.fixture
def uncapped(ledger_url, tmp_path) -> str:
    """The survey dataset without its cap: the old members are written by the store alone, which
    keeps no cap's running total."""
    ok(run(ledger_url, "dataset", "add", write(tmp_path, "survey.yaml", SURVEY.split("caps:")[0])))
    return ledger_url


def test_an_old_ledgers_members_become_their_own_parts_and_its_chain_verifies(uncapped, tmp_path):
    survey = uncapped
    make_schema_15(survey)
    assert "part" not in {c["name"] for c in inspect(create_engine(survey)).get_columns("releases")}
    payloads = query(survey, "SELECT payload FROM audit_events WHERE kind = 'release.recorded'")
    assert payloads and not any('"part"' in payload for (payload,) in payloads)  # written as before

    verified = ok(run(survey, "audit", "verify"))  # (the upgrade runs on first use, then the whole chain)
    assert "audit chain intact" in verified.out
    assert query(survey, "SELECT id, part FROM releases ORDER BY id") == [("m1", "m1"), ("m2", "m2"), ("x", None)]
    assert query(survey, "SELECT value FROM ledger_meta WHERE key = 'schema_version'") == [(str(schema_migrations.SCHEMA_VERSION),)]
    assert ("ledger.migrated", "schema 16") in query(survey, "SELECT kind, subject FROM audit_events")
    listed = {r["id"]: r for r in run(survey, "releases", "--json").json()}
    assert (listed["m1"]["part"], listed["m2"]["part"]) == ("m1", "m2") and "part" not in listed["x"]
    assert income(survey) == F(5, 4)  # the family max(1, 1/2), and x's 1/4

    # the old members hold their ids: a new member naming one is refused, another part is free
    text_ = refused(survey, write(tmp_path, "again.yaml", releases(member("m3", "m1", "1"))))
    assert "part 'm1' of family 'by-region' is already held by release 'm1'" in text_, text_
    ok(run(survey, "record", write(tmp_path, "new.yaml", releases(member("m3", "region=east", "1/8")))))
    assert income(survey) == F(5, 4)  # max(1, 1/2, 1/8) + 1/4
    assert ok(run(survey, "audit", "verify"))


# --------------------------------------------------------------------------
# The rule as a proposition: refused exactly when the part is held
# --------------------------------------------------------------------------

DATASET = Dataset("d", (Variable("k"), Variable("a")))
FAMILIES = {"f": Family("f", "d", frozenset({"k"})), "g": Family("g", "d", None)}
CHARGED = (Status.PLANNED, Status.APPROVED, Status.PUBLISHED, Status.RETRACTED)


@st.composite
def histories(draw):
    """Recorded members (family, part, status) and a batch of new members (family, part)."""
    pair = st.tuples(st.sampled_from(sorted(FAMILIES)), st.sampled_from(["p1", "p2", "p3"]))
    recorded = draw(st.lists(st.tuples(pair, st.sampled_from([*CHARGED, Status.CANCELLED])), max_size=5))
    batch = draw(st.lists(pair, min_size=1, max_size=5))
    return recorded, batch


@settings(max_examples=150, deadline=None)
@given(histories())
def test_a_new_member_is_refused_exactly_when_a_charged_member_or_an_earlier_one_of_the_batch_holds_its_part(
        history):
    recorded, batch = history
    reads = frozenset({"k", "a"})
    stored = {f"old{i}": Release(f"old{i}", "d", reads, Mechanism("laplace", (("epsilon", F(1)),)),
                                 (Guarantee(reads, Notion.PURE, epsilon=F(1)),), family=family, part=part,
                                 status=status)
              for i, ((family, part), status) in enumerate(recorded)}
    snapshot = LedgerSnapshot(datasets={"d": DATASET}, releases=stored, families=FAMILIES)
    entries = [{"id": f"new{i}", "reads": ["a", "k"], "family": family, "part": part,
                "mechanism": {"name": "laplace", "epsilon": 1}} for i, (family, part) in enumerate(batch)]
    built, families, errors = build_releases(Document("r.json", {"dataset": "d", "releases": entries}), snapshot,
                                             recorded_by="t", recorded_at=WHEN)
    _, _, errors = finish_batch(built, families, errors, snapshot)
    # the oracle: the pairs held by charged recorded members, then each new member in turn
    held = {(family, part) for (family, part), status in recorded if status in CHARGED}
    expected = []
    for i, pair in enumerate(batch):
        if pair in held:
            expected.append(f"releases[{i}].part")
        held.add(pair)
    assert [e.field for e in errors] == expected


# --------------------------------------------------------------------------
# Where releases are listed, a member's part is shown
# --------------------------------------------------------------------------


def test_the_listings_show_each_members_part(tmp_path, monkeypatch):
    import csv

    from ledger.reporting.report import SUMMARY_ENV

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ok(run(url, "dataset", "add", write(tmp_path, "survey.yaml", SURVEY)))
    ok(run(url, "record", write(tmp_path, "r.yaml", releases(
        member("m1", "region=north", "1"), member("m2", "region=south", "1/2"), outside("x", "1/4")))))
    lines = {line.split()[0]: line for line in ok(run(url, "releases")).out.splitlines()}
    assert "by-region (part region=north)" in lines["m1"] and "by-region (part region=south)" in lines["m2"]
    assert "part" not in lines["x"]
    listed = {r["id"]: r for r in ok(run(url, "releases", "--json")).json()}
    assert (listed["m1"]["part"], listed["m2"]["part"]) == ("region=north", "region=south")
    assert "part" not in listed["x"]

    markdown = ok(run(url, "report", "--format", "md", "--out", "-")).out
    assert "by-region (partition by region), part region=north" in markdown
    assert "by-region (partition by region), part region=south" in markdown

    monkeypatch.setenv(SUMMARY_ENV, "2")  # past it, the report links a register of every release
    ok(run(url, "report", "--out", tmp_path / "report.md"))
    with open(tmp_path / "report.md.register.csv", newline="", encoding="utf-8") as handle:
        register = {row["release"]: row for row in csv.DictReader(handle)}
    assert {rid: row["part"] for rid, row in register.items()} == {"m1": "region=north", "m2": "region=south",
                                                                   "x": ""}


def test_a_release_handed_over_whole_meets_the_same_rule(tmp_path):
    """The Python API records `Release` objects (check_release_record, then the batch's checks):
    a member without a part, a part outside a family and a held part are refused there too."""
    import ledger

    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    book.add_dataset({"dataset": "d", "variables": [{"name": "a"}, {"name": "k"}]})
    book.record({"dataset": "d", "families": [{"id": "f", "partition": ["k"]}], "releases": [
        {"id": "m0", "family": "f", "part": "k=0", "reads": ["a", "k"], "mechanism": {"name": "laplace", "epsilon": 1}}]})
    reads = frozenset("ak")
    laplace, pure = Mechanism("laplace", (("epsilon", F(1)),)), (Guarantee(reads, Notion.PURE, epsilon=F(1)),)
    for release, named in ((Release("m1", "d", reads, laplace, pure, family="f"), "names no part"),
                           (Release("x", "d", reads, laplace, pure, part="k=1"), "in no family"),
                           (Release("m2", "d", reads, laplace, pure, family="f", part="k=0"),
                            "already held by release 'm0'")):
        with pytest.raises(ledger.InputErrors) as refused_:
            book.record(release)
        assert named in str(refused_.value), str(refused_.value)
    assert [r.id for r in book.releases()] == ["m0"]
    book.record(Release("m2", "d", reads, laplace, pure, family="f", part="k=1"))
    assert [(r.id, r.part) for r in book.releases()] == [("m0", "k=0"), ("m2", "k=1")]
