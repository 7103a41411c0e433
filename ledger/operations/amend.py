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


class _Plan:
    """The amendments planned so far, the dataset as they leave it, and the errors found."""

    def __init__(self, old: Dataset, source: str):
        self.name, self.state, self.source = old.name, old, source
        self.out: list[Amendment] = []
        self.errors: list[LedgerError] = []

    def step(self, kind: str, summary: str, after: Dataset, change: dict) -> None:
        self.state = after
        self.out.append(Amendment(kind, self.name, summary, after, None, change))

    def refuse(self, at: str, message: str, source: str | None = None) -> None:
        self.errors.append(LedgerError(self.source if source is None else source, at, message))


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
    if new.name != old.name:
        return [], [LedgerError(source, "dataset", f"names dataset {new.name!r}, not {old.name!r}")]
    book = _Plan(old, source)
    _fixed_fields(book, old, new)
    current = {v.name: v for v in old.variables}
    _duties_and_description(book, old, new, reason, require_reason)
    _added_variables(book, new, current)
    _changed_variables(book, new, current, reason, require_reason)
    _groups(book, old, new)
    if new_caps is not None:
        _caps(book, old_caps, new_caps)
    final_caps = list(new_caps) if new_caps is not None else list(old_caps)
    _removed_variables(book, old, new, current, releases, families, final_caps)
    return (book.out if not book.errors else []), book.errors


def _fixed_fields(book: _Plan, old: Dataset, new: Dataset) -> None:
    """A recorded dataset's delta, neighbour relation and allowance are never changed."""
    if new.delta != old.delta:
        book.refuse("delta", "a recorded dataset's delta is never changed: every figure recorded is stated at it")
    if new.relation != old.relation:
        book.refuse("relation", relation_fixed(old))
    if new.allowance != old.allowance:
        book.refuse("allowance", allowance_fixed(old))


def _reason_text(reason: str | None) -> str:
    """The reason as an amendment's summary states it, or that one is needed."""
    if reason is None or not reason.strip():
        return " (needs a reason to be applied: --reason TEXT)"
    return f" (reason: {reason.strip()})"


def _duties_and_description(book: _Plan, old: Dataset, new: Dataset, reason: str | None,
                            require_reason: bool) -> None:
    """Separation of duties waived or restored (with a reason), and the dataset's description."""
    name = book.name
    if new.self_approval != old.self_approval:
        verb = "waive" if new.self_approval else "restore"
        if (reason is None or not reason.strip()) and require_reason:
            book.refuse("--reason", f"to {verb} separation of duties on dataset {name!r} needs a reason; give "
                        "--reason TEXT", source="command line")
        book.step("dataset.self_approval", f"dataset {name}: {verb} separation of duties (self_approval: "
                  f"{str(new.self_approval).lower()})" + _reason_text(reason),
                  replace(book.state, self_approval=new.self_approval),
                  {"self_approval": new.self_approval, "was": old.self_approval, "reason": (reason or "").strip()})
    if new.description != old.description:
        book.step("dataset.described", f"dataset {name}: description changed",
                  replace(book.state, description=new.description),
                  {"description": new.description, "was": old.description})


def _added_variables(book: _Plan, new: Dataset, current: dict[str, Variable]) -> None:
    """Each new variable, in the file's order; a classification that misreads `public` is refused."""
    for position, variable in enumerate(new.variables):
        changed = current.get(variable.name)
        if changed is None or changed.classification != variable.classification:
            misread = misread_public(variable.classification)
            if misread:
                book.refuse(f"variables[{position}].classification", misread)
        if variable.name not in current:
            book.step("variable.added", f"add variable {variable.name} ({variable.classification})"
                      + (f" with {len(variable.categories)} categories" if variable.categories else ""),
                      replace(book.state, variables=book.state.variables + (variable,)),
                      {"variable": variable.name, "classification": variable.classification,
                       "description": variable.description,
                       "categories": None if variable.categories is None else list(variable.categories)})


