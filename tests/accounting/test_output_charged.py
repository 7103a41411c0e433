"""A release is charged from the moment an output of it exists (docs/explanation/accounting.md).

A steward who runs a release has seen its output, and whatever is published next may
depend on it: the transcript is charged for it whether or not it ever goes out. `cancel`
frees only a reservation whose output was never computed; once `run` has computed one (or
a release was recorded with its output digest), cancelling is refused (exit 1, nothing
written), through the command line and the Python API alike.

Figures are pure-epsilon sums worked out here by hand (basic composition, Tan Prop 3.4);
digests are SHA-256 of the output as printed. "Nothing written" is a dump of every table,
compared before and after.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from fractions import Fraction

import pytest

import ledger
from ledger.core.records import Guarantee, Mechanism, Notion, Release
from support import acting_as, cli_main, cli_ok, dump_tables

F = Fraction

SURVEY = """\
dataset: survey
variables:
  - {name: region, classification: public, categories: [N, S]}
  - {name: sex, categories: [f, m]}
  - {name: income, classification: sensitive}
"""

DATA = """\
region,sex,income
N,f,12
N,m,40
S,f,30
S,m,7
N,f,20
S,m,45
"""

# two small tables, planned in advance; the steward will publish one, chosen by what the big run showed
SMALL_TABLES = """\
dataset: survey
releases:
  - id: income-by-region
    reads: [income, region]
    mechanism: {name: laplace, epsilon: "1/10"}
  - id: income-by-sex
    reads: [income, sex]
    mechanism: {name: laplace, epsilon: "1/10"}
"""


@pytest.fixture
def survey(tmp_path):
    """A SQLite ledger with the survey dataset, an approver beside the steward, and the data as CSV."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    (tmp_path / "survey.yaml").write_text(SURVEY, encoding="utf-8")
    (tmp_path / "data.csv").write_text(DATA, encoding="utf-8")
    with acting_as("steward"):
        cli_ok(url, "dataset", "add", tmp_path / "survey.yaml")
        cli_ok(url, "role", "grant", "approver", "approver")
    return url, tmp_path


def run_income_sum(url, data, release_id, epsilon):
    """`run laplace-sum` on income, recorded planned: its output exists from now."""
    with acting_as("steward"):
        return cli_main(url, "run", "laplace-sum", "--data", data, "--id", release_id, "--seed", "7",
                        "-p", "column=income", "-p", "lower=0", "-p", "upper=50", "-p", f"epsilon={epsilon}")


def subset_epsilon(url, *variables) -> Fraction:
    figure = cli_ok(url, "subset", *variables, "--json").json()
    assert figure["notion"] == "pure"
    return F(figure["epsilon_exact"])


def test_a_release_that_was_run_stays_charged_after_an_attempted_cancel(survey):
    """The steward runs epsilon 10, looks, publishes one of two 0.1 tables and tries to cancel the rest."""
    url, folder = survey
    big = run_income_sum(url, folder / "data.csv", "look-first", 10)
    assert big.code == 0, big.err
    seen = hashlib.sha256(big.out.encode("utf-8")).hexdigest()  # the output the steward looked at

    (folder / "small.yaml").write_text(SMALL_TABLES, encoding="utf-8")
    with acting_as("steward"):
        cli_ok(url, "record", folder / "small.yaml")
    with acting_as("approver"):
        cli_ok(url, "approve", "income-by-sex")
        cli_ok(url, "publish", "income-by-sex")
    with acting_as("steward"):
        cli_ok(url, "cancel", "income-by-region", "--reason", "the other table was chosen")

    before = dump_tables(url)
    with acting_as("steward"):
        refused = cli_main(url, "cancel", "look-first", "--reason", "only a look")
    assert refused.code == 1, (refused.out, refused.err)
    assert dump_tables(url) == before
    (line,) = [line for line in refused.err.splitlines() if "look-first" in line]
    assert "its output exists" in line and seen[:16] in line
    assert "an output that exists stays charged" in line
    assert "Leave it planned and unpublished" in line

    # the transcript depends on the epsilon-10 output and on the one table published:
    # 10 + 1/10 on income (the cancelled table was never run, and is freed)
    assert subset_epsilon(url, "income") == F(10) + F(1, 10)
    assert subset_epsilon(url, "income", "sex") == F(10) + F(1, 10)
    assert subset_epsilon(url, "region") == 0
    statuses = {r["id"]: r["status"] for r in cli_ok(url, "releases", "--json").json()}
    assert statuses == {"look-first": "planned", "income-by-sex": "published", "income-by-region": "cancelled"}


