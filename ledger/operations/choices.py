"""What a command or an API call refers to: the dataset, the delta, the variables, a
release id, the ledger's URL -- resolved the same way for the CLI and the Python API.

Every function here either returns the resolved value or raises `InputErrors`
naming the field (exit 2 in the CLI). A name that is not found is answered with
the nearest known names ("did you mean ...?", difflib), never guessed.
The charged releases of a dataset (`charged_index`) exclude cancelled ones:
a cancelled release never counts (records.CHARGED_STATUSES).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fractions import Fraction

from typing import TYPE_CHECKING

from ..accounting.spend import DEFAULT_DELTA
from ..core.errors import InputErrors, LedgerError, did_you_mean, fail
from ..core.lazy import lazy_module
from ..core.numbers import NumberError, to_fraction
from ..core.records import CHARGED_STATUSES, Dataset

if TYPE_CHECKING:
    from ..accounting.ledger_index import LedgerIndex
    from ..input.snapshot import LedgerSnapshot

ledger_index = lazy_module("ledger.accounting.ledger_index")  # when an index is built, not for `--help`
audit_chain = lazy_module("ledger.store.audit_chain")
configuration = lazy_module("ledger.store.configuration")
decoded_history = lazy_module("ledger.store.decoded_history")
engines = lazy_module("ledger.store.engines")

POSTGRES_SCHEMES = ("postgres://", "postgresql://")  # libpq spellings: read with psycopg 3


def _source(field: str) -> str:
    """Where a choice came from, as an error names it: the command line's options and arguments
    are spelled `--dataset` and `VARIABLES`; the Python API's are its parameters' names."""
    return "command line" if field.startswith("-") or field.isupper() else "argument"


def ledger_url(url: str | None = None) -> str:
    """The ledger's SQLAlchemy URL: `url`, else $LEDGER_DATABASE_URL, else sqlite:///ledger.db.
    `postgres://` and `postgresql://` (libpq's spellings) are read as `postgresql+psycopg://`:
    psycopg 3 is the driver the ledger installs."""
    # engines.database_url, without importing the store (and the ORM) for `--help`
    chosen = url or os.environ.get("LEDGER_DATABASE_URL") or "sqlite:///ledger.db"
    for scheme in POSTGRES_SCHEMES:
        if chosen.startswith(scheme):
            return "postgresql+psycopg://" + chosen[len(scheme):]
    return chosen


def pick_dataset(snapshot: LedgerSnapshot, name: str | None, field: str = "--dataset") -> Dataset:
    """The named dataset, or the only one when no name is given."""
    if name is not None:
        if name not in snapshot.datasets:
            known = ", ".join(sorted(snapshot.datasets)) or "none"
            raise fail(_source(field), field, f"unknown dataset {name!r}{did_you_mean(name, snapshot.datasets)} "
                                              f"(known: {known})")
        return snapshot.datasets[name]
    if not snapshot.datasets:
        raise fail(_source(field), field, "the ledger holds no dataset yet; add one with `dataset add FILE`")
    if len(snapshot.datasets) > 1:
        raise fail(_source(field), field, "the ledger holds several datasets; choose one: "
                   + ", ".join(sorted(snapshot.datasets)))
    return next(iter(snapshot.datasets.values()))


def parse_delta(option: object, dataset: Dataset, field: str = "--delta") -> Fraction:
    """The delta epsilon figures are stated at: the given one, else the dataset's, else 1e-9."""
    if option is None:
        return dataset.delta or DEFAULT_DELTA
    try:
        delta = to_fraction(option)
    except NumberError as exc:
        raise fail(_source(field), field, str(exc)) from None
    if not 0 < delta < 1:
        raise fail(_source(field), field, f"must be in (0, 1). Found {option}.")
    return delta


def charged_index(snapshot: LedgerSnapshot, dataset: Dataset) -> LedgerIndex:
    """The dataset's charged releases (every status but cancelled) and its families."""
    releases = [r for r in snapshot.releases.values() if r.dataset == dataset.name and r.status in CHARGED_STATUSES]
    families = [f for f in snapshot.families.values() if f.dataset == dataset.name]
    return ledger_index.LedgerIndex(dataset.variable_names, releases, families).for_dataset(dataset.allowance)


def resolve_variables(chosen: Dataset, names: Iterable[str], field: str = "VARIABLES") -> set[str]:
    """Variables and group names -> the set of variables; every unknown name reported."""
    resolved: set[str] = set()
    errors = []
    known = [*chosen.variable_names, *(group for group, _ in chosen.groups)]
    for name in names:
        if name in chosen.variable_names:
            resolved.add(name)
        elif chosen.group(name) is not None:
            resolved |= chosen.group(name)
        elif name == "all":  # the whole dataset
            resolved |= set(chosen.variable_names)
        elif name == "protected":  # every variable not classified public (docs/explanation/model.md#public-and-protected-variables)
            resolved |= set(chosen.protected_names)
        else:
            errors.append(LedgerError(_source(field), field, f"unknown variable or group {name!r} in "
                                                             f"{chosen.name!r}{did_you_mean(name, known) or _listed(chosen)}"))
    if errors:
        raise InputErrors(errors)
    return resolved


def _listed(chosen: Dataset, most: int = 12) -> str:
    """' (variables: a, b, ...; groups: g)': what a name may be, cut after `most` variables."""
    names = list(chosen.variable_names)
    shown = ", ".join(names[:most]) + (f", ... ({len(names) - most} more)" if len(names) > most else "")
    groups = [group for group, _ in chosen.groups] + ["protected", "all"]
    return f" (variables: {shown}; groups: {', '.join(groups)})"


REPORT_FORMATS = ("html", "md", "tex", "csv", "pdf")
TEXT_FORMATS = ("html", "md", "tex", "csv")  # may go to standard output (`--out -`)
_EXTENSIONS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".tex": "tex", ".csv": "csv",
               ".pdf": "pdf"}


