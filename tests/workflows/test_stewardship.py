"""Datasets that evolve as audited events, public variables by
design (docs/explanation/model.md#public-and-protected-variables), signed checkpoints of the chain head (docs/explanation/model.md#people-duties-and-the-book-of-record), and bad input.

Ledgers are written in the tests; every expected figure is worked out by hand from
Tan's definitions (pure epsilon composes by sum, Prop 3.4; a release reading a
variable without a guarantee costs ∞ on it, docs/explanation/model.md#the-cost-of-one-release-on-a-subset).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import nullcontext
from fractions import Fraction
from pathlib import Path

import pytest
from sqlmodel import Session

from ledger.store import checkpoint, engines, ledger_meta
from ledger.store.codec import GENESIS_HASH, event_hash
from support import acting_as, cli_main

DATASET = """\
dataset: survey
description: a household survey
self_approval: true  # (its history recorded as published by the one person keeping it)
variables:
  - {name: region, classification: public, description: region of residence}
  - {name: income, classification: sensitive}
  - {name: sex, classification: identifying}
  - {name: age, classification: identifying}
caps:
  - {subset: [income], epsilon: 5}
"""

# region read exactly (public: expected); income 1 + 1/2; sex 1/4; age 1/2 + 1/4 (pure, summed)
RELEASES = """\
dataset: survey
releases:
  - {id: by-region, reads: [region], mechanism: {name: exact}, status: published, published_at: "2024-01-01"}
  - {id: income-by-region, reads: [region, income], mechanism: {name: laplace, epsilon: 1, sensitivity: 1},
     guarantees: [{protects: [income], epsilon: 1}], status: published, published_at: "2024-01-02"}
  - {id: income-age, reads: [income, age], mechanism: {name: laplace, epsilon: 0.5, sensitivity: 1}}
  - {id: sex-age, reads: [sex, age], mechanism: {name: laplace, epsilon: 0.25, sensitivity: 1}}
"""


def run(url: str, *args) -> object:
    return cli_main(url, *args)


@pytest.fixture
def ledger(tmp_path) -> tuple[str, Path]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "survey.yaml").write_text(DATASET)
    (tmp_path / "releases.yaml").write_text(RELEASES)
    assert run(url, "dataset", "add", tmp_path / "survey.yaml").code == 0
    assert run(url, "record", tmp_path / "releases.yaml").code == 0
    return url, tmp_path


def events(url: str) -> list[tuple]:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT seq, kind, subject, payload, hash FROM audit_events ORDER BY seq").fetchall()


def verify_ok(url: str) -> None:
    result = run(url, "audit", "verify")
    assert result.code == 0, result.err


def cap_json(url: str) -> dict:
    return {c["cap"]: c for c in json.loads(run(url, "cap", "list", "--json").out)}


# --------------------------------------------------------------------------
# 2. Datasets that evolve
# --------------------------------------------------------------------------


AMENDED = """\
dataset: survey
description: a household survey, wave 2
self_approval: true
variables:
  - {name: region, classification: public, description: region of residence (NUTS 2)}
  - {name: income, classification: public, description: published income bands}
  - {name: sex, classification: identifying, categories: [f, m]}
  - {name: age, classification: identifying}
  - {name: tenure, classification: sensitive, description: owner or renter, categories: [own, rent]}
groups:
  person: [sex, age]
"""


def test_amend_applies_each_change_as_an_audit_event_and_rewrites_nothing(ledger):
    url, tmp_path = ledger
    assert run(url, "cap", "set", "all", "--epsilon", "100").code == 0  # set after: region is read exactly
    before = events(url)
    (tmp_path / "wave2.yaml").write_text(AMENDED)
    dry = run(url, "dataset", "amend", tmp_path / "wave2.yaml", "--dry-run", "--reason", "bands are published")
    assert dry.code == 0 and "dry run: nothing written" in dry.out
    assert events(url) == before
    result = run(url, "dataset", "amend", tmp_path / "wave2.yaml", "--reason", "bands are published")
    assert result.code == 0, result.err
    # printed first, then applied
    assert result.out.index("variable.reclassified") < result.out.index("applied")
    after = events(url)
    assert after[:len(before)] == before  # nothing recorded is rewritten
    kinds = [kind for _, kind, *_ in after[len(before):]]
    assert kinds == ["dataset.described", "variable.added", "variable.described", "variable.described",
                     "variable.reclassified", "variable.categories_added", "group.set", "cap.set"]
    reclassified = json.loads(next(p for _, k, _, p, _ in after if k == "variable.reclassified"))
    assert reclassified["change"] == {"variable": "income", "classification": "public", "was": "sensitive",
                                      "reason": "bands are published"}
    # the `all` cap follows the dataset: it now covers tenure too
    assert cap_json(url)["all"]["subset"] == ["region", "income", "sex", "age", "tenure"]  # dataset order
    verify_ok(url)
    again = run(url, "dataset", "amend", tmp_path / "wave2.yaml")
    assert again.code == 0 and "nothing to change" in again.out


FOUR_EYES = """\
dataset: trial
variables:
  - {name: income, classification: sensitive}
