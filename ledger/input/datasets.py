"""A dataset document -> a Dataset and its caps, with every problem of the file in one pass.

Invariant: a Dataset returned has distinct variable names, none reserved (RESERVED_SUBSETS),
groups of known variables, and a delta and allowance in [0, 1); a Cap returned names a
subset of its dataset.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputErrors, LedgerError, did_you_mean
from ..core.numbers import NumberError, to_fraction
from ..core.records import DEFAULT_ALLOWANCE, PUBLIC, Cap, Dataset, Relation, Variable, misread_public
from .documents import Collector, Document, read_document
from .schema_check import Taint, schema_problems


RESERVED_SUBSETS = ("all", "protected")  # subsets every command takes (docs/explanation/model.md#public-and-protected-variables): never a variable or group


def reserved_name(name: str) -> str:
    return (f"{name!r} is the name of a subset every command takes (all: the whole dataset; protected: every "
            "variable not classified public); a variable or group of that name would shadow it")


def build_dataset(document: Document) -> tuple[Dataset | None, list[LedgerError]]:
    """A dataset document -> Dataset, or every problem of the file: the schema's, and, for the
    values it accepted, the rest (duplicate or reserved names, a near-miss of `public`, the delta,
    groups naming unknown variables), in one pass."""
    problems = schema_problems(document, "dataset.v1.schema.json")
    out = Collector(document)
    out.errors.extend(error for _at, error in problems)
    refused = Taint(at for at, _error in problems)
    data = document.data
    if not isinstance(data, dict):
        return None, out.errors
    names: set[str] = set()
    variables = []
    for index, entry in enumerate(data.get("variables") if isinstance(data.get("variables"), list) else ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue  # (the schema said so)
        at = ("variables", index)
        if entry["name"] in names:
            out.add(at + ("name",), f"duplicate variable {entry['name']!r}")
        if entry["name"] in RESERVED_SUBSETS:
            out.add(at + ("name",), reserved_name(entry["name"]))
        names.add(entry["name"])
        if refused.within(at):
            continue
        categories = tuple(entry["categories"]) if "categories" in entry else None
        misread = misread_public(entry.get("classification", PUBLIC))
        if misread:
            out.add(at + ("classification",), misread)
        variables.append(Variable(entry["name"], entry.get("classification", "unclassified"),
                                  entry.get("description", ""), categories))
    delta = None
    if "delta" in data and not refused.within(("delta",)):
        delta = out.number(data["delta"], ("delta",), below_one=True)
    allowance = DEFAULT_ALLOWANCE
    if "allowance" in data and not refused.within(("allowance",)):
        allowance = out.number(data["allowance"], ("allowance",), below_one=True)
    groups = []
    # every variable named (else a group's member may be a variable whose name was refused)
    listed = data.get("variables")
    known_names = isinstance(listed, list) and all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                   for e in listed)
    for group, members in (data.get("groups") if isinstance(data.get("groups"), dict) else {}).items():
        if refused.within(("groups", group)) or not isinstance(members, list):
            continue
        for index, member in enumerate(members):
            if known_names and member not in names:
                out.add(("groups", group, index), f"unknown variable {member!r} in group {group!r}")
        if group in names:
            out.add(("groups", group), f"group {group!r} has the name of a variable")
        if group in RESERVED_SUBSETS:
            out.add(("groups", group), reserved_name(group))
        groups.append((group, frozenset(members)))
    if out.errors:
        # the caps checked too, against the variables and groups that could be read (not when the
        # variables themselves were refused: every name a cap gives could then be reported unknown)
        if known_names and isinstance(data.get("dataset"), str) and isinstance(data.get("caps", []), list):
            named = {v.name: v for v in variables}
            provisional = Dataset(data["dataset"], tuple(named.get(e["name"], Variable(e["name"], "unclassified"))
                                                         for e in {e["name"]: e for e in listed}.values()),
                                  "", delta, tuple(groups))
            out.errors.extend(build_caps(document, provisional, refused=refused)[1])
        return None, out.errors
    return Dataset(data["dataset"], tuple(variables), data.get("description", ""), delta, tuple(groups),
                   self_approval=bool(data.get("self_approval", False)),
                   relation=Relation(data.get("relation", Relation.REPLACE.value)), allowance=allowance), []


def load_dataset(path: str | Path) -> tuple[Dataset | None, list[LedgerError]]:
    document, errors = read_document(path)
    if document is None:
        return None, errors
    return build_dataset(document)



def dataset_and_caps(document: Document | None, errors: list[LedgerError]) -> tuple[Dataset, list[Cap]]:
    """A read dataset document's dataset and caps (the CLI's `dataset add` and the API's
    `add_dataset`); every problem, reading included, raised together as InputErrors."""
    dataset = None
    if document is not None:
        dataset, errors = build_dataset(document)
    if errors:
        raise InputErrors(errors)
    caps, errors = build_caps(document, dataset)
    if errors:
        raise InputErrors(errors)
    return dataset, caps


def build_caps(document: Document, dataset: Dataset, key: str = "caps",
               refused: Taint | None = None) -> tuple[list[Cap], list[LedgerError]]:
    """The `caps` of a dataset document (or of a cap file) -> Cap records. `refused`: the values the
    schema refused (those entries are skipped: the schema reported them)."""
    out = Collector(document)
    caps: list[Cap] = []
    for index, entry in enumerate(document.data.get(key, []) or []):
        if refused is not None and refused.within((key, index)):
            continue
        cap = cap_from_entry(entry, dataset, lambda at, message, i=index: out.add((key, i) + at, message))
        if cap is not None:
            if any(existing.name == cap.name for existing in caps):
                out.add((key, index, "name"), f"two caps named {cap.name!r}; give one a `name`")
            caps.append(cap)
    return caps, out.errors


def cap_from_entry(entry: dict, dataset: Dataset, report) -> Cap | None:
    """One cap entry ({subset | name, epsilon [, delta] | rho}) -> Cap; problems go to `report(at, message)`."""
    before = []

    def problem(at, message):
        before.append(message)
        report(at, message)

    subset_spec = entry.get("subset")
    name = entry.get("name")
    whole = subset_spec == "all"
    if whole:
        subset = frozenset(dataset.variable_names)
        name = name or "all"
    elif subset_spec == "protected":  # every variable not classified public (docs/explanation/model.md#public-and-protected-variables)
        subset = frozenset(dataset.protected_names)
        name = name or "protected"
        if not subset:
            problem(("subset",), f"dataset {dataset.name!r} has no protected variable: every one is public")
            return None
    elif subset_spec is not None:
        for index, variable in enumerate(subset_spec):
            if variable in dataset.variable_names:
                continue
            if dataset.group(variable) is not None:  # the group's cap is written by its name alone
                problem(("subset", index), f"{variable!r} is a group, not a variable: a cap on a group is written "
                        f"{{name: {variable}, ...}} without `subset`, or list its variables")
            else:
                problem(("subset", index), f"unknown variable {variable!r} in dataset {dataset.name!r}"
                        + did_you_mean(variable, dataset.variable_names))
        subset = frozenset(subset_spec)
        name = name or ",".join(sorted(subset))
    else:
        group = dataset.group(name)
        if group is None:
            known = ", ".join(name for name, _ in dataset.groups) or "none declared"
            problem(("name",), f"unknown group {name!r} in dataset {dataset.name!r} (groups: {known})")
            return None
        subset = group

    def number(key, **kwargs):
        try:
            value = to_fraction(entry[key])
        except NumberError as exc:
            problem((key,), str(exc))
            return None
        if value < 0:
            problem((key,), f"must be non-negative. Found {entry[key]}.")
            return None
        if kwargs.get("below_one") and not 0 < value < 1:
            problem((key,), f"must be in (0, 1). Found {entry[key]}.")
            return None
        return value

    epsilon = number("epsilon") if "epsilon" in entry else None
    rho = number("rho") if "rho" in entry else None
    delta = number("delta", below_one=True) if "delta" in entry else None
    if "rho" in entry and "epsilon" in entry:
        problem(("rho",), "a cap is in epsilon or in rho, not both")
    if "delta" in entry and "epsilon" not in entry:
        problem(("delta",), "delta goes with an epsilon cap")
    if "rho" not in entry and "epsilon" not in entry:
        problem(("epsilon",), "a cap needs epsilon or rho")
    chosen_filter = entry.get("filter")
    if chosen_filter is not None and (delta is None or rho is not None):
        problem(("filter",), "a filter goes with an epsilon cap at a delta (a pure cap sums epsilon, a rho cap rho)")
    if before:
        return None
    return Cap(dataset.name, name, subset, epsilon=epsilon, delta=delta, rho=rho, whole_dataset=whole,
               filter=chosen_filter, order=dataset.variable_names, allowance=dataset.allowance)
