"""A LedgerIndex a chunk of releases at a time (`rows_of`): what the array passes read, without an n x |V| copy of every row.

Invariant: a chunk shares its index's values, so its ids are the index's.
"""

from __future__ import annotations

from ..core.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use


def rows_of(index, start: int, stop: int, g_start: int | None = None,
            g_stop: int | None = None):
    """The index restricted to releases start..stop (and their guarantees g_start..g_stop, found
    from `g_release` when not given), sharing its values: what `cost_ids` and `single_cells` read,
    for one chunk of a large index (its Table 1 rows, without the whole n x |V| matrix), of the
    index's own class."""
    if g_start is None or g_stop is None:
        g_start, g_stop = np.searchsorted(index.g_release, [start, stop])
    part = type(index).__new__(type(index))
    part.variables, part.column, part.values, part.NONE, part.ZERO_ID = (
        index.variables, index.column, index.values, index.NONE, index.ZERO_ID)
    part.releases = range(stop - start)  # only its length is used
    part.reads = index.reads[start:stop]
    part.g_release = index.g_release[g_start:g_stop] - start
    part.g_value = index.g_value[g_start:g_stop]
    part.g_protects = index.g_protects[g_start:g_stop]
    part.has_guarantee = index.has_guarantee[start:stop]
    part.g_start = (np.flatnonzero(np.r_[True, part.g_release[1:] != part.g_release[:-1]]) if len(part.g_release)
                    else np.zeros(0, dtype=np.int64))
    return part


# releases at a time where a pass over arrays would otherwise copy every row (ledger_index,
# index_pairs and index_running_totals each bind it: a test that shrinks it patches theirs)
_CHUNK = 65_536