"""
PLANNED = """\
dataset: trial
releases:
  - {id: mean-income, reads: [income], mechanism: {name: laplace, epsilon: 1, sensitivity: 1}}
"""


def test_separation_of_duties_is_waived_by_an_amendment_with_a_reason_and_then_self_approval_works(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "trial.yaml").write_text(FOUR_EYES)
    (tmp_path / "planned.yaml").write_text(PLANNED)
    assert run(url, "dataset", "add", tmp_path / "trial.yaml").code == 0
    assert run(url, "record", tmp_path / "planned.yaml").code == 0
    assert run(url, "approve", "mean-income").code == 2  # its recorder may not approve it
    (tmp_path / "trial.yaml").write_text(FOUR_EYES + "self_approval: true\n")
    before = events(url)
    unexplained = run(url, "dataset", "amend", tmp_path / "trial.yaml")
    assert unexplained.code == 2 and "--reason" in unexplained.err and events(url) == before
    waived = run(url, "dataset", "amend", tmp_path / "trial.yaml", "--reason", "a one-person trial")
    assert waived.code == 0, waived.err
    change = json.loads(events(url)[-1][3])
    assert events(url)[-1][1] == "dataset.self_approval"
    assert change["change"] == {"self_approval": True, "was": False, "reason": "a one-person trial"}
    assert run(url, "approve", "mean-income").code == 0
    verify_ok(url)
    (tmp_path / "trial.yaml").write_text(FOUR_EYES)
    restored = run(url, "dataset", "amend", tmp_path / "trial.yaml", "--reason", "the board meets")
    assert restored.code == 0 and "restore separation of duties" in restored.out
    verify_ok(url)


def test_a_declared_privacy_unit_is_amended_as_an_audit_event(ledger):
    url, tmp_path = ledger
    (tmp_path / "unit.yaml").write_text(DATASET.replace("variables:", "privacy_unit: Household\nvariables:", 1))
    result = run(url, "dataset", "amend", tmp_path / "unit.yaml")
    assert result.code == 0 and "declare the privacy unit: Household" in result.out, result.out + result.err
    assert events(url)[-1][1:3] == ("dataset.privacy-unit", "survey")
    assert "nothing to change" in run(url, "dataset", "amend", tmp_path / "unit.yaml").out
    verify_ok(url)


def test_adding_a_recorded_dataset_again_names_what_differs(ledger):
    url, tmp_path = ledger
    (tmp_path / "waived.yaml").write_text(DATASET.replace("self_approval: true", "self_approval: false"))
    result = run(url, "dataset", "add", tmp_path / "waived.yaml")
    assert result.code == 2 and "already recorded with other self_approval;" in result.err


def test_single_changes_from_the_command_line(ledger):
    url, _ = ledger
    assert run(url, "dataset", "add-variable", "tenure", "--classification", "sensitive",
               "--category", "own", "--category", "rent").code == 0
    assert run(url, "dataset", "add-categories", "tenure", "social").code == 0
    assert run(url, "dataset", "describe", "tenure", "owner, renter or social").code == 0
    assert run(url, "dataset", "reclassify", "sex", "sensitive", "--reason", "small areas").code == 0
    assert run(url, "group", "set", "person", "sex", "age").code == 0
    assert run(url, "group", "remove", "person").code == 0
    table = json.loads(run(url, "table", "--json").out)
    assert table["variables"] == ["region", "income", "sex", "age", "tenure"]
    assert table["total"]["values"]["tenure"] == 0  # no release reads a new variable
    kinds = [k for _, k, *_ in events(url)][-6:]
    assert kinds == ["variable.added", "variable.categories_added", "variable.described", "variable.reclassified",
                     "group.set", "group.removed"]
    verify_ok(url)


def test_removing_a_variable_that_releases_read_is_refused_and_writes_nothing(ledger):
    url, tmp_path = ledger
    before = events(url)
    (tmp_path / "shrunk.yaml").write_text(DATASET.replace("  - {name: age, classification: identifying}\n", ""))
    result = run(url, "dataset", "amend", tmp_path / "shrunk.yaml")
    assert result.code == 2
    assert "shrunk.yaml: variables: cannot remove variable 'age'" in result.err
    assert "income-age" in result.err and "sex-age" in result.err
    assert events(url) == before


def test_a_variable_no_release_reads_can_be_removed(ledger):
    url, tmp_path = ledger
    assert run(url, "cap", "set", "all", "--epsilon", "100").code == 0
    assert run(url, "dataset", "add-variable", "spare").code == 0
    assert cap_json(url)["all"]["subset"] == ["region", "income", "sex", "age", "spare"]  # dataset order
    (tmp_path / "same.yaml").write_text(DATASET + "  - {subset: all, epsilon: 100}\n")
    result = run(url, "dataset", "amend", tmp_path / "same.yaml")
    assert result.code == 0 and "variable.removed" in result.out
    assert json.loads(run(url, "table", "--json").out)["variables"] == ["region", "income", "sex", "age"]
    assert cap_json(url)["all"]["subset"] == ["region", "income", "sex", "age"]  # as table lists them
    verify_ok(url)


@pytest.mark.parametrize("args,field", [
    (("dataset", "reclassify", "sex", "public"), "--reason"),
    (("dataset", "reclassify", "sex", "public", "--reason", "  "), "--reason"),
    (("dataset", "reclassify", "nosuch", "public", "--reason", "x"), "VARIABLE"),
    (("dataset", "describe", "nosuch", "text"), "VARIABLE"),
    (("dataset", "add-categories", "nosuch", "a"), "VARIABLE"),
    (("dataset", "add-variable", "income"), "NAME"),
    (("group", "set", "g", "income", "nosuch"), "VARIABLES"),
    (("group", "remove", "nosuch"), "NAME"),
    (("cap", "remove", "nosuch"), "NAME"),
    (("cap", "remove", "income", "--reason", ""), "--reason"),
    (("dataset", "reclassify", "sex", "Public", "--reason", "x"), "CLASSIFICATION"),
    (("dataset", "reclassify", "sex", "publc", "--reason", "x"), "CLASSIFICATION"),
    (("dataset", "add-variable", "town", "--classification", "pubilc"), "--classification"),
])
def test_bad_changes_exit_2_naming_the_argument_and_write_nothing(ledger, args, field):
    url, _ = ledger
    before = events(url)
    result = run(url, *args)
    assert result.code == 2, (result.out, result.err)
    assert f"command line: {field}:" in result.err
    assert events(url) == before


def test_amendment_bad_input_names_the_file_and_field(ledger):
    url, tmp_path = ledger
    before = events(url)
    (tmp_path / "fewer.yaml").write_text(DATASET.replace("{name: sex, classification: identifying}",
                                                         "{name: sex, classification: identifying, categories: [f]}"))
    assert run(url, "dataset", "add-categories", "sex", "f", "m").code == 0
    before = events(url)
    result = run(url, "dataset", "amend", tmp_path / "fewer.yaml")
    assert result.code == 2 and "fewer.yaml: variables[2].categories:" in result.err and "never removed" in result.err
    (tmp_path / "delta.yaml").write_text(DATASET.replace("description: a household survey\n",
                                                         "description: a household survey\ndelta: 1e-6\n"))
    result = run(url, "dataset", "amend", tmp_path / "delta.yaml")
    assert result.code == 2 and "delta.yaml: delta:" in result.err
    assert events(url) == before


def test_a_changed_cap_keeps_its_history_and_its_total_is_recomputed(ledger):
    url, tmp_path = ledger
    # income: income-by-region 1 + income-age 1/2 = 3/2
    assert cap_json(url)["income"]["current"] == 1.5
    assert run(url, "cap", "set", "income", "--epsilon", "2").code == 0
    # the cap now on {income, sex}: 1 + 1/2 + 1/4 (sex-age reads sex) = 7/4
    assert run(url, "cap", "set", "income", "sex", "--name", "income", "--epsilon", "3").code == 0
    caps = cap_json(url)
    assert caps["income"]["subset"] == ["income", "sex"] and caps["income"]["current"] == 1.75
    assert caps["income"]["headroom"] == 1.25
    assert run(url, "cap", "remove", "income", "--reason", "replaced by a cap on protected").code == 0
    assert "income" not in cap_json(url)
    verify_ok(url)
    assert run(url, "report", "--format", "html", "--out", tmp_path / "r.html").code == 0
    html = (tmp_path / "r.html").read_text()
    history = html[html.index('id="cap-history"'):]
    history = history[:history.index("</table>")]
    assert history.count("<tr>") == 5  # header, set, changed, changed, removed
    assert "epsilon 5 on {income}" in history and "epsilon 2 on {income}" in history
    assert "epsilon 3 on {income, sex}" in history and "replaced by a cap on protected" in history
    # a recording after the changes charges the right totals: all = ∞ (region exact), protected finite
    (tmp_path / "more.yaml").write_text("dataset: survey\nreleases:\n  - {id: more, reads: [sex], "
                                        "mechanism: {name: laplace, epsilon: 1, sensitivity: 1}}\n")
    assert run(url, "cap", "set", "protected", "--epsilon", "10").code == 0
    assert cap_json(url)["protected"]["current"] == 1.75  # 1 + 1/2 + 1/4 on {income, sex, age}
    assert run(url, "record", tmp_path / "more.yaml").code == 0
    assert cap_json(url)["protected"]["current"] == 2.75
    verify_ok(url)


# --------------------------------------------------------------------------
# 3. Public variables by design
# --------------------------------------------------------------------------


def test_the_headline_is_the_loss_on_the_protected_subset(ledger):
    url, _ = ledger
    head = json.loads(run(url, "table", "--json").out)["headline"]
    # protected = {income, sex, age}: every release but by-region: 1 + 1/2 + 1/4
    assert head["protected"] == ["income", "sex", "age"] and head["public"] == ["region"]
    assert head["epsilon_exact"] == "7/4" and head["alarm"] is False
    assert head["worst_variable"] == {"variable": "income", "epsilon": 1.5, "epsilon_exact": "3/2"}  # income 3/2, age 3/4, sex 1/4
    # {income, sex} and {income, age} both 1 + 1/2 + 1/4: the first in dataset order
    assert head["worst_pair"] == {"subset": ["income", "sex"], "epsilon": 1.75, "epsilon_exact": "7/4"}
    assert head["public_released_exactly"] == {"region": "inf"}
    assert head["dataset_wide_ordinary_dp"] == head["dataset_wide_ordinary_dp_exact"] == "inf"
    text = run(url, "table").out
    assert "protected subset (every variable not classified public) {income, sex, age}: epsilon 1.75" in text
    assert "public variables (not in the headline): region ∞ (public, released exactly)" in text
    assert "ALARM" not in text


def test_an_exact_read_of_a_protected_variable_is_an_alarm(ledger):
    url, tmp_path = ledger
    (tmp_path / "leak.yaml").write_text("dataset: survey\nreleases:\n  - {id: leak, reads: [sex], "
                                        "mechanism: {name: exact}}\n")
    assert run(url, "record", tmp_path / "leak.yaml").code == 0
    head = json.loads(run(url, "table", "--json").out)["headline"]
    assert head["alarm"] is True and head["epsilon"] == "inf" and head["unprotected"] == ["sex"]
    assert run(url, "table").out.count("ALARM") == 1
    assert run(url, "report", "--format", "html", "--out", tmp_path / "r.html").code == 0
    html = (tmp_path / "r.html").read_text()
    assert 'class="figure lead alert" id="protected-epsilon"' in html


def test_protected_and_all_are_subsets_every_command_accepts(ledger):
    url, _ = ledger
    protected = json.loads(run(url, "subset", "protected", "--json").out)
    assert protected["subset"] == ["income", "sex", "age"] and protected["epsilon_exact"] == "7/4"
    every = json.loads(run(url, "subset", "all", "--json").out)
    assert every["epsilon"] == "inf"
    assert run(url, "cap", "set", "protected", "--epsilon", "2").code == 0
    room = json.loads(run(url, "headroom", "protected", "--json").out)
    assert room["epsilon"] == 0.25 and room["epsilon_binding"] == "protected"  # 2 - 7/4
    room = json.loads(run(url, "headroom", "all", "--json").out)
    assert room["variables"] == ["region", "income", "sex", "age"]  # dataset order, as subset prints it
    assert room["epsilon"] == 0.25 and room["epsilon_binding"] == "protected"  # income's cap: 5 - 3/2


def test_the_pairs_panel_ranks_pairs_of_protected_variables(ledger):
    url, tmp_path = ledger
    assert run(url, "report", "--format", "md", "--out", tmp_path / "r.md").code == 0
    md = (tmp_path / "r.md").read_text()
    assert "| Worst protected pair | {income, sex} 1.75 |" in md
    assert "| Public variables (not in the headline) | {region} ∞ (public, released exactly) |" in md
    assert "Dataset-wide epsilon" not in md and "| Whole dataset, ordinary DP (U = V) | ∞ |" in md
    from test_report_helpers import context_of

    pairs = context_of(url, "survey", charts=False).pairs
    assert pairs.protected_only and pairs.public == ("region",)
    assert [(p.a, p.b) for p in pairs.highest] == [("income", "sex"), ("income", "age"), ("sex", "age")]
    assert [p.epsilon for p in pairs.highest] == [Fraction(7, 4), Fraction(7, 4), Fraction(3, 4)]
    assert pairs.unprotected == 0


# --------------------------------------------------------------------------
# 6. Signed checkpoints and running totals stamped with the head
# --------------------------------------------------------------------------


@pytest.fixture
def keys(tmp_path):
    assert run("sqlite://", "audit", "keygen", "--out", tmp_path / "board").code == 0
    assert run("sqlite://", "audit", "keygen", "--out", tmp_path / "other").code == 0
    return tmp_path / "board", tmp_path / "board.pub", tmp_path / "other", tmp_path / "other.pub"


def test_keygen_writes_a_private_and_a_public_pem_and_never_overwrites(keys):
    private, public, *_ = keys
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert private.stat().st_mode & 0o077 == 0
    result = run("sqlite://", "audit", "keygen", "--out", private)
    assert result.code == 2 and "--out" in result.err and "never overwritten" in result.err


def test_a_checkpoint_holds_while_the_chain_grows(ledger, keys):
    url, tmp_path = ledger
    private, public, *_ = keys
    assert run(url, "audit", "checkpoint", "--key", private, "--out", tmp_path / "cp.json").code == 0
    document = json.loads((tmp_path / "cp.json").read_text())
    last = events(url)[-1]
    assert document["head"]["seq"] == last[0] == document["head"]["events"] and document["head"]["hash"] == last[4]
    assert run(url, "cap", "set", "sex", "--epsilon", "3").code == 0  # the chain grows
    result = run(url, "audit", "verify", "--checkpoint", tmp_path / "cp.json", "--public-key", public)
    assert result.code == 0 and f"checkpoint held: event {last[0]}" in result.out


def test_a_truncated_tail_is_detected(ledger, keys):
    url, tmp_path = ledger
    private, public, *_ = keys
    assert run(url, "audit", "checkpoint", "--key", private, "--out", tmp_path / "cp.json").code == 0
    seq = json.loads((tmp_path / "cp.json").read_text())["head"]["seq"]
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DELETE FROM audit_events WHERE seq >= ?", (seq - 1,))
        connection.execute("DELETE FROM releases WHERE id = 'sex-age'")
    result = run(url, "audit", "verify", "--checkpoint", tmp_path / "cp.json", "--public-key", public)
    assert result.code == 1 and "truncated" in result.err


def test_a_rewritten_chain_is_detected_though_it_verifies_on_its_own(ledger, keys):
    url, tmp_path = ledger
    private, public, *_ = keys
    assert run(url, "audit", "checkpoint", "--key", private, "--out", tmp_path / "cp.json").code == 0
    # rewrite every event's actor and re-chain it: the chain alone still verifies
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        rows = connection.execute("SELECT seq, at, kind, subject, payload FROM audit_events ORDER BY seq").fetchall()
        previous = GENESIS_HASH
        for seq, at, kind, subject, payload in rows:
            digest = event_hash(previous, seq, at, "mallory", kind, subject, payload)
            connection.execute("UPDATE audit_events SET actor = 'mallory', prev_hash = ?, hash = ? WHERE seq = ?",
                               (previous, digest, seq))
            previous = digest
        connection.execute("UPDATE ledger_meta SET value = ? WHERE key = 'totals_head'", (f"{rows[-1][0]}:{previous}",))
    assert run(url, "audit", "verify").code == 0
    result = run(url, "audit", "verify", "--checkpoint", tmp_path / "cp.json", "--public-key", public)
    assert result.code == 1 and "rewritten" in result.err


def test_checkpoint_bad_input_exits_2_naming_the_file(ledger, keys, tmp_path):
    url, _ = ledger
    private, public, other_private, other_public = keys
    cp = tmp_path / "cp.json"
    assert run(url, "audit", "checkpoint", "--key", private, "--out", cp).code == 0
    signed_by_other = run(url, "audit", "verify", "--checkpoint", cp, "--public-key", other_public)
    assert signed_by_other.code == 2 and f"{cp}: signature: does not verify" in signed_by_other.err
    forged = json.loads(cp.read_text())
    forged["head"]["seq"] -= 1
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    result = run(url, "audit", "verify", "--checkpoint", tmp_path / "forged.json", "--public-key", public)
    assert result.code == 2 and "signature" in result.err
    (tmp_path / "bad.pem").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    before = events(url)
    result = run(url, "audit", "checkpoint", "--key", tmp_path / "bad.pem", "--out", tmp_path / "x.json")
    assert result.code == 2 and f"{tmp_path / 'bad.pem'}: key:" in result.err
    assert not (tmp_path / "x.json").exists() and events(url) == before
    result = run(url, "audit", "verify", "--checkpoint", cp, "--public-key", private)  # a private key
    assert result.code == 2 and f"{private}: key:" in result.err
    (tmp_path / "junk.json").write_text("{nope")
    result = run(url, "audit", "verify", "--checkpoint", tmp_path / "junk.json", "--public-key", public)
    assert result.code == 2 and "junk.json" in result.err
    result = run(url, "audit", "verify", "--checkpoint", cp)
    assert result.code == 2 and "--public-key" in result.err


def test_checkpoint_signature_is_ed25519_over_the_canonical_head():
    private_pem, public_pem = checkpoint.generate_key()
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_pem, password=None)
    head = checkpoint.Head(3, "ab" * 32, "2026-01-01T00:00:00+00:00", 3)
    document = checkpoint.sign(head, key, "2026-01-02T00:00:00+00:00")
    public = serialization.load_pem_public_key(public_pem)
    assert checkpoint.signed_head(document, public, "cp") == head
    assert checkpoint.compare(head, (3, "ab" * 32), 5) is None
    assert "truncated" in checkpoint.compare(head, None, 2)
    assert "rewritten" in checkpoint.compare(head, (3, "cd" * 32), 3)


def test_decisions_refuse_totals_that_are_behind_the_chain_head(ledger):
    url, tmp_path = ledger
    (tmp_path / "plan.yaml").write_text("dataset: survey\nreleases:\n  - {id: plan, status: planned, reads: [income], "
                                        "mechanism: {name: laplace, epsilon: 1, sensitivity: 1}}\n")
    assert run(url, "role", "grant", "grace", "approver").code == 0  # separation of duties: another approves
    assert run(url, "record", tmp_path / "plan.yaml").code == 0
    # something other than privacy-ledger appends an event (it cancels a release without
    # recomputing the totals): the totals' stamp is now behind the head
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        seq, digest = connection.execute("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").fetchone()
        connection.execute("INSERT INTO audit_events VALUES (?, '2026-01-01T00:00:00+00:00', 'mallory', "
                           "'release.cancelled', 'income-age', '{}', ?, ?)", (seq + 1, digest, "f" * 64))
    before = events(url)
    (tmp_path / "next.yaml").write_text("dataset: survey\nreleases:\n  - {id: next, reads: [sex], "
                                        "mechanism: {name: laplace, epsilon: 1, sensitivity: 1}}\n")
    for person, args in ((None, ("check", tmp_path / "next.yaml")), (None, ("record", tmp_path / "next.yaml")),
                         ("grace", ("approve", "plan"))):
        with acting_as(person) if person else nullcontext():
            result = run(url, *args)
        assert result.code == 2, args
        assert f"computed at audit event {seq} but the chain head is event {seq + 1}" in result.err
    assert events(url) == before
    # recomputed from the releases, the totals are stamped again and decisions go on
    assert run(url, "audit", "retotal").code == 0
    with acting_as("grace"):
        assert run(url, "approve", "plan").code == 0


def test_a_report_prints_the_head_it_was_computed_from(ledger):
    url, tmp_path = ledger
    seq, *_, digest = events(url)[-1]
    for fmt in ("html", "md", "tex"):
        assert run(url, "report", "--format", fmt, "--out", tmp_path / f"r.{fmt}").code == 0
        text = (tmp_path / f"r.{fmt}").read_text()
        assert f"event {seq}" in text and digest in text


def test_stamps_cost_two_key_reads_not_the_history(ledger):
    """The check reads the stamp and the head: no query touches the releases for it."""
    url, _ = ledger
    engine = engines.make_engine(url)
    with Session(engine) as session:
        assert ledger_meta.stale_totals(session) is None
        statements = []
        from sqlalchemy import event

        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        ledger_meta.stale_totals(session)
        assert not any("releases" in s for s in statements)


# --------------------------------------------------------------------------
# 7. What a board reads
# --------------------------------------------------------------------------


def test_user_facing_text_cites_papers_not_internal_documents(ledger):
    url, tmp_path = ledger
    for fmt in ("html", "md", "tex", "csv"):
        assert run(url, "report", "--format", fmt, "--out", tmp_path / f"r.{fmt}").code == 0
        assert "DESIGN" not in (tmp_path / f"r.{fmt}").read_text()
    for args in ((), ("dataset",), ("audit",), ("cap",), ("group",), ("table",), ("report",), ("run",)):
        assert "DESIGN" not in run(url, *args, "--help").out
    assert "DESIGN" not in run(url, "table").out


def test_status_badges_differ_by_status(ledger):
    url, tmp_path = ledger
    assert run(url, "retract", "by-region", "--reason", "a test").code == 0
    assert run(url, "report", "--format", "html", "--out", tmp_path / "r.html").code == 0
    html = (tmp_path / "r.html").read_text()
    assert '<span class="status release-retracted">retracted</span>' in html
    assert '<span class="status release-published">published</span>' in html
    css = html[html.index("<style>"):html.index("</style>")]
    rule = {name: css[css.index(f".status.release-{name} {{"):].split("}")[0] for name in ("published", "retracted")}
    assert rule["published"] != rule["retracted"] and "--ok" not in rule["retracted"]


def test_the_worst_pair_shortcut_for_an_infinite_variable_agrees_with_the_pair_grid():
    """With a protected variable at ∞ the headline names the first pair holding it without
    the O(V²) grid; the grid itself gives the same pair and figure."""
    from ledger.accounting.charge_choice import at_delta
    from ledger.accounting.ledger_index import LedgerIndex
    from ledger.operations.headline import headline
    from ledger.core.records import Dataset, Guarantee, Mechanism, Notion, Release, Variable

    names = ("p", "a", "b", "c", "d")
    dataset = Dataset("d", tuple(Variable(n, "public" if n == "p" else "sensitive") for n in names))
    releases = [
        Release("r1", "d", frozenset({"a", "b"}), Mechanism("laplace"),
                (Guarantee(frozenset({"a", "b"}), Notion.PURE, epsilon=Fraction(3)),)),
        Release("r2", "d", frozenset({"c", "p"}), Mechanism("exact")),  # c read exactly: ∞
    ]
    index = LedgerIndex(names, releases)
    objective = at_delta(Fraction(1, 10**9))
    table = index.table("d", objective)
    quick = headline(index, dataset, Fraction(1, 10**9), objective, table.total, table.total_dataset_wide)
    full = headline(index, dataset, Fraction(1, 10**9), objective, table.total, table.total_dataset_wide,
                    pair_grid=index.pair_matrix(objective))
    assert quick.worst_pair == full.worst_pair == ("a", "c", float("inf"))
    assert quick.alarm and quick.unprotected == ("c",)


@pytest.mark.parametrize("written, refused", [
    ("public", False), ("sensitive", False), ("non-public", False), ("nonpublic", False), ("published", False),
    ("Public", True), ("PUBLIC", True), ("public ", True), ("publc", True), ("pubilc", True), ("publik", True),
    ("pubic", True), ("publics", True), ("publish", True),
])
def test_a_near_miss_of_public_is_refused_naming_file_and_field(tmp_path, written, refused):
    """A classification within two edits of `public` (letter case aside) was meant as public:
    kept as written it would be silently protected (docs/explanation/model.md#public-and-protected-variables), so it is bad input naming the
    file and field, exit 2, nothing written; a word further from it is a protected variable's label."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "survey.yaml").write_text(DATASET.replace("{name: sex, classification: identifying}",
                                                          f"{{name: sex, classification: '{written}'}}"))
    result = run(url, "dataset", "add", tmp_path / "survey.yaml")
    if not refused:
        assert result.code == 0, result.err
        return
    assert result.code == 2
    assert "survey.yaml:" in result.err and f"variables[2].classification: '{written}' is not 'public'" in result.err
    assert not (tmp_path / "ledger.db").exists() or run(url, "releases", "--json").json() == []


