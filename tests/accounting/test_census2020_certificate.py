"""The 2020 Census redistricting (P.L. 94-171) persons certificate, reproduced by the ledger.

The Disclosure Avoidance System fixed its budget in advance: total rho = (542/339)^2 =
293764/114921 (1 / global_scale^2), split over the geography levels and, within each level,
over the queries (Abowd et al. 2022, Tables 6-8; the production settings `person_US.ini`
and the strategy `ProductionCandidate20210527US_mult8_add02_dsepJune3` of the DAS 2020
production code). Each measurement is a discrete Gaussian with rho = total x level fraction x
query fraction. The certificate states, at delta 1e-10, by Canonne, Kamath and Steinke (2020),
Prop 12 / Cor 13 at the best order:

- overall: every measurement;
- per attribute: the measurements whose query tabulates it (the DAS counts a query for an
  attribute when it splits the attribute's values into two or more groups);
- Block-within-X: a person's block moved inside their unit X, which changes only the
  measurements at the levels below X.

`examples/census2020/` states this as a dataset, its caps and its releases; the location is
one variable per level (a unit's code within its parent), so Tan's subset of the variables
below X is the certificate's Block-within-X. The tables below are the published ones, copied
from the production settings; every expected figure is computed here from them, and the
epsilons by this file's own CKS minimisation over the order (mpmath), not the ledger's.
"""

from __future__ import annotations

import math
from fractions import Fraction as F
from functools import lru_cache
from pathlib import Path

import mpmath
import pytest
from support import cli_ok

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "census2020"
DELTA = F(1, 10**10)
TOTAL_RHO = F(542, 339) ** 2  # 1 / global_scale^2, global_scale = 339/542 (person_default.ini)

# geolevel_budget_prop, top down (person_US.ini)
LEVEL_SHARE = {"us": F(104, 4099), "state": F(1440, 4099), "county": F(447, 4099),
               "tract": F(687, 4099), "block-group": F(1256, 4099), "block": F(165, 4099)}
LEVELS = tuple(LEVEL_SHARE)  # top down
QUERIES = ("total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq", "hispanic * cenrace",
           "votingage * cenrace", "votingage * hispanic", "votingage * hispanic * cenrace", "detailed")


def _shares(*pairs):
    return tuple(None if pair is None else F(*pair) for pair in pairs)


# The strategy's query fractions per level, in QUERIES' order; the US level measures no total
# (the US population is invariant).
QUERY_SHARE = {
    "us": _shares(None, (52, 4097), (26, 4097), (26, 4097), (26, 4097), (26, 4097), (130, 4097), (130, 4097),
                  (26, 4097), (26, 241), (189, 241)),
    "state": _shares((3773, 4097), (6, 4097), (6, 4097), (6, 4097), (6, 4097), (6, 4097), (12, 4097),
                     (12, 4097), (6, 4097), (2, 241), (230, 4097)),
    "county": _shares((3126, 4097), (10, 4097), (10, 4097), (10, 4097), (10, 4097), (10, 4097), (28, 4097),
                      (28, 4097), (10, 4097), (101, 4097), (754, 4097)),
    "tract": _shares((1567, 4102), (4, 2051), (5, 4102), (5, 4102), (5, 4102), (5, 4102), (1933, 4102),
                     (10, 2051), (5, 4102), (67, 4102), (241, 2051)),
    "block-group": _shares((1705, 4099), (3, 4099), (3, 4099), (3, 4099), (3, 4099), (3, 4099), (1055, 4099),
                           (9, 4099), (3, 4099), (24, 4099), (1288, 4099)),
    "block": _shares((5, 4097), (9, 4097), (5, 4097), (5, 4097), (5, 4097), (5, 4097), (21, 4097), (21, 4097),
                     (5, 4097), (71, 4097), (3945, 4097)),
}

