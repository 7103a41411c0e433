"""Printed numbers are safe bounds (issue 2: "every printed bound is valid").

A loss is printed at or above its exact value, a headroom or a cap at or below it.
For JSON this is about the *text*: a float's shortest repr names a decimal, and that
decimal, read back exactly (Fraction of the text), is compared with the exact value.
"""

from __future__ import annotations

import json
import math
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
    exact, up = _stated(format_number(value))
    assert exact == value and up >= value
    exact, down = _stated(format_number(value, down=True))
    assert exact == value and down <= value