def test_an_amendment_file_with_a_near_miss_of_public_is_refused(ledger):
    url, tmp_path = ledger
    before = events(url)
    (tmp_path / "typo.yaml").write_text(DATASET.replace("{name: sex, classification: identifying}",
                                                        "{name: sex, classification: Public}"))
    result = run(url, "dataset", "amend", tmp_path / "typo.yaml", "--reason", "x")
    assert result.code == 2 and "typo.yaml:" in result.err
    assert "variables[2].classification: 'Public' is not 'public'" in result.err
    assert events(url) == before


def test_an_amendment_plan_with_a_near_miss_of_public_is_refused(ledger):
    """The check is in the amendment plan every change goes through (API, files, commands)."""
    from dataclasses import replace

    import ledger as api
    from ledger.operations.amend import plan

    url, _ = ledger
    dataset = api.open(url).dataset("survey")
    typo = replace(dataset, variables=tuple(replace(v, classification="Publc") if v.name == "sex" else v
                                            for v in dataset.variables))
    _, errors = plan(dataset, typo, source="api", reason="x")
    assert [(e.source, e.field) for e in errors] == [("api", "variables[2].classification")]
    _, errors = plan(dataset, replace(typo, variables=dataset.variables), source="api", reason="x")
    assert errors == []


@pytest.mark.parametrize("name", ["all", "protected"])
def test_all_and_protected_are_never_the_name_of_a_variable_or_group(tmp_path, name):
    """`all` and `protected` are subsets every command takes (docs/explanation/model.md#public-and-protected-variables). A variable or group
    of that name shadowed them in `subset` (a variable comes first): `subset all` printed the
    variable's 0 where the whole dataset had spent 5, while `cap set all` capped the whole
    dataset. Refused in a dataset file (add and amend) and by add-variable; nothing written."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    named = tmp_path / "named.yaml"
    named.write_text(f"dataset: d\nvariables:\n  - {{name: {name}}}\n  - {{name: x}}\n", encoding="utf-8")
    refused = cli_main(url, "dataset", "add", named)
    assert refused.code == 2 and f"{name!r} is the name of a subset every command takes" in refused.err, refused.err
    grouped = tmp_path / "grouped.yaml"
    grouped.write_text(f"dataset: d\nvariables:\n  - {{name: x}}\n  - {{name: y}}\ngroups:\n  {name}: [x]\n",
                       encoding="utf-8")
    refused = cli_main(url, "dataset", "add", grouped)
    assert refused.code == 2 and f"{name!r} is the name of a subset every command takes" in refused.err, refused.err
    plain = tmp_path / "plain.yaml"
    plain.write_text("dataset: d\nvariables:\n  - {name: x}\n  - {name: y}\n", encoding="utf-8")
    assert cli_main(url, "dataset", "add", plain).code == 0
    refused = cli_main(url, "dataset", "add-variable", name)
    assert refused.code == 2 and f"{name!r} is the name of a subset every command takes" in refused.err, refused.err
    refused = cli_main(url, "dataset", "amend", named.write_text(
        f"dataset: d\nvariables:\n  - {{name: x}}\n  - {{name: y}}\n  - {{name: {name}}}\n", encoding="utf-8")
        and named, "--reason", "more")
    assert refused.code == 2 and f"{name!r} is the name of a subset every command takes" in refused.err, refused.err
    assert cli_main(url, "subset", name, "--json").json()["subset"] == ["x", "y"]
