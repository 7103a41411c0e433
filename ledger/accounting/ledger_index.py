"""The cost rule over arrays: a LedgerIndex holds the reads and guarantees of a set of releases as boolean matrices.

The same rules as cost_rule (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), used for the
release-by-variable table (Tan's Table 1) and subset queries on large ledgers; its pair and
running-total queries are in index_pairs.py and index_running_totals.py.

Invariant: totals stay exact: distinct guarantee values are scaled to integers over a common
denominator and summed as integers (exact_sums.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from itertools import combinations

from ..core.lazy import lazy_module
from ..core.records import Family, Relation, Release
from .charge_choice import AtDelta, Objective, at_delta, compose_units
from .cost_rule import _is_chain, candidates, family_options, is_approx, one_charge, unprotected_move
from .exact_sums import _ExactComponents
from .index_chunks import _CHUNK, rows_of
from .index_pairs import PairQueries
from .index_running_totals import RunningTotals
from .risk_table import RiskTable, SubsetCost
from .spend import ALLOWANCE, Spend, UNBOUNDED, ZERO, guarantee_spend

np = lazy_module("numpy")  # imported on first use


class LedgerIndex(PairQueries, RunningTotals):
    """Reads and guarantees of a set of releases as arrays, for fast exact queries.

    Releases are split three ways: *simple* standalone releases (`one_charge`: on each side
    their guarantees are ordered by dominance, so the first-ranked covering one of the side
    charged is always the one to charge) are summed over arrays; family members go through `family_cost`; the rare
    standalone releases with incomparable guarantees go through `choose`, exactly as
    in `ledger_cost`.
    """

    # the dataset's approximate allowance (Dataset.allowance): every figure of the index is stated
    # with it; the builders of a dataset's index set it (`for_dataset`). Until then the default,
    # and an objective keeps its own (a cap's, cap_measure.objective)
    allowance: Fraction = ALLOWANCE
    _stated_allowance = False

    def for_dataset(self, allowance: Fraction) -> "LedgerIndex":
        """This index, its figures stated with its dataset's `allowance`."""
        self.allowance, self._stated_allowance = allowance, True
        return self

    def __init__(self, variables: Sequence[str], releases: Sequence[Release], families: Iterable[Family] = ()):
        self.variables = tuple(variables)
        self.column = {name: j for j, name in enumerate(self.variables)}
        self.releases = tuple(releases)
        self.families = {family.id: family for family in families}
        n_rel, n_var = len(self.releases), len(self.variables)

        # one guarantee_spend per distinct guarantee value, found by its exact parts as integers
        # (hashing Fractions costs a modular inverse each)
        key_of: dict[tuple, int] = {}
        spend_of: list[Spend] = []
        g_release: list[int] = []
        g_keys: list[int] = []
        g_rows: list[int] = []
        g_cols: list[int] = []
        read_rows: list[int] = []
        read_cols: list[int] = []
        self.members: dict[str, list[int]] = {}
        self.ambiguous: list[int] = []
        column = self.column
        for i, release in enumerate(self.releases):
            for name in release.reads:
                read_rows.append(i)
                read_cols.append(column[name])
            if release.family is not None and release.family in self.families:
                self.members.setdefault(release.family, []).append(i)
            values = []
            for guarantee in release.guarantees:
                key = (guarantee.notion, _exact_key(guarantee.epsilon), _exact_key(guarantee.delta),
                       _exact_key(guarantee.rho), guarantee.relation, guarantee.charged_in)
                found = key_of.get(key)
                if found is None:
                    found = key_of[key] = len(spend_of)
                    spend_of.append(guarantee_spend(guarantee))
                k = len(g_release)
                g_release.append(i)
                g_keys.append(found)
                values.append(spend_of[found])
                for name in guarantee.protects:
                    if name in column:
                        g_rows.append(k)
                        g_cols.append(column[name])
            if len(values) > 1 and not one_charge(values):
                self.ambiguous.append(i)
        self.reads = np.zeros((n_rel, n_var), dtype=bool)
        self.reads[read_rows, read_cols] = True
        self.g_release = np.asarray(g_release, dtype=np.int64)
        self.g_protects = np.zeros((len(g_release), n_var), dtype=bool)
        self.g_protects[g_rows, g_cols] = True

        # Distinct guarantee values in rank order, so the smallest id is the first-ranked
        # (and, among comparable values, the dominant) one; then the ∞ and zero sentinels.
        distinct = sorted(set(spend_of), key=Spend.rank)
        value_id = {spend: k for k, spend in enumerate(distinct)}
        self.NONE = len(distinct)  # no covering guarantee: unbounded
        self.ZERO_ID = len(distinct) + 1
        self.values: tuple[Spend, ...] = tuple(distinct) + (UNBOUNDED, ZERO)
        self.value_is_zero = np.asarray([v.is_zero for v in self.values], dtype=bool)
        remap = np.asarray([value_id[spend] for spend in spend_of], dtype=np.int64)  # key -> value id
        self.g_value = remap[np.asarray(g_keys, dtype=np.int64)] if g_keys else np.zeros(0, dtype=np.int64)
        self.release_ids = np.asarray([r.id for r in self.releases], dtype=object)

        self.finish_arrays(self.ambiguous)

    def finish_arrays(self, ambiguous: Sequence[int]) -> None:
        """The arrays derived from the guarantee arrays and the families, however the index was
        filled (from releases here, from the stored accounting rows in `index_from_rows.index_for`):
        where each release's guarantees start, which releases are summed over arrays, which
        leave a choice (`ambiguous`: releases with several guarantees), and the families whose
        members' guarantees are not all comparable (mixed notions, say), charged as the worst
        member as a whole through the exact path (docs/explanation/model.md#families), never a componentwise max."""
        n_rel = len(self.releases)
        self.has_guarantee = np.zeros(n_rel, dtype=bool)
        self.has_guarantee[self.g_release] = True
        if len(self.g_release):
            self.g_start = np.flatnonzero(np.r_[True, self.g_release[1:] != self.g_release[:-1]])
        else:
            self.g_start = np.zeros(0, dtype=np.int64)
        self.simple = np.ones(n_rel, dtype=bool)  # summed over arrays
        for rows in self.members.values():
            self.simple[rows] = False
        self.ambiguous = [i for i in ambiguous if self.simple[i]]
        self.simple[self.ambiguous] = False
        self._components = _ExactComponents(self.values, n_rel)
        self.mixed_families = set()
        counts, first = self._guarantee_spans()
        for fid, rows_ in self.members.items():
            member_values = {int(v) for r in rows_ for v in self.g_value[first[r]:first[r] + counts[r]]}
            if len(member_values) > 1 and not _is_chain([self.values[v] for v in member_values]):
                self.mixed_families.add(fid)

    def exact_total(self, ids: np.ndarray) -> Spend:
        """The exact composition of the values with these ids (Tan Prop 3.4)."""
        return self._components.total(ids)

    # -- the cost rule over arrays ------------------------------------------

    def _best(self, candidates: np.ndarray) -> np.ndarray:
        """Per release, the smallest candidate id over its guarantees (NONE if it has none): its
        first-ranked covering guarantee, of its pure and rho ones where one covers, else of its
        (epsilon, delta) ones (`charge_options`: the side fixed by the release)."""
        shape = (len(self.releases),) + candidates.shape[1:]
        best = np.full(shape, self.NONE, dtype=np.int64)
        if len(self.g_release):
            best[self.has_guarantee] = self._first_of_side(candidates, self.g_is_approx, self.g_start)
        return best

    def _first_of_side(self, candidates: np.ndarray, approx: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Per run of guarantees (one release's, from each of `starts`), the smallest candidate id
        of its pure and rho guarantees (`approx` False), or, where none is a candidate (NONE), of
        its (epsilon, delta) ones: the side `charge_options` fixes."""
        if not approx.any():
            return np.minimum.reduceat(candidates, starts, axis=0)
        mask = approx.reshape((-1,) + (1,) * (candidates.ndim - 1))
        exact = np.minimum.reduceat(np.where(mask, self.NONE, candidates), starts, axis=0)
        either = np.minimum.reduceat(np.where(mask, candidates, self.NONE), starts, axis=0)
        return np.where(exact != self.NONE, exact, either)

    def cost_ids(self, columns: Sequence[int]) -> np.ndarray:
        """Per release, the id of c_r(U) for U = the given columns. The last few are kept (a
        table's headline asks for the protected subset's three times: its loss, its figures,
        its releases), read-only."""
        key = tuple(int(j) for j in columns)
        memo = self.__dict__.setdefault("_ids_memo", {})
        found = memo.get(key)
        if found is None:
            found = self._cost_ids(np.asarray(key, dtype=np.int64))
            found.flags.writeable = False
            if len(memo) >= 4:
                memo.pop(next(iter(memo)))
            memo[key] = found
        return found

    def remember_cost_ids(self, columns: Sequence[int], ids: np.ndarray) -> None:
        """`cost_ids(columns)` computed elsewhere (the whole-dataset column of `large_table`)."""
        ids = np.array(ids, dtype=np.int64)
        ids.flags.writeable = False
        self.__dict__.setdefault("_ids_memo", {})[tuple(int(j) for j in columns)] = ids

    def _cost_ids(self, columns: np.ndarray) -> np.ndarray:
        n_rel = len(self.releases)
        if self.g_protects is self.reads and len(self.g_release) == n_rel and self.has_guarantee.all():
            # one guarantee per release, protecting exactly what it reads (index_from_rows.index_for shares
            # the matrix then: nearly every ledger): none leaves a variable it reads uncovered, so
            # c_r(U) is that guarantee's value where r reads U, else zero (Tan Prop 3.3), as below
            touched = np.empty(n_rel, dtype=bool)
            for start in range(0, n_rel, _CHUNK):
                touched[start:start + _CHUNK] = self.reads[start:start + _CHUNK][:, columns].any(axis=1)
            return np.where(touched, self.g_value, self.ZERO_ID)
        if n_rel > _CHUNK and len(self.g_release):  # a chunk of releases at a time: no n x |U| copies
            out = np.empty(n_rel, dtype=np.int64)
            bounds = np.searchsorted(self.g_release, np.arange(0, n_rel + _CHUNK, _CHUNK).clip(max=n_rel))
            for k, start in enumerate(range(0, n_rel, _CHUNK)):
                stop = min(start + _CHUNK, n_rel)
                part = rows_of(self, start, stop, bounds[k], bounds[k + 1])
                out[start:stop] = part._cost_ids(columns)
            return out
        reads_u = self.reads[:, columns]
        touched = reads_u.any(axis=1)
        if len(self.g_release):
            uncovered = (reads_u[self.g_release] & ~self.g_protects[:, columns]).any(axis=1)
            candidates = np.where(uncovered, self.NONE, self.g_value)
        else:
            candidates = np.zeros(0, dtype=np.int64)
        return np.where(touched, self._best(candidates), self.ZERO_ID)

    def exactly_read(self) -> np.ndarray:
        """The rows, in order, of the releases that read a variable none of their guarantees
        protects (`Release.exact_variables` not empty: released without noise, docs/explanation/model.md#a-release), a
        chunk of releases at a time (no second n x variables matrix)."""
        n_rel = len(self.releases)
        found = [np.zeros(0, dtype=np.int64)]
        bounds = np.searchsorted(self.g_release, np.arange(0, n_rel + _CHUNK, _CHUNK).clip(max=n_rel))
        for k, start in enumerate(range(0, n_rel, _CHUNK)):
            left = self.reads[start:min(start + _CHUNK, n_rel)].copy()
            owners = self.g_release[bounds[k]:bounds[k + 1]] - start
            if len(owners):  # each release's guarantees are adjacent: their union by one reduceat
                first = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
                covered = np.logical_or.reduceat(self.g_protects[bounds[k]:bounds[k + 1]], first, axis=0)
                left[owners[first]] &= ~covered
            found.append(np.flatnonzero(left.any(axis=1)) + start)
        return np.concatenate(found)

    def stated(self, objective: Objective | None) -> Objective | None:
        """`objective` with this index's allowance: an epsilon at a delta is always the dataset's
        figure there, whichever view asked (`at_delta`)."""
        if self._stated_allowance and isinstance(objective, AtDelta) and objective.allowance != self.allowance:
            return at_delta(objective.delta, self.allowance)
        return objective

    def _others(self, subset: frozenset[str], base: Spend, objective: Objective | None) -> Spend:
        """base composed with the families and the releases with a choice, on `subset`."""
        objective = self.stated(objective)
        units = [family_options(self.families[fid], [self.releases[i] for i in rows], subset)
                 for fid, rows in self.members.items()]
        units += [candidates(self.releases[i], subset) for i in self.ambiguous]
        return compose_units(base, units, objective)

    def subset_spend(self, subset: Iterable[str], objective: Objective | None = None) -> Spend:
        """`subset_cost(subset).spend`, without listing the releases charged."""
        subset = frozenset(subset)
        ids = self.cost_ids([self.column[name] for name in sorted(subset)])
        return self._others(subset, self._components.total(ids[self.simple]), objective)

    def subset_cost(self, subset: Iterable[str], objective: Objective | None = None) -> SubsetCost:
        subset = frozenset(subset)
        ids = self.cost_ids([self.column[name] for name in sorted(subset)])
        spend = self._others(subset, self._components.total(ids[self.simple]), objective)
        charged = ~self.value_is_zero[ids]
        return SubsetCost(
            subset=tuple(sorted(subset, key=self.column.__getitem__)),
            spend=spend,
            releases=tuple(self.release_ids[charged]),
        )

    def table(self, dataset: str, objective: Objective | None = None) -> RiskTable:
        """The release-by-variable matrix (Tan, Table 1) with totals and the whole-dataset column."""
        n_var = len(self.variables)
        cells = self.single_cells()
        dataset_wide = self.cost_ids(range(n_var))
        rows, cols = self.read_entries()  # every other cell is 0 (not read), which adds nothing
        keep = self.simple[rows]
        totals = self._components.entry_totals(cells[rows[keep], cols[keep]], cols[keep], n_var)
        if self.members or self.ambiguous:
            totals = [self._others(frozenset({name}), total, objective) for total, name in zip(totals, self.variables)]
        return self._risk_table(dataset, cells, dataset_wide, totals, objective)

    def _risk_table(self, dataset: str, cells: np.ndarray, dataset_wide: np.ndarray, totals: Iterable[Spend],
                    objective: Objective | None) -> RiskTable:
        """The RiskTable of these cells, whole-dataset column and total row, its whole-dataset
        total composed here (`_others`: families and releases with a choice over every variable)."""
        total_wide = self._others(frozenset(self.variables), self._components.total(dataset_wide[self.simple]),
                                  objective)
        return RiskTable(
            dataset=dataset,
            variables=self.variables,
            releases=self.releases,
            values=self.values,
            cells=cells,
            dataset_wide=dataset_wide,
            total=tuple(totals),
            total_dataset_wide=total_wide,
            allowance=self.allowance,
        )

    def pairs(self, objective: Objective | None = None) -> dict[tuple[str, str], Spend]:
        """The loss on every pair of variables."""
        return {
            (a, b): self.subset_cost((a, b), objective).spend for a, b in combinations(self.variables, 2)
        }

    def read_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The (release, variable) pairs of `reads`, release by release and each release's
        variables in order (np.nonzero, a chunk at a time), as int32 arrays; built once."""
        cached = self.__dict__.get("_read_entries")
        if cached is None:
            rows_, cols_ = [], []
            n = max(self.reads.shape[1], 1)
            for start in range(0, len(self.releases), _CHUNK):
                # the flat positions of a chunk, split by divmod: the same entries in the same
                # (row-major) order as np.nonzero of the 2-D chunk, in about a third of its time
                rows, cols = np.divmod(np.flatnonzero(self.reads[start:start + _CHUNK]), n)
                rows_.append((rows + start).astype(np.int32))
                cols_.append(cols.astype(np.int32))
            cached = self.__dict__["_read_entries"] = (
                np.concatenate(rows_) if rows_ else np.zeros(0, dtype=np.int32),
                np.concatenate(cols_) if cols_ else np.zeros(0, dtype=np.int32))
        return cached

    def _guarantee_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Per release: how many guarantees it has, and the index of its first (-1: none)."""
        n_rel = len(self.releases)
        counts = np.bincount(self.g_release, minlength=n_rel) if len(self.g_release) else np.zeros(n_rel, int)
        first = np.full(n_rel, -1, dtype=np.int64)
        first[self.has_guarantee] = self.g_start
        return counts, first

    def _single_protects(self, rows: np.ndarray, first: np.ndarray) -> np.ndarray:
        protects = np.zeros((len(rows), len(self.variables)), dtype=bool)
        guaranteed = first[rows] >= 0
        protects[guaranteed] = self.g_protects[first[rows][guaranteed]]
        return protects

    def single_cells(self) -> np.ndarray:
        """Per release and variable, the id of c_r({v}) (the cells of Table 1): for a single
        variable v read by r, U ∩ reads(r) = {v}, covered by g iff v ∈ P_g, so the cell is
        the smallest value id among the guarantees protecting v (NONE when none does), 0
        (ZERO_ID) where r does not read v. A release with one guarantee (nearly all) takes
        its value where it protects, without a per-guarantee candidates matrix."""
        n_rel, n_var = len(self.releases), len(self.variables)
        if not len(self.g_release):
            return np.where(self.reads, self.NONE, self.ZERO_ID).astype(np.int64)
        counts, first = self._guarantee_spans()
        several = np.flatnonzero(counts > 1)
        if not len(several):
            # every release has at most one guarantee: the cells are sparse (what each release
            # reads), so fill 0 and set the read entries, without n x |V| temporaries
            best = np.full((n_rel, n_var), self.ZERO_ID, dtype=np.int64)
            rows, cols = self.read_entries()
            g = first[rows]
            has = g >= 0
            value = np.full(len(rows), self.NONE, dtype=np.int64)
            value[has] = np.where(self.g_protects[g[has], cols[has]], self.g_value[g[has]], self.NONE)
            best[rows, cols] = value
            return best
        best = np.full((n_rel, n_var), self.NONE, dtype=np.int64)
        one = np.flatnonzero(counts == 1)
        if len(one):
            g = first[one]
            best[one] = np.where(self.g_protects[g], self.g_value[g][:, None], self.NONE)
        if len(several):
            g = np.concatenate([np.arange(first[r], first[r] + counts[r]) for r in several])
            candidates_ = np.where(self.g_protects[g], self.g_value[g][:, None], self.NONE)
            starts = np.concatenate([[0], np.cumsum(counts[several])[:-1]])
            best[several] = self._first_of_side(candidates_, self.g_is_approx[g], starts)
        best[~self.reads] = self.ZERO_ID
        return best

    @property
    def g_is_approx(self) -> np.ndarray:
        """Per guarantee, whether its value is an (epsilon, delta) charge (`is_approx`), found once."""
        found = self.__dict__.get("_g_is_approx")
        if found is None:
            by_value = np.asarray([is_approx(v) for v in self.values], dtype=bool)
            found = self.__dict__["_g_is_approx"] = by_value[self.g_value]
        return found

    def charged_id(self, r: int, columns: Sequence[int], spans: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """The id of c_r(U) for U = `columns` (which r reads) of one release, by `_best`'s rule:
        the first-ranked guarantee covering them, of its side (NONE when none covers). `spans`:
        `_guarantee_spans()`, found once by a caller asking for many releases."""
        counts, first = spans if spans is not None else self._guarantee_spans()
        rows_ = np.arange(first[r], first[r] + counts[r]) if first[r] >= 0 else np.zeros(0, dtype=np.int64)
        covering = rows_[self.g_protects[rows_][:, list(columns)].all(axis=1)]
        if not len(covering):
            return self.NONE
        return int(self._first_of_side(self.g_value[covering], self.g_is_approx[covering], np.zeros(1, np.int64))[0])

    def _units_cost(self, subset: frozenset[str], base: Spend, families: dict[str, list[int]],
                    releases: Sequence[int], objective: Objective | None, memo: dict | None = None) -> Spend:
        """base composed with the given families and releases with a choice, on `subset`
        (`_others` restricted to the units that read the subset: the others cost 0).

        `memo` keeps each unit's options by what they depend on: a family's on the subset's
        part in its members' reads and its partition (and on its members), a release's on
        the subset's part in its reads."""
        memo = {} if memo is None else memo
        units = []
        for fid, rows_ in families.items():
            family = self.families[fid]
            relevant = self.family_reads(fid) | (family.partition or frozenset())
            key = (fid, len(rows_), rows_[-1], subset & relevant)
            if key not in memo:
                memo[key] = self._family_options(family, rows_, subset)
            units.append(memo[key])
        for i in releases:
            key = (i, subset & self.releases[i].reads)
            if key not in memo:
                memo[key] = candidates(self.releases[i], subset)
            units.append(memo[key])
        return compose_units(base, units, objective)

    def unprotected_move(self, subset: Iterable[str]) -> tuple[Family, Release] | None:
        """(family, member) of the first family whose move is unbounded on `subset`
        (`unprotected_move`, docs/explanation/model.md#families), None when no family's is."""
        subset = frozenset(subset)
        for fid, rows_ in self.members.items():
            member = unprotected_move(self.families[fid], [self.releases[i] for i in rows_], subset)
            if member is not None:
                return self.families[fid], member
        return None

    def reads_uncovered(self, subset: Iterable[str]) -> np.ndarray:
        """The rows of the releases that read part of `subset` with no one guarantee covering all
        of it (c_r(U) = ∞, not protected: docs/explanation/model.md#the-cost-of-one-release-on-a-subset)."""
        return np.flatnonzero(self.cost_ids([self.column[name] for name in sorted(frozenset(subset))]) == self.NONE)

    def reads_at(self, row: int) -> frozenset[str]:
        """What the release of `row` reads (from the arrays: a large index holds few releases whole)."""
        return frozenset(self.variables[j] for j in np.flatnonzero(self.reads[row]))

    def exact_at(self, row: int) -> frozenset[str]:
        """What the release of `row` reads that none of its guarantees protects
        (`Release.exact_variables`, from the arrays; its guarantees are adjacent in g_release)."""
        start, stop = np.searchsorted(self.g_release, [row, row + 1])
        covered = self.g_protects[start:stop].any(axis=0) if stop > start else np.zeros(len(self.variables), bool)
        return frozenset(self.variables[j] for j in np.flatnonzero(self.reads[row] & ~covered))

    def family_reads(self, fid: str) -> frozenset[str]:
        cache = self.__dict__.setdefault("_family_reads", {})
        if fid not in cache:
            cache[fid] = frozenset().union(*(self.releases[i].reads for i in self.members[fid]))
        return cache[fid]

    def _family_options(self, family: Family, rows_: Sequence[int], subset: frozenset[str]) -> tuple[Spend, ...]:
        """family_options, with its ∞ case found first: with a key variable in the subset,
        a member that reads the subset and holds no add/remove guarantee covering all it
        reads costs ∞ when a record moves between parts (docs/explanation/model.md#families), and then so
        does the family, whatever the other members cost."""
        members = [self.releases[i] for i in rows_]
        if family.partition is not None and family.partition & subset:
            for member in members:  # a move takes the whole record: add/remove on all it reads
                if subset & member.reads and not any(g.relation == Relation.ADD_REMOVE and member.reads <= g.protects
                                                     for g in member.guarantees):
                    return ()
        return family_options(family, members, subset)


def _exact_key(x):
    """An exact number as a hashable key of integers (a Fraction's lowest terms), None as None."""
    return None if x is None else (x.numerator, x.denominator) if isinstance(x, Fraction) else x


def index_over(index: LedgerIndex, variables: Sequence[str]) -> LedgerIndex:
    """The same releases over other columns: the dataset's variables as they stood at a moment
    (history.state_as_of). A variable of `variables` the index lacks is read by none of its
    releases (a column of zeros, Tan Prop 3.3); a column of the index not in `variables` is
    dropped, and must be read by none of its releases (the caller keeps every variable read:
    dropping one would drop its cost). Protected sets are cut to the columns kept: a cost
    only asks whether U ∩ reads ⊆ P (docs/explanation/model.md#the-cost-of-one-release-on-a-subset), and U ∩ reads lies in the columns kept. The
    index itself is left as it is."""
    import copy

    variables = tuple(variables)
    if variables == index.variables:
        return index
    kept = [index.column.get(name) for name in variables]
    dropped = [j for j in range(len(index.variables)) if j not in set(k for k in kept if k is not None)]
    if dropped and index.reads[:, dropped].any():
        raise ValueError(f"index_over drops variables its releases read: "
                         f"{[index.variables[j] for j in dropped if index.reads[:, j].any()]}")

    def over(matrix: np.ndarray) -> np.ndarray:
        result = np.zeros((matrix.shape[0], len(variables)), dtype=bool)
        for j, k in enumerate(kept):
            if k is not None:
                result[:, j] = matrix[:, k]
        return result

    projected = copy.copy(index)
    # (over the old columns; the accountants' events are per release)
    for memo in ("_ids_memo", "_pair_grids", "_pairs_read", "_read_entries", "_family_reads", "_family_cases"):
        projected.__dict__.pop(memo, None)
    projected.variables = variables
    projected.column = {name: j for j, name in enumerate(variables)}
    projected.reads = over(index.reads)
    projected.g_protects = over(index.g_protects)
    return projected
