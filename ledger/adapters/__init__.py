"""Releases recorded where they are made: OpenDP, dp_accounting and diffprivlib.

Each adapter turns another library's object into ledger `Release` records with
the right guarantee; the user names the variables each release reads (and,
optionally, the subset it protects); the adapter derives the rest. Record
them like any other release -- `ledger.open().record(*releases)` -- and they
are checked against the caps first (all or nothing, `BudgetRefused`).

    ledger.adapters.opendp.release(measurement, id=..., dataset=..., reads=[...])
    ledger.adapters.dp_accounting.releases(event, id=..., dataset=..., reads=[...])
    ledger.adapters.diffprivlib.release(mechanism, id=..., dataset=..., reads=[...])
    ledger.adapters.diffprivlib.from_accountant(accountant, id=..., dataset=..., reads=[...])

Numbers from a library are floats. Each is recorded as the user wrote it: its
shortest round-trip decimal (`Laplace(epsilon=0.4)` is recorded as 2/5, the float
OpenDP's map returns, 0.5000000000000001, as that decimal), as a dataset or
release file's numbers are read (core.numbers.to_fraction); an exact Fraction stays exact.
The libraries are imported only by their adapter: each is an optional dependency
(`pip install -e '.[adapters]'` installs OpenDP and diffprivlib; dp_accounting is a dependency).

Status: a release from a library is recorded **planned** by default, as a release file without
`status` and `privacy-ledger run` record theirs; it reserves its budget at once (the caps are
checked when it is recorded) and is approved and published like any other release, by an approver
(separation of duties). `status="published"` records an output that went out when it was made (the
recorder then needs the approver role). The ledger does not see the library's output: a release
whose output has been computed is recorded with its digest (`dataclasses.replace(release,
output_digest=sha256_hex)`), and is charged from then, never cancelled (docs/explanation/accounting.md); without
one it is a reservation, which `cancel` frees.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from ..accounting.catalogue import derive_guarantees, unknown_parameters
from ..core.errors import InputErrors, LedgerError
from ..core.numbers import to_fraction
from ..core.records import Guarantee, Mechanism, Notion, Relation, Release, Status


def loss_fraction(value: float | int | Fraction) -> Fraction:
    """A number from a library as the user wrote it: a float's shortest round-trip decimal
    (`Fraction(repr(0.4))` = 2/5, not the binary 3602879701896397/9007199254740992), an
    integer or a Fraction exactly (core.numbers.to_fraction, as a file's numbers are read)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    return to_fraction(float(value))


def refuse(source: str, field: str, message: str) -> InputErrors:
    return InputErrors([LedgerError(source, field, message)])


def relation_of(value: str | Relation, source: str) -> Relation:
    try:
        return Relation(value)
    except ValueError:
        raise refuse(source, "relation", f"must be 'replace' or 'add-remove', found {value!r}") from None


def make_release(*, id: str, dataset: str, reads: Iterable[str], mechanism: str, params: dict[str, Any],
                 guarantees: Iterable[Guarantee] | None = None, protects: Iterable[str] | None = None,
                 title: str = "", status: Status | str = Status.PLANNED, source: str) -> Release:
    """A Release whose guarantees are the catalogue's derivation from `mechanism` and `params`,
    or the explicit `guarantees`; `protects` narrows what they protect (default: all read)."""
    read = frozenset(reads)
    if not id:
        raise refuse(source, "id", "a release needs an id")
    cleaned = {key: value for key, value in params.items() if value is not None}
    unknown = unknown_parameters(mechanism, cleaned)  # the catalogue's table, as for a release file
    if unknown:
        raise InputErrors([LedgerError(source, f"mechanism.{p.field}", p.message) for p in unknown])
    recorded = Mechanism(mechanism, tuple(sorted(cleaned.items())))
    if guarantees is None:
        derived, problems = derive_guarantees(recorded, read)
        if problems:
            raise InputErrors([LedgerError(source, f"mechanism.{p.field}", p.message) for p in problems])
        guarantees = derived
    protected = read if protects is None else frozenset(protects)
    if not protected <= read:
        raise refuse(source, "protects", f"protects {sorted(protected - read)}, which the release does not read")
    guarantees = tuple(Guarantee(protected, g.notion, g.epsilon, g.delta, g.rho, g.relation) for g in guarantees)
    return Release(id=id, dataset=dataset, reads=read, mechanism=recorded, guarantees=guarantees, title=title,
                   status=Status(status), source=source)


def guarantee(notion: Notion, relation: Relation, *, epsilon=None, delta=None, rho=None) -> Guarantee:
    """A guarantee on what is read (make_release sets the protected set)."""
    return Guarantee(frozenset(), notion, epsilon=epsilon, delta=delta, rho=rho, relation=relation)
