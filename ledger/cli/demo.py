"""The demo: Tan's Example 3.6 recorded through the real pipeline.

Three count tables, each from an independent eps = 1 geometric mechanism that
depends only on the variables it tabulates (Tan, Example 3.6):
Table A by age and sex, Table B by residential region and race, Table C by
residential region and age. The ledger reproduces Tan's Table 1 and adds the
whole-dataset column (Prop 3.1: U = V is ordinary bounded DP).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from dataclasses import replace

from ..operations import people
from ..store import dataset_writes, decoded_history, release_writes, session_state, sessions
from ..core.errors import InputErrors, fail
from ..input.loader import build_dataset, build_releases, check_batch, parse_document
from ..core.records import CHARGED_STATUSES, Status
from ..operations.table_view import table_view
from ..reporting.views import render, text_table

DATASET_NAME = "census"

DATASET_YAML = """\
dataset: census
description: Tan (2023), Example 3.6, a census-like dataset
variables:
  - {name: age, classification: identifying}
  - {name: sex, classification: identifying}
  - {name: residential region, classification: identifying}
  - {name: race, classification: sensitive}
  - {name: other variable, classification: sensitive, description: every other variable of the dataset}
"""

RELEASES_YAML = """\
dataset: census
releases:
  - id: Table A
    title: Population by age and sex
    reads: [age, sex]
    mechanism: {name: geometric, epsilon: 1}
  - id: Table B
    title: Population by residential region and race
    reads: [residential region, race]
    mechanism: {name: geometric, epsilon: 1}
  - id: Table C
    title: Population by residential region and age
    reads: [residential region, age]
    mechanism: {name: geometric, epsilon: 1}
"""

TOTAL_LABEL = "Tables A, B & C"


def _build(actor: str, snapshot, recorded_at):
    dataset_document, errors = parse_document("demo:dataset.yaml", DATASET_YAML)
    dataset, errors = build_dataset(dataset_document)
    if errors:
        raise InputErrors(errors)
    snapshot = type(snapshot)(datasets={dataset.name: dataset})
    release_document, _ = parse_document("demo:releases.yaml", RELEASES_YAML)
    releases, families, errors = build_releases(release_document, snapshot, recorded_by=actor,
                                                recorded_at=recorded_at)
    errors += check_batch(releases, families, snapshot)
    if errors:
        raise InputErrors(errors)
    # Tan's tables were published: the demo records them as published now
    releases = [replace(r, status=Status.PUBLISHED, published_at=recorded_at) for r in releases]
    return dataset, releases, families


def run_demo(engine: Engine, out: Path, actor: str) -> str:
    """Record the example in an empty ledger (or reuse a ledger holding exactly it),
    and return Table 1 as text; the HTML table is written to `out`."""
    from ..accounting.ledger_index import LedgerIndex
    from ..input.loader import LedgerSnapshot

    with sessions.write_session(engine) as session:
        snapshot = decoded_history.snapshot(session)
        dataset, releases, families = _build(actor, LedgerSnapshot(), session_state.now())
        if not snapshot.datasets and not snapshot.releases:  # empty (roles aside)
            people.bootstrap(session, actor)  # the demo's user is the new ledger's admin
            dataset_writes.add_dataset(session, dataset, actor)
            release_writes.add_releases(session, releases, families, actor)
            action = "recorded Tan's Example 3.6 in the ledger"
        elif _holds_only_demo(snapshot, dataset, releases):
            action = "the ledger already holds Tan's Example 3.6; nothing recorded"
        else:
            raise fail(str(engine.url), "--db", "this ledger already holds other data; the demo only runs "
                                                "in an empty ledger (choose another with --db or LEDGER_DATABASE_URL)")
    with Session(engine) as session:
        snapshot = decoded_history.snapshot(session, DATASET_NAME)
    recorded = [r for r in snapshot.releases.values() if r.status in CHARGED_STATUSES]
    view = table_view(LedgerIndex(dataset.variable_names, recorded).table(dataset.name), dataset.delta or 0)
    html = render("risk_table.html.j2", view=view, generated_at=session_state.now().isoformat(),
                  total_label=TOTAL_LABEL)
    from .outputs import write_atomically

    write_atomically(out, html)
    return "\n".join([
        action,
        "",
        "Table 1: ε values for each release for privacy on each singleton subset of dataset variables",
        "(Tan, Example 3.6), with the whole-dataset column (U = V, Prop 3.1)",
        "",
        text_table(view, TOTAL_LABEL),
        "",
        f"HTML table written to {out}",
    ])


def _holds_only_demo(snapshot, dataset, releases) -> bool:
    if set(snapshot.datasets) != {dataset.name} or snapshot.datasets[dataset.name] != dataset:
        return False
    if set(snapshot.releases) != {r.id for r in releases}:
        return False
    return all(
        (stored.reads, stored.guarantees, stored.mechanism) == (new.reads, new.guarantees, new.mechanism)
        for new in releases
        for stored in [snapshot.releases[new.id]]
    )


# --------------------------------------------------------------------------
# Tan, section 5: Algorithm 1 on the graduates table (Table 2 -> a Table 3)
# --------------------------------------------------------------------------

GRADUATES_YAML = """\
dataset: graduates
description: Tan (2023), section 5.1, a university's graduate survey (Table 2)
self_approval: true  # one person runs the demo and publishes its table: no second approver
variables:
  - {name: degree_programme, classification: public, description: released before with the name list}
  - {name: income_band, classification: sensitive}