def report_format(option: str | None, out: str) -> str:
    """The report's format: --format, else from --out's extension; a contradicting pair is
    refused (`--format pdf --out report.html`). `--out -` (standard output) needs --format."""
    given = option.strip().lower() if option is not None else None
    if given is not None and given not in REPORT_FORMATS:
        raise fail("command line", "--format", f"unknown format {option!r}{did_you_mean(given, REPORT_FORMATS)}; "
                                               f"choose one of {', '.join(REPORT_FORMATS)}")
    implied = None if out.strip() == "-" else _EXTENSIONS.get(os.path.splitext(out.strip())[1].lower())
    if given is None and implied is None:
        raise fail("command line", "--format", f"cannot tell the format from {out!r}; give --format "
                                               f"({', '.join(REPORT_FORMATS)}) or an --out ending in "
                                               ".html, .pdf, .md, .tex or .csv")
    if given is not None and implied is not None and given != implied:
        raise fail("command line", "--format", f"--format {given} contradicts --out {out} (a .{implied} file); "
                                               "change one of them")
    chosen = given or implied
    if out.strip() == "-" and chosen not in TEXT_FORMATS:
        raise fail("command line", "--out", f"a {chosen} report cannot go to standard output; give a file")
    return chosen


def index_as_of(session, chosen: Dataset, families, when, *, titles: bool = False,
                touching: Iterable[str] | None = None, accounts: bool = True) -> tuple[Dataset, LedgerIndex]:
    """(the dataset as it stood at `when`, the index of its releases charged then, each with the
    status it had then): what every `--as-of` figure is computed from, for the CLI and the API
    alike. From the accounting rows (store/index_from_rows.py); where the rows cannot state the ledger
    then exactly (as_of.rows_then), from the whole releases (ledger.accounting.history)."""
    from ..input.snapshot import LedgerSnapshot
    from ..store import index_from_rows
    from ..store.as_of import state_then

    index = index_from_rows.index_for(session, chosen.variable_names, chosen.name, families, titles, touching, accounts, when)
    if index is None:
        whole = decoded_history.snapshot(session, chosen.name)
        then = releases_then(session, list(whole.releases.values()), when)
        snapshot = LedgerSnapshot(datasets=whole.datasets, releases={r.id: r for r in then},
                                  families=whole.families, ended=whole.ended)
        index = charged_index(snapshot, pick_dataset(snapshot, chosen.name))
    dataset_then, _caps, index = state_then(session, chosen, when, index)
    return dataset_then, index


def releases_then(session, releases: list, when) -> list:
    """`releases` as they stood at `when` (ledger.accounting.history): those in the ledger then, by
    publication date, each with the status it had then; retractions and cancellations dated by
    their audit events."""
    from ..accounting.history import ENDING_KINDS, ended, releases_as_of
    from ..input.utc_moments import parse_moment

    ended_at = ended((kind, subject, parse_moment(at)) for _seq, kind, subject, at, _actor, _payload
                     in audit_chain.lifecycle_events(session, list(ENDING_KINDS)))
    return releases_as_of(releases, when, ended_at)


def rows_index(session, dataset: str | None, *, titles: bool = False, variables: list[str] | None = None,
               accounts: bool = True, when=None, field: str = "--dataset") -> tuple[Dataset, LedgerIndex]:
    """The chosen dataset and the index of its charged releases, from the accounting rows
    (store/index_from_rows.py): no release is decoded but the few the exact path needs. `variables`: only
    the releases that read them; `accounts=False`: without what the Rényi and PLD accountants read
    (`pairs`); `when` (--as-of): `index_as_of`, the subset resolved against the dataset then. The
    index reads release titles from `session` when first asked for them (`titles`)."""
    from ..store import index_from_rows

    light = configuration.write_context(session)
    chosen = pick_dataset(light, dataset, field)
    if when is not None:  # (every row read, and the subset resolved against the dataset then)
        return index_as_of(session, chosen, light.families, when, titles=titles,
                           touching=None if variables is None else set(), accounts=accounts)
    index = index_from_rows.index_for(session, chosen.variable_names, chosen.name, light.families, titles,
                              resolve_variables(chosen, variables) if variables is not None else None, accounts)
    return chosen, index
