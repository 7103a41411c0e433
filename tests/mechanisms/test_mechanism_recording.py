"""Mechanisms that run on data and record their own releases, through
`ledger.operations.recording.run_and_record` on a SQLite ledger per test.

Every expected value is worked out here from the parameters, by hand or by exact
enumeration, never read back from the code under test:
- guarantees: a clipped sum has replacement sensitivity upper - lower and
  add/remove sensitivity max(|lower|, |upper|); a mean with public n has
  (upper - lower)/n; a full crosstab has 2 under replacement (docs/explanation/model.md#variables-subsets-and-neighbours);
  Laplace scale = sensitivity/epsilon; Gaussian rho = sensitivity^2/(2 sigma^2)
  (Bun and Steinke 2016, Prop 1.6); Tan's Algorithm 1 is epsilon on the protected
  variable and exact on the margin (docs/explanation/model.md#a-release, docs/explanation/model.md#notes-on-the-papers-algorithms);
- Bailie's scale b = -(4/epsilon) ln(1 - p) (Bailie 2020); Zhang, Ohrimenko and
  Cummings' sigma^2 = (c V_ij d/(V_ii epsilon))^2 - (V_jj - V_ij^2/V_ii)/n with
  c^2 = 2 ln(1.25/delta) (section 4.3);
- subsampling: eps' = ln((e^eps beta + 1 - beta)/(1 - beta)) (Clifton et al.,
  Theorem 2), evaluated with mpmath at 50 digits;
- outputs and digests: the CSV of what run_and_record returned, and its SHA-256
  by hashlib.
"The input data is never stored" is checked by searching a dump of every table of
the SQLite file for values planted in the input that no output contains.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import secrets
import sqlite3
from fractions import Fraction
from pathlib import Path

import mpmath
import pandas as pd
import pytest
from sqlmodel import Session

from ledger.operations import transactions as operations
from ledger.store import cap_writes, dataset_writes, decoded_history, engines, schema_migrations, sessions
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.errors import InputErrors
from ledger.input.datasets import build_caps, build_dataset
from ledger.input.documents import parse_document
from ledger.operations import run_mechanisms
from ledger.operations.recording import run_and_record
from ledger.core.records import CHARGED_STATUSES, Notion, Relation, Release

F = Fraction
mpmath.mp.dps = 50

SURVEY_YAML = """\
dataset: survey
variables:
  - {name: region, classification: public, categories: [N, S]}
  - {name: sex, categories: [f, m]}
  - {name: income, classification: sensitive}
  - {name: firm}
  - {name: turnover, classification: sensitive}
  - {name: wages, classification: sensitive}
  - {name: bit}
  - {name: height}
  - {name: weight}
"""

# Values planted in the input that no output contains: a name in a column that is
# no variable of the dataset, contributor ids (p% outputs are cell totals), and an
# income far outside every clipping interval used below.
PLANTED_NAME = "Zebulon Quux-4471"
PLANTED_FIRM = "firm-ZQX-"
PLANTED_INCOME = "987654.321"

ALL_CELLS = [("N", "f"), ("N", "m"), ("S", "f"), ("S", "m")]  # every (region, sex) combination


def survey() -> pd.DataFrame:
    """Four records. wages = turnover / 10 for every contributor (Bailie's linear relation)."""
    return pd.DataFrame({
        "name": [PLANTED_NAME, "Ann", "Bo", "Cy"],
        "region": ["N", "N", "S", "S"],
        "sex": ["f", "m", "f", "m"],
        "income": [12.5, 40.0, float(PLANTED_INCOME), 7.25],
        "firm": [f"{PLANTED_FIRM}0001", f"{PLANTED_FIRM}0002", f"{PLANTED_FIRM}0003", f"{PLANTED_FIRM}0004"],
        "turnover": [100.0, 5.0, 3.0, 7.0],
        "wages": [10.0, 0.5, 0.3, 0.7],
        "bit": [1, 1, 0, 1],
        "height": [160.0, 172.0, 181.0, 168.0],
        "weight": [55.0, 70.0, 82.0, 64.0],
    })


# --------------------------------------------------------------------------
# A ledger per test
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Ledger:
    path: Path
    engine: object

    def run(self, name: str, data: pd.DataFrame, release_id: str, params: dict, **options):
        options.setdefault("seed", 20240611)
        return run_and_record(self.engine, name, data, dataset="survey", release_id=release_id,
                              params=params, actor="tester", **options)

    def releases(self) -> dict[str, Release]:
        with Session(self.engine) as session:
            return dict(decoded_history.snapshot(session, "survey").releases)

    def dump(self) -> list[str]:
        """Every table of the SQLite file, as SQL text."""
        connection = sqlite3.connect(self.path)
        try:
            return list(connection.iterdump())
        finally:
            connection.close()

    def cost(self, variable: str):
        """The DP total on {variable} over the charged releases: math.inf when unbounded."""
        with Session(self.engine) as session:
            snapshot = decoded_history.snapshot(session, "survey")
        charged = [r for r in snapshot.releases.values() if r.status in CHARGED_STATUSES]
        spend = LedgerIndex(snapshot.datasets["survey"].variable_names, charged).subset_cost({variable}).spend
        return math.inf if spend.unbounded else spend

    def set_caps(self, caps_yaml: str) -> None:
        document, errors = parse_document("caps.yaml", SURVEY_YAML + caps_yaml)
        assert not errors
        dataset, errors = build_dataset(document)
        assert not errors
        caps, errors = build_caps(document, dataset)
        assert not errors and caps
        with sessions.write_session(self.engine) as session:
            for cap in caps:
                cap_writes.set_cap(session, cap, "steward")


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    path = tmp_path / "l.db"
    engine = engines.make_engine(f"sqlite:///{path}")
    schema_migrations.ensure_schema(engine)
    document, errors = parse_document("survey.yaml", SURVEY_YAML)
    assert not errors
    dataset, errors = build_dataset(document)
    assert not errors
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "steward")
    yield Ledger(path, engine)
    engine.dispose()


