"""Safe retries: recording a release whose id is already recorded with
identical content is a no-op that says so (exit 0, nothing written); with different
content it is bad input naming the fields that differ (exit 2). A pipeline re-running the
same `record` after a time-out gets exactly one charge, even when the retries race.

Expected totals are the sums of the files' epsilons, by hand (pure epsilon adds, Tan
Prop 3.4), counted once per distinct release id.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlalchemy import create_engine
from sqlmodel import Session
from support import acting_as, cli_main, dump_tables

from ledger.operations import transactions as operations, people
from ledger.store import identity
from ledger.store import cap_writes, dataset_writes, decoded_history, engines, running_totals, schema_migrations, sessions
from ledger.input.datasets import build_caps, build_dataset
from ledger.input.documents import read_document

DATASET = """\
dataset: survey
variables:
  - {name: income}
  - {name: region}
caps:
  - {subset: [income], epsilon: 100}
"""


def release_file(release_id: str, epsilon: str = "0.5", title: str = "Mean income", extra: str = "") -> str:
    return textwrap.dedent(f"""\
        dataset: survey
        releases:
          - {{id: {release_id}, title: {title}, reads: [income], mechanism: {{name: laplace, epsilon: "{epsilon}"}}{extra}}}
        """)


@pytest.fixture
def ledger(ledger_url, tmp_path):
    (tmp_path / "survey.yaml").write_text(DATASET, encoding="utf-8")
    with acting_as("ana"):
        assert cli_main(ledger_url, "dataset", "add", tmp_path / "survey.yaml").code == 0
    return ledger_url


def spent(url: str) -> float:
    return cli_main(url, "subset", "income", "--json").json()["epsilon"]


def test_recording_the_same_release_again_is_a_no_op_that_says_so(ledger, tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(release_file("r1"), encoding="utf-8")
    with acting_as("ana"):
        first = cli_main(ledger, "record", path)
    assert (first.code, first.out.splitlines()[0]) == (0, "recorded 1 release")
    before = dump_tables(ledger)
    with acting_as("ana"):
        again = cli_main(ledger, "record", path)
    assert again.code == 0, again.err
    assert again.out.strip() == "already recorded, identical: r1 (nothing written for it)"
    assert dump_tables(ledger) == before
    assert spent(ledger) == 0.5  # charged once


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
def test_a_retry_after_the_release_moved_on_is_still_the_same_release(ledger, tmp_path):
    """A file without status names a planned release; once it is approved and published, the
    same file is still that release, not a conflict."""
    path = tmp_path / "plan.yaml"
    path.write_text(release_file("r1"), encoding="utf-8")
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
        assert cli_main(ledger, "role", "grant", "carol", "approver").code == 0
    with acting_as("carol"):
        assert cli_main(ledger, "approve", "r1").code == 0
        assert cli_main(ledger, "publish", "r1").code == 0
    before = dump_tables(ledger)
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
    assert dump_tables(ledger) == before


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("changed, fields", [
    (release_file("r1", epsilon="0.6"), "mechanism, guarantees"),
    (release_file("r1", title="Median income"), "title"),
    (release_file("r1", extra=", status: published, published_at: \"2024-01-01T00:00:00Z\""),
     "status, published_at"),
    (release_file("r1", epsilon="0.6", title="Other").replace("reads: [income]", "reads: [income, region]"),
     "title, reads, mechanism, guarantees"),
])
def test_the_same_id_with_other_content_exits_2_naming_the_fields(ledger, tmp_path, changed, fields):
    path = tmp_path / "plan.yaml"
    path.write_text(release_file("r1"), encoding="utf-8")
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
    before = dump_tables(ledger)
    path.write_text(changed, encoding="utf-8")
    with acting_as("ana"):
        result = cli_main(ledger, "record", path)
    assert result.code == 2
    assert f"release id 'r1' is already recorded with different content (fields that differ: {fields})" in result.err
    assert "nothing was written" in result.err
    assert dump_tables(ledger) == before


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
def test_guarantees_a_file_stated_are_its_content_a_retry_without_them_differs(ledger, tmp_path):
    """A file stating no guarantees is compared by what it states (the mechanism): a recorded
    release whose guarantees were stated (here weaker than the mechanism's, epsilon 1) is not
    that file's release. (Its derivation may grow: tests/accounting/test_implied_gaussian.py.)"""
    path = tmp_path / "plan.yaml"
    path.write_text(release_file("r1", extra=", guarantees: [{epsilon: 1}]"), encoding="utf-8")
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
    before = dump_tables(ledger)
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
    path.write_text(release_file("r1"), encoding="utf-8")
    with acting_as("ana"):
        result = cli_main(ledger, "record", path)
    assert result.code == 2 and "(fields that differ: guarantees)" in result.err
    assert dump_tables(ledger) == before
    # none stated (an uncapped variable read exactly) is not what the mechanism implies either
    path.write_text(release_file("r2", extra=", guarantees: []").replace("[income]", "[region]"), encoding="utf-8")
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
    before = dump_tables(ledger)
    path.write_text(release_file("r2").replace("[income]", "[region]"), encoding="utf-8")
    with acting_as("ana"):
        result = cli_main(ledger, "record", path)
    assert result.code == 2 and "(fields that differ: guarantees)" in result.err
    assert dump_tables(ledger) == before


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
def test_a_batch_with_old_and_new_releases_records_only_the_new(ledger, tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(release_file("r1"), encoding="utf-8")
    with acting_as("ana"):
        assert cli_main(ledger, "record", path).code == 0
    both = release_file("r1") + "  - {id: r2, reads: [income], mechanism: {name: laplace, epsilon: \"0.25\"}}\n"
    path.write_text(both, encoding="utf-8")
    with acting_as("ana"):
        result = cli_main(ledger, "record", path)
    assert result.code == 0, result.err
    assert "already recorded, identical: r1" in result.out and "recorded 1 release" in result.out
    assert spent(ledger) == 0.75


def test_racing_retries_of_one_record_charge_once(ledger, tmp_path):
    """Six pipelines re-running the same `record` at once (after a time-out): every one exits
    0, exactly one records, and the cap is charged 0.5 once."""
    path = tmp_path / "plan.yaml"
    path.write_text(release_file("r1"), encoding="utf-8")
    engine = create_engine(ledger)
    try:
        pipelines = identity.authenticated(engine).name  # the operating-system user, or the database login
    finally:
        engine.dispose()
    with acting_as("ana"):
        assert cli_main(ledger, "role", "grant", pipelines, "steward").code == 0
    processes = [subprocess.Popen([sys.executable, "-m", "ledger", "--db", ledger, "record", str(path)],
                                  cwd=tmp_path, env=os.environ.copy(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outcomes = [(p.returncode, out) for p in processes for out, _ in [p.communicate(timeout=180)]]
    assert [code for code, _ in outcomes] == [0] * 6
    assert sum("recorded 1 release" in out for _, out in outcomes) == 1
    assert sum("already recorded, identical: r1" in out for _, out in outcomes) == 5
    assert spent(ledger) == 0.5
    caps = cli_main(ledger, "cap", "list", "--json").json()
    assert caps[0]["current"] == 0.5
    assert cli_main(ledger, "audit", "verify").code == 0


# --------------------------------------------------------------------------
# A stateful property: whatever mix of first recordings and retries, each distinct
# release is charged exactly once, and a conflicting retry changes nothing.
# --------------------------------------------------------------------------


class Retries(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        import tempfile

        self.directory = Path(tempfile.mkdtemp(prefix="retries-"))
        self.engine = engines.make_engine(f"sqlite:///{self.directory / 'ledger.db'}")
        schema_migrations.ensure_schema(self.engine)
        dataset_path = self.directory / "survey.yaml"
        dataset_path.write_text(DATASET, encoding="utf-8")
        document, _ = read_document(dataset_path)
        dataset, errors = build_dataset(document)
        caps, more = build_caps(document, dataset)
        assert not errors and not more
        with sessions.write_session(self.engine) as session:
            people.bootstrap(session, "ana")
            dataset_writes.add_dataset(session, dataset, "ana")
            for cap in caps:
                cap_writes.set_cap(session, cap, "ana")
        self.recorded: dict[str, Fraction] = {}  # id -> epsilon it was first recorded with
        self.count = 0

    def _record(self, release_id: str, epsilon: Fraction):
        self.count += 1
        path = self.directory / f"f{self.count}.yaml"
        path.write_text(release_file(release_id, epsilon=str(epsilon)), encoding="utf-8")
        return operations.record(self.engine, operations.release_builder([path], "ana"), "ana")

    @rule(release_id=st.sampled_from(["a", "b", "c"]), epsilon=st.sampled_from([Fraction(1, 4), Fraction(1, 2)]))
    def record(self, release_id, epsilon):
        if release_id in self.recorded and self.recorded[release_id] != epsilon:
            with pytest.raises(operations.InputErrors, match="fields that differ: mechanism, guarantees"):
                self._record(release_id, epsilon)
            return
        result = self._record(release_id, epsilon)
        if release_id in self.recorded:
            assert [r.id for r in result.unchanged] == [release_id] and not result.releases
        else:
            assert [r.id for r in result.releases] == [release_id] and not result.unchanged
            self.recorded[release_id] = epsilon

    @invariant()
    def each_release_is_charged_once(self):
        with Session(self.engine) as session:
            total = running_totals.cap_totals(session, "survey")["income"]
            releases = decoded_history.snapshot(session, "survey").releases
        assert set(releases) == set(self.recorded)
        assert total.spend.pure == sum(self.recorded.values(), Fraction(0))

    def teardown(self):
        self.engine.dispose()


Retries.TestCase.settings = settings(max_examples=8, stateful_step_count=8, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
test_retries_charge_each_release_once = Retries.TestCase


def test_a_retry_of_a_cancelled_release_is_refused_not_a_silent_no_op(tmp_path):
    """A retry is a no-op because the release is charged once already; a cancelled release is
    charged nothing (its reservation freed), so `record` of the same file after a cancellation
    must not answer exit 0 as if the release were reserved: a pipeline would go on with a
    release the ledger does not count. Refused (exit 2), naming the cancellation; nothing written."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "d.yaml").write_text(DATASET, encoding="utf-8")
    release = tmp_path / "r.yaml"
    release.write_text("dataset: survey\nreleases:\n"
                       "  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 1}}\n", encoding="utf-8")
    for args in (("dataset", "add", tmp_path / "d.yaml"), ("record", release), ("record", release),
                 ("cancel", "a", "--reason", "withdrawn")):
        assert cli_main(url, *args).code == 0, args
    refused = cli_main(url, "record", release)
    assert refused.code == 2, (refused.out, refused.err)
    assert "release id 'a' was cancelled" in refused.err, refused.err
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["current_exact"] == "0"
