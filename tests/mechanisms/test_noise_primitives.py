"""Noise primitives and basic noisy queries: laws, sensitivities, recorded guarantees."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from ledger.mechanisms import noise
from ledger.mechanisms.errors import MechanismInputError


def test_unseeded_generators_differ_and_seeded_ones_repeat():
    assert noise.make_rng(None).integers(0, 2**62) != noise.make_rng(None).integers(0, 2**62)
    assert noise.make_rng(7).integers(0, 2**62, size=5).tolist() == noise.make_rng(7).integers(0, 2**62, size=5).tolist()


def test_two_sided_geometric_has_the_stated_law():
    # P(Z = z) = (1 - r)/(1 + r) r^|z| with r = e^(-1/scale); Var Z = 2r/(1 - r)^2
    scale, runs = 2.0, 200_000
    draws = noise.two_sided_geometric(noise.make_rng(1), scale, size=runs)
    assert draws.dtype == np.int64
    r = math.exp(-1 / scale)
    for z in range(-4, 5):
        expected = (1 - r) / (1 + r) * r ** abs(z)
        standard_error = math.sqrt(expected * (1 - expected) / runs)
        assert abs((draws == z).mean() - expected) < 5 * standard_error
    variance = 2 * r / (1 - r) ** 2
    assert abs(draws.mean()) < 5 * math.sqrt(variance / runs)
    assert abs(draws.var() / variance - 1) < 0.03


def test_sensitivity_belongs_to_the_neighbour_relation():
    # docs/explanation/model.md#variables-subsets-and-neighbours: replacing moves one count between two cells; adding changes one
    assert noise.histogram_sensitivity("replace") == 2
    assert noise.histogram_sensitivity("add-remove") == 1
    assert noise.sum_sensitivity(-3.0, 10.0, "replace") == 13.0
    assert noise.sum_sensitivity(-3.0, 10.0, "add-remove") == 10.0
    assert noise.sum_sensitivity(-30.0, 10.0, "add-remove") == 30.0
    assert noise.mean_sensitivity(0.0, 100.0, 50, "replace") == 2.0
    with pytest.raises(MechanismInputError) as error:
        noise.mean_sensitivity(0.0, 100.0, 50, "add-remove")
    assert error.value.field == "relation"


def test_ledger_relation_enum_is_accepted():
    from ledger.core.records import Relation

    assert noise.histogram_sensitivity(Relation.ADD_REMOVE) == 1


PEOPLE = pd.DataFrame(
    {
        "sex": pd.Categorical(["f", "m", "f", "f"], categories=["f", "m", "x"]),
        "region": ["north", "south", "south", "north"],
        "income": [10.0, 250.0, -5.0, 40.0],
    }
)


def test_contingency_table_has_every_combination_with_exact_counts():
    table = noise.contingency_table(PEOPLE, ["sex", "region"])
    assert list(table.index) == [
        ("f", "north"), ("f", "south"), ("m", "north"), ("m", "south"), ("x", "north"), ("x", "south"),
    ]
    assert table.tolist() == [2, 1, 0, 1, 0, 0]  # counted by hand from PEOPLE


def test_public_categories_are_used_and_values_outside_them_refused():
    table = noise.contingency_table(PEOPLE, ["region"], {"region": ["north", "south", "east"]})
    assert table.to_dict() == {"north": 2, "south": 2, "east": 0}
    with pytest.raises(MechanismInputError) as error:
        noise.contingency_table(PEOPLE, ["region"], {"region": ["north"]})
    assert error.value.field == "categories" and "'south'" in str(error.value)


@pytest.mark.parametrize(("relation", "sensitivity"), [("replace", 2), ("add-remove", 1)])
def test_noisy_crosstab_scale_and_guarantee(relation, sensitivity):
    noisy, record = noise.noisy_crosstab(PEOPLE, ["sex", "region"], 0.5, relation=relation, rng=noise.make_rng(3))
    assert len(noisy) == 6 and noisy.dtype == np.int64
    assert record.sensitivity == sensitivity
    assert record.scale == pytest.approx(sensitivity / 0.5)
    # the recorded epsilon is never below sensitivity/scale, read exactly
    assert Fraction(sensitivity) / Fraction(record.scale) <= Fraction(1, 2)
    assert record.epsilon == 0.5 and record.relation == relation and record.notion == "pure"


def test_exact_fraction_epsilon_stays_exact_and_bounds_the_scale():
    epsilon = Fraction(104, 4099)
    _, record = noise.noisy_crosstab(PEOPLE, ["sex"], epsilon, rng=noise.make_rng(0))
    assert record.epsilon is epsilon
    assert Fraction(2) / Fraction(record.scale) <= epsilon


def test_count_of_all_records_is_public_under_replacement():
    count, record = noise.noisy_count(PEOPLE, 1.0, rng=noise.make_rng(0))
    assert count == 4 and record.sensitivity == 0 and record.scale == 0 and record.epsilon == 0
    _, unbounded = noise.noisy_count(PEOPLE, 1.0, relation="add-remove", rng=noise.make_rng(0))
    assert unbounded.sensitivity == 1 and unbounded.scale == 1.0 and unbounded.epsilon == 1.0


def test_count_with_a_predicate_has_sensitivity_one():
    rng = noise.make_rng(5)
    results = [noise.noisy_count(PEOPLE, 1.0, where=(PEOPLE["region"] == "south").to_numpy(), rng=rng) for _ in range(4000)]
    assert results[0][1].sensitivity == 1 and results[0][1].scale == 1.0
    values = np.array([value for value, _ in results])
    r = math.exp(-1.0)
    assert abs(values.mean() - 2) < 5 * math.sqrt(2 * r / (1 - r) ** 2 / 4000)


def test_laplace_sum_clips_and_has_the_stated_spread():
    # clipped to [0, 100]: 10 + 100 + 0 + 40 = 150; scale (100 - 0)/0.5 = 200 under replacement
    rng = noise.make_rng(11)
    runs = [noise.laplace_sum(PEOPLE, "income", 0.0, 100.0, 0.5, rng=rng) for _ in range(4000)]
    values = np.array([value for value, _ in runs])
    record = runs[0][1]
    assert record.sensitivity == 100.0 and record.scale == 200.0 and record.bounds == (0.0, 100.0)
    assert abs(values.mean() - 150) < 5 * math.sqrt(2) * 200 / math.sqrt(4000)
    assert abs(values.std() / (math.sqrt(2) * 200) - 1) < 0.06


def test_laplace_mean_uses_the_public_n():
    _, record = noise.laplace_mean(PEOPLE, "income", 0.0, 100.0, 1.0, rng=noise.make_rng(0))
    assert record.sensitivity == 25.0 and record.scale == 25.0 and record.n == 4


def test_gaussian_sum_is_rho_zcdp():
    # Bun and Steinke Prop 1.6: rho = Delta^2/(2 sigma^2); Delta = max(|-50|, |100|) = 100 under add/remove
    _, record = noise.gaussian_sum(PEOPLE, "income", -50.0, 100.0, 0.125, relation="add-remove", rng=noise.make_rng(0))
    assert record.sensitivity == 100.0
    assert record.sigma == pytest.approx(100 / math.sqrt(0.25))
    assert Fraction(100) ** 2 / (2 * Fraction(record.sigma) ** 2) <= Fraction(1, 8)
    assert record.notion == "zcdp"


def test_gaussian_mean_spread():
    rng = noise.make_rng(2)
    values = np.array([noise.gaussian_mean(PEOPLE, "income", 0.0, 100.0, 0.5, rng=rng)[0] for _ in range(4000)])
    sigma = (100 / 4) / math.sqrt(1.0)  # Delta = 25, sigma = Delta/sqrt(2 rho)
    assert abs(values.mean() - 37.5) < 5 * sigma / math.sqrt(4000)
    assert abs(values.std() / sigma - 1) < 0.05


from hypothesis import given, settings, strategies as st  # noqa: E402

_BOUND = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(_BOUND, _BOUND, st.integers(min_value=1, max_value=10_000), st.sampled_from(["0.3", "1", "0.1", "2.5"]),
       st.sampled_from(["replace", "add-remove"]))
def test_the_recorded_guarantee_bounds_the_exact_sensitivity_of_the_float_bounds(a, b, n, epsilon, relation):
    """The sensitivity a sum or mean really has is that of the float bounds it clips to, computed
    exactly ((upper - lower) / n as fractions of the floats' binary values). The noise scale is
    worked out from the recorded sensitivity as the ledger reads a float (its shortest decimal
    form), so that reading must not fall below the exact one: (1 - 0) / 3 as a float is
    0.3333333333333333 < 1/3, and the recorded epsilon was then below the true one by 1e-17."""
    lower, upper = sorted((a, b))
    if not lower < upper:
        return
    exact_sum = (Fraction(upper) - Fraction(lower) if relation == "replace"
                 else max(abs(Fraction(lower)), abs(Fraction(upper))))
    assert Fraction(repr(noise.sum_sensitivity(lower, upper, relation))) >= exact_sum
    bound = Fraction(epsilon)
    data = pd.DataFrame({"v": np.linspace(lower, upper, n)})
    _, record = noise.laplace_sum(data, "v", lower, upper, float(epsilon), relation=relation, rng=noise.make_rng(0))
    assert exact_sum / Fraction(record.scale) <= bound
    if relation == "replace":
        exact_mean = (Fraction(upper) - Fraction(lower)) / n
        assert Fraction(repr(noise.mean_sensitivity(lower, upper, n))) >= exact_mean
        _, record = noise.laplace_mean(data, "v", lower, upper, float(epsilon), rng=noise.make_rng(0))
        assert exact_mean / Fraction(record.scale) <= bound
        _, record = noise.gaussian_mean(data, "v", lower, upper, float(epsilon), rng=noise.make_rng(0))
        assert exact_mean ** 2 / (2 * Fraction(record.sigma) ** 2) <= bound  # rho = Delta^2 / (2 sigma^2)