def csv_of(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def assert_recorded_output(stored: Release, returned: pd.DataFrame) -> None:
    """The stored output is the CSV of what was returned, and its digest is that CSV's SHA-256."""
    assert stored.output == csv_of(returned)
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(stored.output)), returned.reset_index(drop=True),
                                  check_dtype=False)
    assert stored.output_digest == sha256(stored.output)


def assert_input_not_stored(ledger: Ledger) -> None:
    text = "\n".join(ledger.dump())
    assert "releases" in text and "audit_events" in text  # the dump covers the tables
    for planted in (PLANTED_NAME, PLANTED_FIRM, PLANTED_INCOME, "987654"):
        assert planted not in text, f"input value {planted!r} was stored in the ledger"


def only_new(ledger: Ledger, before: dict, *ids: str) -> dict[str, Release]:
    after = ledger.releases()
    assert set(after) - set(before) == set(ids), "exactly these releases are recorded"
    return {release_id: after[release_id] for release_id in ids}


def params(release: Release) -> dict:
    return dict(release.mechanism.params)


# --------------------------------------------------------------------------
# 1. Each mechanism records one release with its derived guarantee
# --------------------------------------------------------------------------


def test_crosstab_records_a_pure_guarantee_on_what_it_reads(ledger):
    before = ledger.releases()
    result = ledger.run("crosstab", survey(), "by-region-sex", {"columns": "region,sex", "epsilon": "1/2"})
    stored = only_new(ledger, before, "by-region-sex")["by-region-sex"]

    assert stored.reads == {"region", "sex"}
    (guarantee,) = stored.guarantees
    assert (guarantee.protects, guarantee.notion, guarantee.epsilon, guarantee.relation) == \
        ({"region", "sex"}, Notion.PURE, F(1, 2), Relation.REPLACE)
    assert stored.mechanism.name == "geometric"
    # replacement moves one count between two cells: sensitivity 2, scale 2 / (1/2) = 4
    p = params(stored)
    assert (p["columns"], p["epsilon"], p["relation"], p["sensitivity"], p["scale"]) == \
        (("region", "sex"), F(1, 2), "replace", 2, 4.0)
    # every combination of the categories, integer counts
    assert sorted(zip(result.output["region"], result.output["sex"])) == ALL_CELLS
    assert all(float(c).is_integer() for c in result.output["count"])
    assert_recorded_output(stored, result.output)
    assert stored == result.release
    assert ledger.cost("region").pure == F(1, 2) and ledger.cost("income").is_zero
    assert_input_not_stored(ledger)


