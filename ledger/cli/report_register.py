"""The complete register of a summarised report: a row per release, in recording order, as CSV.

`register_csv` writes it from a report's summary; `large_register_csv` from the raw release rows
(Ledger.register_pages, keyset-paged by seq, column by column (register_columns.py): memory does
not grow with the ledger), in parts written
by forked processes alongside the page (`RegisterAlongside`). Every text cell is neutralised
against formula injection; figures as the CSV export states them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


from . import outputs
from ..reporting.write import csv_cell
from .context import book
from ..core.lazy import lazy_module
from .forked_helpers import Helper, call_child

# the report's context builder (and markupsafe, the chart data): imported when a report is
# made, not by `--help`, `check` or `record`, which only register this command
_report = lazy_module("ledger.reporting.report")
large_register = lazy_module("ledger.operations.large_register")  # the register's reading, below the API


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


def large_register_entries(ledger, large, page: int | None = None, head: tuple[int, str] | None = None):
    """The complete register of a large ledger, one RegisterEntry at a time, in recording order
    (Ledger.register_releases: the release rows read `page` at a time, each release's cells of
    Table 1 from the index, as `build_report` gives them)."""
    for release, found, wide, steps in ledger.register_releases(large, head=head, page=page):
        yield _report.register_entry(release, large.families, found, wide, **steps)


def large_register_csv(ledger, large, page: int | None = None, after: int = -1, upto: int | None = None,
                       header: bool = True, head: tuple[int, str] | None = None):
    """The complete register of a large ledger as CSV text, `page` releases at a time (with
    `after` and `upto`, the rows of the releases whose seq is in (after, upto] only, and with
    `header=False` without the header row: a part of the register, see RegisterAlongside): the same
    rows as `register_csv` of `large_register_entries` (tested), written from the raw release
    rows (Ledger.register_pages, keyset-paged by seq) column by column (register_columns.py), and
    csv.writer writes the page's rows from the finished columns."""
    import csv
    import io

    from .register_columns import RegisterColumns

    columns = RegisterColumns(large, ledger.register_figures(large))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(REGISTER_COLUMNS)
    for rows, steps in ledger.register_pages(large, head=head, page=page, after=after, upto=upto):
        writer.writerows(zip(*columns.page(rows, steps)))
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
        self.helpers: list[Helper] = []
        bounds = _register_parts(large, REGISTER_PARTS if parts is None else parts)
        try:
            for k, (after, upto) in enumerate(bounds):
                handle, name = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                                                prefix=f".{path.name}.part{k}.", suffix=".tmp")
                os.close(handle)
                self.files.append(Path(name))
                self.helpers.append(Helper(call_child, lambda name=name, after=after, upto=upto, k=k:
                                            _write_register(url, large, Path(name), after, upto, k == 0, head)))
        except OSError:  # (no temporary file beside the register: written here, at the end)
            self.close()

    def finish(self, summary) -> None:
        try:
            outcomes = [helper.reply() if helper.process is not None else None for helper in self.helpers]
            if self.helpers and all(outcome == ("done", "written") for outcome in outcomes):
                outputs.write_streaming(self.path, _joined(self.files))
            else:  # no child, or one failed: the parent writes it again, whole
                outputs.write_streaming(self.path, large_register_csv(book(), self.large, head=self.head))
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
    parts = max(1, min(parts, len(seqs) // large_register.REGISTER_PAGE))
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
    """In a forked process (`call_child`): a new engine (never the parent's connections), the
    register's part of seqs (after, upto] written to `path` (the temporary file the parent made)."""
    from ..api import Ledger

    ledger = Ledger.on_own_engine(url)
    with open(path, "wb") as stream:
        for text in large_register_csv(ledger, large, after=after, upto=upto, header=header, head=head):
            stream.write(text.encode("utf-8"))
    ledger.dispose()
    return "written"
