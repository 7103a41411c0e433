"""`privacy-ledger report`: reports for review meetings and compliance files.

A thin adapter (STYLE 8): read the ledger (operations/report_inputs.py and
report_reading.py; the summarised report of a large ledger from the accounting
rows, here), build the context (`report.build_report`, pure), render it
(reporting/write.py: the Jinja templates of `reports/`, pandas for CSV, headless
Chromium for PDF) and write one file. Bad input -- an unknown dataset or format,
a --since that is not a date, an --out that cannot be written -- exits 2 with a
message and writes nothing; the file itself is written whole or not at all (a temporary file in
the same directory, renamed into place).

On Linux forked helpers share the work of a report: one verifies the audit chain
(`VerifyAlongside`), one computes the pairs panel (`ForkedCall`; past the summary
threshold, `ChartsAlongside` draws the charts), while this process reads the ledger
and builds the rest (the risk table, the register, the timeline, then both charts).
If a helper is missing or fails, its work is done here; the report is the same.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..operations import choices
from ..operations.report_inputs import (  # (gathered below the API)
    event_moment,
    gather,
    parse_since,
    release_count,
    verify_for_report,
)
from . import outputs
from ..operations.report_reading import (  # (read below the API)
    DATASET_AMENDMENTS,
    dated_by,
    event_columns,
    event_counts,
    event_filter,
    events_of,
    lifecycle_events,
    publishers,
    register_moment,
    rows_as_they_stood,
    same_ledger,
    titles_of,
    whole_releases,
)
from ..reporting.write import csv_cell, csv_column, find_chromium, render
from .context import open_engine, parse_date, state
from ..core.errors import fail
from ..core.lazy import lazy_callable, lazy_module
from ..core.numbers import is_infinite
from ..core.records import Dataset

if TYPE_CHECKING:
    from ..operations.report_inputs import ChainStatus
    from ..reporting.chart_data import Pairs, Timeline

audit_chain = lazy_module("ledger.store.audit_chain")  # the ORM, imported when a report is made
audit_verify = lazy_module("ledger.store.audit_verify")  # the ORM, imported when a report is made
configuration = lazy_module("ledger.store.configuration")  # the ORM, imported when a report is made
engines = lazy_module("ledger.store.engines")  # the ORM, imported when a report is made
row_dicts = lazy_module("ledger.store.row_dicts")  # the ORM, imported when a report is made
session_state = lazy_module("ledger.store.session_state")  # the ORM, imported when a report is made
sessions = lazy_module("ledger.store.sessions")  # the ORM, imported when a report is made
table_models = lazy_module("ledger.store.table_models")  # the ORM, imported when a report is made
# the report's context builder (and markupsafe, the chart data): imported when a report is
# made, not by `--help`, `check` or `record`, which only register this command
_report = lazy_module("ledger.reporting.report")
pack = lazy_module("ledger.operations.meeting_pack")  # the meeting pack (--since), computed below the API
plan_book = lazy_module("ledger.operations.plan_book")  # the stored plans (the "Plan against actual" section)
plans_of = lazy_callable("ledger.reporting.plan_view", "plans_of")
select = lazy_callable("sqlalchemy", "select")
Session = lazy_callable("sqlmodel", "Session")

_REPORT_NAMES = ("AuditEvent", "ChainStatus", "Pairs", "ReportContext", "ReportInputs", "Timeline", "build_report",
                 "draw_here", "risk_frame")


def __getattr__(name: str):
    """The report module's names, as this module offered them before it imported it lazily."""
    if name in _REPORT_NAMES:
        return getattr(_report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


FORMATS = ("html", "md", "tex", "csv", "pdf")
HELPER_TIMEOUT_S = 3600  # a helper process still working this long is given up, and its work done here
HELPER_POLL_S = 0.5  # how often a wait for a helper looks whether it is still alive
# Audit events past which the verification and the pairs panel are computed in forked helpers;
# on a smaller ledger each is a few milliseconds, less than forking a process costs.
ALONGSIDE_FROM = 500


def report(
    out: Annotated[str, typer.Option("--out", "-o", help="The file to write; its extension gives the format "
                                     "(.html, .pdf, .md, .tex, .csv); `-` for standard output (text formats).")],
    format: Annotated[Optional[str], typer.Option("--format", "-f", help="html, md, tex, csv or pdf (default: "
                                                  "from --out's extension).")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", "-d",
                                                   help="Dataset (default: the only one).")] = None,
    delta: Annotated[Optional[str], typer.Option("--delta", help="Delta for epsilon figures "
                                                 "(default: the dataset's, else 1e-9).")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Meeting pack: what changed since this date "
                                                 "(ISO 8601, e.g. 2024-05-01 or 2024-05-01T09:30; UTC "
                                                 "unless it says otherwise).")] = None,
    as_of: Annotated[Optional[str], typer.Option("--as-of", metavar="DATE", help="The ledger as it stood on this date (ISO "
                                                 "8601): published by then, planned or approved at that "
                                                 "time.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: what was written.")] = False,
) -> None:
    """A report: the compliance report (html, pdf), the same as Markdown or LaTeX, or the
    release-by-variable table as CSV. --since adds what changed since the last meeting."""
    chosen_format = choices.report_format(format, out)
    since_at = parse_since(since)
    as_of_at = parse_date(as_of, "--as-of")
    if since_at is not None and as_of_at is not None and since_at > as_of_at:
        raise fail("command line", "--since", f"{since} is after --as-of {as_of}")
    if since_at is not None and chosen_format == "csv":
        raise fail("command line", "--since", "the CSV export is the release-by-variable table only; "
                                              "--since applies to html, pdf, md and tex")
    target = None if out.strip() == "-" else writable_target(out)
    chromium = None
    if chosen_format == "pdf":
        chromium = find_chromium("--format" if format is not None else "--out")
    engine = open_engine()  # (opened once: its schema checked once)
    with sessions.read_session(engine) as session:  # (as read_light, with the chain's length)
        snapshot = configuration.write_context(session)
        alongside = audit_chain.last_event(session)[0] > ALONGSIDE_FROM
    chosen = choices.pick_dataset(snapshot, dataset)
    chosen_delta = choices.parse_delta(delta, chosen)
    charts = chosen_format in ("html", "pdf")
    if alongside:
        _modules_before_fork(charts)
    chain = VerifyAlongside(state.url, alongside)
    draw = _report.draw_here  # (past the summary threshold: ChartsAlongside, forked below)
    from ..core.progress import progress

    from ..core.memory import paused_gc

    large = False
    helpers: list[RegisterAlongside] = []  # the register is written alongside from as soon as the index is read
    with progress(f"writing the {chosen_format} report"), paused_gc(), _closing(helpers):
        try:
            with sessions.read_session(engine) as session:
                count = release_count(session, chosen.name)
                # past the threshold (now, as `build_report` decides it at any --as-of), the page
                # summarises, and is computed from the accounting rows: no release decoded but those
                # listed, at --as-of and --since too
                large = chosen_format != "csv" and count > _report.summary_from()
                if large:
                    if charts:
                        draw = ChartsAlongside()
                    register = register_target(target, count)
                    head = audit_chain.last_event(session)  # the moment the page is of: the register must be too
                    large_inputs = gather_large(session, chosen, chosen_delta, chain=chain, indexed=lambda lite:
                                                helpers.append(RegisterAlongside(state.url, lite, register, head)),
                                                as_of=as_of_at, since=since_at)
                    if large_inputs is None:  # the rows cannot say it exactly (gather_large): every release read
                        for helper in helpers:
                            helper.close()
                        helpers.clear()
                        large = False
                    else:
                        register_helper = helpers[0]
                if not large:
                    inputs = gather(session, chosen, chosen_delta, since_at, chain=chain)
            if large:
                context = _report.build_large_report(
                    large_inputs, lambda: large_register_entries(open_engine(), large_inputs, head=head), register.name,
                    charts=charts, draw=draw)
            else:
                if as_of_at is not None:
                    inputs = replace(inputs, as_of=as_of_at)
                register = None
                if chosen_format != "csv" and len(inputs.releases) > _report.summary_from():
                    register = register_target(target, len(inputs.releases))
                context = _report.build_report(inputs, charts=charts, draw=draw,
                                               beside=ForkedCall if alongside else _report.here,
                                               register_file=None if register is None else register.name)
        finally:
            chain.close()
            if isinstance(draw, ChartsAlongside):
                draw.close()
        if as_of_at is not None:  # said on the page, and here, when the dataset did not exist then (item 19)
            from dataclasses import replace as _replace

            from .context import dataset_added_at, moment_text

            added = dataset_added_at(chosen.name)
            context = _replace(context, certificate=_replace(context.certificate, dataset_added=added))
            if context.certificate.added_after:
                typer.echo(f"note: dataset {chosen.name} was added to this ledger at {moment_text(added)}, after "
                           f"--as-of ({moment_text(as_of_at)}): it did not exist then", err=True)
        data = render(context, chosen_format, chromium=chromium)
        if large:
            register_helper.finish(context.summary)
        elif register is not None:
            outputs.write_streaming(register, register_csv(context.summary))
    if target is None:  # --out -: standard output (text formats only, see choices.report_format)
        typer.echo(data.decode("utf-8"), nl=False)
        return
    outputs.write_atomically(target, data)
    if as_json:
        import json

        typer.echo(json.dumps({"ok": True, "format": chosen_format, "dataset": chosen.name, "out": str(target),
                               "register": None if register is None else str(register)}))
        return
    also = "" if register is None else f", and its register of {context.summary.releases} releases to {register}"
    typer.echo(f"wrote the {chosen_format} report of dataset {chosen.name} to {target}{also}")


