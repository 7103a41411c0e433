"""`table --json` of a large ledger, written a chunk of releases at a time.

`table --json` prints every release row (unlike the text table, which past a million
cells prints the total row and the largest releases). At a million releases over 100
variables that is about four gigabytes of JSON: built as one Python object, as for a
small table, it took more than ten gigabytes. Here the document is the one
`json.dumps(..., indent=2, ensure_ascii=False)` writes for the whole table, to the byte:
everything but the release rows is built and dumped as for a small table (the total
row, the headline and the accountants from `chunked_table.large_table`, which composes them
a chunk of releases at a time), and the rows are written in its place, a chunk of
releases at a time: their cells (`LedgerIndex.single_cells` of the chunk), their
whole-dataset cost (kept by `large_table`) and their heads (id, title, status, read
for the chunk's seqs). Memory holds the index and one chunk, whatever the length of the
history.

Invariants: the text equals `json.dumps` of the document a small table builds
(tests/store/test_scale.py compares them); the basis (pure, or epsilon at a delta) is decided
from every cell and whole-dataset cost, as `table_view.table_view` decides it from the whole
table, in a first pass over the chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from fractions import Fraction

from ..core.lazy import lazy_module
from ..core.numbers import fraction_text, to_json

np = lazy_module("numpy")

CHUNK = 16_384  # releases whose rows are made and written at once (a chunk of cells is 13 MB)
_ROWS_KEY = '\n  "rows": [],\n'  # where the document's (empty) rows stand in its dumped text


def _chunks(index, chunk: int) -> Iterator[tuple[int, int, "np.ndarray"]]:
    """(start, stop, cells) of each chunk of the index's releases: Table 1's cells of those rows."""
    from ..accounting.index_chunks import rows_of

    n_rel = len(index.releases)
    bounds = np.searchsorted(index.g_release, np.arange(0, n_rel + chunk, chunk).clip(max=n_rel))
    for k, start in enumerate(range(0, n_rel, chunk)):
        stop = min(start + chunk, n_rel)
        yield start, stop, rows_of(index, start, stop, int(bounds[k]), int(bounds[k + 1])).single_cells()


def used_values(index, dataset_wide: "np.ndarray", chunk: int | None = None) -> set[int]:
    """The value ids of every cell of Table 1 and every whole-dataset cost (`table_view`'s `used`)."""
    chunk = chunk or CHUNK
    seen = np.zeros(len(index.values), dtype=bool)
    seen[np.unique(dataset_wide)] = True
    for _, _, cells in _chunks(index, chunk):
        seen[np.unique(cells)] = True
    return set(np.flatnonzero(seen).tolist())


def write(out: Callable[[str], object], document: dict, index, dataset_wide: "np.ndarray", delta: Fraction,
          heads: Callable[[int, int], Sequence[tuple[str, str, str]]], chunk: int | None = None) -> None:
    """Write `document` (the table's JSON document with "rows": []) with every release row in
    place, as `json.dumps(document with its rows, indent=2, ensure_ascii=False)` writes it.
    `heads(start, stop)`: (id, title, status) of the index's releases start..stop."""
    chunk = chunk or CHUNK
    text = json.dumps(document, indent=2, ensure_ascii=False)
    at = text.index(_ROWS_KEY)  # (a top-level key: nothing nested is indented by two spaces)
    out(text[:at] + '\n  "rows": [')
    names = [json.dumps(name, ensure_ascii=False) for name in index.variables]
    epsilon = [v.own_epsilon(delta, index.allowance) for v in index.values]  # (each a release's own charge)
    number = [json.dumps(to_json(e), ensure_ascii=False) for e in epsilon]
    exact = [json.dumps(fraction_text(e), ensure_ascii=False) for e in epsilon]
    # one line per (value id, variable), for "values" and for "exact"
    value_line = np.asarray([[f"\n        {name}: {number[v]}" for name in names] for v in range(len(epsilon))],
                            dtype=object)
    exact_line = np.asarray([[f"\n        {name}: {exact[v]}" for name in names] for v in range(len(epsilon))],
                            dtype=object)
    wide_text = [f',\n      "dataset_wide": {number[v]},\n      "dataset_wide_exact": {exact[v]}\n    }}'
                 for v in range(len(epsilon))]
    columns = np.arange(len(names))
    string = json.JSONEncoder(ensure_ascii=False).encode  # (a string alone: the C encoder, as json.dumps)
    first = True
    for start, stop, cells in _chunks(index, chunk):
        lines = []
        for (rid, title, status), row, wide in zip(heads(start, stop), cells, dataset_wide[start:stop].tolist()):
            lines.append(("\n    {" if first else ",\n    {") + '\n      "release": ' + string(rid)
                         + ',\n      "title": ' + string(title) + ',\n      "status": ' + string(status)
                         + (',\n      "values": {' + ",".join(value_line[row, columns]) + '\n      },'
                            '\n      "exact": {' + ",".join(exact_line[row, columns]) + "\n      }"
                            if len(names) else ',\n      "values": {},\n      "exact": {}')
                         + wide_text[wide])
            first = False
        out("".join(lines))
    out("\n  ]," + text[at + len(_ROWS_KEY) - 1:] + "\n")


def document(view, risk, headline_json: dict, accounts_json: dict, used: set[int], delta: Fraction) -> dict:
    """The table's JSON document without its rows (`view`: the table's view; `risk`: its
    RiskTable), on the basis `table_view` takes from the whole table: every cell (`used`) and
    the total row."""
    from ..operations.table_view import basis_for, converts

    spends = [risk.values[i] for i in sorted(used)] + [*risk.total, risk.total_dataset_wide]
    view = replace(view, rows=(), basis=basis_for(spends, delta, risk.allowance), converted=converts(spends))
    return {**view.to_json(), "headline": headline_json, **accounts_json}
