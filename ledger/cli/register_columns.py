"""The complete register's columns, made from a page of raw release rows (Ledger.register_pages):
the same cells as `register_csv` writes from a report's summary (tested), without building a
Release, a RegisterEntry or a row of cells per release.

Each column of a page is made from its distinct stored values (`by_value`: a JSON text parsed
once, a figure's text made once); the figures of Table 1 are the façade's, as value ids
(Ledger.register_figures), their texts made here once per distinct cell.
Every text cell is neutralised against formula injection (`csv_cell`).
"""

from __future__ import annotations

import json
from datetime import datetime

from ..api.outputs import release_part_readers
from ..core.numbers import exact_text, fraction_text, to_json
from ..operations.meeting_pack import aware
from ..reporting import register_section
from ..reporting.views import guarantee_text, names_text, param_text
from ..reporting.write import csv_cell, csv_column

REGISTER_CACHE = 100_000  # distinct texts a register column remembers across pages before it forgets them
NO_STEPS: dict = {}


def by_value(values, make, cache: dict) -> list:
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


def json_many(texts) -> list:
    """json.loads of each text, parsed in one call (the texts joined as one JSON array)."""
    return json.loads("[" + ",".join(texts) + "]")


def each(make):
    """A `make` of by_value from a function of one value."""
    return lambda values: [make(v) for v in values]


def when(text) -> str:
    return "" if text is None else aware(datetime.fromisoformat(text)).isoformat()


def exact_of(reads, protects) -> str:
    """The variables a release reads that no guarantee of it protects (read exactly)."""
    exact = reads
    for p in protects:
        if not exact:
            break
        exact = exact - p
    return csv_cell(names_text(tuple(sorted(exact)))) if exact else ""


def ended_columns(later: list[dict], n: int) -> list[list]:
    """The four columns of a retraction or cancellation (what, when, by whom, why)."""
    ended = [s.get("ended") for s in later]
    if not any(ended):
        return [[""] * n] * 4
    cells = [([csv_cell(e.action), e.at.isoformat(), csv_cell(e.by), csv_cell(e.reason)] if e else ["", "", "", ""])
             for e in ended]
    return [list(column) for column in zip(*cells)]