@contextmanager
def _closing(helpers: list):
    """Every register helper stopped and its parts removed, however the report ends."""
    try:
        yield
    finally:
        for helper in helpers:
            helper.close()


# --------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------


def writable_target(out: str) -> Path:
    """The --out path, refused before any work when it cannot or must not be written
    (outputs.output_target: never the ledger, never anything but a regular file or a new path)."""
    return outputs.output_target(out)


REGISTER_SUFFIX = ".register.csv"


def register_target(target: Path | None, releases: int) -> Path:
    """Where the complete register of a summarised report goes: `<out>.register.csv`, beside
    it, under the same rules as --out (outputs.output_target: never the ledger, never a
    directory, a link or a device). Refused (exit 2) when the report goes to standard output."""
    if target is None:
        raise fail("command line", "--out", f"the dataset has {releases} releases (more than {_report.summary_from()}): "
                                            "the report summarises them and links a complete register written "
                                            f"beside it ({REGISTER_SUFFIX}); give --out a file, not -")
    return outputs.output_target(str(target) + REGISTER_SUFFIX)


REGISTER_COLUMNS = (
    "release", "title", "status", "charged", "reads", "read exactly (no guarantee)", "guarantees", "mechanism",
    "parameters", "family", "family split", "part", "derived from", "recorded at", "recorded by", "approved at",
    "approved by", "published at", "published by", "retracted or cancelled", "at", "by", "reason",
    "output SHA-256", "Pufferfish", "whole dataset (ordinary DP)", "whole dataset exact", "epsilon by variable")


def register_csv(summary, chunk: int = 5_000):
    """The complete register as CSV text, `chunk` releases at a time: a row per release, in
    recording order, every text cell neutralised against formula injection (`csv_cell`).
    Figures as the CSV export states them: a float at or above the exact loss, "inf" for ∞,
    and the exact value beside it; cells by variable as "{name} exact" pairs."""
    import csv
    import io

    from ..core.numbers import exact_text, fraction_text, to_json
    from ..reporting.views import guarantee_text, names_text, param_text

    def when(moment) -> str:
        return "" if moment is None else moment.isoformat()

    # texts repeated across a large register (a few distinct guarantees, parameters and values), made once
    guarantees_seen: dict = {}
    parameters_seen: dict = {}
    cells_seen: dict = {}
    wide_seen: dict = {}

    def guarantees_of(guarantees) -> str:
        found = guarantees_seen.get(guarantees)
        if found is None:
            found = guarantees_seen[guarantees] = csv_cell("; ".join(guarantee_text(g) for g in guarantees))
        return found

    def parameters_of(parameters) -> str:
        try:
            found = parameters_seen.get(parameters)
        except TypeError:  # (a parameter value that cannot be a key)
            return csv_cell("; ".join(f"{key} {param_text(value)}" for key, value in parameters))
        if found is None:
            found = parameters_seen[parameters] = csv_cell(
                "; ".join(f"{key} {param_text(value)}" for key, value in parameters))
        return found

    # figures are keyed by identity (a register's cells share the few value objects of its table:
    # hashing exact Fractions cost more than the text); each key keeps its value alive beside the text
    def cell_text(cell) -> str:
        key = (cell[0], id(cell[1]))
        found = cells_seen.get(key)
        if found is None or found[0] is not cell[1]:
            found = cells_seen[key] = (cell[1], f"{{{cell[0]}}} {exact_text(cell[1])}")
        return found[1]

    def wide_of(wide) -> tuple[str, str]:
        found = wide_seen.get(id(wide))
        if found is None or found[0] is not wide:
            # the exact column holds exact values only: empty for an irrational figure (JSON's null)
            found = wide_seen[id(wide)] = (wide, csv_cell(str(to_json(wide))), csv_cell(fraction_text(wide) or ""))
        return found[1:]

    def row(r) -> list:
        ended = r.ended
        wide = ("", "") if r.dataset_wide is None else wide_of(r.dataset_wide)
        return [*(csv_cell(value) for value in (
            r.id, r.title, r.status, "yes" if r.charged else "no", names_text(r.reads),
            names_text(r.exact) if r.exact else "")),
            guarantees_of(r.guarantees), csv_cell(r.mechanism), parameters_of(r.parameters),
            *(csv_cell(value) for value in (
                r.family or "", r.family_split, r.part or "", ", ".join(r.derived_from), when(r.recorded_at),
                r.recorded_by,
                when(r.approved_at), r.approved_by or "", when(r.published_at), r.published_by or "",
                ended.action if ended else "", when(ended.at) if ended else "", ended.by if ended else "",
                ended.reason if ended else "", r.output_digest or "", "; ".join(r.pufferfish))),
            *wide, csv_cell("; ".join(map(cell_text, r.cells)))]

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(REGISTER_COLUMNS)
    for k, entry in enumerate(summary.entries(), start=1):
        writer.writerow(row(entry))
        if k % chunk == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