@pytest.mark.parametrize("name, statistic, lower, upper, epsilon, relation, sensitivity", [
    # sum, replacement: one value moves across [lower, upper]: upper - lower
    ("laplace-sum", "sum", "-20", "100", "1/4", "replace", 120.0),
    # sum, add/remove: one value appears or vanishes: max(|lower|, |upper|)
    ("laplace-sum", "sum", "-20", "100", "1/4", "add-remove", 100.0),
    # mean over the public n = 4: (upper - lower) / n
    ("laplace-mean", "mean", "0", "100", "1/2", "replace", 25.0),
])
def test_laplace_records_epsilon_as_given(ledger, name, statistic, lower, upper, epsilon, relation, sensitivity):
    before = ledger.releases()
    result = ledger.run(name, survey(), "income", {"column": "income", "lower": lower, "upper": upper,
                                                   "epsilon": epsilon, "relation": relation})
    stored = only_new(ledger, before, "income")["income"]

    assert stored.reads == {"income"}
    (guarantee,) = stored.guarantees
    assert (guarantee.protects, guarantee.notion, guarantee.epsilon, guarantee.relation) == \
        ({"income"}, Notion.PURE, F(epsilon), Relation(relation))
    p = params(stored)
    assert stored.mechanism.name == "laplace"
    assert (p["column"], p["lower"], p["upper"], p["epsilon"], p["relation"]) == \
        ("income", float(lower), float(upper), F(epsilon), relation)
    assert p["sensitivity"] == sensitivity
    assert p["scale"] == sensitivity / float(F(epsilon))  # exact in binary for these values
    assert F(p["sensitivity"]) / F(p["scale"]) <= F(epsilon)
    if statistic == "mean":
        assert p["n"] == 4
    assert list(result.output.columns) == ["variable", "statistic", "value"]
    assert result.output.iloc[0, :2].tolist() == ["income", statistic]
    assert_recorded_output(stored, result.output)
    # the ledger's totals are for replacement neighbours: eps_replace <= 2 eps_add_remove (docs/explanation/model.md#variables-subsets-and-neighbours)
    assert ledger.cost("income").pure == F(epsilon) * (2 if relation == "add-remove" else 1)
    assert_input_not_stored(ledger)


@pytest.mark.parametrize("name, statistic, rho, sensitivity", [
    ("gaussian-sum", "sum", "1/2", 10.0),  # [0, 10]: sensitivity 10, sigma = 10 / sqrt(2 * 1/2) = 10
    ("gaussian-mean", "mean", "1/8", 2.5),  # 10 / n = 2.5, sigma = 2.5 / sqrt(1/4) = 5
])
def test_gaussian_records_rho_as_given(ledger, name, statistic, rho, sensitivity):
    before = ledger.releases()
    result = ledger.run(name, survey(), "g", {"column": "income", "lower": "0", "upper": "10", "rho": rho})
    stored = only_new(ledger, before, "g")["g"]

    (guarantee,) = stored.guarantees
    assert (guarantee.protects, guarantee.notion, guarantee.rho, guarantee.epsilon, guarantee.relation) == \
        ({"income"}, Notion.ZCDP, F(rho), None, Relation.REPLACE)
    p = params(stored)
    assert stored.mechanism.name == "gaussian"
    assert (p["rho"], p["lower"], p["upper"], p["sensitivity"]) == (F(rho), 0.0, 10.0, sensitivity)
    sigma = sensitivity / math.sqrt(2 * float(F(rho)))
    # rho = sensitivity^2 / (2 sigma^2) holds with the recorded sigma (rounded up, never below)
    assert p["sigma"] == pytest.approx(sigma, rel=1e-15)
    assert F(sensitivity) ** 2 / (2 * F(p["sigma"]) ** 2) <= F(rho)
    assert result.output.iloc[0, :2].tolist() == ["income", statistic]
    assert_recorded_output(stored, result.output)
    assert ledger.cost("income").rho == F(rho)
    assert_input_not_stored(ledger)


def test_tan_protects_only_the_protected_variable_and_keeps_margins_exact(ledger):
    before = ledger.releases()
    result = ledger.run("tan-consistent-counts", survey(), "t3",
                        {"margin": "region", "protected": "sex", "epsilon": "1"})
    stored = only_new(ledger, before, "t3")["t3"]
    assert result.derived is None

    assert stored.reads == {"region", "sex"}
    (guarantee,) = stored.guarantees
    assert (guarantee.protects, guarantee.notion, guarantee.epsilon, guarantee.relation) == \
        ({"sex"}, Notion.PURE, F(1), Relation.REPLACE)
    assert stored.exact_variables == {"region"}
    p = params(stored)
    assert (p["margin"], p["protected"], p["epsilon"], p["exact_variables"], p["noised_rows"]) == \
        ("region", "sex", F(1), ("region",), 2)
    assert 0 < p["pair_noise_exponent"] <= 1  # noise P(z) ~ e^(-a|z|) with a <= epsilon
    # margins by hand: N has 2 records, S has 2; integer cells
    totals = result.output.groupby("region")["count"].sum().to_dict()
    assert totals == {"N": 2, "S": 2}
    assert sorted(zip(result.output["region"], result.output["sex"])) == ALL_CELLS
    assert_recorded_output(stored, result.output)
    # the DP table: exact on the margin (∞), epsilon on the protected variable
    assert ledger.cost("region") == math.inf
    assert ledger.cost("sex").pure == F(1)
    assert_input_not_stored(ledger)


