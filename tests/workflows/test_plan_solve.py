"""`plan solve`: planned releases' noise solved from the budgets left (ledger/operations/solve.py).

Every expected figure is computed here independently: the 2020 Census allocation from the
published fractions (test_census2020_certificate's tables), the PipelineDP-style splits by
their closed forms (a pure split, Gaussian DP's mu from scipy's root of Dong, Roth and Su 2022,
Cor 2.13) and by PipelineDP's own budget accountants, water-filling by hand; and every solved file is judged by `check` itself.
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import pandas as pd
import pipeline_dp
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_dp.aggregate_params import MechanismType
from scipy import optimize, stats
from support import cli_main, cli_ok
from test_census2020_certificate import (
    CERTIFICATE,
    EXAMPLE,
    LEVEL_SHARE,
    LEVELS,
    QUERIES,
    QUERY_SHARE,
    TABULATES,
    TOTAL_RHO,
    cks_epsilon,
    planned_rho,
)

import ledger
from ledger.core.errors import InputErrors, Refused

LOCATION = ("state", "county", "tract", "block_group", "block")
LEVEL_READS = {level: LOCATION[:i] for i, level in enumerate(LEVELS)}  # us reads no location


def census_plan() -> dict:
    """The persons measurements as a plan: each a discrete Gaussian weighted by its level
    fraction x query fraction (the published strategy), no rho given."""
    releases = []
    for level in LEVELS:
        for query, share in zip(QUERIES, QUERY_SHARE[level]):
            if share is None:
                continue
            reads = [*LEVEL_READS[level], *sorted(TABULATES[query])]
            releases.append({"id": f"{level}/{query.replace(' * ', '-x-')}", "reads": reads,
                             "mechanism": "discrete-gaussian", "weight": str(LEVEL_SHARE[level] * share)})
    return {"dataset": "census2020", "releases": releases}


def fresh(dataset: dict) -> ledger.Ledger:
    book = ledger.open("sqlite://")
    book.add_dataset(dataset)
    return book


def scaled_down(release_file: dict, factor: F = F(99, 100)) -> dict:
    """The release file with every release's noise multiplied by `factor`."""
    releases = []
    for entry in release_file["releases"]:
        entry = yaml.safe_load(yaml.safe_dump(entry))
        mechanism = entry["mechanism"]
        if mechanism["name"] == "gaussian":
            mechanism["sigma"] = str(F(mechanism["sigma"]) * factor)
        elif mechanism["name"] == "declared":
            entry["guarantees"][0]["rho"] = str(F(entry["guarantees"][0]["rho"]) / (factor * factor))
        else:
            mechanism["scale"] = str(F(mechanism["scale"]) * factor)
            mechanism["epsilon"] = str(F(mechanism["epsilon"]) / factor)
        releases.append(entry)
    return {**release_file, "releases": releases}


# --------------------------------------------------------------------------
# The 2020 Census allocation
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def census():
    book = ledger.open("sqlite://")
    book.add_dataset(EXAMPLE / "census2020.dataset.yaml")
    return book, book.solve(census_plan())


def test_census_weights_solve_to_the_published_rho_exactly(census):
    _book, frame = census
    expected = {f"{level}/{query.replace(' * ', '-x-')}": rho for (level, query), rho in planned_rho().items()}
    solved = dict(zip(frame["id"], frame["value"]))
    assert set(frame["parameter"]) == {"rho"}
    assert solved == expected  # Fractions: exactly
    assert sum(solved.values()) == TOTAL_RHO


def test_census_solved_file_spends_every_cap_exactly_and_gives_the_certificate(census):
    book, frame = census
    assert book.check(frame.attrs["release_file"]).ok
    book.record(frame.attrs["release_file"])
    for check in book.caps():
        assert check.after == check.cap.rho, check.cap.name
        assert round(float(cks_epsilon(check.after, F(1, 10**10))), 2) == CERTIFICATE[check.cap.name]


def test_census_noise_one_percent_smaller_is_refused(census):
    _book, frame = census
    fresh_book = ledger.open("sqlite://")
    fresh_book.add_dataset(EXAMPLE / "census2020.dataset.yaml")
    assert not fresh_book.check(scaled_down(frame.attrs["release_file"])).ok