# --------------------------------------------------------------------------
# Reading the ledger
# --------------------------------------------------------------------------


REGISTER_PAGE = 5_000  # releases read (and decoded) at a time for the complete register


def large_audit(session: Session, dataset: str, when: datetime | None = None, until: str | None = None,
                counts: list[tuple] | None = None):
    """report.audit_trail of a large ledger by SQL: the dataset's events counted by kind and by
    actor (`event_counts`, unless given), the last AUDIT_EVENTS_LISTED read (with `when`,
    `until`: those dated by then, see event_filter). Returns a function of the chain's status."""
    table, columns_ = event_columns()
    about = event_filter(dataset, when, until)
    if counts is None:
        counts = event_counts(session, dataset, when, until)
    counts = [row for row in counts if row[2]]
    listed = events_of(session, select(*columns_).where(about, *dated_by(session, until)).order_by(table.c.seq.desc())
                     .limit(_report.AUDIT_EVENTS_LISTED))[::-1]
    total = sum(row[2] for row in counts)
    by_kind, by_actor = {}, {}
    for kind, actor, c, *_ in counts:
        by_kind[kind] = by_kind.get(kind, 0) + c
        by_actor[actor] = by_actor.get(actor, 0) + c
    first_at = last_at = None
    if counts:
        first_seq = min(row[3] for row in counts)
        first_at = event_moment(session.connection().execute(
            select(table.c.at).where(table.c.seq == first_seq)).scalar_one())
        last_at = listed[-1].at

    def trail(chain: ChainStatus):
        return _report.AuditTrail(
            ok=chain.ok, head=chain.head, chain_events=chain.events, problems=chain.problems, events=total,
            first_at=first_at, last_at=last_at, by_kind=tuple(sorted(by_kind.items())),
            by_actor=tuple(sorted(by_actor.items())),
            listed=tuple(_report.AuditEntry(e.seq, e.at, e.actor, e.kind, e.subject, _report.audit_note(e))
                         for e in listed),
            omitted=total - len(listed))

    return trail


def gather_large(session: Session, dataset: Dataset, delta: Fraction,
                 chain: Callable[[], ChainStatus] | None = None, generated_at: datetime | None = None,
                 indexed: Callable | None = None, as_of: datetime | None = None, since: datetime | None = None):
    """report.LargeInputs: what a summarised report is computed from, read from the accounting
    rows (columns.index_for, columns.large_table, as `table` reads them at a million releases),
    SQL counts of the audit trail, the caps as `cap list` decides them, and the listed releases
    read whole by id. No Release is built but those listed. `indexed` is called with
    what the complete register needs (the index, its whole-dataset ids) once they are read.

    With `as_of` (--as-of): the ledger as it stood then, as `build_report` shows it after
    `as_it_stood`: the rows charged then (columns.index_for with the moment), each listed
    release with the status it had then, the caps checked over that index (as `cap list
    --as-of`), the audit events dated by then. With `since` (--since): the meeting pack
    (`large_meeting`). None when the rows or the events cannot say it exactly (a moment past
    what floats order, as_of.rows_then; an event moment not in UTC text,
    event_counts): the caller then reads every release (`gather`)."""
    from sqlalchemy import Text, cast

    from ..store import as_of as rows_at
    from ..store import columns
    from ..reporting.accountant_views import TableAccounts
    from ..core.records import CHARGED_STATUSES
    from ..accounting.index_figures import index_events
    from ..accounting.charge_choice import at_delta
    from ..operations.transactions import cap_checks
    from ..operations.cap_accounting import checks_from_index

    connection = session.connection()
    until = None if as_of is None else rows_at.event_text(as_of)  # the events dated by --as-of
    since_text = None if since is None else rows_at.event_text(since)
    counts = None
    if until is not None or since_text is not None:  # (one pass over the dataset's events, first)
        counts = event_counts(session, dataset.name, as_of, until, since_text)
        if any(row[5] for row in counts):  # a moment not in UTC text: text does not order it
            return None
    light = configuration.write_context(session)
    families = {fid: f for fid, f in light.families.items() if f.dataset == dataset.name}
    index = columns.index_for(session, dataset.variable_names, dataset.name, families, False, None, True, when=as_of)
    if index is None:
        return None
    then = index.then
    caps = tuple(configuration.caps(session, dataset.name))
    if as_of is not None:  # the dataset (variables, classifications, groups) and caps as they stood then
        dataset, caps, index = rows_at.state_then(session, dataset, as_of, index)
    if chain is None:
        chain = verify_for_report(session)
    generated_at = generated_at or session_state.now()
    wanted = ["basic", "rdp"]  # the figures shown (shown_accounts); the PLD is information only
    table, per_variable, wide = columns.large_table(index, dataset.name, at_delta(delta), delta,
                                                    _report.LARGEST_LISTED, wanted)
    accounts = TableAccounts(table.variables, per_variable, wide, None)
    wide_ids = index.cost_ids(range(len(index.variables)))  # remembered by large_table
    if indexed is not None:  # what the register needs (large_register_csv), given as soon as it is known
        from types import SimpleNamespace

        indexed(SimpleNamespace(index=index, delta=delta, wide_ids=wide_ids, families=tuple(families.values()),
                                dataset=dataset, as_of=as_of, until=until,
                                ended=None if then is None else then.ended))
    events = index_events(index)
    stamps = _report.charged_from_stamps(events.recorded, events.published)
    ids = [r.id for r in table.releases]
    largest = whole_releases(session, ids)
    if then is not None:  # each with the status it had then
        largest = {rid: then.release(release) for rid, release in largest.items()}
    releases = table_models.ReleaseRow.__table__
    if then is None:
        named = tuple(f for (f,) in connection.execute(
            select(releases.c.family).where(releases.c.dataset == dataset.name, releases.c.family.is_not(None),
                                            releases.c.status.in_(sorted(s.value for s in CHARGED_STATUSES)))
            .distinct()))
        count = release_count(session, dataset.name)
    else:  # the families of the releases charged then; the releases in the ledger then, any status
        from sqlalchemy import func

        rows = table_models.AccountingRow.__table__
        charged_then = set(index.releases.seqs.tolist())
        named = tuple(sorted({family for seq, family in connection.execute(
            select(rows.c.seq, rows.c.family).where(rows.c.dataset == dataset.name, rows.c.family.is_not(None)))
            if seq in charged_then}))
        count = connection.execute(select(func.count()).where(rows_at.in_ledger(dataset.name, as_of))).scalar_one()
    puffer_ids = [i for (i,) in connection.execute(
        select(releases.c.id).where(releases.c.dataset == dataset.name,
                                    cast(releases.c.pufferfish, Text) != "[]").order_by(releases.c.seq))]
    pufferfish = whole_releases(session, puffer_ids)
    if then is not None:
        puffer_ids = [i for i in puffer_ids if then.status(pufferfish[i]) is not None]
    table_, columns_ = event_columns()
    prefix = dataset.name + "/"
    from sqlalchemy import func

    by_then = () if until is None else (table_.c.at <= until,)
    cap_events = tuple(events_of(session, select(*columns_).where(
        table_.c.kind.in_(("cap.set", "cap.removed")), func.substr(table_.c.subject, 1, len(prefix)) == prefix,
        *by_then).order_by(table_.c.seq)))
    last = events_of(session, select(*columns_).where(*by_then, *dated_by(session, until))
                   .order_by(table_.c.seq.desc()).limit(1))
    if then is None:  # as `cap list` decides them now (the stored running totals and states)
        checks = tuple(cap_checks(session, dataset.name, list(caps)))
    else:  # as `cap list --as-of` decides them (operations.cap_checks_as_of): over the index then
        checks = tuple(checks_from_index(list(caps), index))
    if any(is_infinite(value) for c in checks for _name, value in c.drivers):
        index.release_ids[:0]  # read now, while the session is open: an ∞ driver's own reason finds its row by id
    meeting = None
    if since is not None:
        meeting = large_meeting(session, dataset, index, families, caps, since, as_of, until, counts, checks)
        if meeting is None:
            return None
    return _report.LargeInputs(
        dataset=dataset, index=index, table=table, accounts=accounts, stamps=stamps,
        releases=count, largest=largest,
        steps=lifecycle_events(session, ids, until) if ids else {}, families=tuple(families.values()),
        families_named=named, caps=caps, cap_checks=checks,
        chain=chain, audit=large_audit(session, dataset.name, as_of, until, counts), cap_events=cap_events,
        pufferfish=tuple(pufferfish[i] for i in puffer_ids), last_event=last[0] if last else None,
        generated_at=generated_at, delta=delta, wide_ids=wide_ids, as_of=as_of, meeting=meeting,
        plans=() if as_of is not None else plans_of(plan_book.against_actual(session, dataset.name)),
        timeline=_report.timeline_of(index, delta, at_delta(delta), as_of or generated_at,
                                     public=dataset.public_names, caps=caps, stamps=stamps,
                                     final=[f.epsilon for f in accounts.shown()[0]]))