def test_tan_nonnegative_records_a_derived_release_that_reads_nothing(ledger):
    before = ledger.releases()
    result = ledger.run("tan-consistent-counts", survey(), "t3",
                        {"margin": "region", "protected": "sex", "epsilon": "1", "nonnegative": "true"})
    new = only_new(ledger, before, "t3", "t3-nonnegative")
    noisy, derived = new["t3"], new["t3-nonnegative"]
    assert result.release == noisy and result.derived == derived

    assert noisy.reads == {"region", "sex"} and noisy.guarantees[0].protects == {"sex"}
    assert derived.reads == frozenset() and derived.guarantees == ()
    assert derived.derived_from == ("t3",)
    assert derived.mechanism.name == "post-processing"
    # the noisy table and the non-negative one both keep the exact margins
    noisy_table = pd.read_csv(io.StringIO(noisy.output))
    assert noisy_table.groupby("region")["count"].sum().to_dict() == {"N": 2, "S": 2}
    assert noisy.output_digest == sha256(noisy.output)
    assert (result.output["count"] >= 0).all()
    assert result.output.groupby("region")["count"].sum().to_dict() == {"N": 2, "S": 2}
    assert_recorded_output(derived, result.output)
    # post-processing costs nothing: the totals are those of the noisy release alone
    assert ledger.cost("sex").pure == F(1) and ledger.cost("region") == math.inf
    assert_input_not_stored(ledger)


def test_p_percent_records_a_pufferfish_guarantee_and_no_dp_one(ledger):
    before = ledger.releases()
    result = ledger.run("p-percent", survey(), "pp", {"contributor": "firm", "linked": "turnover,wages",
                                                      "cells": "region", "p": "0.1", "epsilon": "1"})
    stored = only_new(ledger, before, "pp")["pp"]

    assert stored.reads == {"firm", "turnover", "wages", "region"}
    assert stored.guarantees == ()
    (pufferfish,) = stored.pufferfish
    assert pufferfish.kind == "p-percent"
    assert pufferfish.protects == {"turnover", "wages"}
    assert pufferfish.epsilon == F(1) and pufferfish.delta is None
    assert "(1-p)x" in pufferfish.secrets and "(1+p)x" in pufferfish.secrets
    assert "linear" in pufferfish.assumptions
    b = -(4 / 1) * math.log(1 - 0.1)  # Bailie 2020: b = -(4/epsilon) ln(1 - p) = 0.42144...
    p = params(stored)
    assert (p["p"], p["epsilon"], p["contributor"], p["linked"], p["cells"], p["protected_contributors"]) == \
        (F(1, 10), F(1), "firm", ("turnover", "wages"), ("region",), 4)
    assert p["laplace_scale"] == pytest.approx(b, rel=1e-14)
    assert dict(pufferfish.parameters)["laplace_scale"] == pytest.approx(b, rel=1e-14)
    # one draw per contributor, shared by its linked variables: wages = turnover / 10 survives
    assert sorted(result.output["region"]) == ["N", "S"]
    for turnover, wages in zip(result.output["turnover"], result.output["wages"]):
        assert turnover > 0 and turnover / wages == pytest.approx(10.0, rel=1e-12)
    assert_recorded_output(stored, result.output)
    # no DP guarantee: ∞ on everything it reads, nothing elsewhere
    for variable in ("firm", "turnover", "wages", "region"):
        assert ledger.cost(variable) == math.inf
    assert ledger.cost("income").is_zero
    assert_input_not_stored(ledger)


COVARIANCE = pd.DataFrame([[4.0, 3.0], [3.0, 9.0]], index=["height", "weight"], columns=["height", "weight"])


def test_attribute_gaussian_records_a_dataset_attribute_privacy_guarantee(ledger):
    before = ledger.releases()
    result = ledger.run("attribute-gaussian", survey(), "mean-weight",
                        {"query": "weight", "protected": "height", "covariance": COVARIANCE,
                         "diameters": "2", "epsilon": "1/2", "delta": "1e-5"})
    stored = only_new(ledger, before, "mean-weight")["mean-weight"]

    assert stored.reads == {"weight"}
    assert stored.guarantees == ()
    (pufferfish,) = stored.pufferfish
    assert pufferfish.kind == "dataset-attribute-privacy"
    assert pufferfish.protects == {"height"}
    assert (pufferfish.epsilon, pufferfish.delta) == (F(1, 2), F(1, 100000))
    assert "mean" in pufferfish.secrets
    assert "Gaussian" in pufferfish.assumptions and "covariance" in pufferfish.assumptions
    # Zhang et al. 4.3 by hand: Delta = |V_ij|/V_ii d = 3/4 * 2 = 3/2; c^2 = 2 ln(1.25/1e-5) = 2 ln 125000;
    # (c Delta/eps)^2 = 9 c^2 = 18 ln 125000; Var(F | g) = (9 - 9/4)/4 = 27/16
    sigma2 = 18 * math.log(125000) - 27 / 16
    p = params(stored)
    assert (p["query"], p["protected"], p["epsilon"], p["delta"], p["diameters"], p["n"]) == \
        ("weight", ("height",), F(1, 2), F(1, 100000), 2.0, 4)
    assert p["sigma2"] == pytest.approx(sigma2, rel=1e-12)
    recorded = dict(pufferfish.parameters)
    assert recorded["covariance"] == ((4.0, 3.0), (3.0, 9.0))  # the assumed covariance is recorded
    assert tuple(recorded["attributes"]) == ("height", "weight")
    assert result.output.iloc[0, :2].tolist() == ["weight", "mean"]
    assert_recorded_output(stored, result.output)
    assert ledger.cost("weight") == math.inf and ledger.cost("height").is_zero
    assert_input_not_stored(ledger)