class RegisterColumns:
    """The register's columns of each page of a large report's release rows, with what is
    remembered across pages (each column's texts by stored value)."""

    def __init__(self, large, figures):
        """`figures`: the register's figures of Table 1 (Ledger.register_figures)."""
        self.guarantee_from_dict, self.mechanism_from_dict, self.pufferfish_from_dict = release_part_readers()
        self.register_figures = figures
        self.families = {f.id: f for f in large.families}
        self.caches: dict[str, dict] = {}
        self.sets_seen: dict = {}  # a page's lists of variables (what releases read, what guarantees protect)
        self.values_seen: dict = {}

    def cache(self, name: str) -> dict:
        return self.caches.setdefault(name, {})

    def set_of(self, names: list) -> tuple[frozenset, str]:
        """A stored list of variables as a set and its text, once per list in a page."""
        key = tuple(names)
        found = self.sets_seen.get(key)
        if found is None:
            chosen = frozenset(names)
            found = self.sets_seen[key] = (chosen, names_text(tuple(sorted(chosen))))
        return found

    def reads_cells(self, texts) -> list:
        found = []
        for names in json_many(texts):
            reads, text = self.set_of(names)
            found.append((reads, csv_cell(text)))
        return found

    def value_of(self, g: dict) -> list[str]:
        """A guarantee's text but what it protects (`views.guarantee_text`), once per value."""
        key = (g["notion"], g["epsilon"], g["delta"], g["rho"], g["relation"])
        found = self.values_seen.get(key)
        if found is None:
            guarantee = self.guarantee_from_dict({**g, "protects": ["\x00"]})
            text = guarantee_text(register_section.guarantee_text_of(guarantee))
            found = self.values_seen[key] = text.split(" on {\x00}, ")
        return found

    def guarantees_cells(self, texts) -> list:
        found = []
        for parsed in json_many(texts):
            sets = [self.set_of(g["protects"]) for g in parsed]
            parts = []
            for g, (_, names) in zip(parsed, sets):
                value, relation = self.value_of(g)
                parts.append(f"{value} on {names}, {relation}")
            found.append((tuple(p for p, _ in sets), csv_cell("; ".join(parts))))
        return found

    def mechanism_of(self, key) -> tuple[str, str]:
        name, text = key
        mechanism = self.mechanism_from_dict({"name": name, "params": json.loads(text)})
        return (csv_cell(mechanism.name), csv_cell("; ".join(f"{k} {param_text(v)}" for k, v in mechanism.params)))

    def pufferfish_of(self, text) -> str:
        parsed = [self.pufferfish_from_dict(g) for g in (json.loads(text) if text else None) or ()]
        return csv_cell("; ".join(register_section.PUFFERFISH_KINDS.get(g.kind, g.kind) for g in parsed))

    def family_of(self, fid) -> tuple[str, str]:
        family = self.families.get(fid)
        split = ""
        if family is not None:
            split = "random split" if family.partition is None else \
                "partition by " + ", ".join(sorted(family.partition))
        return (csv_cell(fid or ""), csv_cell(split))

    def wide_of(self, vid: int) -> tuple[str, str]:
        value = self.register_figures.epsilon(vid)
        return (csv_cell(str(to_json(value))), csv_cell(fraction_text(value) or ""))  # (register_csv's rule)

    def cell_of(self, key: int) -> str:
        variable, epsilon = self.register_figures.cell(key)
        return f"{{{variable}}} {exact_text(epsilon)}"

    def figure_cells(self, page) -> tuple[list, list]:
        """(the whole-dataset cells, the cells by variable) of a page's figures (`PageFigures`):
        each charged release's nonzero cells of Table 1; blank for the others."""
        n = len(page.charged)
        wide, figures = [("", "")] * n, [""] * n
        if not page.shown:
            return wide, figures
        texts = by_value(page.cells, each(self.cell_of), self.cache("cell"))
        pieces = list(map(texts.__getitem__, page.which))
        bounds = page.bounds
        joined = csv_column(["; ".join(pieces[bounds[t]:bounds[t + 1]]) for t in range(len(page.shown))])
        for k, text in zip(page.shown, joined):
            figures[k] = text
        for k, w in zip(page.shown, by_value(page.wide, each(self.wide_of), self.cache("wide"))):
            wide[k] = w
        return wide, figures

    def page(self, rows, steps) -> list[list]:
        """The page's 28 columns of REGISTER_COLUMNS, each a list of cells."""
        n = len(rows)
        self.sets_seen.clear()
        cache = self.cache
        (seq, rid, title, status, reads_text, mech_name, params_text, guarantees_text, derived_text, family,
         recorded_by, recorded_at, approved_by, approved_at, published_at, pufferfish_text, digest, part) = zip(*rows)
        reads = by_value(reads_text, self.reads_cells, cache("reads"))
        guarantees = by_value(guarantees_text, self.guarantees_cells, cache("guarantees"))
        exact = [exact_of(r[0], g[0]) for r, g in zip(reads, guarantees)]
        page = self.register_figures.page(seq, status)
        mechanisms = by_value(list(zip(mech_name, params_text)), each(self.mechanism_of), cache("mechanism"))
        family_cells = by_value(family, each(self.family_of), cache("family"))
        later = list(map(steps.get, rid, [NO_STEPS] * n))
        published_by = [s.get("published_by") for s in later]
        wide, figures = self.figure_cells(page)
        dates = cache("when")
        return [
            csv_column(rid), csv_column(title), by_value(status, each(csv_cell), cache("status")),
            ["yes" if x else "no" for x in page.charged], [r[1] for r in reads], exact,
            [g[1] for g in guarantees], [m[0] for m in mechanisms], [m[1] for m in mechanisms],
            [f[0] for f in family_cells], [f[1] for f in family_cells], csv_column([p or "" for p in part]),
            by_value(derived_text, each(lambda text: csv_cell(", ".join(json.loads(text)))), cache("derived")),
            by_value(recorded_at, each(when), dates), by_value(recorded_by, each(csv_cell), cache("by")),
            by_value(approved_at, each(when), dates),
            by_value(approved_by, each(lambda x: csv_cell(x or "")), cache("by or none")),
            by_value(published_at, each(when), dates),
            by_value(published_by, each(lambda x: csv_cell(x or "")), cache("by or none")),
            *ended_columns(later, n), csv_column([d or "" for d in digest]),
            by_value(pufferfish_text, each(self.pufferfish_of), cache("pufferfish")),
            [w[0] for w in wide], [w[1] for w in wide], figures]