def test_run_and_cancel_cycles_cannot_spend_a_cap_twice(survey):
    """Under a pure cap of 1 on income, the first run of 0.9 stays charged, so the second is refused."""
    url, folder = survey
    with acting_as("steward"):
        cli_ok(url, "cap", "set", "income", "--epsilon", "1")
    outcomes = []
    for cycle in range(20):
        ran = run_income_sum(url, folder / "data.csv", f"cycle-{cycle}", "0.9")
        with acting_as("steward"):
            cancelled = cli_main(url, "cancel", f"cycle-{cycle}", "--reason", "try again")
        outcomes.append((ran.code, cancelled.code))
    # the first run is admitted (0.9 <= 1) and cannot be cancelled; every later one would make
    # 0.9 + 0.9 = 1.8 > 1 and is refused, so there is nothing of it to cancel (no such release: exit 2)
    assert outcomes == [(0, 1)] + [(1, 2)] * 19

    (cap,) = cli_ok(url, "cap", "list", "--json").json()
    assert F(cap["current_exact"]) == F(9, 10)
    assert [d["release"] for d in cap["drivers"]] == ["cycle-0"]
    assert "spent 0.9" in cli_ok(url, "cap", "list").out


def test_cancelling_a_planned_release_that_was_never_run_frees_it(survey):
    url, folder = survey
    with acting_as("steward"):
        cli_ok(url, "cap", "set", "income", "--epsilon", "1")
    (folder / "small.yaml").write_text(SMALL_TABLES, encoding="utf-8")
    with acting_as("steward"):
        cli_ok(url, "record", folder / "small.yaml")
    assert subset_epsilon(url, "income") == F(1, 10) + F(1, 10)

    with acting_as("steward"):
        done = cli_ok(url, "cancel", "income-by-region", "--reason", "not needed", "--json").json()
    assert (done["ok"], done["status"]) == (True, "cancelled")
    assert subset_epsilon(url, "income") == F(1, 10)
    (cap,) = cli_ok(url, "cap", "list", "--json").json()
    assert F(cap["current_exact"]) == F(1, 10)


def test_a_refused_cancel_in_json_says_why_with_exit_1(survey):
    url, folder = survey
    ran = run_income_sum(url, folder / "data.csv", "looked", 1)
    assert ran.code == 0, ran.err
    digest = hashlib.sha256(ran.out.encode("utf-8")).hexdigest()
    recorded_at = {r["id"]: r["recorded_at"] for r in cli_ok(url, "releases", "--json").json()}["looked"]

    before = dump_tables(url)
    with acting_as("steward"):
        refused = cli_main(url, "cancel", "looked", "--reason", "changed my mind", "--json")
    assert refused.code == 1
    body = refused.json()
    assert (body["ok"], body["exit_code"]) == (False, 1)
    assert f"recorded {recorded_at}" in body["refused"] and digest[:16] in body["refused"]
    (error,) = body["errors"]
    assert (error["file"], error["field"]) == ("release looked", "status")
    assert dump_tables(url) == before


def test_the_derived_table_of_a_run_stays_charged_too(survey):
    """tan-consistent-counts with nonnegative: both tables are outputs that exist."""
    url, folder = survey
    with acting_as("steward"):
        ran = cli_main(url, "run", "tan-consistent-counts", "--data", folder / "data.csv", "--id", "t", "--seed", "3"
    , "-p", "margin=region", "-p", "protected=sex", "-p", "epsilon=1",
                       "-p", "nonnegative=true")
    assert ran.code == 0, ran.err
    before = dump_tables(url)
    for release_id in ("t-nonnegative", "t"):
        with acting_as("steward"):
            refused = cli_main(url, "cancel", release_id, "--reason", "not needed")
        assert refused.code == 1 and "its output exists" in refused.err, (release_id, refused.err)
    assert dump_tables(url) == before
    assert subset_epsilon(url, "sex") == 1  # Tan's Algorithm 1 at epsilon 1 on the protected variable


def test_the_python_api_refuses_to_cancel_a_release_whose_output_exists(survey):
    url, folder = survey
    with acting_as("steward"):
        book = ledger.open(url)
        assert run_income_sum(url, folder / "data.csv", "looked", 2).code == 0
        output = "variable,statistic,value\nincome,sum,151.3\n"
        digest = hashlib.sha256(output.encode("utf-8")).hexdigest()
        computed_elsewhere = Release(id="computed-elsewhere", dataset="survey", reads=frozenset({"income"}),
                                     mechanism=Mechanism("laplace", (("epsilon", F(1, 2)),)),
                                     guarantees=(Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1, 2)),))
        book.record(replace(computed_elsewhere, output_digest=digest))
        reserved_only = replace(computed_elsewhere, id="reserved-only")
        book.record(reserved_only)
        assert book.subset(["income"]).exact == F(2) + F(1, 2) + F(1, 2)

        before = dump_tables(url)
        for release_id, shown in (("looked", None), ("computed-elsewhere", digest[:16])):
            with pytest.raises(ledger.Refused) as caught:
                book.cancel(release_id, reason="not needed")
            assert "its output exists" in caught.value.error.message
            assert shown is None or shown in caught.value.error.message
        assert dump_tables(url) == before

        assert book.cancel("reserved-only", reason="not needed").status.value == "cancelled"
        assert book.subset(["income"]).exact == F(2) + F(1, 2)
