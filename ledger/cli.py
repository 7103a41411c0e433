"""The `privacy-ledger` command line: thin adapters over the loader, store and engine.

Exit codes: 0 done; 1 a budget check refused (nothing written); 2 bad input
(every problem printed with its file and field; nothing written).
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Optional

import typer
from sqlmodel import Session

from . import store
from .engine import LedgerIndex
from .errors import InputErrors, LedgerError, fail
from .loader import LedgerSnapshot, load_dataset, load_releases
from .numbers import NumberError, format_delta, format_number, to_fraction, to_json
from .records import CHARGED_STATUSES, Dataset
from .views import DEFAULT_DELTA, subset_json, table_view, text_table

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])
dataset_app = typer.Typer(no_args_is_help=True, help="Datasets and their variables.")
audit_app = typer.Typer(no_args_is_help=True, help="The tamper-evident audit chain.")
app.add_typer(dataset_app, name="dataset")
app.add_typer(audit_app, name="audit")


class State:
    url: str = store.DEFAULT_URL


state = State()

DatasetOption = Annotated[Optional[str], typer.Option("--dataset", "-d", help="Dataset (default: the only one).")]
DeltaOption = Annotated[Optional[str], typer.Option("--delta", help="Delta for epsilon figures "
                                                    "(default: the dataset's, else 1e-9).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.callback()
def main_options(
    db: Annotated[Optional[str], typer.Option("--db", help="SQLAlchemy URL (default: LEDGER_DATABASE_URL, "
                                              "else sqlite:///ledger.db).")] = None,
) -> None:
    state.url = store.database_url(db)


def main() -> None:
    try:
        app()
    except InputErrors as exc:
        report_errors(exc.errors)
        sys.exit(2)


def report_errors(errors: list[LedgerError]) -> None:
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    typer.echo(f"{len(errors)} problem{'s' if len(errors) != 1 else ''}; nothing was written.", err=True)


def _engine():
    try:
        engine = store.make_engine(state.url)
        store.ensure_schema(engine)
    except Exception as exc:  # a bad URL or an unreachable server is bad input
        raise fail("--db", "url", f"cannot open ledger {state.url!r}: {exc}") from None
    return engine


def _actor(by: str | None) -> str:
    return by or os.environ.get("LEDGER_USER") or getpass.getuser()


def _pick_dataset(snapshot: LedgerSnapshot, name: str | None) -> Dataset:
    if name is not None:
        if name not in snapshot.datasets:
            known = ", ".join(sorted(snapshot.datasets)) or "none"
            raise fail("command line", "--dataset", f"unknown dataset {name!r} (known: {known})")
        return snapshot.datasets[name]
    if not snapshot.datasets:
        raise fail("command line", "--dataset", "the ledger holds no dataset yet; add one with `dataset add FILE`")
    if len(snapshot.datasets) > 1:
        raise fail("command line", "--dataset", "the ledger holds several datasets; choose one: "
                   + ", ".join(sorted(snapshot.datasets)))
    return next(iter(snapshot.datasets.values()))


def _delta(option: str | None, dataset: Dataset) -> Fraction:
    if option is None:
        return dataset.delta or DEFAULT_DELTA
    try:
        delta = to_fraction(option)
    except NumberError as exc:
        raise fail("command line", "--delta", str(exc)) from None
    if not 0 < delta < 1:
        raise fail("command line", "--delta", f"must be in (0, 1). Found {option}.")
    return delta


def _index(snapshot: LedgerSnapshot, dataset: Dataset) -> LedgerIndex:
    releases = [r for r in snapshot.releases.values() if r.dataset == dataset.name and r.status in CHARGED_STATUSES]
    families = [f for f in snapshot.families.values() if f.dataset == dataset.name]
    return LedgerIndex(dataset.variable_names, releases, families)


def _read(dataset: str | None = None) -> LedgerSnapshot:
    with Session(_engine()) as session:
        return store.snapshot(session, dataset)


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------


@app.command()
def init() -> None:
    """Create an empty ledger (the schema is also created on first use)."""
    _engine()
    typer.echo(f"ledger ready at {state.url}")


@dataset_app.command("add")
def dataset_add(
    file: Annotated[Path, typer.Argument(help="Dataset file (YAML or JSON).")],
    by: Annotated[Optional[str], typer.Option(help="Who records it (default: $LEDGER_USER or login).")] = None,
) -> None:
    """Add a dataset and its variables."""
    dataset, errors = load_dataset(file)
    if errors:
        raise InputErrors(errors)
    engine = _engine()
    with store.write_session(engine) as session:
        existing = store.snapshot(session).datasets.get(dataset.name)
        if existing is not None:
            if existing == dataset:
                typer.echo(f"dataset {dataset.name} is already recorded, unchanged")
                return
            raise fail(str(file), "dataset", f"dataset {dataset.name!r} is already recorded with other variables "
                                             "or groups; a recorded dataset is never rewritten")
        store.add_dataset(session, dataset, _actor(by))
    typer.echo(f"added dataset {dataset.name} with {len(dataset.variables)} variables")


@app.command()
def record(
    files: Annotated[list[Path], typer.Argument(help="Release files (YAML or JSON).")],
    by: Annotated[Optional[str], typer.Option(help="Who records them (default: $LEDGER_USER or login).")] = None,
) -> None:
    """Record releases: every file is checked first, and all are recorded or none."""
    engine = _engine()
    actor = _actor(by)
    with store.write_session(engine) as session:
        snapshot = store.snapshot(session)
        releases, families, errors = load_releases(files, snapshot, recorded_by=actor, recorded_at=store.now())
        if errors:
            raise InputErrors(errors)
        store.add_releases(session, releases, families, actor)
    typer.echo(f"recorded {len(releases)} release{'s' if len(releases) != 1 else ''}"
               + (f" and {len(families)} famil{'ies' if len(families) != 1 else 'y'}" if families else ""))


@app.command()
def releases(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """List recorded releases."""
    snapshot = _read(dataset)
    rows = [r for r in snapshot.releases.values() if dataset is None or r.dataset == dataset]
    if as_json:
        from .codec import release_to_dict

        typer.echo(json.dumps([release_to_dict(r) for r in rows], indent=2, ensure_ascii=False))
        return
    for release in rows:
        typer.echo(f"{release.id}\t{release.dataset}\t{release.status.value}\t{release.mechanism.name}\t"
                   f"reads {', '.join(sorted(release.reads)) or '-'}\t{release.title}")


@app.command()
def table(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False) -> None:
    """The release-by-variable table (Tan, Table 1) with totals and the whole-dataset column."""
    snapshot = _read(dataset)
    chosen = _pick_dataset(snapshot, dataset)
    view = table_view(_index(snapshot, chosen).table(chosen.name), _delta(delta, chosen))
    if as_json:
        typer.echo(json.dumps(view.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo(f"dataset {chosen.name}: {view.basis.label}\n")
    typer.echo(text_table(view))


@app.command()
def subset(
    variables: Annotated[list[str], typer.Argument(help="Variables or named groups.")],
    dataset: DatasetOption = None,
    delta: DeltaOption = None,
    as_json: JsonOption = False,
) -> None:
    """The privacy loss on one subset of variables."""
    snapshot = _read(dataset)
    chosen = _pick_dataset(snapshot, dataset)
    names: set[str] = set()
    errors = []
    for name in variables:
        if name in chosen.variable_names:
            names.add(name)
        elif chosen.group(name) is not None:
            names |= chosen.group(name)
        else:
            errors.append(LedgerError("command line", "VAR", f"unknown variable or group {name!r} in {chosen.name!r}"))
    if errors:
        raise InputErrors(errors)
    cost = _index(snapshot, chosen).subset_cost(names)
    chosen_delta = _delta(delta, chosen)
    result = subset_json(cost, chosen_delta)
    if as_json:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    label = "{" + ", ".join(cost.subset) + "}"
    if cost.spend.unbounded:
        typer.echo(f"{label}: ∞ (not protected)")
    elif cost.spend.is_pure:
        typer.echo(f"{label}: epsilon {format_number(cost.spend.pure)} (pure)")
    else:
        typer.echo(f"{label}: epsilon {format_number(cost.spend.epsilon(chosen_delta))} at delta "
                   f"{format_delta(chosen_delta)} ({result['conversion'] or 'basic composition'})")
        if result["rho"] is not None:
            typer.echo(f"  rho (zCDP): {format_number(cost.spend.zcdp_rho())}")
    typer.echo(f"  charged by: {', '.join(cost.releases) or 'no release'}")


@app.command()
def pairs(dataset: DatasetOption = None, delta: DeltaOption = None, as_json: JsonOption = False) -> None:
    """The privacy loss on every pair of variables."""
    snapshot = _read(dataset)
    chosen = _pick_dataset(snapshot, dataset)
    chosen_delta = _delta(delta, chosen)
    result = _index(snapshot, chosen).pairs()
    if as_json:
        typer.echo(json.dumps([{"subset": list(pair), "epsilon": to_json(spend.epsilon(chosen_delta))}
                               for pair, spend in result.items()], indent=2, ensure_ascii=False))
        return
    for (a, b), spend in result.items():
        typer.echo(f"{{{a}, {b}}}\t{format_number(spend.epsilon(chosen_delta))}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Where to write the HTML table.")] = Path("ledger-demo.html"),
) -> None:
    """Tan's Example 3.6 in the selected ledger: Table 1, printed and written as HTML."""
    from .demo import run_demo

    typer.echo(run_demo(_engine(), out, actor=_actor(None)))


@audit_app.command("verify")
def audit_verify() -> None:
    """Recompute the hash chain and compare every row with its audit event."""
    with Session(_engine()) as session:
        result = store.verify(session)
    if result.ok:
        typer.echo(f"audit chain intact: {result.events} events, head {result.head}")
        return
    typer.echo(f"audit chain BROKEN: first bad event: {result.problems[0]}", err=True)
    for problem in result.problems[1:]:
        typer.echo(f"  also: {problem}", err=True)
    raise typer.Exit(1)
