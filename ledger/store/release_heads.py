"""What a table row shows of a release (`ReleaseHead`: id, title, status) without decoding it,
read from the accounting rows when first asked for: the releases of an index built from the rows
(index_from_rows.py), whole only where the exact path needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.lazy import lazy_module
from ..core.records import Release, Status

np = lazy_module("numpy")


@dataclass(frozen=True, slots=True)
class ReleaseHead:
    """What a table row shows of a release (its id, title and status), without the release."""

    id: str
    title: str
    status: Status


_STATUS_OF = {status.value: status for status in Status}  # (a dict look-up: Status(text) is ten times slower)


class _Releases(Sequence):
    """The index's releases: heads (id, title, status), read when first asked for (only a
    table shows them: all of them for a small table, the rows it shows of a large one,
    `prefetch`), and the whole release where the exact path needs it."""

    def __init__(self, seqs, whole: Mapping[int, Release], heads, ids=None):
        self.seqs, self.whole, self._heads, self._ids = seqs, whole, heads, ids
        self.heads: tuple[list[str], list[str], list[str]] | None = None
        self.found: dict[int, ReleaseHead] = {}
        self.known_ids: list[str] | None = None  # the ids alone, when read with the rows

    def ids(self) -> list[str]:
        """The ids of every release, in index order: the heads' when read, else the ids alone
        (`ids`: a cap's drivers name tied rows by id; at a million releases the heads at
        --as-of, statuses then and titles, took seven seconds, the ids one)."""
        if self.known_ids is None:
            self.known_ids = self.load()[0] if self.heads is not None or self._ids is None else self._ids()
        return self.known_ids

    def __len__(self) -> int:
        return len(self.seqs)

    def load(self) -> tuple[list[str], list[str], list[str]]:
        """(ids, titles, statuses) of every release, in index order."""
        if self.heads is None:
            self.heads = self._heads(None)
        return self.heads

    def prefetch(self, rows: Sequence[int]) -> None:
        """The heads of these rows only, read now."""
        rows = [int(r) for r in rows if int(r) not in self.found and int(r) not in self.whole]
        if self.heads is None and rows:
            at = {int(self.seqs[r]): r for r in rows}
            for start in range(0, len(rows), 500):
                for seq, rid, title, status in self._heads(sorted(at)[start:start + 500]):
                    self.found[at[seq]] = ReleaseHead(rid, title, _STATUS_OF[status])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        found = self.whole.get(i)
        if found is None:
            found = self.found.get(i)
        if found is not None:
            return found
        ids, titles, statuses = self.load()
        return ReleaseHead(ids[i], titles[i], _STATUS_OF[statuses[i]])


class _LazyIds:
    """`LedgerIndex.release_ids`, read when first indexed (a table's headline, a subset's
    list of charged releases); `pairs` never reads them."""

    def __init__(self, releases: _Releases):
        self.releases = releases
        self.ids = None

    def __len__(self) -> int:
        return len(self.releases)

    def __getitem__(self, key):
        if self.ids is None:
            self.ids = np.asarray(self.releases.ids(), dtype=object)
        return self.ids[key]

    def __iter__(self):
        return iter(self[:])
