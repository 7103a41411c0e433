"""The mechanisms `run` offers (MECHANISMS): for each, what it reads and guarantees, known from
its parameters alone (`plan`), and how it runs on data (`run`).

Invariant: `run` certifies exactly what `plan` promised (run_and_record refuses to record otherwise);
CATALOGUE_NAME gives each the catalogue name of the records it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ..core.numbers import NumberError, to_fraction
from ..core.records import (
    Guarantee,
    Notion,
    PufferfishGuarantee,
    Relation,
)
from ..mechanisms import attribute, noise, ppercent, sample_privacy, tan
from ..mechanisms.errors import MechanismInputError


@dataclass(frozen=True)
class Planned:
    """What a mechanism will read and certify, known before any value is read."""

    reads: frozenset[str]
    guarantees: tuple[Guarantee, ...]
    pufferfish: tuple[PufferfishGuarantee, ...] = ()
    post_processed: bool = False  # also records a derived, post-processed output


@dataclass(frozen=True)
class Outcome:
    """What a run produced: the published output and every parameter used."""

    output: pd.DataFrame
    params: dict[str, Any]
    guarantees: tuple[Guarantee, ...]
    pufferfish: tuple[PufferfishGuarantee, ...] = ()
    post_processed: pd.DataFrame | None = None


@dataclass(frozen=True)
class Definition:
    required: tuple[str, ...]
    plan: Callable[[dict, int], Planned]
    run: Callable[[pd.DataFrame, dict, np.random.Generator], Outcome]
    subsamplable: bool = False  # a pure-epsilon mechanism: Clifton et al. Theorem 2 applies
    help: str = ""
    tabulates: tuple[str, ...] = ()  # parameters naming variables whose categories are the cells
    optional: tuple[str, ...] = ()  # parameters it reads when given; any other name is refused (a typo)


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------


def number_parameter(params: dict, key: str) -> Fraction:
    try:
        return to_fraction(params[key])
    except NumberError as exc:
        raise MechanismInputError(key, str(exc)) from None


def names_parameter(params: dict, key: str) -> tuple[str, ...]:
    value = params[key]
    names = tuple(value) if isinstance(value, (list, tuple)) else tuple(v.strip() for v in str(value).split(","))
    if not names or not all(names):
        raise MechanismInputError(key, f"needs one or more variable names, found {value!r}")
    return names


def _relation(params: dict) -> Relation:
    try:
        return Relation(params.get("relation", Relation.REPLACE.value))
    except ValueError:
        raise MechanismInputError("relation", f"must be replace or add-remove, found {params['relation']!r}") from None


def _pure(protects, epsilon, relation=Relation.REPLACE) -> Guarantee:
    return Guarantee(frozenset(protects), Notion.PURE, epsilon=Fraction(epsilon), relation=relation)


def exact_fraction(value: float) -> Fraction:
    """A float bound as an exact fraction (every float is one); no rounding down."""
    return Fraction(value)


# --------------------------------------------------------------------------
# The mechanisms
# --------------------------------------------------------------------------


def _crosstab_plan(params, n):
    columns = names_parameter(params, "columns")
    return Planned(frozenset(columns), (_pure(columns, number_parameter(params, "epsilon"), _relation(params)),))


def _crosstab_run(data, params, rng):
    columns = names_parameter(params, "columns")
    counts, record = noise.noisy_crosstab(data, list(columns), number_parameter(params, "epsilon"),
                                          relation=_relation(params).value, categories=params.get("categories"),
                                          rng=rng)
    output = counts.reset_index()
    return Outcome(output, {"query": "crosstab", "columns": columns, "sensitivity": record.sensitivity,
                            "scale": record.scale, "epsilon": Fraction(record.epsilon), "relation": record.relation},
                   (_pure(columns, record.epsilon, Relation(record.relation)),))


def _clipped_plan(notion):
    def plan(params, n):
        column = names_parameter(params, "column")[0]
        if notion == Notion.PURE:
            return Planned(frozenset({column}), (_pure({column}, number_parameter(params, "epsilon"), _relation(params)),))
        return Planned(frozenset({column}), (Guarantee(frozenset({column}), Notion.ZCDP, rho=number_parameter(params, "rho"),
                                                       relation=_relation(params)),))
    return plan


def _clipped_run(function, query):
    def run(data, params, rng):
        column = names_parameter(params, "column")[0]
        lower, upper = float(number_parameter(params, "lower")), float(number_parameter(params, "upper"))
        budget_key = "epsilon" if function in (noise.laplace_sum, noise.laplace_mean) else "rho"
        value, record = function(data, column, lower, upper, number_parameter(params, budget_key),
                                 relation=_relation(params).value, rng=rng)
        output = pd.DataFrame({"variable": [column], "statistic": [query], "value": [value]})
        described = {"query": query, "column": column, "lower": lower, "upper": upper,
                     "sensitivity": record.sensitivity, "relation": record.relation}
        if budget_key == "epsilon":
            described.update(scale=record.scale, epsilon=Fraction(record.epsilon))
            guarantee = _pure({column}, record.epsilon, Relation(record.relation))
        else:
            described.update(sigma=record.sigma, rho=Fraction(record.rho))
            guarantee = Guarantee(frozenset({column}), Notion.ZCDP, rho=Fraction(record.rho),
                                  relation=Relation(record.relation))
        if record.n is not None:
            described["n"] = record.n
        return Outcome(output, described, (guarantee,))
    return run


def _tan_plan(params, n):
    margin, protected = names_parameter(params, "margin")[0], names_parameter(params, "protected")[0]
    epsilon = number_parameter(params, "epsilon")
    # Tan, Algorithm 1 (corrected, docs/explanation/model.md#notes-on-the-papers-algorithms): epsilon-private on the protected variable;
    # the margin is released exactly, so it is read but covered by no guarantee.
    return Planned(frozenset({margin, protected}), (_pure({protected}, epsilon),),
                   post_processed=_flag(params.get("nonnegative", False)))


def _tan_run(data, params, rng):
    margin, protected = names_parameter(params, "margin")[0], names_parameter(params, "protected")[0]
    table, record = tan.consistent_count_table(data, margin, protected, number_parameter(params, "epsilon"),
                                               categories=params.get("categories"), rng=rng)
    long = _long_table(table, margin, protected)
    described = {"margin": margin, "protected": protected, "epsilon": Fraction(record.epsilon),
                 "pair_noise_exponent": record.pair_noise_exponent, "noised_rows": record.noised_rows,
                 "exact_variables": record.exact_variables, "relation": record.relation}
    derived = _long_table(tan.nonnegative(table), margin, protected) if _flag(params.get("nonnegative", False)) else None
    return Outcome(long, described, (_pure({protected}, record.epsilon),), post_processed=derived)


def _long_table(table: pd.DataFrame, margin: str, protected: str) -> pd.DataFrame:
    long = table.stack().rename("count").reset_index()
    long.columns = [margin, protected, "count"]
    return long


def _ppercent_plan(params, n):
    contributor, linked = names_parameter(params, "contributor")[0], names_parameter(params, "linked")
    cells = names_parameter(params, "cells")
    reads = frozenset({contributor, *linked, *cells})
    return Planned(reads, (), (_ppercent_guarantee(params, linked, contributor, None),))


def _ppercent_guarantee(params, linked, contributor, record) -> PufferfishGuarantee:
    p, epsilon = number_parameter(params, "p"), number_parameter(params, "epsilon")
    if record is None:
        scale = ppercent.bailie_scale(p, epsilon)
        secrets = _default(ppercent.PPercentGuarantee, "secrets")
        assumption = _default(ppercent.PPercentGuarantee, "assumption")
    else:
        scale, secrets, assumption = record.laplace_scale, record.secrets, record.assumption
    return PufferfishGuarantee(
        kind="p-percent", protects=frozenset(linked), epsilon=epsilon,
        secrets=f"{secrets} (Bailie 2020); pairs " + _default(ppercent.PPercentGuarantee, "pairs"),
        assumptions=assumption,
        parameters=(("contributor", contributor), ("laplace_scale", scale), ("p", p)),
    )


def _ppercent_run(data, params, rng):
    contributor, linked, cells = names_parameter(params, "contributor")[0], names_parameter(params, "linked"), names_parameter(params, "cells")
    totals, record = ppercent.p_percent_cell_totals(data, list(cells), contributor, list(linked),
                                                    number_parameter(params, "p"), number_parameter(params, "epsilon"), rng=rng)
    described = {"p": number_parameter(params, "p"), "epsilon": number_parameter(params, "epsilon"), "laplace_scale": record.laplace_scale,
                 "contributor": contributor, "linked": linked, "cells": cells,
                 "protected_contributors": record.protected_contributors}
    return Outcome(totals.reset_index(), described, (), (_ppercent_guarantee(params, linked, contributor, record),))


def _attribute_plan(params, n):
    query, protected = names_parameter(params, "query")[0], names_parameter(params, "protected")
    return Planned(frozenset({query}), (), (_attribute_guarantee(params, protected, None),))


def _attribute_guarantee(params, protected, record) -> PufferfishGuarantee:
    parameters: tuple = ()
    if record is not None:
        parameters = (("covariance", record.covariance), ("attributes", record.attributes),
                      ("sigma2", record.sigma2), ("n", record.n), ("diameters", record.diameters))
    return PufferfishGuarantee(
        kind="dataset-attribute-privacy", protects=frozenset(protected),
        epsilon=number_parameter(params, "epsilon"), delta=number_parameter(params, "delta"),
        secrets="the mean of each protected attribute (Zhang, Ohrimenko and Cummings, Definition 3)",
        assumptions=_default(attribute.AttributePrivacyGuarantee, "assumption"),
        parameters=parameters,
    )


def _attribute_run(data, params, rng):
    query, protected = names_parameter(params, "query")[0], names_parameter(params, "protected")
    covariance = params["covariance"]
    if not isinstance(covariance, pd.DataFrame):
        raise MechanismInputError("covariance", f"must be a covariance table, found {type(covariance).__name__}")
    diameters = float(number_parameter(params, "diameters"))
    mean, record = attribute.attribute_private_mean(data, query, list(protected), covariance, diameters,
                                                    number_parameter(params, "epsilon"), number_parameter(params, "delta"), rng=rng)
    output = pd.DataFrame({"variable": [query], "statistic": ["mean"], "value": [mean]})
    described = {"query": query, "protected": protected, "sigma2": record.sigma2, "n": record.n,
                 "epsilon": number_parameter(params, "epsilon"), "delta": number_parameter(params, "delta"), "diameters": diameters}
    return Outcome(output, described, (), (_attribute_guarantee(params, protected, record),))


def _modular_plan(params, n):
    variable = names_parameter(params, "variable")[0]
    return Planned(frozenset({variable}), (), (_modular_guarantee(params, n),))


def _modular_guarantee(params, n) -> PufferfishGuarantee:
    variable = names_parameter(params, "variable")[0]
    modulus = int(number_parameter(params, "modulus"))
    rows = _rows(params, n)
    return PufferfishGuarantee(
        kind="perfect-sample-privacy", protects=frozenset({variable}),
        secrets="the value of each single sample (record)",
        assumptions=f"samples independent and uniform on 0..{modulus - 1}",
        parameters=(("modulus", modulus), ("n", n), ("rows", rows), ("variable", variable)),
    )


def _rows(params, n) -> tuple[int, ...]:
    if "rows" not in params:
        return tuple(range(n))
    rows = tuple(int(r) for r in names_parameter(params, "rows"))
    if any(not 0 <= r < n for r in rows) or len(set(rows)) != len(rows):
        raise MechanismInputError("rows", f"must be distinct record positions in 0..{n - 1}, found {rows}")
    return rows


def _modular_run(data, params, rng):
    variable = names_parameter(params, "variable")[0]
    modulus = int(number_parameter(params, "modulus"))
    if variable not in data.columns:
        raise MechanismInputError("variable", f"variable {variable!r} is not in the data")
    rows = _rows(params, len(data))
    values = pd.to_numeric(data[variable], errors="coerce")
    if values.isna().any() or (values < 0).any() or (values >= modulus).any() or (values % 1 != 0).any():
        raise MechanismInputError("variable", f"values of {variable!r} must be integers in 0..{modulus - 1}")
    leakage = modular_leakage([rows], len(data), modulus)
    if not leakage.perfect:
        worst = int(np.argmax(leakage.leakage_bits))
        raise MechanismInputError("rows", f"this mapping is not perfectly sample-private: it reveals "
                                          f"{leakage.leakage_bits[worst]:.3g} bits about record {worst}")
    y = int(values.iloc[list(rows)].sum()) % modulus
    output = pd.DataFrame({"variable": [variable], "statistic": [f"sum mod {modulus}"], "value": [y]})
    described = {"variable": variable, "modulus": modulus, "rows": rows}
    return Outcome(output, described, (), (_modular_guarantee(params, len(data)),))


def modular_leakage(row_sets: Sequence[Sequence[int]], n: int, modulus: int) -> sample_privacy.SampleLeakage:
    """Leakage of the mappings Y_k = (sum of X_i over rows_k) mod m, applied together, for
    n samples independent and uniform on 0..m-1 (perfect sample privacy: every I(X_i; Y) = 0)."""
    if modulus ** n > 2_000_000:
        raise MechanismInputError("n", f"exact leakage is computed for small models only: {modulus}^{n} outcomes")
    sizes = [modulus] * n
    mappings = [sample_privacy.deterministic_mapping(lambda *x, rows=tuple(rows): sum(x[i] for i in rows) % modulus,
                                                     sizes, modulus) for rows in row_sets]
    joint = np.full(sizes, 1.0 / modulus ** n)
    combined = sample_privacy.joint_mapping(mappings, n)
    return sample_privacy.sample_leakage(joint, combined.reshape(*sizes, -1))


def _default(record_class, name: str) -> str:
    """A field's default on a slotted dataclass (the class attribute is a slot descriptor)."""
    return record_class.__dataclass_fields__[name].default


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true", "yes")


