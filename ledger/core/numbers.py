"""Exact numbers for privacy parameters, and how they are shown.

Invariant: a value the user writes exactly stays exact. Every epsilon, delta
and rho read from a file becomes a `fractions.Fraction`: integers and decimal
strings exactly ("0.1" is 1/10), YAML/JSON floats through their shortest
decimal form (0.1 is 1/10, not 0.1000000000000000055...), and fractions
written as strings ("104/4099") as they are. So ten releases of 0.1 total
exactly 1.

Only conversions that are irrational by nature (the zCDP-to-epsilon
conversion, e^epsilon in group privacy) produce floats, and those are rounded
*up*. Display rounding is also upward: a printed bound is never below the
true one.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from typing import Union, overload

Number = Union[Fraction, float]

INF = math.inf
"""Unbounded loss: no certified bound. Shown as ∞ / "inf", never as a number."""

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class NumberError(ValueError):
    """A value that is not a finite number (the loader turns it into a sourced error)."""


WRITE_A_NUMBER = 'write a decimal such as 0.5 or a fraction such as "1/2"'
# A number as text: a decimal (ASCII digits, an optional exponent) or a fraction of two whole
# numbers. Not the forms Python's Fraction also takes ("1_000", other scripts' digits).
_DECIMAL_OR_FRACTION = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+/[0-9]+")
# A number as a YAML file may write it unquoted: a decimal without a leading zero. YAML 1.1 reads
# 017 as 15, 1:30 as 90, 0x10 as 16 and 1_000 as 1000; none of those is what a reader sees.
_PLAIN_DECIMAL = re.compile(r"[-+]?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def plain_decimal(text: str) -> bool:
    """`text` is a plain decimal: 2, -0.5, 1.5e+2; not 017, 0x10, 0o17, 1_000, 1:30, .inf."""
    return _PLAIN_DECIMAL.fullmatch(text) is not None


MAX_NUMBER_TEXT = 400  # characters of a number written as text
MAX_EXPONENT = 1000  # |exponent| of a number written as text (1e-1000 .. 1e1000)
_MAX_MAGNITUDE = 10**300  # beyond, the figures could not be drawn or compared as floats
_EXPONENT = re.compile(r"[eE]\s*([+-]?\d+)")


def _exponent_too_large(text: str) -> bool:
    found = _EXPONENT.search(text)
    return found is not None and (len(found.group(1).lstrip("+-")) > 5 or abs(int(found.group(1))) > MAX_EXPONENT)


def to_fraction(value: object) -> Fraction:
    """Parse an int, float or string ("0.1", "1e-9", "104/4099") exactly.

    Raises NumberError for booleans, NaN, infinities and anything unparsable.
    """
    if isinstance(value, bool):
        raise NumberError(f"expected a number, found {value!r}: {WRITE_A_NUMBER}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_MAGNITUDE:
            raise NumberError(f"expected a number of at most 1e300 (a float's range), found an integer of "
                              f"{len(str(abs(value)))} digits: {WRITE_A_NUMBER}")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NumberError(f"expected a finite number, found {value!r}: {WRITE_A_NUMBER}")
        return Fraction(repr(value))
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_NUMBER_TEXT or _exponent_too_large(text):
            # "1e999999999" would build a billion-digit integer: refused, as input
            raise NumberError(f"expected a number of at most {MAX_NUMBER_TEXT} characters and an exponent of "
                              f"at most {MAX_EXPONENT}, found {value[:40]!r}{'…' if len(value) > 40 else ''}: "
                              f"{WRITE_A_NUMBER}")
        try:
            if _DECIMAL_OR_FRACTION.fullmatch(text) is None:
                raise ValueError(text)
            result = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise NumberError(f"expected a number, found {value!r}: {WRITE_A_NUMBER}") from None
        if abs(result) > _MAX_MAGNITUDE:
            raise NumberError(f"expected a number of at most 1e300 (a float's range), found {value[:40]!r}: "
                              f"{WRITE_A_NUMBER}")
        return result
    raise NumberError(f"expected a number, found {value!r}: {WRITE_A_NUMBER}")


def float_up(value: Number) -> float:
    """The smallest float at or above `value` (a loss): never an OverflowError, ∞ past the
    largest float; a positive value never becomes 0."""
    if isinstance(value, float):
        return value
    if isinstance(value, Fraction):
        # n / d is float(value) (correctly rounded); it is below value exactly when p / q (its
        # exact ratio) is: p * d < n * q in integers, with no Fraction built (a third of the time)
        n, d = value.numerator, value.denominator
        try:
            number = n / d
        except OverflowError:
            return math.inf if n > 0 else -sys.float_info.max
        p, q = number.as_integer_ratio()
        return math.nextafter(number, math.inf) if p * d < n * q else number
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -sys.float_info.max


def float_down(value: Number) -> float:
    """The largest float at or below `value` (a headroom, a cap, a delta budget)."""
    if isinstance(value, float):
        return value
    if isinstance(value, Fraction):  # (as float_up)
        n, d = value.numerator, value.denominator
        try:
            number = n / d
        except OverflowError:
            return sys.float_info.max if n > 0 else -math.inf
        p, q = number.as_integer_ratio()
        return math.nextafter(number, -math.inf) if p * d > n * q else number
    try:
        return float(value)
    except OverflowError:
        return sys.float_info.max if value > 0 else -math.inf


def round_up(value: Number, places: int, rounding: str = ROUND_CEILING) -> Decimal:
    """Round upward to `places` decimals, so a displayed bound is never too small
    (`rounding=ROUND_FLOOR` for headroom, which must never look larger than it is)."""
    decimal = _as_decimal(value, rounding)
    with localcontext() as ctx:
        ctx.prec = max(28, abs(decimal.adjusted()) + places + 10)
        return decimal.quantize(Decimal(1).scaleb(-places), rounding=rounding)


def _as_decimal(value: Number, rounding: str = ROUND_CEILING) -> Decimal:
    if isinstance(value, Fraction):
        # enough digits, rounded the same way, that the rounding below is never on the wrong side
        with localcontext() as ctx:
            ctx.prec = max(60, len(str(value.numerator)) + 30, len(str(value.denominator)) + 30)
            ctx.rounding = rounding
            return Decimal(value.numerator) / Decimal(value.denominator)
    return Decimal(value)


def approximate(value: Number, places: int, rounding: str = ROUND_CEILING) -> str:
    """`value` rounded in the given direction, with `places` decimals, or `places`
    significant digits when it is smaller than 10^-places (so 1e-10 reads `1e-10`,
    never `0.0001`). The text's value is on the safe side of `value`."""
    decimal = _as_decimal(value, rounding)
    if decimal == 0:
        return "0"
    exponent = decimal.adjusted()
    with localcontext() as ctx:
        ctx.prec = abs(exponent) + places + 10
        if abs(decimal) >= Decimal(1).scaleb(-places):
            return format(decimal.quantize(Decimal(1).scaleb(-places), rounding=rounding), "f")
        digits = decimal.quantize(Decimal(1).scaleb(exponent - places + 1), rounding=rounding)
    return _e_notation(digits)