"""


def run_graduates_demo(engine: Engine, actor: str, seed: int | None = None) -> str:
    """Run Tan's Algorithm 1 (corrected, docs/explanation/model.md#notes-on-the-papers-algorithms) on Table 2 through the ledger and
    return Table 2, the released Table-3-like table, and the ledger's table."""
    import io

    import pandas as pd

    from ..accounting.ledger_index import LedgerIndex
    from ..mechanisms import tan
    from ..operations.recording import run_and_record

    document, _ = parse_document("demo:graduates.yaml", GRADUATES_YAML)
    dataset, errors = build_dataset(document)
    if errors:
        raise InputErrors(errors)
    with sessions.write_session(engine) as session:
        snapshot = decoded_history.snapshot(session)
        if not snapshot.datasets and not snapshot.releases:  # empty (roles aside)
            people.bootstrap(session, actor)  # the demo's user is the new ledger's admin
            dataset_writes.add_dataset(session, dataset, actor)
            fresh = True
        elif set(snapshot.datasets) == {dataset.name} and set(snapshot.releases) <= {"table-3", "table-3-nonnegative"}:
            fresh = not snapshot.releases
        else:
            raise fail(str(engine.url), "--db", "this ledger already holds other data; the demo only runs "
                                                "in an empty ledger (choose another with --db or LEDGER_DATABASE_URL)")
    if fresh:
        result = run_and_record(
            engine, "tan-consistent-counts", tan.table2_records(), dataset=dataset.name, release_id="table-3",
            title="Graduates by degree programme and income band, exact programme totals (Tan, Algorithm 1)",
            params={"margin": "degree_programme", "protected": "income_band", "epsilon": 1}, actor=actor, seed=seed,
            status=Status.PUBLISHED)
        released, action = result.release, "ran Tan's Algorithm 1 on Table 2 and recorded release table-3"
    else:
        with Session(engine) as session:
            released = decoded_history.snapshot(session, dataset.name).releases["table-3"]
        action = "the ledger already holds this demo's release table-3; nothing recorded"
    long = pd.read_csv(io.StringIO(released.output))
    table = long.pivot(index="degree_programme", columns="income_band", values="count")
    table = table.reindex(index=list(tan.DEGREE_PROGRAMMES), columns=list(tan.INCOME_BANDS))
    table.index.name, table.columns.name = "Degree Programme", None
    exact = tan.table2_counts()
    exact.index.name, exact.columns.name = "Degree Programme", None
    with Session(engine) as session:
        recorded = [r for r in decoded_history.snapshot(session, dataset.name).releases.values() if r.status in CHARGED_STATUSES]
    view = table_view(LedgerIndex(dataset.variable_names, recorded).table(dataset.name), dataset.delta or 0)
    return "\n".join([
        action,
        "",
        "Table 2: accurate counts by degree programme and annual income band (confidential; not released)",
        tan.format_table(exact),
        "",
        f"Released (like Tan's Table 3): epsilon = {released.guarantees[0].epsilon} on income_band, "
        "degree programme totals exact; every row with two or more cells is noised (Tan, Algorithm 1)",
        tan.format_table(table),
        "",
        text_table(view),
    ])