def test_modular_sum_records_perfect_sample_privacy(ledger):
    before = ledger.releases()
    result = ledger.run("modular-sum", survey(), "parity", {"variable": "bit", "modulus": "2", "rows": "0,1"})
    everything = ledger.run("modular-sum", survey(), "parity-all", {"variable": "bit", "modulus": "2"})
    new = only_new(ledger, before, "parity", "parity-all")
    stored = new["parity"]

    assert stored.reads == {"bit"} and stored.guarantees == ()
    (pufferfish,) = stored.pufferfish
    assert pufferfish.kind == "perfect-sample-privacy"
    assert pufferfish.protects == {"bit"}
    assert "sample" in pufferfish.secrets
    assert "independent" in pufferfish.assumptions and "uniform" in pufferfish.assumptions
    assert dict(pufferfish.parameters) == {"modulus": 2, "n": 4, "rows": (0, 1), "variable": "bit"}
    assert params(stored) == {"variable": "bit", "modulus": 2, "rows": (0, 1)}
    # bits 1, 1, 0, 1: rows 0 and 1 give (1 + 1) mod 2 = 0; all rows give 3 mod 2 = 1
    assert result.output.to_dict("list") == {"variable": ["bit"], "statistic": ["sum mod 2"], "value": [0]}
    assert everything.output["value"].tolist() == [1]
    assert dict(new["parity-all"].pufferfish[0].parameters)["rows"] == (0, 1, 2, 3)
    assert_recorded_output(stored, result.output)
    assert ledger.cost("bit") == math.inf
    assert_input_not_stored(ledger)


# --------------------------------------------------------------------------
# 2. Budget first: refuse before the data is touched
# --------------------------------------------------------------------------


def spy_on(monkeypatch, name: str) -> list:
    calls: list = []
    definition = run_mechanisms.MECHANISMS[name]

    def run(data, params, rng):
        calls.append(len(data))
        return definition.run(data, params, rng)

    monkeypatch.setitem(run_mechanisms.MECHANISMS, name, dataclasses.replace(definition, run=run))
    return calls


def test_a_cap_that_would_break_refuses_before_the_mechanism_runs(ledger, monkeypatch):
    ledger.set_caps("caps:\n  - {subset: [income], epsilon: 1}\n")
    ledger.run("laplace-sum", survey(), "first", {"column": "income", "lower": "0", "upper": "10", "epsilon": "0.75"})
    calls = spy_on(monkeypatch, "laplace-sum")
    dump = ledger.dump()

    with pytest.raises(operations.BudgetRefused) as refused:  # 0.75 + 0.5 > 1
        ledger.run("laplace-sum", survey(), "second",
                   {"column": "income", "lower": "0", "upper": "10", "epsilon": "0.5"})
    assert "income" in str(refused.value)
    assert calls == [], "the mechanism ran although the budget check refused"
    assert ledger.dump() == dump

    ledger.run("laplace-sum", survey(), "fits", {"column": "income", "lower": "0", "upper": "10", "epsilon": "0.25"})
    assert calls == [4]  # 0.75 + 0.25 = 1 fits exactly, and runs once


def test_a_pufferfish_release_on_a_capped_variable_is_refused(ledger, monkeypatch):
    """No DP guarantee means ∞ on what it reads (docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#pufferfish-guarantees): any cap there breaks."""
    ledger.set_caps("caps:\n  - {subset: [bit], epsilon: 100}\n")
    calls = spy_on(monkeypatch, "modular-sum")
    dump = ledger.dump()
    with pytest.raises(operations.BudgetRefused):
        ledger.run("modular-sum", survey(), "parity", {"variable": "bit", "modulus": "2", "rows": "0,1"})
    assert calls == [] and ledger.dump() == dump


def test_subsampling_enters_the_budget_check_amplified(ledger, monkeypatch):
    """eps = 1 on 1 of 10 records costs ln((0.1 e + 0.9)/0.9) = 0.2639... < 0.3 (Clifton et al., Theorem 2)."""
    ledger.set_caps("caps:\n  - {subset: [income], epsilon: 0.3}\n")
    calls = spy_on(monkeypatch, "laplace-sum")
    ten = pd.concat([survey()] * 3).iloc[:10].reset_index(drop=True)
    query = {"column": "income", "lower": "0", "upper": "10", "epsilon": "1"}
    with pytest.raises(operations.BudgetRefused):
        ledger.run("laplace-sum", ten, "whole", query)
    assert calls == []
    ledger.run("laplace-sum", ten, "sampled", query, sample=1)
    assert calls == [1]


