"""Frozen domain records: datasets, variables, guarantees, releases, families.

A release is plain data describing what was published, like dp_accounting's
DpEvent: the variables it reads, the mechanism and its parameters, and the
guarantees it carries. Nothing here touches a file or a database; the loader
builds these records, the store persists them, the engine reads them.

Invariants (checked by the loader, assumed by the engine):
- every name in `reads`, `protects`, a family's `partition` is a variable of
  the release's dataset;
- epsilon, delta and rho are exact `Fraction`s, epsilon >= 0, 0 <= delta < 1,
  rho >= 0;
- `derived_from` names recorded releases and never forms a cycle;
- a release has a `part` exactly when it has a `family`, and the charged members of
  one family have distinct parts (docs/explanation/model.md#families: members on disjoint parts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from fractions import Fraction
from typing import Any

# The share of a figure's delta kept for approximate releases' deltas when a dataset states none.
DEFAULT_ALLOWANCE = Fraction(1, 2)


class Notion(StrEnum):
    """The privacy notion a guarantee is stated in (docs/explanation/model.md#composition)."""

    PURE = "pure"  # epsilon-DP on the protected set (Tan, Definition 2.2)
    APPROX = "approx"  # (epsilon, delta)-DP on the protected set
    ZCDP = "zcdp"  # rho-zCDP on the protected set (Bun and Steinke 2016)


class Relation(StrEnum):
    """Which neighbouring datasets a guarantee is stated for (docs/explanation/model.md#variables-subsets-and-neighbours)."""

    REPLACE = "replace"  # one record replaced: bounded DP, Tan's U-neighbours
    ADD_REMOVE = "add-remove"  # one record added or removed: unbounded DP

    @classmethod
    def _missing_(cls, value: object) -> Relation | None:
        # `replace-one`, as a dataset file names Tan's bounded relation, is `replace`
        return cls.REPLACE if value == "replace-one" else None

    @property
    def label(self) -> str:
        """How output names it: `replace-one`, `add/remove`."""
        return "replace-one" if self is Relation.REPLACE else "add/remove"


class Status(StrEnum):
    """Where a release is in its lifecycle. Every status but cancelled is charged."""

    PLANNED = "planned"
    APPROVED = "approved"
    PUBLISHED = "published"
    RETRACTED = "retracted"  # still counts: what was published cannot be unpublished
    CANCELLED = "cancelled"  # never run, never published: frees its reservation (lifecycle.transition)


DATASET_CHANGE_KINDS = ("dataset.", "variable.", "group.")  # audit events whose subject is the dataset: its changes

CHARGED_STATUSES = frozenset({Status.PLANNED, Status.APPROVED, Status.PUBLISHED, Status.RETRACTED})


PUBLIC = "public"  # the classification of a variable released exactly by design (docs/explanation/model.md#public-and-protected-variables)


def misread_public(classification: str) -> str | None:
    """Why a classification that looks like `public` but is not (`Public`, `publc`, `public `:
    within two edits of it, letter case aside) is refused, else None. Any other word is a
    protected variable's label; one this close was meant as public, and kept as written it would
    be silently protected: its exact releases an alarm on every report, the steward's intent lost."""
    if classification == PUBLIC:
        return None
    text = classification.strip().lower()
    if _edits(text, PUBLIC) > 2:
        return None
    return (f"{classification!r} is not {PUBLIC!r}: only the word public marks a variable released exactly "
            "by design, outside the protected headline (docs/explanation/model.md#public-and-protected-variables); any other word marks it protected. "
            "Write public, or a classification that is not a near-miss of it (e.g. sensitive)")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


@dataclass(frozen=True, slots=True)
class Variable:
    """A dataset variable (Tan, Definition 2.1). `classification` is the steward's label
    (public / identifying / sensitive / ...); the accounting does not depend on it."""

    name: str
    classification: str = "unclassified"
    description: str = ""
    categories: tuple | None = None  # the public list of values, when the variable is categorical


@dataclass(frozen=True, slots=True)
class Dataset:
    """A confidential dataset: its variables, named groups of them, and the delta at
    which approximate totals are reported when a release file does not say."""

    name: str
    variables: tuple[Variable, ...]
    description: str = ""
    delta: Fraction | None = None
    groups: tuple[tuple[str, frozenset[str]], ...] = ()
    # separation of duties (docs/explanation/model.md#people-duties-and-the-book-of-record): False, the default, means the approver of a
    # release is never the person who recorded it; True is the dataset's explicit waiver
    self_approval: bool = False
    # the neighbour relation its figures and caps are in (docs/explanation/model.md#variables-subsets-and-neighbours); fixed once recorded
    relation: Relation = Relation.REPLACE
    # the share of every delta a figure is stated at that approximate releases' deltas may use
    # (docs/explanation/accounting.md); the filters' statements share the rest. Fixed once recorded
    allowance: Fraction = DEFAULT_ALLOWANCE

    @property
    def variable_names(self) -> tuple[str, ...]:
        return tuple(variable.name for variable in self.variables)

    def group(self, name: str) -> frozenset[str] | None:
        return dict(self.groups).get(name)

    @property
    def public_names(self) -> tuple[str, ...]:
        """Variables classified public: released exactly by design (docs/explanation/model.md#public-and-protected-variables)."""
        return tuple(v.name for v in self.variables if v.classification == PUBLIC)

    @property
    def protected_names(self) -> tuple[str, ...]:
        """The protected subset: every variable not classified public (docs/explanation/model.md#public-and-protected-variables)."""
        return tuple(v.name for v in self.variables if v.classification != PUBLIC)


@dataclass(frozen=True, slots=True)
class Guarantee:
    """A certified bound: the release is `notion`-private on every subset of `protects`
    (Tan, Prop 3.2), for neighbours under `relation`.

    Exactly the parameters of its notion are set: pure -> epsilon;
    approx -> epsilon and delta; zcdp -> rho.
    """

    protects: frozenset[str]
    notion: Notion
    epsilon: Fraction | None = None
    delta: Fraction | None = None
    rho: Fraction | None = None
    relation: Relation = Relation.REPLACE
    # the relation of the dataset it is charged in, set when it is recorded into an add/remove
    # dataset; None: replace-one (docs/explanation/model.md#variables-subsets-and-neighbours; accounting.relation.charged converts between them)
    charged_in: Relation | None = None

    @property
    def charge_relation(self) -> Relation:
        return self.charged_in or Relation.REPLACE


@dataclass(frozen=True, slots=True)
class PufferfishGuarantee:
    """A Pufferfish-family guarantee (docs/explanation/model.md#pufferfish-guarantees): p% protection (Bailie), dataset
    attribute privacy (Zhang, Ohrimenko and Cummings), perfect sample privacy.

    Stated under a data model, so it does not compose like DP: the engine never
    adds it into a DP total; reports show it in its own section with its secrets
    and assumptions.
    """

    kind: str  # "p-percent", "dataset-attribute-privacy", "perfect-sample-privacy"
    protects: frozenset[str]
    secrets: str
    assumptions: str
    epsilon: Fraction | None = None
    delta: Fraction | None = None
    parameters: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Mechanism:
    """How a release was produced, as data: a name and its parameters (exact numbers
    stay Fractions). `params` is a sorted tuple of pairs so the record stays hashable."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)


@dataclass(frozen=True, slots=True)
class Release:
    """One published (or planned) output of a dataset.

    reads: variables whose record values the output depends on (docs/explanation/model.md#a-release).
    guarantees: what the mechanism certifies; variables read but covered by no
        guarantee are released exactly and cost ∞ (docs/explanation/model.md#the-cost-of-one-release-on-a-subset).
    derived_from: releases whose outputs this one was computed from (lineage;
        a release reading nothing costs nothing, docs/explanation/model.md#post-processing-and-lineage).
    family: the parallel-composition family it belongs to (docs/explanation/model.md#families).
    part: for a family member, the part of the records it is computed on (a short name:
        "degree=PhD", "stratum 3"); None outside any family. The charged members of a
        family hold distinct parts: two releases on one part compose sequentially, and
        charged as parallel they would be under-reported (the loader refuses it). A
        member recorded before parts were named is its own part: its id.
    """

    id: str
    dataset: str
    reads: frozenset[str]
    mechanism: Mechanism
    guarantees: tuple[Guarantee, ...] = ()
    title: str = ""
    derived_from: tuple[str, ...] = ()
    family: str | None = None
    part: str | None = None  # the part of the records a family member is computed on (docs/explanation/model.md#families)
    status: Status = Status.PLANNED  # recorded without a status: planned
    recorded_by: str = ""
    recorded_at: datetime | None = None
    approved_by: str | None = None
    approved_at: datetime | None = None
    published_at: datetime | None = None
    pufferfish: tuple[PufferfishGuarantee, ...] = ()  # never added into DP totals (docs/explanation/model.md#pufferfish-guarantees)
    output_digest: str | None = None  # SHA-256 of its output; once one exists it stays charged (docs/explanation/accounting.md)
    output: str | None = None  # the output itself, as CSV (mechanisms run by the ledger); never the input data
    source: str = field(default="", compare=False)  # file:line it was read from, for messages
    source_field: str = field(default="", compare=False)  # its path in that file: "releases[1]"
    # read from a file that stated no guarantees: they are what the catalogue derives from the
    # mechanism (a retry compares the file's content, not the derivation: input.batch.differences)
    guarantees_derived: bool = field(default=False, compare=False)

    @property
    def exact_variables(self) -> frozenset[str]:
        """Variables read but covered by no guarantee: released without protection."""
        exact = self.reads
        for guarantee in self.guarantees:  # (set differences: protected sets can be large)
            if not exact:
                break
            exact = exact - guarantee.protects
        return exact


@dataclass(frozen=True, slots=True)
class Family:
    """Releases computed on disjoint parts of the records (Clifton et al.; docs/explanation/model.md#families).

    partition: the key variables that split the records, or None for a
    data-independent random split.
    """

    id: str
    dataset: str
    partition: frozenset[str] | None
    description: str = ""
    source: str = field(default="", compare=False)  # file:line it was declared at

    @property
    def is_random(self) -> bool:
        return self.partition is None


def in_dataset_order(order: tuple[str, ...], subset: frozenset[str]) -> tuple[str, ...]:
    """A subset of a dataset's variables in `order` (the dataset's variables, in dataset
    order), as `subset` prints a subset: the one order of a cap's subset and of headroom's
    variables. Sorted when `order` does not hold every variable of the subset (a cap read
    without its dataset's variables): never a variable dropped."""
    inside = tuple(name for name in order if name in subset)
    return inside if len(inside) == len(subset) else tuple(sorted(subset))


@dataclass(frozen=True, slots=True)
class Cap:
    """A budget cap: the loss on `subset` (docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6) must stay within one bound.

    Exactly one form is set:
    - epsilon, delta None: pure epsilon; a total with any delta or rho part exceeds it;
    - epsilon and delta: epsilon at that delta (zCDP parts converted, docs/explanation/model.md#composition);
    - rho: rho-zCDP; pure epsilon enters as epsilon^2 / 2, approximate parts exceed it.
    `name` identifies the cap in its dataset: a group name, "all", or the variables.
    """

    dataset: str
    name: str
    subset: frozenset[str]
    epsilon: Fraction | None = None
    delta: Fraction | None = None
    rho: Fraction | None = None
    whole_dataset: bool = False
    # a cap at a delta: the privacy filter it is, fixed when it is set ("gaussian", or "renyi:ORDER";
    # accounting/filters.py); None until the store sets it (pure and rho caps: their sums)
    filter: str | None = field(default=None, compare=False)
    # the dataset's variables in dataset order, when known: how the subset is printed (neither
    # compared nor stored; the loader and the store give it)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # the dataset's approximate allowance (Dataset.allowance; neither compared nor stored: the
    # loader and the store give it, with `order`)
    allowance: Fraction = field(default=DEFAULT_ALLOWANCE, compare=False, repr=False)

    @property
    def ordered_subset(self) -> tuple[str, ...]:
        """The subset in dataset order, as `subset` prints a subset (`in_dataset_order`)."""
        return in_dataset_order(self.order, self.subset)

    @property
    def unit(self) -> str:
        if self.rho is not None:
            return "rho"
        return "epsilon" if self.delta is None else "epsilon at delta"

    @property
    def limit(self) -> Fraction | None:
        """The bound: rho for a rho cap, else epsilon; None for a cap that only names a subset
        (neither set)."""
        return self.rho if self.rho is not None else self.epsilon

    @property
    def unit_text(self) -> str:
        """The cap's unit with its delta: `epsilon`, `rho`, `epsilon at delta 1 × 10⁻⁹`."""
        return cap_unit_text(self.unit, self.delta)

    @property
    def limit_text(self) -> str:
        """The cap's bound in words, the one text every command and report prints for it:
        `epsilon 1`, `rho 1/2`, `epsilon 10 at delta 1 × 10⁻⁹` (a limit rounded down, as a
        cap is; exact where its text is short)."""
        from .numbers import format_delta, format_number

        limit = self.limit
        if limit is None:
            raise ValueError(f"cap {self.dataset}/{self.name} has no bound to print: neither epsilon nor rho is set")
        name = "rho" if self.rho is not None else "epsilon"
        text = f"{name} {format_number(limit, down=True)}"
        return text if self.delta is None else f"{text} at delta {format_delta(self.delta)}"

    @property
    def description(self) -> str:
        """The cap as `epsilon 10 at delta 1 × 10⁻⁹ on the whole dataset` or `rho 2 on {income, sex}`."""
        where = "the whole dataset" if self.whole_dataset else "{" + ", ".join(self.ordered_subset) + "}"
        return f"{self.limit_text} on {where}"


def cap_unit_text(unit: str, delta: Fraction | None) -> str:
    """A cap's unit with its delta (`Cap.unit_text`; a report's cap rows call it with their own
    unit and delta): `epsilon`, `rho`, `epsilon at delta 1 × 10⁻⁹`."""
    from .numbers import format_delta

    return unit if delta is None else f"epsilon at delta {format_delta(delta)}"


def in_name_order(caps: Iterable[Cap]) -> tuple[Cap, ...]:
    """Caps in the one order every command lists them in: by name, in Python's string order
    (code points). The database's order is not it: SQLite compares names by bytes, PostgreSQL by
    its database's collation, which under a locale (en_US, ICU) puts `b` before `C`."""
    return tuple(sorted(caps, key=lambda cap: cap.name))
