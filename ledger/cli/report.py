"""`privacy-ledger report`: reports for review meetings and compliance files.

A thin adapter (STYLE 8): read the ledger through the façade (ledger.api.Ledger:
operations/report_inputs.py; the summarised report of a large ledger from the accounting
rows, operations/large_report.py), build the context (`report.build_report`, pure), render it
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

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..operations import choices
from ..operations.report_inputs import parse_since
from . import outputs
from ..reporting.write import find_chromium, render
from ..operations.moments import parse_date
from .context import book, state
from ..core.errors import fail
from ..core.lazy import lazy_module
from .forked_helpers import ChartsAlongside, ForkedCall, VerifyAlongside, modules_before_fork
from .report_register import RegisterAlongside, large_register_entries, register_csv

_audit = lazy_module("ledger.reporting.audit_section")
# the report's context builder (and markupsafe, the chart data): imported when a report is
# made, not by `--help`, `check` or `record`, which only register this command
_report = lazy_module("ledger.reporting.report")



FORMATS = ("html", "md", "tex", "csv", "pdf")
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
    since_at, as_of_at = _moments(since, as_of, chosen_format)
    target = None if out.strip() == "-" else writable_target(out)
    chromium = None
    if chosen_format == "pdf":
        chromium = find_chromium("--format" if format is not None else "--out")
    ledger = book()  # (opened once: its schema checked once)
    snapshot, events = ledger.report_outset()
    chosen = choices.pick_dataset(snapshot, dataset)
    chosen_delta = choices.parse_delta(delta, chosen)
    alongside = events > ALONGSIDE_FROM
    if alongside:
        modules_before_fork(chosen_format in ("html", "pdf"))
    from ..core.memory import paused_gc
    from ..core.progress import progress

    helpers: list[RegisterAlongside] = []  # the register is written alongside from as soon as the index is read
    with progress(f"writing the {chosen_format} report"), paused_gc(), _closing(helpers):
        context, register, large = _context(ledger, chosen, chosen_delta, chosen_format, target, helpers,
                                            VerifyAlongside(state.url, alongside), alongside, as_of_at, since_at)
        if as_of_at is not None:
            context = _dated(context, chosen.name, as_of_at)
        data = render(context, chosen_format, chromium=chromium)
        if large:
            helpers[0].finish(context.summary)
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


def _moments(since: str | None, as_of: str | None, chosen_format: str):
    """(--since, --as-of) as moments, refused when --since is after --as-of or asked of the CSV export."""
    since_at = parse_since(since)
    as_of_at = parse_date(as_of, "--as-of")
    if since_at is not None and as_of_at is not None and since_at > as_of_at:
        raise fail("command line", "--since", f"{since} is after --as-of {as_of}")
    if since_at is not None and chosen_format == "csv":
        raise fail("command line", "--since", "the CSV export is the release-by-variable table only; "
                                              "--since applies to html, pdf, md and tex")
    return since_at, as_of_at


def summarised(**options):
    """How the command reads a report past `report.summary_from()` releases (report_source.Summary):
    `report.large_inputs` of the reading from the accounting rows, the LARGEST_LISTED largest releases
    and the AUDIT_EVENTS_LISTED most recent events. `options`: above, indexed, starting."""
    from ..operations.report_source import Summary

    options.setdefault("above", _report.summary_from())
    return Summary(inputs_of=_report.large_inputs, listed=_report.LARGEST_LISTED,
                   audit_listed=_audit.AUDIT_EVENTS_LISTED, **options)


def gather_large(ledger, dataset, delta, **options):
    """The summarised report's inputs (report.LargeInputs) at any size, or None when the rows cannot
    say it exactly. `options`: chain, generated_at, as_of, since (Ledger.report_reading)."""
    return ledger.report_reading(dataset, delta, summary=summarised(above=-1), **options).large


def _context(ledger, chosen, delta, chosen_format: str, target: Path | None, helpers: list, chain, alongside: bool,
             as_of_at, since_at):
    """(the report's context, the register's path or None, whether it is the summarised report's).
    One read (Ledger.report_reading) counts the releases and reads the page: past the threshold
    (now, as `build_report` decides it at any --as-of) the page summarises and is computed from the
    accounting rows (no release decoded but those listed, at --as-of and --since too), its register
    written alongside (`helpers`); else, or when the rows cannot say it exactly, from every release."""
    charts = chosen_format in ("html", "pdf")
    past: dict = {}  # past the threshold: the register's path, and the charts drawn alongside (forked then)

    def starting(count: int) -> None:
        past["register"] = register_target(target, count)
        if charts:
            past["draw"] = ChartsAlongside()

    def indexed(lite) -> None:
        helpers.append(RegisterAlongside(state.url, lite, past["register"], lite.head))

    summary = None if chosen_format == "csv" else summarised(indexed=indexed, starting=starting)
    try:
        reading = ledger.report_reading(chosen, delta, since=since_at, as_of=as_of_at, chain=chain, summary=summary)
        draw, register = past.get("draw", _report.draw_here), past.get("register")
        large = reading.large
        if large is not None:
            head = helpers[0].head  # the moment the page is of: the register must be too
            return _report.build_large_report(large, lambda: large_register_entries(book(), large.reading, head=head),
                                              register.name, charts=charts, draw=draw), register, True
        for helper in helpers:  # the rows cannot say it exactly (read_large): every release read
            helper.close()
        helpers.clear()
        return _report.build_report(reading.inputs, charts=charts, draw=draw,
                                    beside=ForkedCall if alongside else _report.here,
                                    register_file=None if register is None else register.name), register, False
    finally:
        chain.close()
        if "draw" in past:
            past["draw"].close()


def _dated(context, dataset: str, as_of_at):
    """The context saying when the dataset was added, said here too when it did not exist at --as-of."""
    from ..operations.moments import moment_text
    from .context import dataset_added_at

    added = dataset_added_at(dataset)
    context = replace(context, certificate=replace(context.certificate, dataset_added=added))
    if context.certificate.added_after:
        typer.echo(f"note: dataset {dataset} was added to this ledger at {moment_text(added)}, after "
                   f"--as-of ({moment_text(as_of_at)}): it did not exist then", err=True)
    return context


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
