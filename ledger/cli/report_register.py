"""The complete register of a summarised report: a row per release, in recording order, as CSV.

`register_csv` writes it from a report's summary; `large_register_csv` from the raw release rows
(keyset-paged by seq, column by column: memory does not grow with the ledger), in parts written
by forked processes alongside the page (`RegisterAlongside`). Every text cell is neutralised
against formula injection; figures as the CSV export states them.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path


from . import outputs
from ..reporting.write import csv_cell, csv_column
from .context import book
from ..core.lazy import lazy_module
from .forked_helpers import Helper, call_child

# the report's context builder (and markupsafe, the chart data): imported when a report is
# made, not by `--help`, `check` or `record`, which only register this command
_report = lazy_module("ledger.reporting.report")
_register = lazy_module("ledger.reporting.register_section")

pack = lazy_module("ledger.operations.meeting_pack")  # the meeting pack (--since), computed below the API
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


def large_register_csv(ledger, large, page: int | None = None, after: int = -1, upto: int | None = None,
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

    from ..api import release_part_readers
    from ..accounting.index_chunks import rows_of
    from ..core.numbers import exact_text, fraction_text, to_json
    from ..core.records import CHARGED_STATUSES
    from ..reporting.views import guarantee_text, names_text, param_text

    guarantee_from_dict, mechanism_from_dict, pufferfish_from_dict = release_part_readers()
    index, delta, n_var, seqs, wide_ids, epsilon_of, zero = large_register.register_basis(large)
    variables = index.variables
    n_values = len(epsilon_of)
    charged_names = {s.value for s in CHARGED_STATUSES}
    families = {f.id: f for f in large.families}
    aware = pack.aware
    guarantee_text_of = _register.guarantee_text_of
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
        return csv_cell("; ".join(_register.PUFFERFISH_KINDS.get(g.kind, g.kind) for g in parsed))

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
        at, inside = large_register.positions(seqs, np.asarray(seq, dtype=np.int64))
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
    for rows, steps in ledger.register_pages(large, head=head, page=page, after=after, upto=upto):
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