def test_census_expected_error_is_the_discrete_gaussian_sigma(census):
    _book, frame = census
    row = frame.set_index("id").loc["block/detailed"]
    rho = TOTAL_RHO * LEVEL_SHARE["block"] * F(3945, 4097)
    assert row["std"] == pytest.approx(1 / math.sqrt(2 * float(rho)), rel=1e-12)
    assert row["halfwidth95"] == pytest.approx(row["std"] * math.sqrt(2 * math.log(40)), rel=1e-12)


# --------------------------------------------------------------------------
# PipelineDP's case: one budget split across a count, a sum and a mean
# --------------------------------------------------------------------------

AGGREGATES = [("count", 1, 1), ("sum", 100, 2), ("mean", F(1, 2), 1)]  # (id, sensitivity, weight)


def aggregates_plan(family: str) -> dict:
    return {"dataset": "shop", "releases": [{"id": name, "reads": ["spend"], "mechanism": family,
                                             "sensitivity": str(sens), "weight": weight}
                                            for name, sens, weight in AGGREGATES]}


def shop(cap: dict) -> dict:
    return {"dataset": "shop", "delta": "1e-6", "variables": [{"name": "spend"}, {"name": "region"}],
            "caps": [{"subset": ["spend"], **cap}]}


def test_laplace_split_of_a_pure_budget_is_the_weighted_split_exactly():
    book = fresh(shop({"epsilon": 1}))
    frame = book.solve(aggregates_plan("laplace")).set_index("id")
    total = sum(w for *_, w in AGGREGATES)
    for name, sensitivity, weight in AGGREGATES:
        epsilon = F(weight, total)
        assert frame.loc[name, "value"] == epsilon
        assert frame.loc[name, "std"] == pytest.approx(math.sqrt(2) * float(sensitivity / epsilon), rel=1e-12)
        assert frame.loc[name, "halfwidth95"] == pytest.approx(float(sensitivity / epsilon) * math.log(20), rel=1e-12)
    assert book.check(frame.attrs["release_file"]).ok
    assert not book.check(scaled_down(frame.attrs["release_file"])).ok


def gdp_mu(epsilon: float, delta: float) -> float:
    """mu with delta(epsilon) = delta for mu-GDP (Dong, Roth and Su 2022, Cor 2.13), by scipy."""
    def excess(mu):
        return (stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)
                - delta)
    return optimize.brentq(excess, 1e-6, 50, xtol=1e-15, rtol=1e-15)


def test_gaussian_split_of_a_gaussian_dp_budget_matches_the_closed_form():
    book = fresh(shop({"epsilon": 1, "delta": "1e-6", "filter": "gaussian"}))
    frame = book.solve(aggregates_plan("gaussian")).set_index("id")
    mu, total = gdp_mu(1.0, 1e-6), sum(w for *_, w in AGGREGATES)
    for name, sensitivity, weight in AGGREGATES:  # mu_i^2 = mu^2 w_i / sum w
        sigma = float(sensitivity) / (mu * math.sqrt(weight / total))
        assert float(frame.loc[name, "value"]) == pytest.approx(sigma, rel=1e-8)
        assert frame.loc[name, "halfwidth95"] == pytest.approx(stats.norm.ppf(0.975) * frame.loc[name, "std"])
    assert set(frame["binding_cap"]) == {"spend"}
    assert book.check(frame.attrs["release_file"]).ok
    assert not book.check(scaled_down(frame.attrs["release_file"])).ok


def test_laplace_split_of_a_pure_budget_is_pipelinedps_naive_split():
    book = fresh(shop({"epsilon": 1}))
    frame = book.solve(aggregates_plan("laplace")).set_index("id")
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1, total_delta=0)
    specs = {name: accountant.request_budget(MechanismType.LAPLACE, sensitivity=float(sensitivity), weight=weight)
             for name, sensitivity, weight in AGGREGATES}
    accountant.compute_budgets()
    for name, spec in specs.items():
        assert float(frame.loc[name, "value"]) == pytest.approx(spec.eps, rel=1e-12)


