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

Each entry of run_mechanisms.MECHANISMS states what a mechanism reads and guarantees
(`plan`) and how it runs (`run`); `run` must certify exactly what `plan`
promised, or nothing is recorded.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from . import transactions as operations
from ..store import configuration, session_state
from ..store.sessions import Engine
from ..accounting.catalogue import unknown_parameters
from ..core.errors import InputErrors, LedgerError, did_you_mean
from ..core.failures import excerpt
from ..input.batch import check_batch
from ..input.snapshot import LedgerSnapshot
from ..core.records import (
    Guarantee,
    Mechanism,
    Notion,
    Relation,
    Release,
    Status,
)
from ..mechanisms import noise, subsampling
from ..mechanisms.errors import MechanismInputError
from .run_mechanisms import (CATALOGUE_NAME, MECHANISMS, Definition, exact_fraction, modular_leakage,
                             names_parameter, number_parameter)


@dataclass(frozen=True)
class Result:
    output: pd.DataFrame
    release: Release
    derived: Release | None = None


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
    definition = _definition(name, params)
    params = dict(params)
    if not isinstance(data, pd.DataFrame) or data.empty:
        raise _input_error("data", "the data is empty: no records to run a mechanism on")
    rng = noise.make_rng(seed)
    data, planned = _planned(engine, name, definition, dataset, params, data, sample)
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

    outcome, subsample_record = _run(definition, params, data, sample, rng)
    final = _as_run(name, release, planned, outcome, subsample_record)
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


def _definition(name: str, params: Mapping[str, Any]) -> Definition:
    """The mechanism `name`, with every parameter it needs and none it does not take (else bad input)."""
    definition = MECHANISMS.get(name)
    if definition is None:
        raise _input_error("mechanism", f"unknown mechanism {name!r}{did_you_mean(name, MECHANISMS)}; "
                                        f"known: {', '.join(sorted(MECHANISMS))}")
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
    return definition


def _planned(engine: Engine, name: str, definition: Definition, dataset: str, params: dict, data: pd.DataFrame,
             sample: int | None):
    """(the data with the public categories, the mechanism's plan): what it reads and certifies,
    amplified by subsampling when `sample`; before the data is touched."""
    try:
        data = _with_public_categories(engine, dataset, definition, params, data)
        planned = definition.plan(params, len(data))
        absent = sorted(planned.reads - set(map(str, data.columns)))
        if absent:
            columns = list(map(str, data.columns))
            raise MechanismInputError("data", "; ".join(
                f"variable {name!r} is not a column of the data{did_you_mean(name, columns)}" for name in absent)
                + f" (its columns: {excerpt(', '.join(columns), 80)})")  # a short excerpt: a header may be data
        if sample is not None:
            if not definition.subsamplable:
                raise MechanismInputError("sample", f"{name} is not a pure-epsilon mechanism; the subsampling "
                                                    "amplification bound (docs/explanation/model.md#subsampling) does not apply to it")
            planned = replace(planned, guarantees=tuple(_amplified(g, sample, len(data)) for g in planned.guarantees))
    except MechanismInputError as exc:
        raise _input_error(exc.field, str(exc)) from None
    return data, planned


def _run(definition: Definition, params: dict, data: pd.DataFrame, sample: int | None, rng):
    """(the mechanism's outcome, the subsample drawn or None): run on the data, or on a subsample of it."""
    subsample_record = None
    try:
        if sample is not None:
            epsilon = number_parameter(params, "epsilon")
            data, subsample_record = subsampling.draw_subsample(data, sample, epsilon, rng)
        outcome = definition.run(data, params, rng)
    except MechanismInputError as exc:
        raise _input_error(exc.field, str(exc)) from None
    return outcome, subsample_record


def _as_run(name: str, release: Release, planned, outcome, subsample_record) -> Release:
    """The release as the run made it: the parameters it ran with, its output and digest, recorded
    now. What it certifies must be what was planned (and checked against the caps)."""
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
    return final


def _with_public_categories(engine: Engine, dataset: str, definition: Definition, params: dict,
                            data: pd.DataFrame) -> pd.DataFrame:
    """The cells of a table must not depend on the data: a value seen only in the data
    would add a cell, and reveal the record (an unbounded loss). Every tabulated variable
    takes its categories from the `categories` parameter, else from the dataset file
    (variables[].categories), else from a categorical column; otherwise the run is refused."""
    if not definition.tabulates:
        return data
    from ..store.sessions import Session

    with Session(engine) as session:
        known = configuration.write_context(session).datasets.get(dataset)
    declared = {v.name: v.categories for v in known.variables if v.categories} if known else {}
    categories = dict(params.get("categories") or {})
    data = data.copy()
    for key in definition.tabulates:
        for name in names_parameter(params, key):
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
    epsilon = min(guarantee.epsilon, exact_fraction(amplified))
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


__all__ = ["Result", "digest", "joint_sample_leakage", "run_and_record"]