# --------------------------------------------------------------------------
# 3. Seeds
# --------------------------------------------------------------------------


LAPLACE_SUM = {"column": "income", "lower": "0", "upper": "100", "epsilon": "1"}


def test_without_a_seed_the_noise_is_seeded_from_secrets(ledger, monkeypatch):
    drawn = []

    def randbits(k):
        drawn.append(k)
        return 2**100 + 12345

    monkeypatch.setattr(secrets, "randbits", randbits)
    secure = ledger.run("laplace-sum", survey(), "secure", LAPLACE_SUM, seed=None)
    assert drawn == [128]
    monkeypatch.undo()
    # the same 128-bit seed given explicitly gives the same output: the secure draw *was* the seed
    explicit = ledger.run("laplace-sum", survey(), "explicit", LAPLACE_SUM, seed=2**100 + 12345)
    assert secure.release.output == explicit.release.output


def test_without_a_seed_two_runs_differ(ledger):
    first = ledger.run("laplace-sum", survey(), "a", LAPLACE_SUM, seed=None)
    second = ledger.run("laplace-sum", survey(), "b", LAPLACE_SUM, seed=None)
    assert first.release.output != second.release.output  # continuous noise: equal with probability 0


def test_an_explicit_seed_reproduces_the_output_and_draws_no_secret(ledger, monkeypatch):
    def no_secret(k):
        raise AssertionError("an explicit seed must not draw from secrets")

    monkeypatch.setattr(secrets, "randbits", no_secret)
    tan = {"margin": "region", "protected": "sex", "epsilon": "1"}
    first = ledger.run("tan-consistent-counts", survey(), "a", tan, seed=7)
    second = ledger.run("tan-consistent-counts", survey(), "b", tan, seed=7)
    assert first.release.output == second.release.output
    assert first.release.output_digest == second.release.output_digest
    first = ledger.run("laplace-sum", survey(), "c", LAPLACE_SUM, seed=7)
    second = ledger.run("laplace-sum", survey(), "d", LAPLACE_SUM, seed=7)
    assert first.output.equals(second.output)


# --------------------------------------------------------------------------
# 4. Subsampling (Clifton et al., Theorem 2; docs/explanation/model.md#subsampling)
# --------------------------------------------------------------------------


def theorem2(epsilon, n_sample: int, n_total: int) -> mpmath.mpf:
    beta = mpmath.mpf(n_sample) / n_total
    eps = mpmath.mpf(epsilon.numerator) / epsilon.denominator
    return mpmath.log((mpmath.e**eps * beta + 1 - beta) / (1 - beta))


def tight(epsilon, n_sample: int, n_total: int) -> mpmath.mpf:
    """ln(1 + beta (e^eps - 1)) (Balle, Barthe and Gaboardi 2018), what the ledger records."""
    beta = mpmath.mpf(n_sample) / n_total
    eps = mpmath.mpf(epsilon.numerator) / epsilon.denominator
    return mpmath.log(1 + beta * (mpmath.e**eps - 1))


def mp(value: Fraction) -> mpmath.mpf:
    return mpmath.mpf(value.numerator) / value.denominator


