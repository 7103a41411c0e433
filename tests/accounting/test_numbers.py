"""Printed numbers are safe bounds.

A loss is printed at or above its exact value, a headroom or a cap at or below it.
For JSON this is about the *text*: a float's shortest repr names a decimal, and that
decimal, read back exactly (Fraction of the text), is compared with the exact value.
"""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.numbers import format_number, to_json

F = Fraction
fractions = st.fractions(min_value=F(1, 10**9), max_value=F(10**6), max_denominator=10**9)


def written(value) -> Fraction:
    """The exact number a JSON text states."""
    return Fraction(json.dumps(value))


@given(fractions)
def test_a_loss_in_json_is_never_below_its_exact_value(value):
    assert written(to_json(value)) >= value


@given(fractions)
def test_a_headroom_in_json_is_never_above_its_exact_value(value):
    assert written(to_json(value, down=True)) <= value


@given(fractions)
def test_the_json_float_is_the_nearest_or_the_next_one_out(value):
    # safe, and no looser than it must be
    nearest = float(value)
    assert to_json(value) in (int(value), nearest, math.nextafter(nearest, math.inf))
    assert to_json(value, down=True) in (int(value), nearest, math.nextafter(nearest, -math.inf))


def test_exact_decimals_stay_exact_and_thirds_round_outwards():
    assert json.dumps(to_json(F(3, 10))) == "0.3"  # not 0.30000000000000004
    assert json.dumps(to_json(F(1, 10) * 10)) == "1"
    assert json.dumps(to_json(F(1, 3))) == "0.33333333333333337"
    assert json.dumps(to_json(F(1, 3), down=True)) == "0.3333333333333333"
    assert to_json(float("inf")) == "inf" and to_json(None) is None


def _stated(text: str) -> tuple[Fraction, Fraction]:
    """(exact part, approximation) of `1/3 (≈ 0.3334)`; a plain figure is both."""
    if " (≈ " in text:
        exact, approximation = text.removesuffix(")").split(" (≈ ")
        return Fraction(exact), Fraction(approximation)
    return Fraction(text), Fraction(text)


@given(fractions)
def test_text_figures_round_up_and_headroom_down(value):
    """Exact where the text is short; a value whose exact text is long is rounded alone (as
    a float is), on the safe side: up for a loss, down for a headroom."""
    exact, up = _stated(format_number(value))
    assert up >= value and (exact == value or len(str(value)) > 14)
    exact, down = _stated(format_number(value, down=True))
    assert down <= value and (exact == value or len(str(value)) > 14)
    if exact != value:  # rounded to 4 places (or 4 significant digits below 10^-4)
        assert up - down <= max(F(2, 10**4), value / 500)


def test_a_long_exact_figure_is_rounded_for_display():
    """An implied Gaussian's rho (12 digits) and a sum with it were printed whole
    (`this plan +0.0359257023278`, `after 4116656604751/45000000000000 (≈ 0.0915)`): rounded as
    the other figures are; --json keeps them exact (`*_exact`)."""
    assert format_number(F(359257023278, 10**13)) == "0.036"
    assert format_number(F(4116656604751, 45 * 10**12)) == "0.0915"
    assert format_number(F(40883343395249, 45 * 10**12), down=True) == "0.9085"
    assert format_number(F(1, 18)) == "1/18 (≈ 0.0556)" and format_number(F(1410673597, 10**9)) == "1.410673597"


def test_a_floats_value_is_shown_as_a_float_and_has_no_exact_form():
    """A subsampled Laplace's amplified epsilon, log(1 + beta (e^eps - 1)), is irrational: the
    ledger keeps the float bound's exact value, 357056814764685/2251799813685248, which is not an
    exact input and is never printed as a fraction or given as `epsilon_exact`. Shown as a float
    is, rounded up (down for a headroom), with no exact form."""
    from ledger.core.numbers import figure_fields, format_exact, format_number, from_float

    amplified = Fraction(357056814764685, 2251799813685248)
    assert from_float(amplified) and Fraction(0.15856) != amplified
    assert format_number(amplified) == "0.1586" and format_number(amplified, down=True) == "0.1585"
    assert format_exact(amplified) == "0.16"
    assert figure_fields("epsilon", amplified) == {"epsilon": to_json(amplified), "epsilon_exact": None}
    assert Fraction(repr(to_json(amplified))) >= amplified
    assert not from_float(Fraction(1, 2**20)) and not from_float(Fraction(3, 10**12))
    assert figure_fields("epsilon", Fraction(1, 1024))["epsilon_exact"] == "1/1024"