CHANGES_LISTED = 50  # the most recent changes of each kind a large report's meeting pack lists


def large_meeting(session: Session, dataset: Dataset, index, families, caps, since: datetime,
                  as_of: datetime | None, until: str | None, counts: list[tuple], checks=None):
    """report.meeting_pack of a large ledger (--since), from SQL and the accounting rows: the
    dataset's events since then (up to --as-of) counted, and of each kind of change the
    CHANGES_LISTED most recent listed (`MeetingPack.counts` has how many there are: the
    complete register beside the report has every release's lifecycle); approvals and
    publications by the releases' own dates, read from the release rows whose date may be
    that late (`_dated_since`); each cap's figure just before `since` over the index of the
    rows charged then (columns.index_for with that moment, decided as `meeting_pack` decides
    it: meeting_pack.cap_moves); `checks`: every cap as the Caps section decides it now (at --as-of),
    computed over `index` when None. `index`: the rows
    charged now (at --as-of); `until`: --as-of as the events' text; `counts`: event_counts with
    `since` (every moment compared is UTC text: gather_large checked it). None when the rows
    cannot say it exactly (see gather_large)."""
    from datetime import timedelta

    from sqlalchemy import and_, func

    from ..accounting.ledger_index import index_over
    from ..core.records import Status
    from ..operations.cap_accounting import checks_from_index
    from ..store import as_of as rows_at
    from ..store import columns

    connection = session.connection()
    since_text = rows_at.event_text(since)
    table, columns_ = event_columns()
    about = and_(event_filter(dataset.name, as_of, until), table.c.at >= since_text, *dated_by(session, until))
    events = sum(row[4] for row in counts)
    titles = titles_of

    def changes_of(kind: str, status_of) -> tuple[tuple, int]:
        chosen = about & (table.c.kind == kind)
        count = sum(row[4] for row in counts if row[0] == kind)
        # the seqs of the most recent first, from EVENT_INDEX alone (it holds every column `chosen`
        # reads), then those rows: SQLite otherwise read every event of the kind whole to sort
        # them (a million release.recorded at a million releases: 5 s)
        latest = select(table.c.seq).where(chosen).order_by(table.c.seq.desc()).limit(CHANGES_LISTED)
        listed = events_of(session, select(*columns_).where(table.c.seq.in_(latest)).order_by(table.c.seq))
        named = titles(session, [e.subject for e in listed])
        return tuple(pack.Change(e.subject, named.get(e.subject, ""), e.at, e.actor, status_of(e))
                     for e in listed), count

    recorded = changes_of("release.recorded", lambda e: e.data()["release"]["status"])
    retracted = changes_of("release.retracted", lambda e: Status.RETRACTED.value)
    cancelled = changes_of("release.cancelled", lambda e: Status.CANCELLED.value)
    approved, published = _dated_since(session, dataset.name, since, as_of, index.then, until)
    before = columns.index_for(session, configuration.write_context(session).datasets[dataset.name].variable_names,
                               dataset.name, families, False, None, True, when=since - timedelta(microseconds=1))
    if before is None:
        return None
    before = index_over(before, index.variables)  # (the columns of `index`: the dataset at --as-of)
    if checks is None:  # the Caps section's figures (gather_large gives them)
        checks = checks_from_index(list(caps), index)
    prefix = dataset.name + "/"
    set_at = {subject[len(prefix):]: event_moment(at) for subject, at in connection.execute(
        select(table.c.subject, table.c.at).where(table.c.kind == "cap.set",
                                                  func.substr(table.c.subject, 1, len(prefix)) == prefix,
                                                  *(() if until is None else (table.c.at <= until,)))
        .order_by(table.c.seq))}
    # the caps as they stood just before `since` (each against its limit then), and those removed since
    caps_then, removed = pack.caps_in_period(rows_at.state_changes(session, dataset.name), dataset.variable_names,
                                                since, as_of, dataset.allowance)
    moves = pack.cap_moves(caps, checks, checks_from_index(list(caps_then), before), set_at, since, removed,
                              dataset.public_names, before, index)
    # the dataset's own changes since then (report.meeting_pack's dataset_changes): the most recent
    changed = (table.c.kind.in_(DATASET_AMENDMENTS), table.c.subject == dataset.name, table.c.at >= since_text,
               *(() if until is None else (table.c.at <= until,)))
    dataset_count = connection.execute(select(func.count()).where(*changed)).scalar_one()
    dataset_changes = tuple(pack.dataset_change(e.at, e.actor, e.kind, e.data()) for e in events_of(
        session, select(*columns_).where(*changed).order_by(table.c.seq.desc()).limit(CHANGES_LISTED))[::-1])
    sections = (recorded, approved, published, retracted, cancelled)
    return pack.MeetingPack(
        since=since, events=events, recorded=recorded[0], approved=approved[0], published=published[0],
        retracted=retracted[0], cancelled=cancelled[0], caps=moves,
        counts=tuple(count for _, count in sections), dataset_changes=dataset_changes, dataset_count=dataset_count)