def test_gaussian_split_never_has_more_noise_than_pipelinedps_pld_split():
    """PipelineDP's PLD accountant bisects one noise scale against a pessimistic PLD of the
    composition, each mechanism's sigma = sensitivity * scale / weight; the ledger's Gaussian-DP
    budget gives sigma_i = sensitivity / (mu sqrt(w_i / sum w)). With PipelineDP's weights set to
    sqrt(w_i) both split the same way, and PipelineDP's sigmas are upper bounds within its
    discretisation: the ledger's are at most those and within 1% of them. (PipelineDP 0.3 builds
    each Gaussian's PLD from that sigma at sensitivity 1, so it is asked for unit sensitivities and
    its sigmas scaled by each release's sensitivity: a Gaussian's sigma is linear in it.)"""
    book = fresh(shop({"epsilon": 1, "delta": "1e-6", "filter": "gaussian"}))
    frame = book.solve(aggregates_plan("gaussian")).set_index("id")
    accountant = pipeline_dp.PLDBudgetAccountant(total_epsilon=1, total_delta=1e-6)
    specs = {name: accountant.request_budget(MechanismType.GAUSSIAN, sensitivity=1, weight=math.sqrt(weight))
             for name, _, weight in AGGREGATES}
    accountant.compute_budgets()
    for name, sensitivity, _ in AGGREGATES:
        theirs = float(sensitivity) * specs[name].noise_standard_deviation
        assert theirs * 0.99 < float(frame.loc[name, "value"]) <= theirs


@pytest.mark.parametrize("kind", ["running", "renyi"])
def test_laplace_split_of_an_approximate_budget_never_gets_less_than_basic_composition(kind):
    book = fresh(shop({"epsilon": 1, "delta": "1e-6", "filter": kind}))
    frame = book.solve(aggregates_plan("laplace")).set_index("id")
    total = sum(w for *_, w in AGGREGATES)
    ratios = {name: frame.loc[name, "value"] / F(weight, total) for name, _, weight in AGGREGATES}
    assert all(r >= 1 if kind == "running" else r > 0 for r in ratios.values())
    assert max(ratios.values()) / min(ratios.values()) < 1 + F(1, 10**9)  # shares keep their weights
    assert book.check(frame.attrs["release_file"]).ok
    assert not book.check(scaled_down(frame.attrs["release_file"])).ok


# --------------------------------------------------------------------------
# Water-filling, fixed parameters, recorded spend
# --------------------------------------------------------------------------


def two_caps() -> dict:
    return {"dataset": "d", "variables": [{"name": "x"}, {"name": "y"}],
            "caps": [{"name": "tight", "subset": ["x"], "epsilon": 1}, {"name": "slack", "subset": ["y"], "epsilon": 3}]}


def test_a_release_on_a_slack_cap_takes_what_the_binding_cap_leaves_it():
    book = fresh(two_caps())
    frame = book.solve({"dataset": "d", "releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1},
        {"id": "b", "reads": ["x", "y"], "mechanism": "laplace", "weight": 1},
        {"id": "c", "reads": ["y"], "mechanism": "geometric", "weight": 1}]}).set_index("id")
    # tight binds at t = 1/2 (a, b); slack then has 3 - 1/2 for c
    assert list(frame["value"]) == [F(1, 2), F(1, 2), F(5, 2)]
    assert list(frame["binding_cap"]) == ["tight", "tight", "slack"]
    alpha = math.exp(-2.5)
    assert frame.loc["c", "std"] == pytest.approx(math.sqrt(2 * alpha) / (1 - alpha))
    tail = lambda k: 2 * alpha ** (k + 1) / (1 + alpha)  # P(|X| > k), two-sided geometric
    k = frame.loc["c", "halfwidth95"]
    assert tail(k) <= 0.05 < tail(k - 1)


def test_fixed_releases_and_recorded_spend_leave_the_rest_to_the_weights():
    book = fresh(two_caps())
    book.record({"dataset": "d", "releases": [{"id": "old", "reads": ["x"],
                                               "mechanism": {"name": "laplace", "epsilon": "1/5"}}]})
    frame = book.solve({"dataset": "d", "releases": [
        {"id": "fixed", "reads": ["x"], "mechanism": "laplace", "scale": 10},
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 3},
        {"id": "b", "reads": ["x"], "mechanism": "laplace", "weight": 1}]}).set_index("id")
    room = 1 - F(1, 5) - F(1, 10)
    assert frame.loc["fixed", "value"] == F(1, 10) and pd.isna(frame.loc["fixed", "binding_cap"])
    assert (frame.loc["a", "value"], frame.loc["b", "value"]) == (room * 3 / 4, room / 4)


