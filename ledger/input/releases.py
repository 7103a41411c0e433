"""A release document -> releases and families, checked against the ledger snapshot.

Every problem of a file is reported in one pass: the schema's, and, for the values it
accepted, unknown datasets and variables, mechanisms, guarantees, families and parts, and
the lifecycle. Invariant: when the error list is empty, each release satisfies the
invariants stated in records.py against the snapshot given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ..core.errors import LedgerError, did_you_mean
from ..core.records import Dataset, Family, Release, Status
from .batch import finish_batch
from .documents import Collector, Document, Path_, read_document
from .limits import field_name
from .mechanism_entry import build_guarantees, build_mechanism
from .release_rules import family_membership, lifecycle_fields, part_named
from .schema_check import RELEASE_SCHEMA, Taint, schema_problems
from .snapshot import LedgerSnapshot


def validated_release_documents(parsed: Iterable[tuple[Document | None, list[LedgerError]]]
                                ) -> tuple[list[Document], list[LedgerError]]:
    """Read release documents checked against the schema, before any lock is taken. Every parsed document is
    returned, marked as checked: one that passed is not checked again by `build_releases`, one
    that failed carries its schema problems, which `build_releases` reports together with every
    other problem of the file (one pass). The errors returned: those of the files that could not
    be read or parsed, and the schema problems (the caller refuses before any lock when there are any)."""
    documents: list[Document] = []
    errors: list[LedgerError] = []
    for document, read_errors in parsed:
        errors.extend(read_errors)
        if document is None:
            continue
        problems = schema_problems(document, RELEASE_SCHEMA)
        errors.extend(error for _at, error in problems)
        documents.append(replace(document, release_schema_checked=True, release_schema_problems=tuple(problems)))
    return documents, errors


# A dataset's variable names as a set, by the dataset record (the same object while the ledger's
# configuration is unchanged: store.configuration), so recording release after release does not
# build a set of every variable each time: (dataset, names) by id, the object kept to check it.
_VARIABLE_SETS: dict[int, tuple[Dataset, frozenset[str]]] = {}


def _variable_set(dataset: Dataset) -> frozenset[str]:
    found = _VARIABLE_SETS.get(id(dataset))
    if found is None or found[0] is not dataset:
        if len(_VARIABLE_SETS) > 64:
            _VARIABLE_SETS.clear()
        found = _VARIABLE_SETS[id(dataset)] = (dataset, frozenset(dataset.variable_names))
    return found[1]


def build_releases(
    document: Document,
    snapshot: LedgerSnapshot,
    *,
    recorded_by: str,
    recorded_at: datetime,
) -> tuple[list[Release], list[Family], list[LedgerError]]:
    """A release document -> releases and families, checked against the snapshot.

    Cross-document checks (duplicate ids, derived-from cycles) are in
    `check_batch`, which sees every file of one `record` together.
    """
    problems = (list(document.release_schema_problems) if document.release_schema_checked
                else schema_problems(document, RELEASE_SCHEMA))
    out = Collector(document)
    out.errors.extend(error for _at, error in problems)
    refused = Taint(at for at, _error in problems)
    data = document.data
    if not isinstance(data, dict) or not isinstance(data.get("releases", []), list) \
            or not isinstance(data.get("families", []), list):
        return [], [], out.errors  # (the schema said so: nothing else can be read)
    dataset = _named_dataset(data, snapshot, out, refused)
    check_variables = _variable_checker(dataset, out, refused)
    families = _build_families(document, data, dataset, snapshot, out, refused, check_variables)
    family_by_id = {**snapshot.families, **{family.id: family for family in families}}
    releases = []
    for index, entry in enumerate(data.get("releases", [])):
        if not isinstance(entry, dict):
            continue  # (the schema said so)
        release = _build_release(document, entry, ("releases", index), dataset, family_by_id, out, refused,
                                 check_variables, recorded_by=recorded_by, recorded_at=recorded_at)
        if release is not None:
            releases.append(release)
    return releases, families, out.errors


def _named_dataset(data: dict, snapshot: LedgerSnapshot, out: Collector, refused: Taint) -> Dataset | None:
    """The recorded dataset the file names, or None (an unknown one is reported)."""
    if not isinstance(data.get("dataset"), str) or refused.within(("dataset",)):
        return None
    dataset = snapshot.datasets.get(data["dataset"])
    if dataset is None:
        known = ", ".join(sorted(snapshot.datasets)) or "none recorded yet"
        out.add(("dataset",), f"unknown dataset {data['dataset']!r}"
                              f"{did_you_mean(data['dataset'], snapshot.datasets)} (known: {known})")
    return dataset


def _variable_checker(dataset: Dataset | None, out: Collector, refused: Taint
                      ) -> Callable[[Iterable[str], Path_], frozenset[str]]:
    """check_variables(names, at): the names as a set, each unknown one in `dataset` reported.
    Without a known dataset, the rest of the file is still checked (numbers, mechanisms,
    status), all but its variable names."""
    known_variables = _variable_set(dataset) if dataset is not None else None

    def check_variables(names: Iterable[str], at: Path_) -> frozenset[str]:
        names = list(names)
        for index, name in enumerate(names):
            if not isinstance(name, str) or refused.within(at + (index,)):
                continue  # (the schema's error names it: not a name to look up)
            if known_variables is not None and name not in known_variables:
                out.add(at + (index,), f"unknown variable {name!r} in dataset {dataset.name!r}"
                                       + did_you_mean(name, known_variables))
        return frozenset(n for n in names if isinstance(n, str))

    return check_variables


def _build_families(document: Document, data: dict, dataset: Dataset | None, snapshot: LedgerSnapshot,
                    out: Collector, refused: Taint, check_variables) -> list[Family]:
    """The families the file declares; one recorded already must be declared the same."""
    families: list[Family] = []
    for index, entry in enumerate(data.get("families", [])):
        if refused.within(("families", index)) or dataset is None:
            continue
        partition = entry["partition"]
        keys = None if partition == "random" else check_variables(partition, ("families", index, "partition"))
        family = Family(entry["id"], dataset.name, keys, entry.get("description", ""),
                        source=document.source(("families", index)))
        existing = snapshot.families.get(family.id)
        if existing is not None and existing != family:
            out.add(("families", index, "id"), f"family {family.id!r} is already recorded with a different "
                                               f"dataset or partition ({existing.dataset}, {_partition_text(existing)})")
        families.append(family)
    return families


def _build_release(document: Document, entry: dict, at: Path_, dataset: Dataset | None,
                   family_by_id: Mapping[str, Family], out: Collector, refused: Taint, check_variables, *,
                   recorded_by: str, recorded_at: datetime) -> Release | None:
    """One release entry, or None when it has a problem (every one of them reported)."""
    before = len(out.errors)
    raw_reads = entry.get("reads")
    reads_known = isinstance(raw_reads, list) and not refused.within(at + ("reads",))
    reads = check_variables(raw_reads if isinstance(raw_reads, list) else [], at + ("reads",))
    mechanism = build_mechanism(entry, reads, out, at, refused)
    # the guarantees checked only on what could be read: reads and mechanism whole
    guarantees = (build_guarantees(entry, mechanism, reads, out, at, check_variables, refused)
                  if reads_known and not refused.within(at + ("mechanism",)) else ())
    family = entry.get("family")
    if dataset is not None and not refused.within(at + ("family",)) and reads_known:
        family_membership(family, dataset.name, reads, family_by_id, out, at)
    part = entry.get("part")
    if not refused.within(at + ("part",)) and not refused.within(at + ("family",)):
        part_named(family, part, out, at)
    status, published_at = lifecycle_fields(entry, out, at, recorded_at, refused)
    # a release stated approved is its recorder's own approval, allowed only where the dataset
    # waives separation of duties (operations/people.check_recorded)
    approved_by, approved_at = (recorded_by, recorded_at) if status is Status.APPROVED else (None, None)
    if len(out.errors) > before or mechanism is None or dataset is None or refused.within(at):
        return None
    return Release(
        id=entry["id"],
        dataset=dataset.name,
        reads=reads,
        mechanism=mechanism,
        guarantees=guarantees,
        title=entry.get("title", ""),
        derived_from=tuple(entry.get("derived_from", ())),
        family=family,
        part=part,
        status=status,
        recorded_by=recorded_by,
        recorded_at=recorded_at,
        approved_by=approved_by,
        approved_at=approved_at,
        published_at=published_at,
        source=document.source(at),
        source_field=field_name(at),
        guarantees_derived="guarantees" not in entry,
    )


def _partition_text(family: Family) -> str:
    return "random split" if family.partition is None else "partition " + ", ".join(sorted(family.partition))


def load_releases(
    paths: Sequence[str | Path | Document],
    snapshot: LedgerSnapshot,
    *,
    recorded_by: str,
    recorded_at: datetime,
) -> tuple[list[Release], list[Family], list[LedgerError]]:
    """Every release file of one `record`: all or nothing (a path is read here; a
    Document, read earlier, is used as it is)."""
    releases: list[Release] = []
    families: list[Family] = []
    errors: list[LedgerError] = []
    for path in paths:
        document, read_errors = (path, []) if isinstance(path, Document) else read_document(path)
        errors.extend(read_errors)
        if document is None:
            continue
        more_releases, more_families, more_errors = build_releases(
            document, snapshot, recorded_by=recorded_by, recorded_at=recorded_at
        )
        releases.extend(more_releases)
        families.extend(more_families)
        errors.extend(more_errors)
    return finish_batch(releases, families, errors, snapshot)