# The attributes each query tabulates (hhinstlevels groups hhgq; detailed is the full histogram)
TABULATES = {"total": set(), "hhinstlevels": {"hhgq"}, "detailed": {"hhgq", "votingage", "hispanic", "cenrace"}}
for _query in QUERIES:
    TABULATES.setdefault(_query, set(_query.split(" * ")))

# The certificate, at delta 1e-10, to its two decimals
CERTIFICATE = {"person": 17.14, "hhgq": 7.24, "votingage": 7.57, "hispanic": 10.04, "cenrace": 10.08,
               "block-within-block-group": 2.93, "block-within-tract": 9.38, "block-within-county": 11.70,
               "block-within-state": 13.05, "block-within-us": 16.89}
BLOCK_WITHIN = {"block-within-us": "us", "block-within-state": "state", "block-within-county": "county",
                "block-within-tract": "tract", "block-within-block-group": "block-group"}


def planned_rho() -> dict[tuple[str, str], F]:
    """Each measurement's rho: total x level fraction x query fraction."""
    return {(level, query): TOTAL_RHO * LEVEL_SHARE[level] * share
            for level in LEVELS for query, share in zip(QUERIES, QUERY_SHARE[level]) if share is not None}


def certificate_rho() -> dict[str, F]:
    """The summed rho behind each of the certificate's figures (zCDP composition adds rho)."""
    rho = planned_rho()
    sums = {"person": sum(rho.values())}
    for attribute in ("hhgq", "votingage", "hispanic", "cenrace"):
        sums[attribute] = sum(r for (_level, query), r in rho.items() if attribute in TABULATES[query])
    for name, unit in BLOCK_WITHIN.items():
        below = LEVELS[LEVELS.index(unit) + 1:]
        sums[name] = sum(r for (level, _query), r in rho.items() if level in below)
    return sums


@lru_cache
def cks_epsilon(rho: F, delta: F) -> mpmath.mpf:
    """Canonne, Kamath and Steinke (2020), Prop 12 / Cor 13: rho-zCDP gives (epsilon, delta)-DP with
    epsilon = inf over a > 1 of a rho + (ln(1/delta) + (a - 1) ln(1 - 1/a) - ln a) / (a - 1).
    Minimised over the order on a dense log grid of a - 1, then by golden section between the
    grid neighbours of its best point, in 50-digit arithmetic."""
    with mpmath.workdps(50):
        r = mpmath.mpf(rho.numerator) / rho.denominator
        log_inv_delta = mpmath.log(mpmath.mpf(delta.denominator) / delta.numerator)

        def bound(a):
            return a * r + (log_inv_delta + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)) / (a - 1)

        grid = [1 + mpmath.mpf(10) ** (k / mpmath.mpf(400)) for k in range(-2400, 1601)]  # a - 1 in [1e-6, 1e4]
        best = min(range(len(grid)), key=lambda i: bound(grid[i]))
        low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
        golden = (mpmath.sqrt(5) - 1) / 2
        for _ in range(200):
            left, right = high - golden * (high - low), low + golden * (high - low)
            if bound(left) < bound(right):
                high = right
            else:
                low = left
        return bound((low + high) / 2)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> str:
    """A fresh ledger holding the example: the dataset with its caps, then every measurement."""
    url = f"sqlite:///{tmp_path_factory.mktemp('census2020') / 'ledger.db'}"
    cli_ok(url, "dataset", "add", EXAMPLE / "census2020.dataset.yaml")
    cli_ok(url, "record", EXAMPLE / "census2020.releases.yaml")
    return url


def test_the_planned_rho_shares_are_the_published_fractions():
    assert sum(LEVEL_SHARE.values()) == 1
    assert all(sum(s for s in QUERY_SHARE[level] if s is not None) == 1 for level in LEVELS)
    assert TOTAL_RHO == F(293764, 114921)