def test_laplace_under_a_rho_cap_solves_the_quadratic():
    book = fresh({"dataset": "d", "variables": [{"name": "x"}], "caps": [{"subset": ["x"], "rho": "1/2"}]})
    frame = book.solve({"dataset": "d", "releases": [
        {"id": "g", "reads": ["x"], "mechanism": "gaussian", "weight": 1},
        {"id": "l", "reads": ["x"], "mechanism": "laplace", "weight": 1}]}).set_index("id")
    t = (-1 + math.sqrt(1 + 4 * 0.5 * 0.5)) / (2 * 0.5)  # t + t^2 / 2 = 1/2
    assert float(frame.loc["l", "value"]) == pytest.approx(t, rel=1e-10)
    assert float(frame.loc["g", "value"]) == pytest.approx(1 / math.sqrt(2 * t), rel=1e-10)


# --------------------------------------------------------------------------
# Random plans: the solved file is what check accepts, at the boundary
# --------------------------------------------------------------------------

VARIABLES = ("v1", "v2", "v3", "v4")
CAP_KINDS = {"pure": {"epsilon": "3/2"}, "rho": {"rho": "1/3"}, "running": {"epsilon": 2, "delta": "1e-6",
             "filter": "running"}, "gaussian": {"epsilon": 2, "delta": "1e-6", "filter": "gaussian"},
             "renyi": {"epsilon": 2, "delta": "1e-6", "filter": "renyi"}}


@st.composite
def plans(draw):
    kind = draw(st.sampled_from(sorted(CAP_KINDS)))
    families = {"pure": ["laplace", "geometric"], "gaussian": ["gaussian"]}.get(
        kind, ["laplace", "geometric", "gaussian", "discrete-gaussian"])
    caps = [{"name": "all", "subset": "all", **CAP_KINDS[kind]}]
    for i, subset in enumerate(draw(st.lists(st.sets(st.sampled_from(VARIABLES), min_size=1), max_size=2))):
        caps.append({"name": f"c{i}", "subset": sorted(subset), **CAP_KINDS[draw(st.sampled_from(
            ["rho", "running", "renyi"] if kind not in ("pure", "gaussian") else [kind]))]})
    releases = []
    for i in range(draw(st.integers(1, 5))):
        family = draw(st.sampled_from(families))
        share = {"weight": draw(st.integers(1, 5))} if i == 0 or draw(st.booleans()) else FIXED[family]
        if "weight" in share and draw(st.booleans()):
            share[draw(st.sampled_from(["max_std", "max_halfwidth95"]))] = draw(st.sampled_from([2, 20, 200]))
        releases.append({"id": f"r{i}", "reads": sorted(draw(st.sets(st.sampled_from(VARIABLES), min_size=1))),
                         "mechanism": family, "sensitivity": draw(st.sampled_from([1, 2, "1/3"])), **share})
    history = [{"id": "old", "reads": sorted(draw(st.sets(st.sampled_from(VARIABLES), min_size=1))),
                "mechanism": {"name": "gaussian", "sigma": 30, "sensitivity": 1} if "gaussian" in families[0]
                else {"name": "laplace", "epsilon": "1/20"}}] if draw(st.booleans()) else []
    dataset = {"dataset": "p", "delta": "1e-6", "variables": [{"name": v} for v in VARIABLES], "caps": caps}
    return dataset, history, {"dataset": "p", "releases": releases}


FIXED = {"laplace": {"epsilon": "1/50"}, "geometric": {"scale": 40}, "gaussian": {"sigma": 30},
         "discrete-gaussian": {"rho": "1/2000"}}


@given(numerator=st.integers(-10**12, 10**12), twos=st.integers(0, 60), fives=st.integers(0, 60),
       other=st.sampled_from([1, 1, 3, 7, 9]))
