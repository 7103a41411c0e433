"""`audit verify` streams, and finds what the verification that held everything did.

The streaming `audit_verify.verify` (chunks of events and of release rows, a temporary
file for each release's latest event, running totals summed chunk by chunk) is
run beside the verification as it was before (tests/verify_reference.py, every
row in memory at once) on a ledger tampered with in each way the store can be:
both give the same verdict, the same events and head, and the same problems.
Chunks of 2 make every chunk boundary fall inside the ledger.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlmodel import Session

from ledger.store import audit_verify, engines, row_dicts, sessions
from ledger.store.codec import canonical_json
from support import acting_as, cli_main
from test_scale import DATASET as SCALE_DATASET
from test_scale import RELEASES as SCALE_RELEASES
from verify_reference import verify_in_memory

# test_scale's survey ledger, with caps of every kind and a planned release to approve
DATASET = SCALE_DATASET + """\
  - {name: pair, subset: [sex, degree], epsilon: 50}
  - {name: wide, subset: [age, sex, income, degree], epsilon: 1000, delta: 1e-9}
"""
RELEASES = SCALE_RELEASES + """\
  - {id: m, reads: [sex], mechanism: {name: laplace, epsilon: "1/8"}, status: planned}
"""

GHOST_COLUMNS = ("dataset, title, reads, mechanism_name, mechanism_params, guarantees, derived_from, family, status, "
                 "recorded_by, recorded_at, approved_by, approved_at, published_at")

TAMPERING = {
    "intact": [],
    "a title edited": ["UPDATE releases SET title = 'Something else' WHERE id = 'd'"],
    "a status edited": ["UPDATE releases SET status = 'cancelled' WHERE id = 'b'"],
    "a family member's status edited": ["UPDATE releases SET status = 'cancelled' WHERE id = 'g'"],
    "a guarantee edited": ["UPDATE releases SET guarantees = replace(guarantees, '1/11', '1/110') WHERE id = 'k'"],
    "a release row deleted": ["DELETE FROM releases WHERE id = 'k'"],
    "a release row added": [f"INSERT INTO releases (id, seq, {GHOST_COLUMNS}) SELECT 'ghost', 99, {GHOST_COLUMNS} "
                            "FROM releases WHERE id = 'a'"],
    "a release's seq moved": ["UPDATE releases SET seq = seq + 1 WHERE id = 'a'"],
    "an accounting row edited": ["UPDATE release_accounting SET reads = x'01' WHERE release = 'd'"],
    "an accounting row deleted": ["DELETE FROM release_accounting WHERE release = 'a'"],
    "an orphan accounting row": ["INSERT INTO release_accounting (seq, release, dataset, status, family, title, "
                                 "reads, value, protects, more, event, charged_by_event, recorded_us, published_us) "
                                 "SELECT 999, 'nobody', dataset, status, family, title, reads, value, protects, more, "
                                 "event, charged_by_event, recorded_us, published_us FROM release_accounting "
                                 "WHERE release = 'a'"],
    "an inverted read deleted": ["DELETE FROM release_reads WHERE seq = (SELECT seq FROM releases WHERE id = 'c')"],
    "an inverted read added": ["INSERT INTO release_reads (dataset, position, seq) VALUES ('survey', 4, 998)"],
    "a running total deleted": ["DELETE FROM cap_totals WHERE cap = 'pair'"],
    "two running totals swapped": [
        "UPDATE cap_totals SET total = (SELECT total FROM cap_totals WHERE cap = 'wide') WHERE cap = 'pair'"],
    "an event's payload edited": ["UPDATE audit_events SET payload = replace(payload, '\"1/3\"', '\"1/30\"') "
                                  "WHERE subject = 'a'"],
    "an event's actor edited": ["UPDATE audit_events SET actor = 'mallory' WHERE seq = 4"],
    "an event deleted": ["DELETE FROM audit_events WHERE seq = 5"],
    "the last events deleted": ["DELETE FROM audit_events WHERE seq > (SELECT max(seq) - 2 FROM audit_events)"],
    "a family row edited": ["UPDATE families SET partition = 'null' WHERE id = 'by-region'"],
    "a cap row edited": ["UPDATE caps SET epsilon = '5000' WHERE name = 'wide'"],
    "a role row added": ["INSERT INTO roles (person, role) VALUES ('mallory', 'admin')"],
    "several at once": ["UPDATE releases SET title = 'x' WHERE id = 'h'", "DELETE FROM releases WHERE id = 'b'",
                        "UPDATE release_accounting SET title = 'y' WHERE release = 'e'"],
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("streaming")
    db = directory / "ledger.db"
    url = f"sqlite:///{db}"
    (directory / "survey.yaml").write_text(DATASET)
    (directory / "releases.yaml").write_text(RELEASES)
    assert cli_main(url, "dataset", "add", directory / "survey.yaml").code == 0
    run = cli_main(url, "record", directory / "releases.yaml")
    assert run.code == 0, run.err
    assert cli_main(url, "cancel", "j", "--reason", "not run").code == 0
    assert cli_main(url, "role", "grant", "approver", "approver").code == 0
    with acting_as("approver"):
        assert cli_main(url, "approve", "m").code == 0, "approval by another person"
    return db


def both(db: Path) -> tuple[audit_verify.Verification, audit_verify.Verification]:
    engine = engines.make_engine(f"sqlite:///{db}")
    try:
        with sessions.read_session(engine) as session:
            streamed = audit_verify.verify(session)
        with Session(engine) as session:
            reference = verify_in_memory(session)
    finally:
        engine.dispose()
    return streamed, reference


@pytest.mark.parametrize("chunk", [2, 20_000])
@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_streaming_verify_finds_what_the_whole_verification_finds(pristine, tmp_path, monkeypatch, case, chunk):
    db = tmp_path / "ledger.db"
    with sqlite3.connect(pristine) as source, sqlite3.connect(db) as copy:
        source.backup(copy)  # the WAL's committed pages too
    with sqlite3.connect(db) as connection:
        for statement in TAMPERING[case]:
            connection.execute(statement)
    monkeypatch.setattr(row_dicts, "VERIFY_CHUNK", chunk)
    streamed, reference = both(db)
    assert (streamed.ok, streamed.events, streamed.head) == (reference.ok, reference.events, reference.head)
    assert sorted(streamed.problems) == sorted(reference.problems)
    assert streamed.problems[:1] == reference.problems[:1]  # the first bad event named first
    assert streamed.ok == (case == "intact")


@pytest.mark.parametrize("text", ["release.recorded", "é ü 名前", 'quote " backslash \\ slash /', "\x00\x1f\x7f",
                                  "\u2028\u2029", ""])
def test_an_events_hash_written_directly_is_the_chain_hash_of_its_canonical_json(text):
    # event_hash writes the event's fields without json.dumps (the verify walk hashes every event):
    # it must hash the very text codec.chain_hash hashes, whatever the strings hold
    from ledger.store.codec import chain_hash, event_hash

    payload = {"release": {"title": text, "n": 3}}
    body = {"seq": 12, "at": text, "actor": text, "kind": text, "subject": text, "payload": payload}
    assert event_hash("ab" * 32, 12, text, text, text, text, canonical_json(payload)) == chain_hash("ab" * 32, body)


def test_a_release_events_state_is_cut_from_its_bytes_as_its_canonical_json():
    # the walk compares a release row with its latest event by the digest of the state cut from the
    # payload's bytes: the cut must be the state's canonical JSON wherever "release" sits
    import hashlib

    body = {"id": "a", "title": 'quote " and ,"release":{} inside', "reads": ["x"], "n": 3}
    digest = hashlib.sha256(canonical_json(body).encode()).digest()
    for payload in ({"release": body}, {"budget_decisions": [{"cap": "d/all", "release": "no"}], "release": body}):
        assert audit_verify.release_state_digest(canonical_json(payload).encode()) == digest


@pytest.mark.parametrize("payload", [
    {"release": {"id": "a"}, "zz": 1},  # a key after the state: the cut runs past it
    {"a": {"release": {"id": "a"}}},  # the key nested deeper: the cut holds a closing brace too many
])
def test_a_wrong_cut_of_a_release_events_state_never_matches_its_canonical_json(payload):
    import hashlib

    digest = audit_verify.release_state_digest(canonical_json(payload).encode())
    assert digest != hashlib.sha256(canonical_json({"id": "a"}).encode()).digest()


def test_a_release_rows_canonical_json_is_written_as_canonical_json_writes_its_dict(pristine):
    # verify compares each row with its event by the canonical JSON written field by field
    from sqlalchemy import select

    engine = engines.make_engine(f"sqlite:///{pristine}")
    try:
        with engine.connect() as connection:
            rows = connection.execute(select(*row_dicts.RELEASE_TEXT_COLUMNS)).all()
    finally:
        engine.dispose()
    names = [column.name for column in row_dicts.RELEASE_TEXT_COLUMNS]
    odd = dict(zip(names, rows[0]), title='é "quoted" \\ \u2028 名前', part=3, output="x\x00y", family="f")
    rows = [*rows, tuple(odd[name] for name in names)]
    written = row_dicts.release_row_dicts_canonical(rows)
    assert [body for body, _ in written] == row_dicts.release_row_dicts(rows)
    assert all(text == canonical_json(body) for body, text in written)
