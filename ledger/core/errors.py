"""Problems in user input, as values with a source (STYLE 3).

A `LedgerError` names where the problem is (file and line, or a release id),
the field, and what is wrong with the value. The loader and the checks collect
every error before anything is written; the CLI prints them all and exits 2.
Exceptions are raised only for programming mistakes, and `InputErrors` to
carry a collected list across a layer boundary.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LedgerError:
    source: str  # "releases.yaml:12", "release income-by-degree", "command line"
    field: str  # "releases[1].mechanism.epsilon"
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.field}" if self.field else self.source
        return f"{where}: {self.message}"


class InputErrors(Exception):
    """Bad user input: exit code 2, nothing written."""

    def __init__(self, errors: list[LedgerError]):
        self.errors = list(errors)
        super().__init__("\n".join(str(error) for error in self.errors))


class Refused(Exception):
    """A well-formed step the ledger's rules refuse outside a cap check (cancelling a release
    whose output exists, docs/explanation/accounting.md): exit code 1, as a refused cap, nothing written."""

    def __init__(self, error: LedgerError):
        self.error = error
        super().__init__(str(error))


def fail(source: str, field: str, message: str) -> InputErrors:
    """One error, ready to raise."""
    return InputErrors([LedgerError(source, field, message)])


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'age'?)' when a known name is close to `name`, else ''."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