def _dated_since(session: Session, dataset: str, since: datetime, as_of: datetime | None, then,
                 until: str | None):
    """The meeting pack's approvals and publications: the releases (in the ledger at --as-of)
    approved, and published, since `since` (and by --as-of), by their own dates, each as
    (the CHANGES_LISTED most recent, sorted by date as `meeting_pack` sorts them; how many).
    Read from the release rows whose date text may be that late (its day not before the day
    before `since`'s: a stored moment's offset is under a day), then compared exactly."""
    from datetime import timedelta

    from sqlalchemy import func, or_

    from ..core.records import Status
    from ..store.codec import parse_time

    table = table_models.ReleaseRow.__table__
    c = table.c
    day = (since.astimezone(UTC) - timedelta(days=1)).date().isoformat()
    dated = {"approved": [], "published": []}
    rows = session.connection().execute(
        select(c.id, c.title, c.status, c.recorded_at, c.recorded_by, c.approved_at, c.approved_by, c.published_at)
        .where(c.dataset == dataset, or_(func.substr(c.approved_at, 1, 10) >= day,
                                         func.substr(c.published_at, 1, 10) >= day))
        .order_by(c.seq))
    for rid, title, status, recorded_at, recorded_by, approved_at, approved_by, published_at in rows:
        approved, published = pack.aware(parse_time(approved_at)), pack.aware(parse_time(published_at))
        if then is not None and then.row_status(rid, status, recorded_at, approved_at, published_at) is None:
            continue  # not in the ledger at --as-of
        if approved is not None and approved >= since and (as_of is None or approved <= as_of):
            dated["approved"].append((approved, rid, title, approved_by or ""))
        if published is not None and published >= since and (as_of is None or published <= as_of):
            dated["published"].append((published, rid, title, recorded_by))
    found = []
    for kind, status in (("approved", Status.APPROVED), ("published", Status.PUBLISHED)):
        changes = sorted(dated[kind], key=lambda change: change[0])  # (stable: recording order among equals)
        listed = changes[-CHANGES_LISTED:]
        actors = {}
        if kind == "published" and listed:  # who published it (the publication's event), else who recorded it
            actors = {subject: actor for subject, actor in publishers(session, [x[1] for x in listed], until)}
        found.append((tuple(pack.Change(rid, title, at, actors.get(rid, by), status.value)
                            for at, rid, title, by in listed), len(changes)))
    return found[0], found[1]


def _register_basis(large):
    """What both large-register writers read each release's figures from: the index, the delta,
    the number of variables, the index's seqs, the whole-dataset value id of every release, each
    value's epsilon at the delta and whether it is zero (one computation per distinct value)."""
    import numpy as np

    index, delta = large.index, large.delta
    n_var = len(index.variables)
    seqs = np.asarray(index.releases.seqs, dtype=np.int64)
    wide_ids = large.wide_ids if large.wide_ids is not None else index.cost_ids(range(n_var))
    epsilon_of = [value.own_epsilon(delta, index.allowance) for value in index.values]  # (each a release's own charge)
    zero = np.asarray([v.is_zero for v in index.values], dtype=bool)
    return index, delta, n_var, seqs, wide_ids, epsilon_of, zero


def large_register_entries(engine, large, page: int = REGISTER_PAGE, head: tuple[int, str] | None = None):
    """The complete register of a large ledger, one RegisterEntry at a time, in recording order:
    the release rows read `page` at a time by seq (keyset paging along the seq index, so memory
    does not grow with the ledger: see large_register_csv), each release's cells of Table 1 from
    the index (as `build_report` gives them)."""
    import numpy as np

    from ..store.codec import release_from_dict
    from ..accounting.index_chunks import rows_of
    from ..core.records import CHARGED_STATUSES

    index, delta, n_var, seqs, wide_ids, epsilon_of, zero = _register_basis(large)
    variables = index.variables
    families = large.families
    table = table_models.ReleaseRow.__table__
    with sessions.read_session(engine) as session:
        same_ledger(session, head)
        then, until = register_moment(session, large)
        steps = lifecycle_events(session, until=until)
        after = -1
        while True:
            rows = session.connection().execute(
                select(table).where(table.c.dataset.concat("") == large.dataset.name, table.c.seq > after)
                .order_by(table.c.seq).limit(page)).all()
            if not rows:
                return
            after = rows[-1].seq
            page_seqs = np.asarray([row.seq for row in rows], dtype=np.int64)
            at = np.searchsorted(seqs, page_seqs)
            inside = (at < len(seqs)) & (seqs[at.clip(max=len(seqs) - 1)] == page_seqs) if len(seqs) else \
                np.zeros(len(rows), dtype=bool)
            cells = None
            if inside.any():
                a, b = int(at[inside].min()), int(at[inside].max()) + 1
                cells = rows_of(index, a, b).single_cells()
            for k, row in enumerate(rows):
                release = release_from_dict(row_dicts.release_row_dict(row))
                if then is not None:  # the release as it stood then (not yet in the ledger: not listed)
                    if then.status(release) is None:
                        continue
                    release = then.release(release)
                found, wide = (), None
                if inside[k] and release.status in CHARGED_STATUSES:
                    i = int(at[k])
                    ids = cells[i - a]
                    found = tuple((variables[j], epsilon_of[ids[j]]) for j in np.flatnonzero(~zero[ids]).tolist())
                    wide = epsilon_of[wide_ids[i]]
                yield _report.register_entry(release, families, found, wide, **steps.get(release.id, {}))


