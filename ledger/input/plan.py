"""A plan file: planned releases whose noise `plan solve` computes (schemas/plan.v1.schema.json).

Each planned release names its noise family, its sensitivity, and either a fixed parameter
or a weight, its relative share of the budget left: a share of epsilon for the epsilon-DP
families (laplace, geometric), of rho for the zCDP ones (gaussian, discrete-gaussian). A
fixed parameter is stated as that share too (`PlannedRelease.fixed`). Problems are
`LedgerError`s naming the file, line and field (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..core.errors import InputErrors, LedgerError
from ..core.numbers import NumberError, to_fraction
from .documents import Document, read_document
from .limits import field_name
from .schema_check import validate

SCHEMA = "plan.v1.schema.json"
PURE_FAMILIES = ("laplace", "geometric")  # epsilon-DP: a share is an epsilon
ZCDP_FAMILIES = ("gaussian", "discrete-gaussian")  # rho-zCDP: a share is a rho
FIXED = {"laplace": ("epsilon", "scale"), "geometric": ("epsilon", "scale"),
         "gaussian": ("sigma", "rho"), "discrete-gaussian": ("sigma", "rho")}
SHARES = ("weight", "epsilon", "scale", "sigma", "rho")


@dataclass(frozen=True)
class PlannedRelease:
    id: str
    title: str
    reads: tuple[str, ...]
    family: str  # laplace, geometric, gaussian, discrete-gaussian
    sensitivity: Fraction
    weight: Fraction | None  # the relative share, or None when fixed
    fixed: Fraction | None  # a fixed share: epsilon (pure families) or rho (zCDP families)
    sigma: Fraction | None = None  # a fixed sigma, kept as given
    max_std: Fraction | None = None
    max_halfwidth95: Fraction | None = None
    source: str = ""  # file:line, for messages
    at: str = ""  # its field in the file: releases[3]

    @property
    def zcdp(self) -> bool:
        return self.family in ZCDP_FAMILIES


@dataclass(frozen=True)
class Plan:
    path: str
    dataset: str | None
    releases: tuple[PlannedRelease, ...]


def read_plan(source: str | Path | Mapping[str, Any]) -> Plan:
    """The plan in a file (YAML or JSON) or a dict of the same form; `InputErrors` on any problem."""
    if isinstance(source, Mapping):
        document, errors = Document("<plan document>", dict(source)), []
    else:
        document, errors = read_document(source)
    if document is None or errors:
        raise InputErrors(errors)
    errors = validate(document, SCHEMA)
    if errors:
        raise InputErrors(errors)
    releases, errors, seen = [], [], set()
    for index, entry in enumerate(document.data["releases"]):
        at = ("releases", index)
        if entry["id"] in seen:
            errors.append(_error(document, (*at, "id"), f"release {entry['id']!r} appears twice"))
            continue
        seen.add(entry["id"])
        release = _release(document, entry, at, errors)
        if release is not None:
            releases.append(release)
    if errors:
        raise InputErrors(errors)
    return Plan(document.path, document.data.get("dataset"), tuple(releases))


def _error(document: Document, at: tuple, message: str) -> LedgerError:
    return LedgerError(document.source(at), field_name(at), message)


def _release(document: Document, entry: dict, at: tuple, errors: list) -> PlannedRelease | None:
    family = entry["mechanism"]
    given = [key for key in SHARES if key in entry]
    if len(given) != 1:
        errors.append(_error(document, at, f"give exactly one of weight, {' or '.join(FIXED[family])}; "
                                           f"found {', '.join(given) or 'none'}"))
        return None
    (key,) = given
    if key != "weight" and key not in FIXED[family]:
        errors.append(_error(document, (*at, key), f"{family} takes weight, {' or '.join(FIXED[family])}, "
                                                   f"not {key}"))
        return None
    numbers = {}
    for name in ("sensitivity", key, "max_std", "max_halfwidth95"):
        if name in entry:
            numbers[name] = _positive(document, entry[name], (*at, name), errors)
    if any(value is None for value in numbers.values()):
        return None
    sensitivity = numbers.get("sensitivity", Fraction(1))
    value = numbers[key]
    fixed = {"weight": None, "epsilon": value, "rho": value, "scale": sensitivity / value if key == "scale" else None,
             "sigma": sensitivity * sensitivity / (2 * value * value) if key == "sigma" else None}[key]
    return PlannedRelease(entry["id"], entry.get("title", ""), tuple(entry["reads"]), family, sensitivity,
                          value if key == "weight" else None, fixed, value if key == "sigma" else None,
                          numbers.get("max_std"), numbers.get("max_halfwidth95"), document.source(at),
                          field_name(at))


def _positive(document: Document, value: Any, at: tuple, errors: list) -> Fraction | None:
    try:
        number = to_fraction(value)
    except NumberError as exc:
        errors.append(_error(document, at, str(exc)))
        return None
    if number <= 0:
        errors.append(_error(document, at, f"must be positive. Found {value}."))
        return None
    return number
