"""Datasets that evolve: a change to a recorded dataset, as a list of audited amendments.

A dataset is never rewritten: each change is its own audit event carrying the
dataset's full state after it (so `audit verify` compares the rows with the
latest event, as for `dataset.added`), and releases already recorded keep
meaning what they meant. `plan` compares the recorded dataset (and its caps)
with the wanted one and returns the amendments, in the order they apply:

    dataset.self_approval (needs a reason), dataset.described, variable.added,
    variable.categories_added, variable.described, variable.reclassified (needs a reason),
    group.set, group.removed, cap.set, cap.removed, variable.removed

Refused (errors, nothing applied): removing a variable a recorded release
reads (any status: a cancelled or retracted release still counts at the moments
it was charged, which every --as-of view shows: history.state_as_of), a family
partitions by, or a cap or group still names; removing
categories (a table by the variable released those cells); changing the
dataset's delta (every recorded figure is stated at it), its neighbour relation or its
approximate allowance; a reclassification
without a reason.

Pure: the caller (cli_stewardship) reads the ledger and writes the events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..core.errors import LedgerError
from ..core.records import Cap, Dataset, Family, Release, Variable, misread_public


@dataclass(frozen=True)
class Amendment:
    """One audited change. kind: the audit event's kind; subject: the dataset, or
    dataset/cap for a cap; dataset: the dataset after this change (None for a cap
    change); cap: the cap set (cap.set), None otherwise; change: what changed, as
    JSON-ready data (the event's payload beside the state)."""

    kind: str
    subject: str
    summary: str
    dataset: Dataset | None
    cap: Cap | None
    change: dict


def relation_fixed(old: Dataset) -> str:
    """Why a recorded dataset's neighbour relation is refused a change (docs/explanation/model.md#variables-subsets-and-neighbours)."""
    return (f"a recorded dataset's neighbour relation is never changed: dataset {old.name!r} is "
            f"{old.relation.label}, and every figure and cap recorded is in it")


def allowance_fixed(old: Dataset) -> str:
    """Why a recorded dataset's approximate allowance is refused a change (docs/explanation/accounting.md)."""
    return (f"a recorded dataset's approximate allowance is never changed: dataset {old.name!r} keeps "
            f"{old.allowance} of every delta for (epsilon, delta) releases, and every figure recorded is "
            "stated with it")


def cap_text(cap: Cap) -> str:
    """The cap in words (`Cap.description`: one text in every command and report)."""
    return cap.description


def plan(
    old: Dataset,
    new: Dataset,
    *,
    source: str,
    old_caps: Sequence[Cap] = (),
    new_caps: Sequence[Cap] | None = None,
    releases: Iterable[Release] = (),
    families: Iterable[Family] = (),
    reason: str | None = None,
    require_reason: bool = True,
) -> tuple[list[Amendment], list[LedgerError]]:
    """The amendments that turn `old` into `new`, or the errors that refuse it.

    new_caps None: caps are left as they are (the file has no `caps`). `require_reason` False
    (a dry run, which writes nothing): a reclassification without a reason is listed, saying it
    needs one to be applied, instead of refused."""
    errors: list[LedgerError] = []
    out: list[Amendment] = []
    name = old.name
    if new.name != name:
        errors.append(LedgerError(source, "dataset", f"names dataset {new.name!r}, not {name!r}"))
        return [], errors
    if new.delta != old.delta:
        errors.append(LedgerError(source, "delta", "a recorded dataset's delta is never changed: every figure "
                                                   "recorded is stated at it"))
    if new.relation != old.relation:
        errors.append(LedgerError(source, "relation", relation_fixed(old)))
    if new.allowance != old.allowance:
        errors.append(LedgerError(source, "allowance", allowance_fixed(old)))
    state = old
    wanted = {v.name: v for v in new.variables}
    current = {v.name: v for v in old.variables}

    def step(kind: str, summary: str, after: Dataset, change: dict) -> None:
        nonlocal state
        state = after
        out.append(Amendment(kind, name, summary, after, None, change))

    if new.self_approval != old.self_approval:
        verb = "waive" if new.self_approval else "restore"
        unexplained = reason is None or not reason.strip()
        if unexplained and require_reason:
            errors.append(LedgerError("command line", "--reason", f"to {verb} separation of duties on dataset "
                                                                  f"{name!r} needs a reason; give --reason TEXT"))
        step("dataset.self_approval", f"dataset {name}: {verb} separation of duties (self_approval: "
             f"{str(new.self_approval).lower()})" + (f" (reason: {reason.strip()})" if not unexplained
                                                      else " (needs a reason to be applied: --reason TEXT)"),
             replace(state, self_approval=new.self_approval),
             {"self_approval": new.self_approval, "was": old.self_approval, "reason": (reason or "").strip()})
    if new.description != old.description:
        step("dataset.described", f"dataset {name}: description changed", replace(state, description=new.description),
             {"description": new.description, "was": old.description})
    for position, variable in enumerate(new.variables):
        changed = current.get(variable.name)
        if changed is None or changed.classification != variable.classification:
            misread = misread_public(variable.classification)
            if misread:
                errors.append(LedgerError(source, f"variables[{position}].classification", misread))
        if variable.name not in current:
            step("variable.added", f"add variable {variable.name} ({variable.classification})"
                 + (f" with {len(variable.categories)} categories" if variable.categories else ""),
                 replace(state, variables=state.variables + (variable,)),
                 {"variable": variable.name, "classification": variable.classification,
                  "description": variable.description,
                  "categories": None if variable.categories is None else list(variable.categories)})
    for index, variable in enumerate(new.variables):
        before = current.get(variable.name)
        if before is None:
            continue
        at = f"variables[{index}]"
        if before.categories != variable.categories:
            old_categories = list(before.categories or ())
            new_categories = list(variable.categories or ())
            dropped = [c for c in old_categories if c not in new_categories]
            if dropped:
                errors.append(LedgerError(source, f"{at}.categories", f"categories of {variable.name!r} are only "
                                          f"ever added, never removed (missing: {', '.join(map(str, dropped))})"))
            else:
                added = [c for c in new_categories if c not in old_categories]
                step("variable.categories_added", f"variable {variable.name}: add categories "
                     + ", ".join(map(str, added)),
                     _with(state, variable.name, categories=tuple(old_categories + added)),
                     {"variable": variable.name, "categories": added})
        if before.description != variable.description:
            step("variable.described", f"variable {variable.name}: description changed",
                 _with(state, variable.name, description=variable.description),
                 {"variable": variable.name, "description": variable.description, "was": before.description})
        if before.classification != variable.classification:
            unexplained = reason is None or not reason.strip()
            if unexplained and require_reason:
                errors.append(LedgerError("command line", "--reason",
                                          f"reclassifying {variable.name!r} ({before.classification} -> "
                                          f"{variable.classification}) needs a reason; give --reason TEXT"))
            step("variable.reclassified", f"variable {variable.name}: {before.classification} -> "
                 f"{variable.classification}" + (f" (reason: {reason.strip()})" if not unexplained
                                                 else " (needs a reason to be applied: --reason TEXT)"),
                 _with(state, variable.name, classification=variable.classification),
                 {"variable": variable.name, "classification": variable.classification,
                  "was": before.classification, "reason": (reason or "").strip()})
    old_groups, new_groups = dict(old.groups), dict(new.groups)
    for group, members in new.groups:
        if old_groups.get(group) != members:
            groups = tuple((g, m) for g, m in state.groups if g != group) + ((group, members),)
            verb = "change" if group in old_groups else "add"
            step("group.set", f"{verb} group {group} = {{{', '.join(sorted(members))}}}", replace(state, groups=groups),
                 {"group": group, "variables": sorted(members),
                  "was": sorted(old_groups[group]) if group in old_groups else None})
    for group, members in old.groups:
        if group not in new_groups:
            step("group.removed", f"remove group {group}",
                 replace(state, groups=tuple((g, m) for g, m in state.groups if g != group)),
                 {"group": group, "was": sorted(members)})
    if new_caps is not None:
        existing = {c.name: c for c in old_caps}
        kept = {c.name for c in new_caps}
        for cap in new_caps:
            if existing.get(cap.name) != cap:
                verb = "change" if cap.name in existing else "add"
                note = ""
                if cap.name in existing:
                    before = cap_text(existing[cap.name])  # the same words: `all` or `protected` moved
                    note = " (its subset changed with the dataset)" if before == cap_text(cap) else f" (was {before})"
                out.append(Amendment("cap.set", f"{name}/{cap.name}", f"{verb} cap {cap.name}: {cap_text(cap)}{note}",
                                     None, cap, {}))
        for cap in old_caps:
            if cap.name not in kept:
                out.append(Amendment("cap.removed", f"{name}/{cap.name}", f"remove cap {cap.name} ({cap_text(cap)})",
                                     None, None, {"was": cap.name}))
    removed = [v for v in old.variables if v.name not in wanted]
    if removed:
        readers: dict[str, list[str]] = {}
        for release in releases:
            for variable in release.reads & {v.name for v in removed}:
                readers.setdefault(variable, []).append(release.id)
        partitions = {v: [f.id for f in families if f.partition and v in f.partition] for v in wanted.keys() | current.keys()}
        final_caps = list(new_caps) if new_caps is not None else list(old_caps)
        for variable in removed:
            uses = []
            if readers.get(variable.name):
                shown = readers[variable.name][:5]
                uses.append("read by recorded release" + ("s " if len(readers[variable.name]) > 1 else " ")
                            + ", ".join(shown) + (" ..." if len(readers[variable.name]) > 5 else ""))
            if partitions.get(variable.name):
                uses.append("the partition of famil" + ("ies " if len(partitions[variable.name]) > 1 else "y ")
                            + ", ".join(partitions[variable.name]))
            capped = [c.name for c in final_caps if variable.name in c.subset and not c.whole_dataset]
            if capped:
                uses.append("in cap " + ", ".join(capped))
            grouped = [g for g, m in state.groups if variable.name in m]
            if grouped:
                uses.append("in group " + ", ".join(grouped))
            if uses:
                errors.append(LedgerError(source, "variables", f"cannot remove variable {variable.name!r}: it is "
                                          + "; ".join(uses) + ". Recorded releases are never rewritten, so the "
                                          "variable stays"))
                continue
            step("variable.removed", f"remove variable {variable.name} (no release reads it)",
                 replace(state, variables=tuple(v for v in state.variables if v.name != variable.name)),
                 {"variable": variable.name})
    return (out if not errors else []), errors


def _with(dataset: Dataset, name: str, **changes) -> Dataset:
    return replace(dataset, variables=tuple(replace(v, **changes) if v.name == name else v
                                            for v in dataset.variables))


def caps_follow(amendments: Sequence[Amendment], caps: Sequence[Cap]) -> list[Amendment]:
    """A cap on the whole dataset (`all`) or on `protected` names a subset that moves with the
    dataset: after a variable is added or removed, or reclassified, it is set again to the new
    subset (its own audited change, its running total recomputed from the history)."""
    final = next((a.dataset for a in reversed(amendments) if a.dataset is not None), None)
    if final is None:
        return []
    touched = {a.subject for a in amendments if a.kind in ("cap.set", "cap.removed")}
    out = []
    for cap in caps:
        if f"{final.name}/{cap.name}" in touched:
            continue
        if cap.whole_dataset:
            subset = frozenset(final.variable_names)
        elif cap.name == "protected" and final.protected_names:
            subset = frozenset(final.protected_names)
        else:
            continue
        if subset != cap.subset:
            changed = replace(cap, subset=subset)
            out.append(Amendment("cap.set", f"{final.name}/{cap.name}", f"change cap {cap.name}: {cap_text(changed)} "
                                 "(its subset changed with the dataset)", None, changed, {}))
    return out


def variable(name: str, classification: str = "unclassified", description: str = "",
             categories: Sequence | None = None) -> Variable:
    return Variable(name, classification, description, None if categories is None else tuple(categories))