def _e_notation(decimal: Decimal) -> str:
    """`decimal` as its digits times a power of ten, the digits' trailing zeros dropped: `2.5e-7`."""
    text = format(decimal.scaleb(-decimal.adjusted()), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}e{decimal.adjusted()}"


def is_infinite(value: Number) -> bool:
    return isinstance(value, float) and math.isinf(value)


FLOAT_DENOMINATOR = 2**32  # a fraction over a larger power of two is a float's value (module docstring)


def from_float(value: Number) -> bool:
    """A Fraction that is a float's exact value (a power of two past 2**32 below it): a bound
    computed in floating point and stored exactly, an irrational figure rounded (a subsampled
    mechanism's amplified epsilon), not an exact input. It is shown as a float is."""
    return (isinstance(value, Fraction) and value.denominator > FLOAT_DENOMINATOR
            and value.denominator & (value.denominator - 1) == 0)


_EXACT_TEXT = 14  # the longest exact text (fraction or decimal) printed as it is


def format_number(value: Number, places: int = 4, *, down: bool = False) -> str:
    """Plain-text display: exact integers and short fractions as they are, an exact decimal
    whole where it is shorter than its fraction, `n/d (≈ x)` for a short fraction without
    one; a value whose exact text is longer than 14 characters (a rho of an implied Gaussian,
    0.0359257023278; a sum with a float's value in it) rounded as a float is, up (a bound) or
    down with `down=True` (a headroom). The exact value is in --json (`*_exact`).

    >>> format_number(Fraction(2)), format_number(Fraction(1, 10)), format_number(INF)
    ('2', '0.1', '∞')
    >>> format_number(Fraction(1410673597, 10**9)), format_number(Fraction(1, 3))
    ('1.410673597', '1/3 (≈ 0.3334)')
    >>> format_number(Fraction(359257023278, 10**13)), format_number(Fraction(40883343395249, 45 * 10**12), down=True)
    ('0.036', '0.9085')
    """
    if is_infinite(value):
        return "∞" if value > 0 else "-∞"
    rounding = ROUND_FLOOR if down else ROUND_CEILING
    if from_float(value):
        return _trim_text(approximate(value, places, rounding))
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return str(value.numerator)
        decimal = _terminating_decimal(value)
        if decimal is not None and len(decimal) <= places + 4:
            return decimal
        if decimal is not None and (scientific := _short_scientific(value)) is not None:
            return scientific  # 1e-10: exact, and short
        if decimal is not None and len(decimal) < len(str(value)) and len(decimal) <= _EXACT_TEXT:
            return decimal  # 1.410673597, not 1410673597/1000000000
        if len(str(value)) <= _EXACT_TEXT:
            return f"{value.numerator}/{value.denominator} (≈ {_trim_text(approximate(value, places, rounding))})"
    return _trim_text(approximate(value, places, rounding))


