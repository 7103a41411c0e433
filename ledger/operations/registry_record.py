"""A record for the DP Deployments Registry (OpenDP / Harvard), from what the ledger knows.

The registry's schema (opendp/deployments-registry-data, `deployments-schema.yaml`)
describes one deployment at tier 1, 2 or 3. The ledger fills what it knows:

- the DP variant and the privacy-loss parameters of the protected variables,
  composed over every charged release (cancelled ones never count) by the
  ledger's own accounting: pure epsilon (Tan, Prop 3.4), rho-zCDP (Bun and
  Steinke 2016, Lemma 2.3; pure releases enter as epsilon^2/2, Prop 3.3), or
  (epsilon, delta) at the dataset's delta, with the zCDP conversion named
  (Canonne, Kamath and Steinke 2020);
- the figures per variable (Tan's Table 1 total row), in the details;
- the privacy unit declared on the dataset (`privacy_unit`, `privacy_unit_details`);
- unprotected quantities: variables classified public, and variables released
  exactly (read but covered by no guarantee);
- accounting: composition (sequential per notion, parallel for families) and
  post-processing (releases derived from others);
- the mechanisms used and how often.

Whatever only a person can say (curators, intended use, region, actors, the
rationale) is a string starting with `PLACEHOLDER`, so a reviewer finds every
gap by searching for it. Figures are safe bounds: losses rounded up.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ..accounting.spend import ALLOWANCE, CONVERSION_NAME
from ..operations.choices import charged_index
from ..accounting.charge_choice import at_delta
from ..input.snapshot import LedgerSnapshot
from ..core.numbers import format_delta, format_number
from ..core.records import Cap, Dataset, Release

PLACEHOLDER = "PLACEHOLDER (to be filled in by the data steward):"
PUBLIC = "public"


def _todo(what: str) -> str:
    return f"{PLACEHOLDER} {what}"


def _safe(value) -> float:
    from ..core.numbers import safe_float

    return safe_float(value)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "deployment"


@dataclass(frozen=True)
class ReleaseFacts:
    """What the record says of the charged releases themselves (not their figures, which come
    from the index): gathered in one pass over the releases (`release_facts`, the API's path),
    or by SQL with only the few releases it names decoded (`facts_of`, `export registry`:
    a million releases)."""

    count: int = 0
    first: datetime | None = None  # the earliest publication (else recording) moment
    exact: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (id, title, variables read exactly)
    # (id, the releases it is computed from, the variables it reads itself: none when it is
    # post-processing alone, docs/explanation/model.md#post-processing-and-lineage)
    derived: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...] = ()
    mechanisms: tuple[tuple[str, int], ...] = ()  # (mechanism name, releases), by name


def release_facts(releases: Iterable[Release]) -> ReleaseFacts:
    count, first, exact, derived, mechanisms = 0, None, [], [], Counter()
    for release in releases:
        count += 1
        moment = release.published_at or release.recorded_at
        if moment is not None and (first is None or moment < first):
            first = moment
        if release.exact_variables:
            exact.append((release.id, release.title, release.exact_variables))
        if release.derived_from:
            derived.append((release.id, tuple(release.derived_from), release.reads))
        mechanisms[release.mechanism.name] += 1
    return ReleaseFacts(count, first, tuple(exact), tuple(derived), tuple(sorted(mechanisms.items())))


def facts_of(charged) -> ReleaseFacts:
    """`release_facts` of the charged releases from what SQL found of them (store.facts.ChargedFacts:
    the counts, and whole only the earliest release and those that may be read exactly or derived):
    the same facts, without a pass over every release."""
    first = charged.first
    return ReleaseFacts(
        count=charged.count, first=None if first is None else first.published_at or first.recorded_at,
        exact=tuple((r.id, r.title, r.exact_variables) for r in charged.exact if r.exact_variables),
        derived=tuple((r.id, tuple(r.derived_from), r.reads) for r in charged.derived if r.derived_from),
        mechanisms=tuple(sorted(charged.mechanisms)))


def registry_record(snapshot: LedgerSnapshot, dataset: Dataset, caps: Sequence[Cap], *, tier: int = 2,
                    privacy_unit: dict[str, str] | None = None, today: date | None = None) -> dict[str, Any]:
    """The registry record of one dataset's releases, as a dict ready for YAML."""
    index = charged_index(snapshot, dataset)
    return record_of(index, release_facts(index.releases), dataset, caps, tier=tier, privacy_unit=privacy_unit,
                     today=today)


def record_from_rows(engine, dataset: str | None, *, tier: int = 2, field: str = "--dataset") -> tuple[Dataset, dict[str, Any]]:
    """(the dataset chosen, its registry record), the figures from the accounting rows (as `table`
    reads them), the releases' own facts by SQL (store/facts.py): no release is decoded but the few
    the record names; Table 1's total row a chunk of releases at a time (its cells at a million
    releases: 800 MB), at the delta the record reads it at."""
    from ..store.sessions import Session

    from ..accounting import chunked_table
    from ..store import index_from_rows
    from ..store import configuration, dataset_writes
    from ..store.facts import charged_facts
    from .choices import pick_dataset

    with Session(engine) as session:
        light = configuration.write_context(session)
        chosen = pick_dataset(light, dataset, field)
        caps = configuration.caps(session, chosen.name)
        unit = dataset_writes.privacy_unit(session, chosen.name)
        index = index_from_rows.index_for(session, chosen.variable_names, chosen.name, light.families)
        exact = index.releases.seqs[index.exactly_read()].tolist()
        facts = facts_of(charged_facts(session.connection(), chosen.name, exact))
        delta = record_delta(chosen)
        table = chunked_table.table_in_chunks(index, chosen.name, at_delta(delta), delta, 0) if tier >= 2 else None
        return chosen, record_of(index, facts, chosen, caps, tier=tier, privacy_unit=unit, table=table)  # (reads ids)


def record_of(index, facts: ReleaseFacts, dataset: Dataset, caps: Sequence[Cap], *, tier: int = 2,
              privacy_unit: dict[str, str] | None = None, today: date | None = None, table=None) -> dict[str, Any]:
    """The registry record from the index of the dataset's charged releases (the figures: from
    the releases, or from the accounting rows, `index_from_rows.index_for`) and their facts. `table`:
    the index's Table 1 at the dataset's delta when already made (only its total row is read:
    `chunked_table.table_in_chunks` makes it without the 800 MB of cells of a million releases)."""
    if tier not in (1, 2, 3):
        raise ValueError(f"tier must be 1, 2 or 3, found {tier!r}")
    unit = privacy_unit or {}
    delta = record_delta(dataset)
    exact_variables = sorted({name for _, _, exact in facts.exact for name in exact})
    public = [v.name for v in dataset.variables if v.classification == PUBLIC]
    unprotected = sorted(set(public) | set(exact_variables), key=dataset.variable_names.index)
    protected = [name for name in dataset.variable_names if name not in unprotected]
    spend = index.subset_cost(set(protected), at_delta(delta)).spend if protected else None

    first = facts.first.date() if facts.first is not None else (today or date.today())
    basic: dict[str, Any] = {
        "name": dataset.description or dataset.name,
        "data_curators": [_todo("the agency publishing the data product")],
        "description": (f"{facts.count} release{'s' if facts.count != 1 else ''} of the confidential dataset "
                        f"{dataset.name!r} ({', '.join(dataset.variable_names)}), recorded in privacy-ledger. "
                        + _todo("what the data product is")),
        "intended_use": _todo("intended use(s) of the data product"),
        "data_product_type": "Summary statistics",
        "data_product_region": _todo("the region the data describe / whose laws apply"),
        "publication_date": first.isoformat(),
    }
    record: dict[str, Any] = {
        "url_slug": slug(f"{dataset.name}-{first.year}"),
        "status": "Draft",
        "tier": tier,
        "deployment": {"basic": basic},
    }
    deployment = record["deployment"]
    if tier >= 2:
        variant, parameters, details = _variant(spend, delta, protected, _smallest(index, protected, delta, spend),
                                               index.allowance)
        deployment["dp_variant"] = {"variant_name": variant}
        deployment["privacy_loss"] = {
            "privacy_unit": unit.get("privacy_unit") or _todo("the privacy unit (declare `privacy_unit` in the "
                                                              "dataset file): e.g. person, household"),
            "privacy_parameters": parameters,
            "privacy_parameters_details": details + _per_variable(index, dataset, delta, table),  # names the conversion
        }
        deployment["deployment_model"] = {
            "model_name": "Central",
            "release_type": "Many releases" if facts.count > 1 else "One release",
            "access_type": "Non-interactive",
        }
        if tier >= 3:
            deployment["dp_variant"]["data_domain"] = (
                f"Datasets with the variables of {dataset.name!r}: {', '.join(dataset.variable_names)}. "
                + _todo("which records are eligible for protection"))
            deployment["dp_variant"]["unprotected_quantities"] = _unprotected_text(public, facts.exact)
            deployment["privacy_loss"]["privacy_unit_details"] = unit.get("privacy_unit_details") or _todo(
                "what adjacent datasets are (declare `privacy_unit_details` in the dataset file)")
            deployment["deployment_model"]["actors"] = _todo("the actors, their trust assumptions and why")
            deployment["deployment_model"]["release_type_details"] = _caps_text(caps)
            deployment["accounting"] = {"composition": _composition_text(index), "post_processing":
                                        _post_processing_text(facts.derived)}
            deployment["implementation"] = {
                "preprocessing_and_hyperparameter_tuning": _todo("pre-processing, tuning, and whether their "
                                                                 "privacy loss was accounted for"),
                "mechanisms": _mechanisms_text(facts.mechanisms),
                "justification": _todo("the rationale for these choices"),
            }
    deployment["administrative"] = {
        "registry_authors": [_todo("who fills in this record")],
        "notes": (f"Exported by privacy-ledger from dataset {dataset.name!r}. Fields starting with "
                  f"{PLACEHOLDER!r} need a person; data_product_type, model_name and access_type are the "
                  "ledger's defaults (summary statistics published by a central curator): check them."),
    }
    return record


def record_delta(dataset: Dataset):
    """The delta the record states its figures at: the dataset's, else the default."""
    return dataset.delta or at_delta_default()


def at_delta_default():
    from ..accounting.spend import DEFAULT_DELTA

    return DEFAULT_DELTA


def _smallest(index, subset, delta, spend):
    """The smallest valid figure on `subset` at `delta` (figure_validity.best over the basic, Rényi
    and PLD accountants, as `subset` and `table` print it; docs/explanation/accounting.md), or None where the
    basic figure is pure or unbounded (a pure statement holds at delta 0: it is kept)."""
    if spend is None or spend.is_zero or spend.unbounded or spend.is_pure:
        return None
    from ..accounting import figure_validity, index_figures

    return figure_validity.best(index_figures.subset_figures(index, subset, delta, spend, invalid_pld=False))


def _figure_source(figure) -> str:
    return f"the {figure.accountant} accountant's figure ({figure.theorem}; {figure.conversion})" \
        if figure.accountant != "basic" else ""


def _variant(spend, delta, protected, smallest=None, allowance=ALLOWANCE) -> tuple[str, dict, str]:
    """The DP variant and the parameters of the protected variables' total: the epsilon at a
    delta is the smallest valid figure (`smallest`), as `subset` prints it for that subset."""
    if spend is None or spend.is_zero:
        return "Pure DP", {"epsilon": 0}, "No release charges the protected variables.\n"
    if spend.unbounded:
        return "Custom", {}, "The protected variables are not bounded by any guarantee (∞).\n"
    on = "{" + ", ".join(protected) + "}"
    if spend.is_pure:
        return ("Pure DP", {"epsilon": _safe(spend.pure)},
                f"- epsilon = {format_number(spend.pure)} on {on}: pure epsilon, summed over every release "
                "(Tan, Prop 3.4).\n")
    epsilon = spend.epsilon(delta, allowance)
    source = ""
    if smallest is not None and smallest.accountant != "basic" and float(smallest.epsilon) < float(epsilon):
        epsilon, source = smallest.epsilon, _figure_source(smallest)
    rho = spend.zcdp_rho()
    if rho is not None:
        how = (f"the smallest valid figure, {source}" if source else f"converted by the {CONVERSION_NAME}")
        return ("Zero-concentrated DP", {"rho": _safe(rho), "epsilon": _safe(epsilon), "delta": _safe(delta)},
                f"- rho = {format_number(rho)} (zCDP) on {on}: rho summed over every release, pure releases "
                "entered as epsilon^2/2 (Bun and Steinke 2016, Lemma 2.3 and Prop 3.3).\n"
                f"- epsilon = {format_number(epsilon)} at delta = {format_delta(delta)}, {how}.\n")
    how = (f"the smallest valid figure, {source}" if source else
           f"basic composition (Dwork and Roth 2014, Theorem 3.16), zCDP parts converted by the {CONVERSION_NAME}")
    return ("Approximate DP", {"epsilon": _safe(epsilon), "delta": _safe(delta)},
            f"- epsilon = {format_number(epsilon)} at delta = {format_delta(delta)} on {on}: {how}.\n")


def _per_variable(index, dataset: Dataset, delta, table=None) -> str:
    table = table if table is not None else index.table(dataset.name, at_delta(delta))
    lines = ["- Per variable (every release composed; Tan, Table 1):"]
    for name, spend in zip(table.variables, table.total):
        if spend.unbounded:
            lines.append(f"  - {name}: ∞ (released exactly, not protected)")
            continue
        smallest = _smallest(index, [name], delta, spend)  # as the total row of `table` prints it
        own = spend.epsilon(delta, table.allowance)
        epsilon = own if smallest is None else min(float(own), float(smallest.epsilon))
        text = f"  - {name}: epsilon {format_number(epsilon)}"
        if not spend.is_pure:
            text += f" at delta {format_delta(delta)}"
            rho = spend.zcdp_rho()
            if rho is not None:
                text += f"; rho {format_number(rho)}"
        lines.append(text)
    return "\n".join(lines) + "\n"


def _unprotected_text(public, exact_releases) -> str:
    lines = []
    if public:
        lines.append("- Variables classified public: " + ", ".join(public) + ".")
    for release_id, title, exact in exact_releases:
        lines.append(f"- Release {release_id!r}{' (' + title + ')' if title else ''} "
                     f"releases {', '.join(sorted(exact))} exactly (no noise).")
    return "\n".join(lines) + "\n" if lines else "None: every variable read is covered by a guarantee.\n"


def _composition_text(index) -> str:
    text = ("Sequential composition per variable subset (Tan, Prop 3.4): pure epsilon adds; (epsilon, delta) "
            "adds (basic composition); rho-zCDP adds (Bun and Steinke 2016). A release costs nothing on "
            "variables it does not read (Tan, Prop 3.3).")
    if index.families:
        text += (" Releases on disjoint parts of the records (families: "
                 + ", ".join(sorted(index.families)) + ") compose in parallel (Clifton et al.).")
    return text + "\n"


def _post_processing_text(derived) -> str:
    if not derived:
        return "No post-processed release is recorded. " + _todo("post-processing applied outside the ledger")
    return "\n".join(f"- {release_id!r} is computed from {', '.join(sources)} " + (
        f"and reads {', '.join(sorted(reads))} itself: charged as any release reading them (docs/explanation/model.md#post-processing-and-lineage)." if reads
        else "(post-processing: no further loss).") for release_id, sources, reads in derived) + "\n"


def _mechanisms_text(mechanisms) -> str:
    lines = [f"- {name}: {count} release{'s' if count != 1 else ''}" for name, count in mechanisms]
    lines.append("- " + _todo("implementation: library, floating-point and timing protections, security"))
    return "\n".join(lines) + "\n"


def _caps_text(caps: Sequence[Cap]) -> str:
    if not caps:
        return "No budget cap is declared in the ledger. " + _todo("how privacy loss is managed over time")
    lines = ["Budget caps enforced by the ledger before each release:"]
    for cap in caps:
        lines.append(f"- {cap.name} on {{{', '.join(cap.ordered_subset)}}}: {cap.limit_text}")
    return "\n".join(lines) + "\n"