def test_each_measurement_is_recorded_with_its_exact_rho(ledger):
    recorded = {r["id"]: r for r in cli_ok(ledger, "releases", "-d", "census2020", "--json").json()}
    expected = {f"{level}/{query.replace(' * ', '-x-')}": rho for (level, query), rho in planned_rho().items()}
    assert sorted(recorded) == sorted(expected)  # 6 levels x 11 queries, less the US total: 65
    for rid, rho in expected.items():
        (guarantee,) = recorded[rid]["guarantees"]
        assert (guarantee["notion"], F(guarantee["rho_exact"])) == ("zcdp", rho), rid
        assert set(guarantee["protects"]) == set(recorded[rid]["reads"]), rid


def test_what_a_measurement_reads_is_its_location_to_its_level_and_what_it_tabulates(ledger):
    location = ("state", "county", "tract", "block_group", "block")  # "us" reads no location
    recorded = {r["id"]: set(r["reads"]) for r in cli_ok(ledger, "releases", "-d", "census2020", "--json").json()}
    for (level, query) in planned_rho():
        expected = set(location[:LEVELS.index(level)]) | TABULATES[query]
        assert recorded[f"{level}/{query.replace(' * ', '-x-')}"] == expected


def test_each_cap_is_the_rho_of_the_measurements_that_read_its_subset_and_they_spend_all_of_it(ledger):
    caps = {c["cap"]: c for c in cli_ok(ledger, "cap", "list", "-d", "census2020", "--json").json()}
    assert sorted(caps) == sorted(CERTIFICATE)
    for name, rho in certificate_rho().items():
        assert (caps[name]["unit"], F(caps[name]["limit_exact"]), F(caps[name]["current_exact"])) == ("rho", rho, rho)
    assert caps["person"]["limit_exact"] == "293764/114921"


@pytest.mark.parametrize("variables, cap", [
    (["hhgq"], "hhgq"), (["votingage"], "votingage"), (["hispanic"], "hispanic"), (["cenrace"], "cenrace"),
    (["block"], "block-within-block-group"), (["block_group", "block"], "block-within-tract"),
    (["tract", "block_group", "block"], "block-within-county"),
    (["county", "tract", "block_group", "block"], "block-within-state"),
    (["state", "county", "tract", "block_group", "block"], "block-within-us"),
    (["all"], "person"),
])
def test_tans_subset_of_the_certificates_variables_composes_its_rho(ledger, variables, cap):
    shown = cli_ok(ledger, "subset", *variables, "-d", "census2020", "--json").json()
    assert F(shown["rho_exact"]) == certificate_rho()[cap]


@pytest.mark.parametrize("cap", sorted(CERTIFICATE))
def test_the_cap_stated_at_delta_1e10_is_the_certificates_figure(ledger, cap):
    caps = {c["cap"]: c for c in cli_ok(ledger, "cap", "list", "-d", "census2020", "--json").json()}
    shown = caps[cap]
    assert (F(shown["conversion_delta_exact"]), shown["conversion"]) == (DELTA, "CKS 2020")
    ours = cks_epsilon(certificate_rho()[cap], DELTA)
    assert round(float(ours), 2) == CERTIFICATE[cap]
    assert round(shown["epsilon_at_delta"], 2) == CERTIFICATE[cap]
    # the ledger's figure is a bound: never below the infimum, and within a rounding of it
    assert ours - mpmath.mpf("1e-9") <= shown["epsilon_at_delta"] <= ours + mpmath.mpf("1e-6")


def test_cap_list_says_each_rho_cap_as_epsilon_at_the_datasets_delta(ledger):
    text = cli_ok(ledger, "cap", "list", "-d", "census2020").out
    epsilon = math.ceil(float(cks_epsilon(TOTAL_RHO, DELTA)) * 10**4) / 10**4  # a bound: printed up, to 4 places
    rho = math.floor(float(TOTAL_RHO) * 10**4) / 10**4  # a cap: printed down
    assert (f"      the cap: rho 293764/114921 (≈ {rho}), epsilon {epsilon} at delta 1 × 10⁻¹⁰ (CKS 2020)"
            in text.splitlines())
