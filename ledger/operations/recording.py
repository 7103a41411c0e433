"""Run a mechanism on data and record its release in the same step.

For every mechanism, in this order:
  1. the planned release is built from the parameters alone (the number of
     records n is public under replacement neighbours; no value is read);
  2. the budget check runs on it: a cap that would break refuses (exit 1)
     before the data is touched;
  3. the mechanism runs, with noise from a generator seeded from `secrets`
     unless an explicit seed is given (reproducible tests);
  4. the release is recorded with its guarantee, every parameter, the output
     and its SHA-256 digest, re-checked atomically by `operations.record`.
The ledger never stores the input data: only parameters, guarantees, outputs.

Each entry of MECHANISMS states what a mechanism reads and guarantees
(`plan`) and how it runs (`run`); `run` must certify exactly what `plan`
promised, or nothing is recorded.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from . import transactions as operations
from ..store import configuration, session_state
from ..accounting.catalogue import unknown_parameters
from ..core.errors import InputErrors, LedgerError, did_you_mean
from ..core.failures import excerpt
from ..input.loader import LedgerSnapshot, check_batch
from ..core.numbers import NumberError, to_fraction
from ..core.records import (
    Guarantee,
    Mechanism,
    Notion,
    PufferfishGuarantee,
    Relation,
    Release,
    Status,
)
from ..mechanisms import attribute, noise, ppercent, sample_privacy, subsampling, tan
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


@dataclass(frozen=True)
class Result:
    output: pd.DataFrame
    release: Release
    derived: Release | None = None


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------


def _number(params: dict, key: str) -> Fraction:
    try:
        return to_fraction(params[key])
    except NumberError as exc:
        raise MechanismInputError(key, str(exc)) from None


def _names(params: dict, key: str) -> tuple[str, ...]:
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


def _exact_fraction(value: float) -> Fraction:
    """A float bound as an exact fraction (every float is one); no rounding down."""
    return Fraction(value)


# --------------------------------------------------------------------------
# The mechanisms
# --------------------------------------------------------------------------


def _crosstab_plan(params, n):
    columns = _names(params, "columns")
    return Planned(frozenset(columns), (_pure(columns, _number(params, "epsilon"), _relation(params)),))


def _crosstab_run(data, params, rng):
    columns = _names(params, "columns")
    counts, record = noise.noisy_crosstab(data, list(columns), _number(params, "epsilon"),
                                          relation=_relation(params).value, categories=params.get("categories"),
                                          rng=rng)
    output = counts.reset_index()
    return Outcome(output, {"query": "crosstab", "columns": columns, "sensitivity": record.sensitivity,
                            "scale": record.scale, "epsilon": Fraction(record.epsilon), "relation": record.relation},
                   (_pure(columns, record.epsilon, Relation(record.relation)),))


def _clipped_plan(notion):
    def plan(params, n):
        column = _names(params, "column")[0]
        if notion == Notion.PURE:
            return Planned(frozenset({column}), (_pure({column}, _number(params, "epsilon"), _relation(params)),))
        return Planned(frozenset({column}), (Guarantee(frozenset({column}), Notion.ZCDP, rho=_number(params, "rho"),
                                                       relation=_relation(params)),))
    return plan


def _clipped_run(function, query):
    def run(data, params, rng):
        column = _names(params, "column")[0]
        lower, upper = float(_number(params, "lower")), float(_number(params, "upper"))
        budget_key = "epsilon" if function in (noise.laplace_sum, noise.laplace_mean) else "rho"
        value, record = function(data, column, lower, upper, _number(params, budget_key),
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
    margin, protected = _names(params, "margin")[0], _names(params, "protected")[0]
    epsilon = _number(params, "epsilon")
    # Tan, Algorithm 1 (corrected, docs/explanation/model.md#notes-on-the-papers-algorithms): epsilon-private on the protected variable;
    # the margin is released exactly, so it is read but covered by no guarantee.
    return Planned(frozenset({margin, protected}), (_pure({protected}, epsilon),),
                   post_processed=_flag(params.get("nonnegative", False)))


def _tan_run(data, params, rng):
    margin, protected = _names(params, "margin")[0], _names(params, "protected")[0]
    table, record = tan.consistent_count_table(data, margin, protected, _number(params, "epsilon"),
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
    contributor, linked = _names(params, "contributor")[0], _names(params, "linked")
    cells = _names(params, "cells")
    reads = frozenset({contributor, *linked, *cells})
    return Planned(reads, (), (_ppercent_guarantee(params, linked, contributor, None),))


def _ppercent_guarantee(params, linked, contributor, record) -> PufferfishGuarantee:
    p, epsilon = _number(params, "p"), _number(params, "epsilon")
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
    contributor, linked, cells = _names(params, "contributor")[0], _names(params, "linked"), _names(params, "cells")
    totals, record = ppercent.p_percent_cell_totals(data, list(cells), contributor, list(linked),
                                                    _number(params, "p"), _number(params, "epsilon"), rng=rng)
    described = {"p": _number(params, "p"), "epsilon": _number(params, "epsilon"), "laplace_scale": record.laplace_scale,
                 "contributor": contributor, "linked": linked, "cells": cells,
                 "protected_contributors": record.protected_contributors}
    return Outcome(totals.reset_index(), described, (), (_ppercent_guarantee(params, linked, contributor, record),))


def _attribute_plan(params, n):
    query, protected = _names(params, "query")[0], _names(params, "protected")
    return Planned(frozenset({query}), (), (_attribute_guarantee(params, protected, None),))


def _attribute_guarantee(params, protected, record) -> PufferfishGuarantee:
    parameters: tuple = ()
    if record is not None:
        parameters = (("covariance", record.covariance), ("attributes", record.attributes),
                      ("sigma2", record.sigma2), ("n", record.n), ("diameters", record.diameters))
    return PufferfishGuarantee(
        kind="dataset-attribute-privacy", protects=frozenset(protected),
        epsilon=_number(params, "epsilon"), delta=_number(params, "delta"),
        secrets="the mean of each protected attribute (Zhang, Ohrimenko and Cummings, Definition 3)",
        assumptions=_default(attribute.AttributePrivacyGuarantee, "assumption"),
        parameters=parameters,
    )


def _attribute_run(data, params, rng):
    query, protected = _names(params, "query")[0], _names(params, "protected")
    covariance = params["covariance"]
    if not isinstance(covariance, pd.DataFrame):
        raise MechanismInputError("covariance", f"must be a covariance table, found {type(covariance).__name__}")
    diameters = float(_number(params, "diameters"))
    mean, record = attribute.attribute_private_mean(data, query, list(protected), covariance, diameters,
                                                    _number(params, "epsilon"), _number(params, "delta"), rng=rng)
    output = pd.DataFrame({"variable": [query], "statistic": ["mean"], "value": [mean]})
    described = {"query": query, "protected": protected, "sigma2": record.sigma2, "n": record.n,
                 "epsilon": _number(params, "epsilon"), "delta": _number(params, "delta"), "diameters": diameters}
    return Outcome(output, described, (), (_attribute_guarantee(params, protected, record),))


def _modular_plan(params, n):
    variable = _names(params, "variable")[0]
    return Planned(frozenset({variable}), (), (_modular_guarantee(params, n),))


def _modular_guarantee(params, n) -> PufferfishGuarantee:
    variable = _names(params, "variable")[0]
    modulus = int(_number(params, "modulus"))
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
    rows = tuple(int(r) for r in _names(params, "rows"))
    if any(not 0 <= r < n for r in rows) or len(set(rows)) != len(rows):
        raise MechanismInputError("rows", f"must be distinct record positions in 0..{n - 1}, found {rows}")
    return rows


def _modular_run(data, params, rng):
    variable = _names(params, "variable")[0]
    modulus = int(_number(params, "modulus"))
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


# --------------------------------------------------------------------------
# Run and record
# --------------------------------------------------------------------------


def digest(output: pd.DataFrame) -> tuple[str, str]:
    """The output as CSV text and its SHA-256."""
    buffer = io.StringIO()
    output.to_csv(buffer, index=False, lineterminator="\n")
    text = buffer.getvalue()
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_and_record(
    engine: Engine,
    name: str,
    data: pd.DataFrame,
    *,
    dataset: str,
    release_id: str,
    params: Mapping[str, Any],
    actor: str,
    title: str = "",
    sample: int | None = None,
    seed: int | None = None,
    status: Status = Status.PLANNED,
) -> Result:
    """Check the budget, run mechanism `name` on `data`, record its release; see the module doc."""
    definition = MECHANISMS.get(name)
    if definition is None:
        raise _input_error("mechanism", f"unknown mechanism {name!r}{did_you_mean(name, MECHANISMS)}; "
                                        f"known: {', '.join(sorted(MECHANISMS))}")
    params = dict(params)
    missing = [key for key in definition.required if key not in params]
    known = (*definition.required, *definition.optional)
    unknown = [key for key in params if key not in known]
    if unknown or missing:  # a mistyped parameter (-p epslon=1) named, beside what is then missing
        problems = [f"{name} takes no parameter {key!r}{did_you_mean(key, known)}" for key in unknown]
        if missing:
            problems.append(f"{name} needs {', '.join(definition.required)}; missing {', '.join(missing)}")
        if unknown:
            problems[len(unknown) - 1] += f" (it takes {', '.join(known)})"
        raise _input_error((unknown or missing)[0], "; ".join(problems))
    if not isinstance(data, pd.DataFrame) or data.empty:
        raise _input_error("data", "the data is empty: no records to run a mechanism on")
    rng = noise.make_rng(seed)
    try:
        data = _with_public_categories(engine, dataset, definition, params, data)
        planned = definition.plan(params, len(data))
        absent = sorted(planned.reads - set(map(str, data.columns)))
        if absent:
            columns = list(map(str, data.columns))
            raise MechanismInputError("data", "; ".join(
                f"variable {name!r} is not a column of the data{did_you_mean(name, columns)}" for name in absent)
                + f" (its columns: {excerpt(', '.join(columns), 80)})")  # a short excerpt: a header may be data
        subsample_record = None
        if sample is not None:
            if not definition.subsamplable:
                raise MechanismInputError("sample", f"{name} is not a pure-epsilon mechanism; the subsampling "
                                                    "amplification bound (docs/explanation/model.md#subsampling) does not apply to it")
            planned = replace(planned, guarantees=tuple(_amplified(g, sample, len(data)) for g in planned.guarantees))
    except MechanismInputError as exc:
        raise _input_error(exc.field, str(exc)) from None

    release = Release(
        id=release_id, dataset=dataset, reads=planned.reads, title=title, status=status,
        mechanism=Mechanism(CATALOGUE_NAME[name], _params(
            {k: v for k, v in params.items() if k not in ("covariance", "categories")})),
        guarantees=planned.guarantees, pufferfish=planned.pufferfish, recorded_by=actor,
        source=f"run {name}", source_field="release",
    )
    derived = _derived(release) if planned.post_processed else None
    batch = [release] + ([derived] if derived else [])

    def build(snapshot: LedgerSnapshot):
        return batch, [], _check_known(batch, snapshot) + check_batch(batch, [], snapshot)

    checks = operations.check(engine, build)  # refuses before the data is touched
    if any(not c.ok for c in checks):
        raise operations.BudgetRefused(checks, f"running {name}")

    try:
        if sample is not None:
            epsilon = _number(params, "epsilon")
            data, subsample_record = subsampling.draw_subsample(data, sample, epsilon, rng)
        outcome = definition.run(data, params, rng)
    except MechanismInputError as exc:
        raise _input_error(exc.field, str(exc)) from None
    guarantees = outcome.guarantees
    described = dict(outcome.params)
    if subsample_record is not None:
        guarantees = tuple(_amplified(g, subsample_record.n_sample, subsample_record.n_total) for g in guarantees)
        described.update(sample_size=subsample_record.n_sample, population=subsample_record.n_total,
                         epsilon_before_subsampling=Fraction(subsample_record.epsilon_mechanism))
    if set(guarantees) != set(planned.guarantees):
        raise RuntimeError(f"{name} certified {guarantees} but planned {planned.guarantees}")
    text, sha = digest(outcome.output)
    final = replace(release, mechanism=Mechanism(release.mechanism.name, _params(described)),
                    pufferfish=outcome.pufferfish or planned.pufferfish, output=text, output_digest=sha,
                    recorded_at=session_state.now())
    unknown = unknown_parameters(final.mechanism.name, dict(final.mechanism.params))
    if unknown:  # what a run records, a release file of the same mechanism may state (catalogue.PARAMETERS)
        raise RuntimeError(f"{name} recorded parameters the catalogue does not accept: {unknown}")
    if final.status is Status.PUBLISHED:  # it goes out now: published when recorded
        final = replace(final, published_at=final.recorded_at)
    final_batch = [final]
    if derived is not None:
        derived_text, derived_sha = digest(outcome.post_processed)
        derived = replace(derived, output=derived_text, output_digest=derived_sha, recorded_at=final.recorded_at,
                          published_at=final.published_at)
        final_batch.append(derived)

    def build_final(snapshot: LedgerSnapshot):
        return final_batch, [], _check_known(final_batch, snapshot) + check_batch(final_batch, [], snapshot)

    operations.record(engine, build_final, actor)
    return Result(outcome.post_processed if derived is not None else outcome.output, final, derived)


def _with_public_categories(engine: Engine, dataset: str, definition: Definition, params: dict,
                            data: pd.DataFrame) -> pd.DataFrame:
    """The cells of a table must not depend on the data: a value seen only in the data
    would add a cell, and reveal the record (an unbounded loss). Every tabulated variable
    takes its categories from the `categories` parameter, else from the dataset file
    (variables[].categories), else from a categorical column; otherwise the run is refused."""
    if not definition.tabulates:
        return data
    from sqlmodel import Session

    with Session(engine) as session:
        known = configuration.write_context(session).datasets.get(dataset)
    declared = {v.name: v.categories for v in known.variables if v.categories} if known else {}
    categories = dict(params.get("categories") or {})
    data = data.copy()
    for key in definition.tabulates:
        for name in _names(params, key):
            if name in categories or name not in data.columns:
                continue
            if name in declared:
                levels = list(declared[name])
                if all(isinstance(level, str) for level in levels) and data[name].dtype != object:
                    data[name] = data[name].astype(str)  # CSV numbers read as ints; the categories are text
                categories[name] = levels
            elif not isinstance(data[name].dtype, pd.CategoricalDtype):
                raise MechanismInputError(
                    "categories", f"variable {name!r} has no public list of categories: the cells released would "
                                  "depend on the data. Declare them in the dataset file (variables[].categories)")
    params["categories"] = categories
    return data


def _amplified(guarantee: Guarantee, sample: int, population: int) -> Guarantee:
    """Balle, Barthe and Gaboardi (2018): eps' = ln(1 + beta (e^eps - 1)), beta = n'/n, rounded
    up (docs/explanation/model.md#subsampling; Clifton et al.'s Theorem 2 is the looser published bound)."""
    if guarantee.notion != Notion.PURE:
        return guarantee
    if guarantee.relation != Relation.REPLACE:
        # the amplification bound is for replacement neighbours; with add/remove a record
        # added to the population can land in the sample and shift a sum further
        raise MechanismInputError("sample", "subsampling is only certified for replacement neighbours "
                                            f"(relation replace); this guarantee is for {guarantee.relation.value}")
    if not 0 < sample <= population:
        raise MechanismInputError("sample", f"must be between 1 and the {population} records, found {sample}")
    amplified = subsampling.subsampled_epsilon(guarantee.epsilon, Fraction(sample, population))  # rounded up
    epsilon = min(guarantee.epsilon, _exact_fraction(amplified))
    return replace(guarantee, epsilon=epsilon)


def _derived(release: Release) -> Release:
    """The non-negative table, computed from the noisy one only: post-processing (docs/explanation/model.md#post-processing-and-lineage)."""
    return Release(
        id=f"{release.id}-nonnegative", dataset=release.dataset, reads=frozenset(),
        mechanism=Mechanism("post-processing", (("method", "tan.nonnegative: clip at 0, keep exact margins"),)),
        title=(release.title + " (non-negative)").strip(), derived_from=(release.id,), status=release.status,
        recorded_by=release.recorded_by, source=release.source, source_field="release (derived)",
    )


def _check_known(releases: Sequence[Release], snapshot: LedgerSnapshot) -> list[LedgerError]:
    errors = []
    for release in releases:
        dataset = snapshot.datasets.get(release.dataset)
        if dataset is None:
            errors.append(LedgerError(release.source, "dataset", f"unknown dataset {release.dataset!r}"))
            continue
        unknown = sorted(release.reads - set(dataset.variable_names))
        if unknown:
            errors.append(LedgerError(release.source, "reads", f"variables {unknown} are not variables of "
                                                               f"dataset {dataset.name!r}"))
    return errors


def _params(values: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    def plain(value):
        if isinstance(value, (list, tuple)):
            return tuple(plain(v) for v in value)
        if isinstance(value, (np.integer,)):
            return int(value)
        if isinstance(value, (np.floating,)):
            return float(value)
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return value
    return tuple(sorted((key, plain(value)) for key, value in values.items()))


def _input_error(field: str, message: str) -> InputErrors:
    prefix = f"{field}: "
    return InputErrors([LedgerError("run", field, message[len(prefix):] if message.startswith(prefix) else message)])


def joint_sample_leakage(releases: Sequence[Release]) -> list[dict]:
    """For the recorded modular-sum releases on one variable and model, the leakage of
    each alone and of all together (docs/explanation/model.md#pufferfish-guarantees: perfectly sample-private releases can
    together reveal a sample)."""
    groups: dict[tuple, list[Release]] = {}
    for release in releases:
        for guarantee in release.pufferfish:
            if guarantee.kind == "perfect-sample-privacy":
                p = dict(guarantee.parameters)
                groups.setdefault((release.dataset, p["variable"], p["n"], p["modulus"]), []).append(release)
    results = []
    for (dataset, variable, n, modulus), members in groups.items():
        row_sets = [dict(m.pufferfish[0].parameters)["rows"] for m in members]
        together = modular_leakage(row_sets, n, modulus)
        results.append({
            "dataset": dataset, "variable": variable, "n": n, "modulus": modulus,
            "releases": [m.id for m in members],
            "alone": {m.id: modular_leakage([rows], n, modulus).max_leakage_bits for m, rows in zip(members, row_sets)},
            "together_bits": list(together.leakage_bits),
            "together_max_bits": together.max_leakage_bits,
            "perfect_together": together.perfect,
        })
    return results


__all__ = ["MECHANISMS", "Result", "digest", "joint_sample_leakage", "modular_leakage", "run_and_record"]