def records(n: int) -> pd.DataFrame:
    return pd.concat([survey()] * (n // 4 + 1)).iloc[:n].reset_index(drop=True)


def test_subsampling_records_theorem_2_where_it_helps(ledger):
    result = ledger.run("laplace-sum", records(10), "sampled", LAPLACE_SUM, sample=1)
    (guarantee,) = result.release.guarantees
    assert float(theorem2(F(1), 1, 10)) == pytest.approx(0.2639255943982554, abs=1e-15)  # Clifton et al.
    true = tight(F(1), 1, 10)  # by hand: ln(1 + 0.1 (e - 1)) = ln(1.17182818...) = 0.158565...
    assert float(true) == pytest.approx(math.log(1.1718281828459045), abs=1e-15)
    assert mp(guarantee.epsilon) >= true
    assert mp(guarantee.epsilon) - true <= 1e-12
    assert guarantee.notion == Notion.PURE and guarantee.relation == Relation.REPLACE
    p = params(result.release)
    assert (p["sample_size"], p["population"], p["epsilon_before_subsampling"]) == (1, 10, F(1))
    assert result.release == ledger.releases()["sampled"]


def test_subsampling_records_the_tight_bound_where_theorem_2_is_worse(ledger):
    # beta = 1/2: Clifton's ln(e + 1) = 1.31 > 1 gains nothing; the tight ln((e + 1)/2) = 0.620 does
    assert theorem2(F(1), 5, 10) > 1
    result = ledger.run("crosstab", records(10), "half", {"columns": "region", "epsilon": "1"}, sample=5)
    recorded = mp(result.release.guarantees[0].epsilon)
    assert tight(F(1), 5, 10) <= recorded <= tight(F(1), 5, 10) + 1e-12
    assert (params(result.release)["sample_size"], params(result.release)["population"]) == (5, 10)


@pytest.mark.parametrize("n_sample, n_total", [(2, 9), (3, 19), (8, 27)])
def test_the_amplified_epsilon_is_never_below_theorem_2(ledger, n_sample, n_total):
    """docs/explanation/model.md#composition/2.7: a recorded bound is never less than the true one (the module says
    "rounded up"). For these fractions the float computation, nudged up by one ulp, still
    lands below ln((e beta + 1 - beta)/(1 - beta)), by 1e-17 to 7e-17."""
    result = ledger.run("crosstab", records(n_total), "s", {"columns": "region", "epsilon": "1"}, sample=n_sample)
    recorded = result.release.guarantees[0].epsilon
    true = tight(F(1), n_sample, n_total)
    assert mp(recorded) >= true, f"recorded {recorded} = {mpmath.nstr(mp(recorded), 25)} < {mpmath.nstr(true, 25)}"


def test_subsampling_under_add_remove_neighbours_claims_no_theorem_2_bound(ledger):
    """Theorem 2 is for replacement neighbours with n and n' fixed (the subsampling module says
    so). Under add/remove, take a clipped sum on [-1, 1] (add/remove sensitivity 1, Laplace
    scale 1 for eps = 1), n = 10 records all -1 and n' = 1. Adding one record +1 gives 11
    records; for an output o >= 1 the density ratio is (10 e^-(o+1) + e^-(o-1))/(11 e^-(o+1)) =
    (10 + e^2)/11, a loss of ln((10 + e^2)/11) = 0.458 > Theorem 2's 0.264. Replacing a -1 by
    +1 instead gives 0.9 + 0.1 e^2, a loss of 0.494. Whatever is recorded must cover these."""
    data = records(10).assign(income=-1.0)
    query = {"column": "income", "lower": "-1", "upper": "1", "epsilon": "1", "relation": "add-remove"}
    try:
        result = ledger.run("laplace-sum", data, "ar", query, sample=1)
    except InputErrors:
        return  # refusing is sound
    (guarantee,) = result.release.guarantees
    if guarantee.relation == Relation.ADD_REMOVE:
        assert float(guarantee.epsilon) >= math.log((10 + math.e**2) / 11), \
            f"recorded {float(guarantee.epsilon):.4f} under add/remove; a neighbouring pair loses 0.458"
    else:
        assert float(guarantee.epsilon) >= math.log(0.9 + 0.1 * math.e**2)


def test_subsampling_a_gaussian_mechanism_is_refused(ledger):
    dump = ledger.dump()
    with pytest.raises(InputErrors) as refused:
        ledger.run("gaussian-sum", records(10), "g", {"column": "income", "lower": "0", "upper": "10", "rho": "1"},
                   sample=2)
    assert [e.field for e in refused.value.errors] == ["sample"]
    assert ledger.dump() == dump


# --------------------------------------------------------------------------
# Which cells exist must not depend on the data (noise.py's own invariant)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name, params_, column", [
    ("crosstab", {"columns": "region", "epsilon": "1"}, "region"),
    ("tan-consistent-counts", {"margin": "region", "protected": "sex", "epsilon": "1"}, "sex"),
])
def test_the_released_cells_do_not_depend_on_the_data(ledger, name, params_, column):
    """Two replacement neighbours on the protected variable: one record's value changes
    to a category no other record has. If the set of released cells follows the observed
    values, one output is impossible under the other input: an infinite privacy loss, while
    the ledger records epsilon = 1. The cells are the public categories of the dataset file;
    a value outside them is bad input (refused, nothing released), never a new cell."""
    first = survey()
    second = survey()
    second.loc[0, column] = "X"  # a record changes its value only in the protected variable

    def cells(data, release_id):
        try:
            return set(ledger.run(name, data, release_id, params_).output[column])
        except InputErrors:
            return "refused"

    public = {"region": {"N", "S"}, "sex": {"f", "m"}}[column]
    assert cells(first, "first") == public
    assert cells(second, "second") in ("refused", public)


# --------------------------------------------------------------------------
# Bad input: an InputErrors naming the field, nothing recorded
# --------------------------------------------------------------------------

CROSSTAB = {"columns": "region", "epsilon": "1"}
PPERCENT = {"contributor": "firm", "linked": "turnover,wages", "cells": "region", "p": "0.1", "epsilon": "1"}
ATTRIBUTE = {"query": "weight", "protected": "height", "covariance": COVARIANCE, "diameters": "2",
             "epsilon": "1/2", "delta": "1e-5"}
