"""Shared input checks for the mechanisms. Each raises MechanismInputError naming the field."""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from numbers import Real
from typing import TypeVar, Union

import numpy as np
import pandas as pd

from .errors import MechanismInputError

Number = Union[int, float, Fraction]
# a checked value is returned as it came (an exact Fraction stays exact), so with the caller's type
Checked = TypeVar("Checked")

REPLACE = "replace"
ADD_REMOVE = "add-remove"
RELATIONS = (REPLACE, ADD_REMOVE)


def positive_number(field: str, value: Checked) -> Checked:
    """A finite real > 0 (booleans refused). Returned unchanged so exact Fractions stay exact."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise MechanismInputError(field, f"must be a positive number, found {value!r}")
    if not math.isfinite(float(value)) or value <= 0:
        raise MechanismInputError(field, f"must be a finite number > 0, found {value!r}")
    return value


def finite_number(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise MechanismInputError(field, f"must be a finite number, found {value!r}")
    return float(value)


def open_unit_interval(field: str, value: Checked) -> Checked:
    """A real strictly between 0 and 1 (delta, Bailie's p, a sampling fraction)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise MechanismInputError(field, f"must be a number in (0, 1), found {value!r}")
    if value <= 0 or not value < 1:  # value < x and value <= x: the comparisons numbers.Real declares
        raise MechanismInputError(field, f"must be in (0, 1), found {value!r}")
    return value


def positive_int(field: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise MechanismInputError(field, f"must be an integer >= {minimum}, found {value!r}")
    return int(value)


def relation(value: object) -> str:
    """'replace' (bounded, Tan's U-neighbours) or 'add-remove' (unbounded), docs/explanation/model.md#variables-subsets-and-neighbours.

    ledger.core.records.Relation members are str-valued and pass unchanged.
    """
    if value not in RELATIONS:
        raise MechanismInputError("relation", f"must be one of {RELATIONS}, found {value!r}")
    return str(value)


def dataframe(field: str, data: object, *, allow_empty: bool = False) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise MechanismInputError(field, f"must be a pandas DataFrame, found {type(data).__name__}")
    if not allow_empty and len(data) == 0:
        raise MechanismInputError(field, "is empty: no records to release from")
    return data


def columns_present(field: str, data: pd.DataFrame, names: Iterable[str]) -> list[str]:
    names = list(names)
    missing = [name for name in names if name not in data.columns]
    if missing:
        from ..core.errors import did_you_mean

        columns = [str(c) for c in data.columns]
        shown = ", ".join(columns)
        raise MechanismInputError(field, "; ".join(
            f"variable {name!r} is not a column of the data{did_you_mean(str(name), columns)}" for name in missing)
            + f" (its columns: {shown[:80] + '…' if len(shown) > 80 else shown})")  # a header may be data
    return names


def numeric_column(field: str, data: pd.DataFrame, name: str, *, non_negative: bool = False) -> np.ndarray:
    """The column as float64; refuses booleans, strings, missing values and (optionally) negatives."""
    series = data[name]
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        raise MechanismInputError(field, f"variable {name!r} must be numeric, found dtype {series.dtype}")
    values = series.to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        raise MechanismInputError(field, f"variable {name!r} has missing or infinite values, e.g. {values[bad][0]!r}")
    if non_negative and (values < 0).any():
        raise MechanismInputError(field, f"variable {name!r} must be non-negative, found {values[values < 0].min()!r}")
    return values


def count_array(field: str, counts: object) -> np.ndarray:
    """Non-negative integer counts as an int64 array (floats allowed only when integral)."""
    array = np.asarray(counts)
    if array.size == 0:
        raise MechanismInputError(field, "is empty: no cells to release")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise MechanismInputError(field, f"counts must be integers, found dtype {array.dtype}")
    if not np.all(np.isfinite(array)) or not np.all(array == np.round(array)):
        bad = array[~np.isfinite(array) | (array != np.round(array))].ravel()[0]
        raise MechanismInputError(field, f"counts must be integers, found {bad!r}")
    if (array < 0).any():
        raise MechanismInputError(field, f"counts must be non-negative, found {array.min()!r}")
    return array.astype(np.int64)