MECHANISMS: dict[str, Definition] = {
    "crosstab": Definition(("columns", "epsilon"), _crosstab_plan, _crosstab_run, True,
                           "counts by one or more variables, two-sided geometric noise", ("columns",),
                           ("relation", "categories")),
    "laplace-sum": Definition(("column", "lower", "upper", "epsilon"), _clipped_plan(Notion.PURE),
                              _clipped_run(noise.laplace_sum, "sum"), True, "clipped sum, Laplace noise", (), ("relation",)),
    "laplace-mean": Definition(("column", "lower", "upper", "epsilon"), _clipped_plan(Notion.PURE),
                               _clipped_run(noise.laplace_mean, "mean"), True, "clipped mean, Laplace noise", (),
                               ("relation",)),
    "gaussian-sum": Definition(("column", "lower", "upper", "rho"), _clipped_plan(Notion.ZCDP),
                               _clipped_run(noise.gaussian_sum, "sum"), False, "clipped sum, Gaussian noise", (),
                               ("relation",)),
    "gaussian-mean": Definition(("column", "lower", "upper", "rho"), _clipped_plan(Notion.ZCDP),
                                _clipped_run(noise.gaussian_mean, "mean"), False, "clipped mean, Gaussian noise", (),
                                ("relation",)),
    "tan-consistent-counts": Definition(("margin", "protected", "epsilon"), _tan_plan, _tan_run, True,
                                        "Tan's Algorithm 1: counts with exact margins", ("margin", "protected"),
                                        ("nonnegative", "categories")),
    "p-percent": Definition(("contributor", "linked", "cells", "p", "epsilon"), _ppercent_plan, _ppercent_run, False,
                            "Bailie's p% mechanism: cell totals of multiplicatively noised contributions"),
    "attribute-gaussian": Definition(("query", "protected", "covariance", "diameters", "epsilon", "delta"),
                                     _attribute_plan, _attribute_run, False,
                                     "Zhang et al.'s attribute-private Gaussian mean"),
    "modular-sum": Definition(("variable", "modulus"), _modular_plan, _modular_run, False,
                              "(X_1 + ... + X_n) mod m: perfect sample privacy", (), ("rows",)),
}

# The ledger's catalogue names for the records these write (mechanism.name).
CATALOGUE_NAME = {
    "crosstab": "geometric", "laplace-sum": "laplace", "laplace-mean": "laplace",
    "gaussian-sum": "gaussian", "gaussian-mean": "gaussian", "tan-consistent-counts": "tan-consistent-counts",
    "p-percent": "p-percent", "attribute-gaussian": "attribute-gaussian", "modular-sum": "modular-sum",
}