def format_short(value: Number, places: int = 4, *, down: bool = False) -> str:
    """`format_number` where there is room for a short number only (a heat map's cell): the
    same text where it is short (an exact decimal of at most `places` + 4 characters, as
    format_number keeps one), else its approximation as format_number rounds a float (`places` decimals, up for a loss, down with `down=True`): a fraction it
    prints as `n/d (≈ x)` reads x, an exact decimal longer than that its rounding.

    >>> format_short(Fraction(1, 3)), format_short(Fraction(2524, 1000)), format_short(INF)
    ('0.3334', '2.524', '∞')
    >>> format_short(Fraction(1410673597, 10**9)), format_short(Fraction(1, 10**10))
    ('1.4107', '1e-10')
    """
    text = format_number(value, places, down=down)
    if " (≈ " not in text and len(text) <= places + 4:  # (format_number's own bound on an exact decimal)
        return text
    return _trim_text(approximate(value, places, ROUND_FLOOR if down else ROUND_CEILING))


def format_exact(value: Number, places: int = 2, *, down: bool = False) -> str:
    """Report display: exact fractions keep their exact form, `293764/114921 (≈ 2.56)`;
    the approximation is rounded up (a bound), or down with `down=True` (a headroom)."""
    if is_infinite(value):
        return "∞"
    rounding = ROUND_FLOOR if down else ROUND_CEILING
    if from_float(value):
        return approximate(value, places, rounding)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return str(value.numerator)
        decimal = _terminating_decimal(value)
        if decimal is not None and len(decimal.split(".")[1]) <= places:
            return decimal
        if decimal is not None and (scientific := _short_scientific(value)) is not None:
            return scientific
        return f"{value.numerator}/{value.denominator} (≈ {approximate(value, places, rounding)})"
    return approximate(value, places, rounding)


def _short_scientific(value: Fraction) -> str | None:
    """A terminating decimal with few significant digits, written exactly: `1e-10`, `2.5e-7`."""
    if not value:
        return None
    with localcontext() as ctx:  # exact: `value` is a terminating decimal
        ctx.prec = len(str(value.numerator)) + len(str(value.denominator)) + 10
        normal = (Decimal(value.numerator) / Decimal(value.denominator)).normalize()
    if len(normal.as_tuple().digits) > 4 or abs(normal) >= 1:
        return None
    return _e_notation(normal)


def _trim_text(text: str) -> str:
    if "e" in text or "." not in text:
        return text
    return text.rstrip("0").rstrip(".")


def format_headroom(value: Number, places: int = 2) -> str:
    """A headroom, rounded down so it never looks larger than it is; -∞ when the spend has
    no bound at all."""
    if is_infinite(value):
        return "∞" if value > 0 else "-∞"
    return format_exact(value, places, down=True)


_DELTA_DIGITS = 12  # a delta with at most this many significant digits is printed as it is