class _Helper:
    """A forked helper process and this process's end of a pipe to it; no process where
    fork is not available. The helper's target is called with its own end of the pipe last."""

    def __init__(self, target: Callable, *args, fork: bool = True):
        self.process = None
        self.channel = None
        if not fork:
            return
        import multiprocessing

        if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            self.channel, child_end = context.Pipe()
            self.process = context.Process(target=target, args=(*args, child_end), daemon=True)
            self.process.start()
            child_end.close()

    def send(self, message) -> bool:
        """False (and the helper stopped) when it cannot be told."""
        try:
            self.channel.send(message)
            return True
        except (OSError, ValueError):
            self.stop()
            return False

    def reply(self):
        """The helper's answer; None when it ended without one (at once: its work is then done here),
        or was still at work after HELPER_TIMEOUT_S. Stops it. A helper that is alive is waited for:
        a full verification of a million events takes minutes, and giving it up part way only
        to verify again here took longer than either."""
        outcome = None
        waited = 0.0
        try:
            while waited < HELPER_TIMEOUT_S:
                if self.channel.poll(HELPER_POLL_S):
                    outcome = self.channel.recv()
                    break
                waited += HELPER_POLL_S
                if not self.process.is_alive() and not self.channel.poll(0):
                    break  # ended without an answer
        except (EOFError, OSError):
            pass
        self.stop()
        return outcome

    def stop(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.terminate()  # done with it: it has answered, or its answer is not wanted
            self.process.join()
            self.channel.close()
            self.process = None


class VerifyAlongside:
    """`audit_verify.verify` run in a forked process while this one reads the ledger and builds
    the report: on a large ledger the verification (every hash, every row, every cap's
    total recomputed) takes as long as all the rest, and a machine has more than one core.
    What it verifies: `verify_for_report` (since the verified head, when the ledger has one).

    Calling it gives the ChainStatus. Where fork is not available, or the child fails, or the
    ledger is small (`fork` False: ALONGSIDE_FROM), the verification runs here, in this
    process, when it is asked for.
    """

    def __init__(self, url: str, fork: bool = True):
        self.url = url
        self.result: ChainStatus | None = None
        self.helper = _Helper(_verify_child, url, fork=fork)  # (not `fork`: verified here when asked)

    def __call__(self) -> ChainStatus:
        if self.result is None and self.helper.process is not None:
            outcome = self.helper.reply()
            if isinstance(outcome, _report.ChainStatus):
                self.result = outcome
        if self.result is None:  # no child, or it failed: verify here
            engine = engines.make_engine(self.url)
            try:
                with sessions.read_session(engine) as session:
                    self.result = verify_for_report(session)
            finally:
                engine.dispose()
        return self.result

    def close(self) -> None:
        self.helper.stop()


class ForkedCall:
    """`function()` computed in a forked process (a `report.Beside`) while this one goes on:
    the report's pairs panel (the accountants on every pair of variables, about a fifth of a
    10,000-release report's work) on the other core, while this process builds the risk table,
    the register and the timeline. The child is a copy of this process, so
    it computes the same figures from the same index; its result comes back pickled. Calling
    the instance gives the result; where fork is not available, or the child fails, the
    function is called here, then."""

    def __init__(self, function: Callable):
        self.function = function
        self.helper = _Helper(_call_child, function)

    def __call__(self):
        if self.helper.process is not None:
            outcome = self.helper.reply()
            if isinstance(outcome, tuple) and len(outcome) == 2 and outcome[0] == "done":
                return outcome[1]
        return self.function()  # no child, or it failed: here


@contextmanager
def _telling_the_parent(channel):
    """In a forked helper: what goes wrong is sent to the parent as text (which then does the work
    itself, in its own process) rather than raised; a parent already gone is not told. The
    helper's end of the pipe is closed either way."""
    try:
        yield
    except BaseException as exc:
        try:
            channel.send(repr(exc))
        except OSError:
            pass
    finally:
        channel.close()


def _call_child(function: Callable, channel) -> None:
    """In the forked process: call, send the result (or what went wrong, for the parent to redo it)."""
    with _telling_the_parent(channel):
        channel.send(("done", function()))


def _modules_before_fork(charts: bool) -> None:
    """Import what the helpers and this process all use before the helpers are forked: a forked
    child shares the parent's imported modules, so each helper importing them again (numpy, the
    accountants, the chart writer: ~0.2 s of CPU in all on a loaded 2-core machine) is CPU taken
    from the other processes of the same report, which import them anyway."""
    import numpy  # noqa: F401
    import numpy.ma  # noqa: F401 (np.unique reads np.ma.is_masked: ~0.1 s of import in each process otherwise)

    from ..accounting import cap_states  # noqa: F401 (audit_verify.verify's)
    from ..store import columns  # noqa: F401 (audit_verify.verify's)
    from ..accounting import ledger_index  # noqa: F401 (audit_verify.verify's)
    from ..store import verified_head  # noqa: F401 (audit_verify.verify's)

    _report.summary_from  # noqa: B018 (the report module, loaded)
    if charts:
        from ..reporting import charts as _charts  # noqa: F401


def _verify_child(url: str, channel) -> None:
    """In the forked process: a new engine (never the parent's connections), verify, send (on a
    failure, the parent verifies again)."""
    with _telling_the_parent(channel):
        engine = engines.make_engine(url)
        with sessions.read_session(engine) as session:
            channel.send(verify_for_report(session))


class ChartsAlongside:
    """The charts drawn in a forked process (a `report.Draw`) while this one builds the
    rest of the report. Where fork is not available, or the child fails, they are drawn here."""

    def __init__(self):
        self.helper = _Helper(_draw_child)

    def __call__(self, pairs: Pairs, timeline: Timeline | None) -> Callable[[], tuple[str, str]]:
        if self.helper.process is None or not self.helper.send((pairs, timeline)):
            return _report.draw_here(pairs, timeline)

        def drawn() -> tuple[str, str]:
            outcome = self.helper.reply()
            return outcome if isinstance(outcome, tuple) else _report.draw_here(pairs, timeline)()  # failed: draw here

        return drawn

    def close(self) -> None:
        self.helper.stop()


def _draw_child(channel) -> None:
    """In the forked process: import the charts, wait for the contexts, draw (on a failure, the
    parent draws again)."""
    with _telling_the_parent(channel):
        from ..reporting import charts

        pairs, timeline = channel.recv()
        channel.send((str(charts.heat_map_svg(pairs)), str(charts.timeline_svg(timeline)) if timeline else ""))


REGISTER_CACHE = 100_000  # distinct texts a register column remembers across pages before it forgets them


def _by_value(values, make, cache: dict) -> list:
    """[make(v) for v in values] with `make` called once per distinct value: the register repeats
    few texts (statuses, mechanisms, families, guarantees' values) many times. `make` takes the
    list of values not yet in `cache` and returns their cells in that order, so that a column's
    JSON is parsed in one call; the cache is emptied past REGISTER_CACHE entries (bounded memory)."""
    missing = set(values).difference(cache)
    if missing:
        if len(cache) + len(missing) > REGISTER_CACHE:
            cache.clear()
            missing = set(values)  # (every value of the page is made again)
        missing = list(missing)
        cache.update(zip(missing, make(missing)))
    return list(map(cache.__getitem__, values))


def _json_many(texts) -> list:
    """json.loads of each text, parsed in one call (the texts joined as one JSON array)."""
    import json

    return json.loads("[" + ",".join(texts) + "]")


def large_register_csv(engine, large, page: int = REGISTER_PAGE, after: int = -1, upto: int | None = None,
                       header: bool = True, head: tuple[int, str] | None = None):
    """The complete register of a large ledger as CSV text, `page` releases at a time (with
    `after` and `upto`, the rows of the releases whose seq is in (after, upto] only, and with
    `header=False` without the header row: a part of the register, see RegisterAlongside): the same
    rows as `register_csv` of `large_register_entries` (tested), written from the raw release
    rows (keyset-paged by seq) column by column, without building a Release, a RegisterEntry or
    a row of cells per release. Each column of a page is made
    from its distinct stored values (`_by_value`: a JSON text parsed once, a figure's text made
    once), the figures of Table 1 from the index's value ids (numpy), and csv.writer writes
    the page's rows from the finished columns."""
    import csv
    import io

    import numpy as np
    from sqlalchemy import Text, cast

    from ..store.codec import guarantee_from_dict, mechanism_from_dict, pufferfish_from_dict
    from ..accounting.index_chunks import rows_of
    from ..store.columns import stream_raw_rows
    from ..core.numbers import exact_text, fraction_text, to_json
    from ..core.records import CHARGED_STATUSES
    from ..reporting.views import guarantee_text, names_text, param_text

    index, delta, n_var, seqs, wide_ids, epsilon_of, zero = _register_basis(large)
    variables = index.variables
    n_values = len(epsilon_of)
    charged_names = {s.value for s in CHARGED_STATUSES}
    families = {f.id: f for f in large.families}
    table = table_models.ReleaseRow.__table__
    c = table.c
    columns_ = (c.seq, c.id, c.title, c.status, cast(c.reads, Text), c.mechanism_name, cast(c.mechanism_params, Text),
                cast(c.guarantees, Text), cast(c.derived_from, Text), c.family, c.recorded_by, c.recorded_at,
                c.approved_by, c.approved_at, c.published_at, cast(c.pufferfish, Text), c.output_digest, c.part)
    aware = pack.aware
    guarantee_text_of = _report.guarantee_text_of
    caches: dict[str, dict] = {}

    def cache(name: str) -> dict:
        return caches.setdefault(name, {})

    def each(make):  # a `make` of _by_value from a function of one value
        return lambda values: [make(v) for v in values]

    def when(text) -> str:
        return "" if text is None else aware(datetime.fromisoformat(text)).isoformat()

    sets_seen: dict = {}  # a page's lists of variables (what releases read, what guarantees protect)

    def set_of(names: list) -> tuple[frozenset, str]:
        """A stored list of variables as a set and its text, once per list in a page."""
        key = tuple(names)
        found = sets_seen.get(key)
        if found is None:
            chosen = frozenset(names)
            found = sets_seen[key] = (chosen, names_text(tuple(sorted(chosen))))
        return found

    def reads_cells(texts):
        found = []
        for names in _json_many(texts):
            reads, text = set_of(names)
            found.append((reads, csv_cell(text)))
        return found

    values_seen: dict = {}

    def value_of(g: dict) -> list[str]:
        """A guarantee's text but what it protects (`views.guarantee_text`), once per value."""
        key = (g["notion"], g["epsilon"], g["delta"], g["rho"], g["relation"])
        found = values_seen.get(key)
        if found is None:
            text = guarantee_text(guarantee_text_of(guarantee_from_dict({**g, "protects": ["\x00"]})))
            found = values_seen[key] = text.split(" on {\x00}, ")
        return found

    def guarantees_cells(texts):
        found = []
        for parsed in _json_many(texts):
            sets = [set_of(g["protects"]) for g in parsed]
            parts = []
            for g, (_, names) in zip(parsed, sets):
                value, relation = value_of(g)
                parts.append(f"{value} on {names}, {relation}")
            found.append((tuple(p for p, _ in sets), csv_cell("; ".join(parts))))
        return found

    def exact_of(reads, protects) -> str:
        exact = reads
        for p in protects:
            if not exact:
                break
            exact = exact - p
        return csv_cell(names_text(tuple(sorted(exact)))) if exact else ""

    def mechanism_of(key):
        name, text = key
        mechanism = mechanism_from_dict({"name": name, "params": json.loads(text)})
        return (csv_cell(mechanism.name), csv_cell("; ".join(f"{k} {param_text(v)}" for k, v in mechanism.params)))

    def pufferfish_of(text):
        parsed = [pufferfish_from_dict(g) for g in (json.loads(text) if text else None) or ()]
        return csv_cell("; ".join(_report.PUFFERFISH_KINDS.get(g.kind, g.kind) for g in parsed))

    def family_of(fid):
        family = families.get(fid)
        split = ""
        if family is not None:
            split = "random split" if family.partition is None else \
                "partition by " + ", ".join(sorted(family.partition))
        return (csv_cell(fid or ""), csv_cell(split))

    def wide_of(vid: int):
        value = epsilon_of[vid]
        return (csv_cell(str(to_json(value))), csv_cell(fraction_text(value) or ""))  # (register_csv's rule)

    def cell_of(key: int) -> str:  # key: variable * n_values + value id
        j, vid = divmod(key, n_values)
        return f"{{{variables[j]}}} {exact_text(epsilon_of[vid])}"

    import json

    no_steps: dict = {}

    def page_columns(rows, steps) -> list:
        """The page's 28 columns of REGISTER_COLUMNS, each a list of cells."""
        n = len(rows)
        sets_seen.clear()
        (seq, rid, title, status, reads_text, mech_name, params_text, guarantees_text, derived_text, family,
         recorded_by, recorded_at, approved_by, approved_at, published_at, pufferfish_text, digest, part) = zip(*rows)
        reads = _by_value(reads_text, reads_cells, cache("reads"))
        guarantees = _by_value(guarantees_text, guarantees_cells, cache("guarantees"))
        exact = [exact_of(r[0], g[0]) for r, g in zip(reads, guarantees)]
        charged = np.fromiter((s in charged_names for s in status), dtype=bool, count=n)
        mechanisms = _by_value(list(zip(mech_name, params_text)), each(mechanism_of), cache("mechanism"))
        family_cells = _by_value(family, each(family_of), cache("family"))
        later = list(map(steps.get, rid, [no_steps] * n))
        published_by = [s.get("published_by") for s in later]
        ended = [s.get("ended") for s in later]
        blank = [""] * n
        if any(ended):
            ended_cells = [([csv_cell(e.action), e.at.isoformat(), csv_cell(e.by), csv_cell(e.reason)] if e else
                            ["", "", "", ""]) for e in ended]
            ended_columns = [list(column) for column in zip(*ended_cells)]
        else:
            ended_columns = [blank] * 4
        # the figures of Table 1: each charged release's nonzero cells, from the index's value ids
        wide = [("", "")] * n
        figures = list(blank)
        page_seqs = np.asarray(seq, dtype=np.int64)
        at = np.searchsorted(seqs, page_seqs)
        inside = (at < len(seqs)) & (seqs[at.clip(max=len(seqs) - 1)] == page_seqs) if len(seqs) else \
            np.zeros(n, dtype=bool)
        shown = np.flatnonzero(inside & charged)
        if len(shown):
            a, b = int(at[inside].min()), int(at[inside].max()) + 1
            cells = rows_of(index, a, b).single_cells()
            ids = cells[at[shown] - a]
            row, j = np.nonzero(~zero[ids])
            keys = j.astype(np.int64) * n_values + ids[row, j]
            distinct, which = np.unique(keys, return_inverse=True)
            texts = np.asarray(_by_value(distinct.tolist(), each(cell_of), cache("cell")), dtype=object)
            pieces = texts[which.reshape(-1)].tolist()
            bounds = np.searchsorted(row, np.arange(len(shown) + 1)).tolist()
            joined = csv_column(["; ".join(pieces[bounds[t]:bounds[t + 1]]) for t in range(len(shown))])
            for k, text in zip(shown.tolist(), joined):
                figures[k] = text
            widest = _by_value(wide_ids[at[shown]].tolist(), each(wide_of), cache("wide"))
            for k, w in zip(shown.tolist(), widest):
                wide[k] = w
        dates = cache("when")
        return [
            csv_column(rid), csv_column(title), _by_value(status, each(csv_cell), cache("status")),
            ["yes" if x else "no" for x in charged.tolist()], [r[1] for r in reads], exact,
            [g[1] for g in guarantees], [m[0] for m in mechanisms], [m[1] for m in mechanisms],
            [f[0] for f in family_cells], [f[1] for f in family_cells], csv_column([p or "" for p in part]),
            _by_value(derived_text, each(lambda text: csv_cell(", ".join(json.loads(text)))), cache("derived")),
            _by_value(recorded_at, each(when), dates), _by_value(recorded_by, each(csv_cell), cache("by")),
            _by_value(approved_at, each(when), dates),
            _by_value(approved_by, each(lambda x: csv_cell(x or "")), cache("by or none")),
            _by_value(published_at, each(when), dates),
            _by_value(published_by, each(lambda x: csv_cell(x or "")), cache("by or none")),
            *ended_columns, csv_column([d or "" for d in digest]),
            _by_value(pufferfish_text, each(pufferfish_of), cache("pufferfish")),
            [w[0] for w in wide], [w[1] for w in wide], figures]

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(REGISTER_COLUMNS)
    # the dataset compared through an expression, so that the page is read along the seq index
    # (SQLite otherwise picks the dataset's index and sorts every release of the dataset for each
    # page: quadratic in the ledger's size)
    of_dataset = c.dataset.concat("") == large.dataset.name
    within = () if upto is None else (c.seq <= upto,)
    with sessions.read_session(engine) as session:
        same_ledger(session, head)
        connection = session.connection()
        then, until = register_moment(session, large)
        steps = lifecycle_events(session, until=until)
        while True:
            rows = list(stream_raw_rows(connection, select(*columns_).where(of_dataset, c.seq > after, *within)
                                        .order_by(c.seq).limit(page), page))
            if not rows:
                break
            after = rows[-1][0]
            if then is not None:
                rows = rows_as_they_stood(rows, then)
                if not rows:
                    continue
            writer.writerows(zip(*page_columns(rows, steps)))
            del rows
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


REGISTER_PARTS = 2  # forked processes writing the register of a large report, each a part of it


class RegisterAlongside:
    """The complete register of a large report written by forked processes (each a new engine,
    `large_register_csv` of its part of the releases by seq) while this one builds and renders
    the page: at a million releases the register is as much work as the rest, and
    one process writing it took longer than this one's whole work, so it is split in
    REGISTER_PARTS parts of about as many charged releases, each written to a temporary file
    beside the register; `finish` waits for them and joins the parts in order. Where fork is
    not available, or a child fails, the register is written here, whole."""

    def __init__(self, url: str, large, path: Path, head: tuple[int, str] | None = None, parts: int | None = None):
        self.path, self.large, self.head = path, large, head
        self.files: list[Path] = []
        self.helpers: list[_Helper] = []
        bounds = _register_parts(large, REGISTER_PARTS if parts is None else parts)
        try:
            for k, (after, upto) in enumerate(bounds):
                handle, name = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                                                prefix=f".{path.name}.part{k}.", suffix=".tmp")
                os.close(handle)
                self.files.append(Path(name))
                self.helpers.append(_Helper(_call_child, lambda name=name, after=after, upto=upto, k=k:
                                            _write_register(url, large, Path(name), after, upto, k == 0, head)))
        except OSError:  # (no temporary file beside the register: written here, at the end)
            self.close()

    def finish(self, summary) -> None:
        try:
            outcomes = [helper.reply() if helper.process is not None else None for helper in self.helpers]
            if self.helpers and all(outcome == ("done", "written") for outcome in outcomes):
                outputs.write_streaming(self.path, _joined(self.files))
            else:  # no child, or one failed: the parent writes it again, whole
                outputs.write_streaming(self.path, large_register_csv(open_engine(), self.large, head=self.head))
        finally:
            self.close()

    def close(self) -> None:
        for helper in self.helpers:
            helper.stop()
        for name in self.files:
            name.unlink(missing_ok=True)
        self.helpers, self.files = [], []


def _register_parts(large, parts: int) -> list[tuple[int, int | None]]:
    """(after, upto) seq bounds of the register's parts: about as many charged releases each
    (the index's seqs; the cancelled ones fall where they were recorded), the last one open."""
    seqs = large.index.releases.seqs
    parts = max(1, min(parts, len(seqs) // REGISTER_PAGE))
    cuts = [int(seqs[len(seqs) * k // parts]) for k in range(1, parts)]
    return list(zip([-1, *cuts], [*cuts, None]))


def _joined(files: list[Path], size: int = 1 << 20):
    """The parts' bytes, in order."""
    for name in files:
        with open(name, "rb") as stream:
            while data := stream.read(size):
                yield data


def _write_register(url: str, large, path: Path, after: int = -1, upto: int | None = None,
                    header: bool = True, head: tuple[int, str] | None = None) -> str:
    """In a forked process (`_call_child`): a new engine (never the parent's connections), the
    register's part of seqs (after, upto] written to `path` (the temporary file the parent made)."""
    engine = engines.make_engine(url)
    with open(path, "wb") as stream:
        for text in large_register_csv(engine, large, after=after, upto=upto, header=header, head=head):
            stream.write(text.encode("utf-8"))
    engine.dispose()
    return "written"