@given(st.integers(1, 10**12), st.integers(0, 12))
def test_an_exact_decimal_is_shown_whole_where_shorter_than_its_fraction(numerator, places):
    """`1410673597/1000000000 (≈ 1.4106)` is 1.410673597; a decimal longer than its fraction
    (1/1024 = 0.0009765625) keeps the fraction; every text states the value exactly or bounds it."""
    from ledger.core.numbers import format_number

    from decimal import Decimal

    value = Fraction(numerator, 10**places)
    text = format_number(value)
    decimal = format(Decimal(numerator).scaleb(-places).normalize(), "f")  # the exact decimal, shortest
    if value.denominator > 1 and len(decimal) < min(len(str(value)), 20) and "e" not in text:  # (1e-7: shorter)
        assert text == decimal
    if "/" not in text and "≈" not in text and "e" not in text:
        assert Fraction(text) == value


def _read_delta(text: str) -> Fraction:
    """The exact number a printed delta states (`2.5 × 10⁻⁷`, `0.999999`)."""
    if " × 10" not in text:
        return Fraction(text)
    mantissa, power = text.split(" × 10")
    return Fraction(mantissa) * Fraction(10) ** int(power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))


@given(st.fractions(min_value=F(1, 10**30), max_value=F(1), max_denominator=10**30))
def test_a_delta_is_printed_as_it_is_or_rounded_up(value):
    from ledger.core.numbers import format_delta

    printed = _read_delta(format_delta(value))
    assert printed >= value
    if printed != value:  # only a delta of more than 12 significant digits is rounded (to 4)
        assert value * (1 + F(1, 10**3)) >= printed


@given(st.integers(min_value=1, max_value=10**12 - 1), st.integers(min_value=0, max_value=25))
def test_a_delta_given_with_few_digits_is_printed_faithfully(digits, places):
    """`--delta 0.999999` printed `1 × 10⁰`: a delta as given is shown as it is."""
    from ledger.core.numbers import format_delta

    value = Fraction(digits, 10 ** (len(str(digits)) + places))  # below 1, at most 12 digits
    assert _read_delta(format_delta(value)) == value
    assert format_delta(F(999999, 10**6)) == "0.999999"
    assert format_delta(F(1, 10**10)) == "1 × 10⁻¹⁰"


wide_fractions = st.one_of(
    st.fractions(max_denominator=10**30),
    st.builds(lambda n, k: F(n, 2**k), st.integers(-2**70, 2**70), st.integers(0, 1200)),  # floats' values too
    st.builds(lambda n, d: F(n, d), st.integers(-10**400, 10**400), st.integers(1, 10**400)),
)


@given(wide_fractions)
def test_float_up_and_down_are_the_nearest_floats_on_each_side_exactly(value):
    """float_up is the smallest float at or above the exact value and float_down the largest at
    or below it (compared as exact Fractions), ∞ or the largest float past the range; a float's
    own value is itself."""
    from ledger.core.numbers import float_down, float_up

    up, down = float_up(value), float_down(value)
    if math.isinf(up):
        assert value > F(sys.float_info.max)
    else:
        assert F(up) >= value and (math.isinf(math.nextafter(up, -math.inf)) or F(math.nextafter(up, -math.inf)) < value)
    if math.isinf(down):
        assert value < -F(sys.float_info.max)
    else:
        assert F(down) <= value and (math.isinf(math.nextafter(down, math.inf)) or F(math.nextafter(down, math.inf)) > value)
    if not math.isinf(up) and not math.isinf(down) and F(up) == value:
        assert up == down