def test_a_solved_parameter_is_written_as_the_exact_number_it_is(numerator, twos, fives, other):
    """9/32 is written 0.28125, never 0.2812: a release file states the very fraction solved, so its
    epsilon and sensitivity / scale agree (and 1/3 stays 1/3)."""
    from ledger.core.numbers import to_fraction
    from ledger.operations.plan_noise import entry_text

    value = F(numerator, 2**twos * 5**fives * other)
    assert to_fraction(entry_text(value)) == value


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_a_solved_plan_passes_check_and_one_percent_less_noise_fails(case):
    dataset, history, plan = case
    book = fresh(dataset)
    if history:
        book.record({"dataset": "p", "releases": history})
    try:
        frame = book.solve(plan)
    except Refused as refused:  # only a floor can make these plans infeasible: the refusal names it
        assert "accuracy floors" in refused.error.message and refused.error.source.startswith("cap p/")
        return
    assert book.check(frame.attrs["release_file"]).ok
    assert not book.check(scaled_down(frame.attrs["release_file"])).ok
    for entry, row in zip(plan["releases"], frame.itertuples()):
        assert row.std <= float(entry.get("max_std", math.inf))
        assert row.halfwidth95 <= float(entry.get("max_halfwidth95", math.inf))


# --------------------------------------------------------------------------
# Refusals and bad input
# --------------------------------------------------------------------------


def test_an_accuracy_floor_no_cap_allows_is_refused_naming_cap_and_release():
    book = fresh(two_caps())
    with pytest.raises(Refused) as refused:
        book.solve({"dataset": "d", "releases": [
            {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1, "max_std": 1},
            {"id": "c", "reads": ["y"], "mechanism": "laplace", "weight": 1, "max_std": 1}]})
    # a needs epsilon sqrt(2) > 1, the whole of tight; c needs sqrt(2) of slack's 3
    assert refused.value.error.source == "cap d/tight"
    assert "a (max_std 1)" in refused.value.error.message and " c " not in refused.value.error.message


def test_a_floor_takes_its_share_first_and_the_others_share_the_rest():
    book = fresh(two_caps())
    frame = book.solve({"dataset": "d", "releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1, "max_std": "1.5"},
        {"id": "b", "reads": ["x"], "mechanism": "laplace", "weight": 1},
        {"id": "c", "reads": ["x"], "mechanism": "laplace", "weight": 2}]}).set_index("id")
    floor = math.sqrt(2) / 1.5  # Laplace std sqrt(2) / epsilon
    a, b, c = frame["value"]
    assert floor <= a <= floor * (1 + 1e-8) and frame.loc["a", "std"] <= 1.5
    assert a + b + c == 1 and c == 2 * b  # the rest by weight, the cap spent exactly
    assert set(frame["binding_cap"]) == {"tight"}


def test_a_fixed_parameter_beyond_its_own_floor_is_bad_input():
    book = fresh(two_caps())
    with pytest.raises(InputErrors) as bad:
        book.solve({"dataset": "d", "releases": [
            {"id": "a", "reads": ["x"], "mechanism": "laplace", "scale": 10, "max_std": 1}]})
    assert bad.value.errors[0].field == "releases[0]" and "beyond its floor" in bad.value.errors[0].message


def test_a_gaussian_under_a_pure_cap_is_refused_naming_the_cap():
    book = fresh(two_caps())
    with pytest.raises(Refused) as refused:
        book.solve({"dataset": "d", "releases": [{"id": "g", "reads": ["x"], "mechanism": "gaussian", "weight": 1}]})
    assert refused.value.error.source == "cap d/tight" and refused.value.error.message.endswith(": g")


def test_plan_solve_cli_writes_the_file_check_accepts(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(two_caps()))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"releases": [
        {"id": "a", "title": "A count", "reads": ["x"], "mechanism": "laplace", "weight": 1}]}))
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    run = cli_ok(url, "plan", "solve", tmp_path / "plan.yaml", "-d", "d", "--out", tmp_path / "out.yaml")
    assert "tight" in run.out and "wrote 1 releases" in run.out
    written = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert written["releases"][0]["mechanism"] == {"name": "laplace", "epsilon": "1", "scale": "1",
                                                   "sensitivity": "1"}
    cli_ok(url, "check", tmp_path / "out.yaml")