def format_delta(value: Number) -> str:
    """Delta for reports: as it is when it has at most 12 significant digits (a delta as
    given: 0.999999, 2.5 × 10⁻⁷), else rounded UP to 4 (a computed one); in scientific form
    below 10⁻³ (1e-10 is `1 × 10⁻¹⁰`), a plain decimal from 10⁻³ up (0.05, 0.999999: never
    `1 × 10⁰` for a delta below 1)."""
    if value == 0:
        return "0"
    if is_infinite(value):
        return "∞"
    # a fraction exactly (rounded up when it does not terminate); a float as its shortest repr
    # (the value it was written as)
    decimal = _as_decimal(value) if isinstance(value, Fraction) else Decimal(repr(float(value)))
    digits = decimal.normalize(Context(prec=len(decimal.as_tuple().digits)))  # exact: only zeros dropped
    if len(digits.as_tuple().digits) > _DELTA_DIGITS:  # (a fraction that does not terminate: 60 digits)
        with localcontext() as ctx:
            ctx.prec = abs(decimal.adjusted()) + 20
            digits = decimal.quantize(Decimal(1).scaleb(decimal.adjusted() - 3), rounding=ROUND_CEILING)
    exponent = digits.adjusted()
    if exponent >= -3:
        return _trim(digits)
    mantissa = format(digits.scaleb(-exponent), "f")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


@overload
def to_json(value: None, *, down: bool = False) -> None:
    ...


@overload
def to_json(value: Number, *, down: bool = False) -> int | float | str:
    ...


def to_json(value: Number | None, *, down: bool = False) -> int | float | str | None:
    """JSON form: integers as integers, other finite values as floats, unbounded as "inf".

    The float is chosen so that its JSON text (Python's shortest repr) is a safe bound
    on the exact value: at or above it (a loss), or at or below it with `down=True` (a
    headroom, a cap). A value the text states exactly stays as it is (3/10 is written
    0.3); 1/3 is written 0.33333333333333337, never 0.3333333333333333 < 1/3."""
    if value is None:
        return None
    if is_infinite(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, Fraction) and value.denominator == 1 and abs(value.numerator) < 2**53:
        return value.numerator
    try:
        number = float(value)  # nearest; the text it is written as is checked below
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    if is_infinite(number):  # a finite value past the largest float: the largest, or "inf" for a loss
        if (number > 0) != down:
            return "inf" if number > 0 else -sys.float_info.max
        return sys.float_info.max if number > 0 else "-inf"
    if isinstance(value, Fraction):
        written = Fraction(repr(number))  # the decimal the JSON text states
        if (written < value) if not down else (written > value):
            number = math.nextafter(number, -math.inf if down else math.inf)
    return number


def safe_float(value: Number | None, *, down: bool = False) -> float:
    """A figure as a float that still bounds it: rounded up (a loss) or down (a headroom,
    `down=True`); `math.inf` when unbounded (to_json's rule)."""
    if value is None:
        return math.nan
    if is_infinite(value):
        return math.inf if value > 0 else -math.inf
    return float(to_json(value, down=down))


def figure_fields(name: str, value: Number | None, *, down: bool = False) -> dict:
    """One figure as every `--json` output states it (README, "JSON figures"):

        {name: a JSON number rounded the safe way (up for a loss; down, with `down=True`,
               for a headroom or a cap), or "inf" / "-inf" when unbounded, or null,
         name + "_exact": the exact value as a fraction string ("1/4", "3") where one
               exists, null for an irrational figure (a zCDP conversion) or no figure}

    The one place that shape is made: `table`, `subset`, `check`, `cap list`,
    `headroom` and `releases` all call it."""
    return {name: to_json(value, down=down), name + "_exact": fraction_text(value)}


def fraction_text(value: Number | None) -> str | None:
    """The exact value as a fraction string where one exists: "104/4099", "1", "inf";
    None for a float (an irrational figure, already rounded) and for no value."""
    if value is None:
        return None
    if is_infinite(value):
        return "inf" if value > 0 else "-inf"
    if from_float(value):
        return None  # a float's value: a rounded irrational figure, not an exact one
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return None


def exact_text(value: Number | None) -> str | None:
    """The exact form for JSON consumers: "104/4099", "1", "inf"; floats as repr."""
    if value is None:
        return None
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, float) and math.isinf(value):  # (is_infinite: either sign is written "inf")
        return "inf"
    return repr(value)


def _terminating_decimal(value: Fraction) -> str | None:
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator != 1:
        return None
    with localcontext() as ctx:  # exact: enough digits for every digit of a terminating decimal
        ctx.prec = len(str(value.numerator)) + 2 * len(str(value.denominator)) + 10
        text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    return text


def _trim(decimal: Decimal) -> str:
    text = format(decimal, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text