def _changed_variables(book: _Plan, new: Dataset, current: dict[str, Variable], reason: str | None,
                       require_reason: bool) -> None:
    """Categories only ever added, descriptions changed, and reclassifications (with a reason)."""
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
                book.refuse(f"{at}.categories", f"categories of {variable.name!r} are only "
                            f"ever added, never removed (missing: {', '.join(map(str, dropped))})")
            else:
                added = [c for c in new_categories if c not in old_categories]
                book.step("variable.categories_added", f"variable {variable.name}: add categories "
                          + ", ".join(map(str, added)),
                          _with(book.state, variable.name, categories=tuple(old_categories + added)),
                          {"variable": variable.name, "categories": added})
        if before.description != variable.description:
            book.step("variable.described", f"variable {variable.name}: description changed",
                      _with(book.state, variable.name, description=variable.description),
                      {"variable": variable.name, "description": variable.description, "was": before.description})
        if before.classification != variable.classification:
            if (reason is None or not reason.strip()) and require_reason:
                book.refuse("--reason", f"reclassifying {variable.name!r} ({before.classification} -> "
                            f"{variable.classification}) needs a reason; give --reason TEXT", source="command line")
            book.step("variable.reclassified", f"variable {variable.name}: {before.classification} -> "
                      f"{variable.classification}" + _reason_text(reason),
                      _with(book.state, variable.name, classification=variable.classification),
                      {"variable": variable.name, "classification": variable.classification,
                       "was": before.classification, "reason": (reason or "").strip()})


def _groups(book: _Plan, old: Dataset, new: Dataset) -> None:
    """Groups set (added or changed), then groups removed."""
    old_groups, new_groups = dict(old.groups), dict(new.groups)
    for group, members in new.groups:
        if old_groups.get(group) != members:
            groups = tuple((g, m) for g, m in book.state.groups if g != group) + ((group, members),)
            verb = "change" if group in old_groups else "add"
            book.step("group.set", f"{verb} group {group} = {{{', '.join(sorted(members))}}}",
                      replace(book.state, groups=groups),
                      {"group": group, "variables": sorted(members),
                       "was": sorted(old_groups[group]) if group in old_groups else None})
    for group, members in old.groups:
        if group not in new_groups:
            book.step("group.removed", f"remove group {group}",
                      replace(book.state, groups=tuple((g, m) for g, m in book.state.groups if g != group)),
                      {"group": group, "was": sorted(members)})


def _caps(book: _Plan, old_caps: Sequence[Cap], new_caps: Sequence[Cap]) -> None:
    """Caps set (added or changed), then caps removed."""
    name = book.name
    existing = {c.name: c for c in old_caps}
    kept = {c.name for c in new_caps}
    for cap in new_caps:
        if existing.get(cap.name) != cap:
            verb = "change" if cap.name in existing else "add"
            note = ""
            if cap.name in existing:
                before = cap_text(existing[cap.name])  # the same words: `all` or `protected` moved
                note = " (its subset changed with the dataset)" if before == cap_text(cap) else f" (was {before})"
            book.out.append(Amendment("cap.set", f"{name}/{cap.name}", f"{verb} cap {cap.name}: {cap_text(cap)}{note}",
                                      None, cap, {}))
    for cap in old_caps:
        if cap.name not in kept:
            book.out.append(Amendment("cap.removed", f"{name}/{cap.name}", f"remove cap {cap.name} ({cap_text(cap)})",
                                      None, None, {"was": cap.name}))


def _removed_variables(book: _Plan, old: Dataset, new: Dataset, current: dict[str, Variable],
                       releases: Iterable[Release], families: Iterable[Family], final_caps: list[Cap]) -> None:
    """Variables removed, each only when nothing names it: no recorded release reads it, no family
    partitions by it, no cap or group (as the plan leaves them) holds it."""
    wanted = {v.name: v for v in new.variables}
    removed = [v for v in old.variables if v.name not in wanted]
    if not removed:
        return
    readers: dict[str, list[str]] = {}
    for release in releases:
        for variable in release.reads & {v.name for v in removed}:
            readers.setdefault(variable, []).append(release.id)
    partitions = {v: [f.id for f in families if f.partition and v in f.partition] for v in wanted.keys() | current.keys()}
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
        grouped = [g for g, m in book.state.groups if variable.name in m]
        if grouped:
            uses.append("in group " + ", ".join(grouped))
        if uses:
            book.refuse("variables", f"cannot remove variable {variable.name!r}: it is "
                        + "; ".join(uses) + ". Recorded releases are never rewritten, so the variable stays")
            continue
        book.step("variable.removed", f"remove variable {variable.name} (no release reads it)",
                  replace(book.state, variables=tuple(v for v in book.state.variables if v.name != variable.name)),
                  {"variable": variable.name})


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