def test_plan_solve_cli_refusal_exits_1_and_writes_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(two_caps()))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1, "max_halfwidth95": 2}]}))
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    run = cli_main(url, "plan", "solve", tmp_path / "plan.yaml", "--out", tmp_path / "out.yaml")
    assert run.code == 1 and "cap d/tight" in run.err and "a (max_halfwidth95 2)" in run.err
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize("release, field", [
    ({"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1, "epsilon": 1}, "releases[0]"),
    ({"id": "a", "reads": ["x"], "mechanism": "laplace", "sigma": 1}, "releases[0].sigma"),
    ({"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": "-1"}, "releases[0].weight"),
    ({"id": "a", "reads": ["nope"], "mechanism": "laplace", "weight": 1}, "releases[0].reads"),
    ({"id": "a", "reads": ["x"], "mechanism": "poisson", "weight": 1}, "releases[0].mechanism"),
])
def test_plan_solve_cli_bad_input_exits_2_naming_file_and_field(tmp_path, release, field):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(two_caps()))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"releases": [release]}))
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    run = cli_main(url, "plan", "solve", tmp_path / "plan.yaml", "--out", tmp_path / "out.yaml")
    assert run.code == 2 and "plan.yaml" in run.err and field in run.err, run.err
    assert not (tmp_path / "out.yaml").exists()


def test_a_weighted_release_no_cap_bounds_is_bad_input():
    book = fresh(two_caps() | {"variables": [{"name": "x"}, {"name": "y"}, {"name": "z"}]})
    with pytest.raises(InputErrors) as bad:
        book.solve({"dataset": "d", "releases": [{"id": "z", "reads": ["z"], "mechanism": "laplace", "weight": 1}]})
    assert bad.value.errors[0].field == "releases[0].weight"


# --------------------------------------------------------------------------
# plan record, plan diff
# --------------------------------------------------------------------------


def test_plan_record_reserves_exactly_the_budget_left_and_a_second_finds_none(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(two_caps()))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1},
        {"id": "c", "reads": ["y"], "mechanism": "laplace", "weight": 2}]}))
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    assert "recorded 2 planned releases" in cli_ok(url, "plan", "record", tmp_path / "plan.yaml").out
    book = ledger.open(url)
    assert {c.cap.name: c.after for c in book.caps()} == {"tight": 1, "slack": 3}
    assert {r.id: r.status.value for r in book.releases()} == {"a": "planned", "c": "planned"}
    again = cli_main(url, "plan", "record", tmp_path / "plan.yaml")
    assert again.code == 2 and "releases[0].id" in again.err and "already recorded" in again.err
    (tmp_path / "more.yaml").write_text(yaml.safe_dump({"releases": [
        {"id": "more", "reads": ["x"], "mechanism": "laplace", "weight": 1}]}))
    full = cli_main(url, "plan", "record", tmp_path / "more.yaml")
    assert full.code == 1 and "cap d/tight" in full.err and "admits none of them" in full.err


def test_plan_diff_gives_each_release_old_new_and_relative_change(tmp_path):
    book = fresh(two_caps())
    old = book.solve({"dataset": "d", "releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1},
        {"id": "b", "reads": ["x"], "mechanism": "laplace", "weight": 1}]}).attrs["release_file"]
    new = book.solve({"dataset": "d", "releases": [
        {"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1},
        {"id": "b", "reads": ["x"], "mechanism": "laplace", "weight": 3},
        {"id": "g", "reads": ["y"], "mechanism": "geometric", "weight": 1}]}).attrs["release_file"]
    diff = book.plan_diff(old, new).set_index("id")
    assert (diff.loc["a", "old"], diff.loc["a", "new"]) == (F(1, 2), F(1, 4))
    assert diff.loc["a", "change"] == pytest.approx(-0.5) and diff.loc["b", "change"] == pytest.approx(0.5)
    assert diff.loc["g", "old"] is None and diff.loc["g", "new"] == 3
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(old))
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(new))
    url = f"sqlite:///{tmp_path / 'l.db'}"
    cli_ok(url, "init")
    out = cli_ok(url, "plan", "diff", tmp_path / "old.yaml", tmp_path / "new.yaml").out
    assert "-50.0000%" in out and "+50.0000%" in out and "added" in out


def test_a_planned_id_already_recorded_is_bad_input_named_in_the_plan():
    book = fresh(two_caps())
    book.record({"dataset": "d", "releases": [{"id": "a", "reads": ["x"],
                                               "mechanism": {"name": "laplace", "epsilon": "1/10"}}]})
    with pytest.raises(InputErrors) as bad:
        book.solve({"dataset": "d", "releases": [{"id": "a", "reads": ["x"], "mechanism": "laplace", "weight": 1}]})
    assert (bad.value.errors[0].source, bad.value.errors[0].field) == ("<plan document>", "releases[0].id")
