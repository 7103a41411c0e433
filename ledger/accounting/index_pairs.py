"""The loss on every pair of variables over a LedgerIndex's arrays (`pair_matrix`), and the per-pair release counts the accountants share.

Invariant: equal to LedgerIndex.pairs() (and to cost_rule.ledger_cost on each pair), exactly.
"""

from __future__ import annotations

from ..core.lazy import lazy_module
from .charge_choice import Objective
from .exact_sums import SpendGrid, _GridBuilder
from .index_chunks import _CHUNK

np = lazy_module("numpy")  # imported on first use


class PairQueries:
    """The pair queries of a LedgerIndex (a mixin: its methods read the index's arrays and its cost rule)."""

    def pair_matrix(self, objective: Objective | None = None) -> SpendGrid:
        """The loss on every pair {a, b} (and on {a} on the diagonal), as a symmetric grid.

        Equal to `pairs()` (and to `ledger_cost` on each pair), without a subset query
        per pair. For a simple release with at most one guarantee, value v, protected
        set P: c_r({a, b}) is v when r reads a or b and neither of them is in
        reads - P, ∞ when one of them is, 0 otherwise (docs/explanation/model.md#the-cost-of-one-release-on-a-subset). So the finite
        part is, per distinct value v, v times the number of its releases reading a or
        b: n_v(a) + n_v(b) - n_v(a and b), with n_v(a and b) = (R_v^T R_v)[a, b] for
        the 0/1 reads matrix R_v -- a matrix product, exact in float32 below 2^24
        releases. Releases with several guarantees are evaluated pair by pair over
        arrays. A family whose members have at most one guarantee each costs the
        componentwise largest member cost (docs/explanation/model.md#families), also over arrays, except on
        pairs holding a key variable of its partition; those, other families and
        releases with a choice go through the exact path (`family_options`,
        `candidates`, `choose`) on the pairs they read, as `_others` does.
        """
        objective = self.stated(objective)
        memo = self.__dict__.setdefault("_pair_grids", {})
        if objective not in memo:  # (the last one kept: a table's headline asks twice)
            memo.clear()
            memo[objective] = self._pair_matrix(objective)
        return memo[objective]

    def _pair_matrix(self, objective: Objective | None) -> SpendGrid:
        n_var = len(self.variables)
        grid = _GridBuilder(self._components, (n_var, n_var))
        n_guarantees, first = self._guarantee_spans()

        single = np.flatnonzero(self.simple & (n_guarantees <= 1))
        exact = np.zeros(n_var, dtype=bool)
        for start in range(0, len(single), _CHUNK):  # read without protection: ∞ (docs/explanation/model.md#the-cost-of-one-release-on-a-subset)
            part = single[start:start + _CHUNK]
            exact |= (self.reads[part] & ~self._single_protects(part, first)).any(axis=0)
        grid.unbounded |= exact[:, None] | exact[None, :]
        guaranteed = first[single] >= 0
        rows = single[guaranteed]
        values = self.g_value[first[rows]]
        groups = np.full(len(self.releases), -1, dtype=np.int64)
        groups[rows] = values
        counts = self.pair_counts(groups, len(self.values))
        for value in np.unique(values):
            grid.add_count(int(value), counts[value])

        for r in np.flatnonzero(self.simple & (n_guarantees > 1)):
            grid.add_ids(self._pair_ids(r, first, n_guarantees))

        # families: the largest member cost, over arrays, where no key variable is in the pair
        exact_units: list[tuple[np.ndarray, str | None, int | None]] = []  # (pairs it must see, family, release)
        for fid, rows_ in self.members.items():
            family = self.families[fid]
            if fid in self.mixed_families or any(n_guarantees[r] > 1 for r in rows_):
                read = self.reads[rows_].any(axis=0)
                exact_units.append((read[:, None] | read[None, :], fid, None))
                continue
            largest = _GridBuilder(self._components, (n_var, n_var))
            for r in rows_:
                largest.max_ids(self._pair_ids(r, first, n_guarantees))
            keyed = np.zeros(n_var, dtype=bool)
            if family.partition is not None:
                keyed[[self.column[name] for name in family.partition if name in self.column]] = True
            with_key = keyed[:, None] | keyed[None, :]
            grid.add_grid(largest, where=~with_key)
            if with_key.any():
                exact_units.append((with_key, fid, None))
        for i in self.ambiguous:
            read = self.reads[i]
            exact_units.append((read[:, None] | read[None, :], None, i))
        if exact_units:
            needed = np.triu(np.logical_or.reduce([pairs_ for pairs_, _, _ in exact_units]))
            memo: dict = {}
            for i, j in zip(*np.nonzero(needed)):
                subset = frozenset({self.variables[i], self.variables[j]})
                families = {fid: self.members[fid] for pairs_, fid, _ in exact_units if fid and pairs_[i, j]}
                releases = [r for pairs_, fid, r in exact_units if r is not None and pairs_[i, j]]
                spend = self._units_cost(subset, grid.spend(i, j), families, releases, objective, memo)
                grid.set(i, j, spend)
                grid.set(j, i, spend)
        return grid.done()

    def pair_counts(self, groups: np.ndarray, n_groups: int) -> np.ndarray:
        """Per group g and pair {a, b}: how many releases r with groups[r] = g (-1: none) read a
        or b, n_g(a) + n_g(b) - n_g(a and b) (n_g(a) on the diagonal), as int64 (n_groups, n, n).

        The counts of both, n_g(a and b), are counted from the pairs of variables each release
        reads (a release reads a few variables: a handful of pairs, not n^2 cells), grouped
        by one bincount; a release reading more than PAIR_SPARSE_LIMIT variables enters by a
        0/1 matrix product instead (exact in float32 below 2^24 releases per chunk)."""
        n = len(self.variables)
        owner, key, wide = self._read_pairs()
        both = np.zeros(n_groups * n * n, dtype=np.int64)
        step = 4 * _CHUNK
        for start in range(0, len(owner), step):
            g = groups[owner[start:start + step]]
            keep = g >= 0
            both += np.bincount(g[keep] * (n * n) + key[start:start + step][keep], minlength=n_groups * n * n)
        both = both.reshape(n_groups, n, n)  # a <= b only (a == b: the release reads a)
        diagonal = np.einsum("gii->gi", both).copy()
        both = both + both.transpose(0, 2, 1)
        both[:, np.arange(n), np.arange(n)] = diagonal
        wide_groups = groups[wide]
        for g in np.unique(wide_groups[wide_groups >= 0]):
            rows = wide[wide_groups == g]
            for start in range(0, len(rows), _CHUNK):
                reads = self.reads[rows[start:start + _CHUNK]].astype(np.float32)
                both[g] += np.rint(reads.T @ reads).astype(np.int64)
        alone = np.einsum("gii->gi", both)
        return alone[:, :, None] + alone[:, None, :] - both

    def _read_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pairs {a, b} (a <= b) of variables read by the same release, for the releases
        reading at most PAIR_SPARSE_LIMIT variables: (release, a * n + b) as two int32 arrays;
        and the other releases. Built once per index (`pair_matrix` and the accountants'
        `pair_rdp` group the same pairs two ways)."""
        cached = self.__dict__.get("_pairs_read")
        if cached is not None:
            return cached
        n = len(self.variables)
        all_rows, all_cols = self.read_entries()
        width = np.bincount(all_rows, minlength=len(self.releases))
        narrow = width <= PAIR_SPARSE_LIMIT
        deepest = int(width[narrow].max()) if narrow.any() else 0
        if narrow.all():  # (nearly always: no copy)
            rows, cols = all_rows, all_cols
        else:
            keep = narrow[all_rows]
            rows, cols = all_rows[keep], all_cols[keep]
        # int32 throughout: a * n + b < n^2 (n variables, far below 46,341)
        wide_ints = np.int64 if n * n >= 2**31 else np.int32
        rows, cols = rows.astype(np.int32, copy=False), cols.astype(wide_ints, copy=False)
        owners, keys = [rows], [(cols * (n + 1)).astype(np.int32)]  # a == b
        for d in range(1, deepest):  # the d-th next variable of the same release
            same = np.flatnonzero(rows[d:] == rows[:-d])  # (positions: each column gathered once)
            owners.append(rows[same])
            keys.append((cols[same] * n + cols[same + d]).astype(np.int32, copy=False))
        found = self.__dict__["_pairs_read"] = (np.concatenate(owners), np.concatenate(keys), np.flatnonzero(~narrow))
        return found

    def _pair_ids(self, r: int, first: np.ndarray, n_guarantees: np.ndarray) -> np.ndarray:
        """The id of c_r({a, b}) for every pair: the first-ranked guarantee covering what r
        reads of the pair (the smallest id, of its side: `_best`), ∞ when none does, 0 when r
        reads neither."""
        read = self.reads[r]
        if first[r] < 0:  # no guarantee (a family's member): ∞ wherever it reads
            return np.where(read[:, None] | read[None, :], self.NONE, self.ZERO_ID)
        rows_ = np.arange(first[r], first[r] + n_guarantees[r])
        covered = ~read[None, :] | self.g_protects[rows_]  # guarantee x variable
        candidates = np.where(covered[:, :, None] & covered[:, None, :], self.g_value[rows_][:, None, None], self.NONE)
        best = self._first_of_side(candidates, self.g_is_approx[rows_], np.zeros(1, np.int64))[0]
        return np.where(read[:, None] | read[None, :], best, self.ZERO_ID)


PAIR_SPARSE_LIMIT = 16  # releases reading more variables enter the pair counts by a matrix product
