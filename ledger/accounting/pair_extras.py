"""The pairs' events from the releases outside the array path of every_pair.pair_rdp, and from the families.

A release's or a family's cost on U depends only on U ∩ what it reads (docs/explanation/model.md#families),
so each distinct case is composed once, not once per pair.

Invariant: each pair gets the events index_figures.IndexEvents.composition adds for them on that subset.
"""

from __future__ import annotations

from collections import Counter

from ..core.lazy import lazy_module
from .dp_events import spend_events, unit_events
from .family_case_costs import family_cases
from .index_figures import IndexEvents

np = lazy_module("numpy")  # imported on first use


class PairExtras:
    """Per event, how many units of the releases outside the array path of `pair_rdp` and of
    the families charge each pair {i, j} (i <= j; {i} alone on the diagonal), and the pairs one
    of them leaves unbounded: what `IndexEvents.composition` adds for them on that subset.

    A release's or a family's cost on U depends only on U ∩ what it reads (docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#families;
    `cost_rule.candidates`, `cost_rule.family_options`), so it is composed once per distinct case:
    - a release outside the array path (several guarantees, a value of several parts, a
      choice): once per variable a it reads ({a}: every pair {a, x} with x not read by it, by a
      matrix product of the reads) and once per pair of variables it reads;
    - a family whose every member costs one value on every part of what it reads (and has one
      add/remove cost): once per distinct case of `FamilyCases` (the set of touched members'
      values, a member untouched or not, the key met or not), the cases of all pairs at once;
    - any other family: once per distinct U ∩ (its reads and key)."""

    def __init__(self, index, events: IndexEvents, single: np.ndarray):
        n = len(index.variables)
        self.index, self.events, self.n = index, events, n
        self.counts: dict[int, np.ndarray] = {}  # event id -> n x n counts (symmetric)
        self.unbounded = np.zeros((n, n), dtype=bool)
        self._codes: dict[tuple, int] = {}
        self._code_events: list[tuple] = []  # code -> ((event id, count), ...) or None (unbounded)
        in_family = np.zeros(len(index.releases), dtype=bool)
        for rows in index.members.values():
            in_family[rows] = True
        others = np.flatnonzero(~single & ~in_family & index.reads.any(axis=1))
        if len(others):
            self._releases(others)
        for fid, rows in index.members.items():
            self._family(fid, rows)

    def _code(self, found: tuple | None) -> int:
        code = self._codes.get(found)
        if code is None:
            code = self._codes[found] = len(self._code_events)
            self._code_events.append(found)
        return code

    def _spend_code(self, spend, release=None) -> int:
        """The code of a unit's cost: its events (`unit_events` for a standalone release with a
        choice, `spend_events` otherwise), or unbounded."""
        if spend.unbounded:
            return self._code(None)
        listed = unit_events(release, spend) if release is not None else spend_events(spend)
        found = Counter(self.events.event_id(e) for e in listed)
        return self._code(tuple(sorted(found.items())))

    def _add(self, code: int, where: np.ndarray) -> None:
        """Charge `code` once to the pairs counted in `where` (n x n, counts, symmetric)."""
        found = self._code_events[code]
        if found is None:
            self.unbounded |= where > 0
            return
        for k, count in found:
            total = self.counts.get(k)
            if total is None:
                total = self.counts[k] = np.zeros((self.n, self.n))
            total += count * where

    def _release_code(self, r: int, columns: tuple[int, ...]) -> int:
        """The code of release r's cost on the variables `columns` it reads, as `composition`
        charges it: a release with a choice by `release_cost`, a simple one by its best covering
        guarantee's value id (`LedgerIndex._cost_ids`) and its mechanism's event where it has one."""
        index = self.index
        if r in self._ambiguous:
            from .cost_rule import release_cost

            release = index.releases[r]
            return self._spend_code(release_cost(release, frozenset(index.variables[c] for c in columns)), release)
        best = index.charged_id(r, columns, (self._n_guarantees, self._first))
        if best == index.NONE:
            return self._code(None)
        if index.value_is_zero[best]:
            return self._code(())
        mech = int(self.events.mech[r])
        event = mech if mech >= 0 else int(self.events.value_event[best])
        if event == -2:
            return self._spend_code(index.values[best])
        return self._code(((event, 1),))

    def _releases(self, others: np.ndarray) -> None:
        index, n = self.index, self.n
        self._ambiguous = set(index.ambiguous)
        self._n_guarantees, self._first = index._guarantee_spans()
        reads = index.reads[others]
        alone: dict[int, np.ndarray] = {}  # code -> (releases x n) 0/1: the release reads a, costing code on {a}
        pairs: dict[int, list] = {}  # code -> [(a, b), ...]: a release reads both, costing code on {a, b}
        for t, r in enumerate(others.tolist()):
            columns = np.flatnonzero(reads[t]).tolist()
            for a in columns:
                code = self._release_code(r, (a,))
                if code not in alone:
                    alone[code] = np.zeros(reads.shape, dtype=np.float64)
                alone[code][t, a] = 1
            for x, a in enumerate(columns):
                for b in columns[x + 1:]:
                    pairs.setdefault(self._release_code(r, (a, b)), []).append((a, b))
        missing = (~reads).astype(np.float64)
        for code, matrix in alone.items():
            where = matrix.T @ missing  # {a, x}: a read, x not
            where = where + where.T
            where[np.arange(n), np.arange(n)] += matrix.sum(axis=0)
            self._add(code, where)
        for code, listed in pairs.items():
            a, b = np.asarray(listed, dtype=np.int64).T
            where = np.zeros((n, n))
            np.add.at(where, (a, b), 1)
            np.add.at(where, (b, a), 1)
            self._add(code, where)

    def _family(self, fid: str, rows: list[int]) -> None:
        from .cost_rule import family_cost

        index, n = self.index, self.n
        cases = family_cases(index, fid)
        variables = index.variables
        reads = index.reads[rows]  # members x n
        key = np.zeros(n, dtype=bool)
        key[[index.column[v] for v in cases.key if v in index.column]] = True
        both = reads.T.astype(np.float64) @ reads.astype(np.float64)  # members reading a and b
        alone = np.diagonal(both).copy()
        touched_count = alone[:, None] + alone[None, :] - both  # members reading a or b
        np.fill_diagonal(touched_count, alone)
        touched = touched_count > 0
        codes = np.full((n, n), -1, dtype=np.int64)
        if not cases.uniform:
            # any family: its cost on U depends on U only through U ∩ (its reads and key)
            scope = reads.any(axis=0) | key
            found: dict[frozenset, int] = {}
            for i, j in zip(*np.nonzero(np.triu(touched))):
                i, j = int(i), int(j)
                case = frozenset(c for c in (i, j) if scope[c])
                code = found.get(case)
                if code is None:
                    subset = frozenset({variables[i], variables[j]})
                    code = found[case] = self._spend_code(family_cost(cases.family, cases.members, subset))
                codes[i, j] = codes[j, i] = code
        else:
            # FamilyCases: the cost is a function of (the touched members' values, a member
            # untouched, the key met), found per pair over arrays and composed once per case
            bits = np.zeros(n, dtype=np.int64)
            for m in range(len(rows)):
                bits[reads[m]] |= cases.bits[m]
            mask = bits[:, None] | bits[None, :]
            keyed = key[:, None] | key[None, :]
            untouched = touched_count < len(rows)
            case = (mask << 2) | (keyed.astype(np.int64) << 1) | untouched.astype(np.int64)
            case = np.where(touched, case, -1).ravel()
            distinct, inverse = np.unique(case, return_inverse=True)
            flat = np.full(len(distinct), -1, dtype=np.int64)
            for c, value in enumerate(distinct.tolist()):
                if value >= 0:
                    flat[c] = self._spend_code(cases.case_cost(value >> 2, bool(value & 1), bool(value & 2)))
            codes = flat[inverse.ravel()].reshape(n, n)
        self._add_codes(codes)

    def _add_codes(self, codes: np.ndarray) -> None:
        """Charge each pair the code in `codes` (n x n, -1: none), every event at once."""
        valid = codes >= 0
        present = np.unique(codes[valid]).tolist()
        weights: dict[int, np.ndarray] = {}
        none = np.zeros(len(self._code_events) + 1, dtype=bool)
        for code in present:
            found = self._code_events[code]
            if found is None:
                none[code] = True
                continue
            for k, count in found:
                weights.setdefault(k, np.zeros(len(self._code_events) + 1))[code] += count
        safe = np.where(valid, codes, len(self._code_events))  # (the last slot: weight 0, not unbounded)
        if none.any():
            self.unbounded |= none[safe]
        for k, weight in weights.items():
            total = self.counts.get(k)
            if total is None:
                total = self.counts[k] = np.zeros((self.n, self.n))
            total += weight[safe]