# eigenvalues 3 and -1: not positive semi-definite
NOT_PSD = pd.DataFrame([[1.0, 2.0], [2.0, 1.0]], index=["height", "weight"], columns=["height", "weight"])


@pytest.mark.parametrize("name, data, params_, field, shown", [
    ("p-percent", survey().assign(turnover=["100", "5", "three", "7"]), PPERCENT, "linked", "turnover"),
    ("p-percent", survey().assign(turnover=[100.0, -5.0, 3.0, 7.0]), PPERCENT, "linked", "negative"),
    ("laplace-sum", survey(), {**LAPLACE_SUM, "column": "region"}, "column", "numeric"),
    ("modular-sum", survey().assign(bit=[1, -1, 0, 1]), {"variable": "bit", "modulus": "2"}, "variable", "0..1"),
    ("p-percent", survey(), {**PPERCENT, "p": "0"}, "p", "(0, 1)"),
    ("p-percent", survey(), {**PPERCENT, "p": "1"}, "p", "(0, 1)"),
    ("p-percent", survey(), {**PPERCENT, "p": "1.5"}, "p", "(0, 1)"),
    ("crosstab", survey(), {**CROSSTAB, "epsilon": "0"}, "epsilon", "0"),
    ("crosstab", survey(), {**CROSSTAB, "epsilon": "-1"}, "epsilon", "-1"),
    ("crosstab", survey(), {**CROSSTAB, "epsilon": float("nan")}, "epsilon", "nan"),
    ("laplace-sum", survey(), {**LAPLACE_SUM, "epsilon": "nan"}, "epsilon", "nan"),
    ("gaussian-sum", survey(), {"column": "income", "lower": "0", "upper": "1", "rho": "0"}, "rho", "0"),
    ("attribute-gaussian", survey(), {**ATTRIBUTE, "delta": "0"}, "delta", "(0, 1)"),
    ("attribute-gaussian", survey(), {**ATTRIBUTE, "delta": "1"}, "delta", "(0, 1)"),
    ("attribute-gaussian", survey(), {**ATTRIBUTE, "delta": "-0.1"}, "delta", "(0, 1)"),
    ("crosstab", survey().iloc[:0], CROSSTAB, "data", "empty"),
    ("tan-consistent-counts", survey().drop(columns="sex"), {"margin": "region", "protected": "sex", "epsilon": "1"},
     None, "'sex'"),
    ("attribute-gaussian", survey().drop(columns="height"), ATTRIBUTE, "protected", "height"),
    ("attribute-gaussian", survey(), {**ATTRIBUTE, "covariance": NOT_PSD}, "covariance", "positive semi-definite"),
    ("no-such-mechanism", survey(), CROSSTAB, "mechanism", "no-such-mechanism"),
    ("crosstab", survey(), {"columns": "region"}, "epsilon", "missing"),
    ("laplace-mean", survey(), {"column": "income", "lower": "0", "epsilon": "1"}, "upper", "missing"),
])
def test_bad_input_names_the_field_and_records_nothing(ledger, monkeypatch, name, data, params_, field, shown):
    dump = ledger.dump()
    with pytest.raises(InputErrors) as refused:
        ledger.run(name, data, "bad", params_)
    text = str(refused.value)
    if field is not None:
        assert field in [error.field for error in refused.value.errors], text
    assert shown in text
    assert ledger.dump() == dump


@pytest.mark.parametrize("sample", [0, -1, 5])
def test_a_sample_size_outside_1_to_n_is_refused(ledger, sample):
    dump = ledger.dump()
    with pytest.raises(InputErrors) as refused:
        ledger.run("laplace-sum", survey(), "bad", LAPLACE_SUM, sample=sample)
    assert [e.field for e in refused.value.errors] == ["sample"]
    assert ledger.dump() == dump


def test_a_table_by_a_variable_without_public_categories_is_refused(ledger):
    # With categories taken from the data, a value seen in only one record adds a cell:
    # the table would reveal that record (an unbounded loss) while epsilon is recorded.
    data = pd.DataFrame({"region": ["N", "S"], "sex": ["f", "m"], "income": ["x", "y"], "other": [1, 2]})
    before = ledger.dump()
    with pytest.raises(InputErrors) as caught:
        ledger.run("crosstab", data, "by-income", {"columns": "income", "epsilon": "1"})
    assert caught.value.errors[0].field == "categories"
    assert "income" in caught.value.errors[0].message
    assert ledger.dump() == before


def test_a_value_outside_the_public_categories_is_refused(ledger):
    data = pd.DataFrame({"region": ["N", "X"], "sex": ["f", "m"], "income": [1, 2]})
    before = ledger.dump()
    with pytest.raises(InputErrors) as caught:
        ledger.run("crosstab", data, "by-region", {"columns": "region", "epsilon": "1"})
    assert "X" in str(caught.value)
    assert ledger.dump() == before
