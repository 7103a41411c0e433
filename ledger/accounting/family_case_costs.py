"""A family's cost composed once per distinct case (cost_rule.family_cost keyed by the set of its touched members' values).

When every member costs one value on every part of what it reads, the family's cost on a subset
depends only on (the set of touched members' values, whether a member is untouched, whether the
subset meets the partition key): docs/explanation/model.md#families.

Invariant: the cost of a case equals cost_rule.family_cost on every subset of that case; any other
family is charged by family_cost itself.
"""

from __future__ import annotations

from ..core.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use


class FamilyCases:
    """`cost_rule.family_cost` of one family on subsets, composed once per distinct case.

    When every member costs one value on every part of what it reads (one candidate on every
    nonempty part, and one add/remove cost), `cost_rule.family_options` has one combination: the
    worst (`charge_choice.worst_of`, a function of the *set* of its inputs) of the touched members'
    values, zero for an untouched member, and, when the subset meets the partition key, the
    moves (every member's add/remove cost, alone or two together: they do not depend on the
    subset). So the cost depends only on (the set of touched members' values, whether a member
    is untouched, whether the key is met), and is composed once per such case. Any other
    family: `family_cost` itself."""

    def __init__(self, index, fid: str):
        from itertools import combinations

        from .spend import UNBOUNDED, ZERO
        from ..core.records import Relation
        from .cost_rule import _covering, _moves, candidates

        self.family = index.families[fid]
        self.members = [index.releases[i] for i in index.members[fid]]
        self.cache: dict = {}
        self.key = frozenset(self.family.partition or ())
        values: dict = {}
        bits, moves = [], []
        for member in self.members:
            parts = sorted(member.reads)
            if not parts or len(parts) > FAMILY_CASE_READS:
                values = None
                break
            found = {candidates(member, frozenset(part)) or (UNBOUNDED,)
                     for size in range(1, len(parts) + 1) for part in combinations(parts, size)}
            move = _covering(member.guarantees, member.reads, Relation.ADD_REMOVE) or (UNBOUNDED,)
            if len(found) != 1 or len(next(iter(found))) != 1 or len(move) != 1 or len(values) >= PAIR_FAMILY_VALUES:
                values = None
                break
            bits.append(1 << values.setdefault(next(iter(found))[0], len(values)))
            moves.append(move[0])
        self.uniform = values is not None
        if self.uniform:
            self.values = list(values)
            self.bits = np.asarray(bits, dtype=np.int64)
            self.moves = _moves(moves) if self.key else []
            self.zero, self.unbounded = ZERO, UNBOUNDED

    def cost(self, touched: np.ndarray, subset: frozenset[str]):
        """c_F(U) (`cost_rule.family_cost`), `touched`: which members read something of U."""
        from .cost_rule import family_cost

        if not self.uniform:
            return family_cost(self.family, self.members, subset)
        mask = int(np.bitwise_or.reduce(self.bits[touched])) if touched.any() else 0
        return self.case_cost(mask, bool(not touched.all()), bool(self.key & subset))

    def case_cost(self, mask: int, untouched: bool, keyed: bool):
        """The cost of a uniform family when the touched members' values are the bits of `mask`,
        some member is `untouched`, and the subset meets the key (`keyed`)."""
        from .charge_choice import option_pareto, worst_of

        case = (mask, untouched, keyed)
        found = self.cache.get(case)
        if found is None:
            spends = [v for b, v in enumerate(self.values) if (mask >> b) & 1]
            spends += [self.zero] if untouched else []
            spends += self.moves if keyed else []
            options = option_pareto([worst_of(spends)])
            found = self.cache[case] = options[0] if options else self.unbounded
        return found


FAMILY_CASE_READS = 4  # members reading more variables are composed by family_cost itself (2^k parts)


def family_cases(index, fid: str) -> FamilyCases:
    """The index's FamilyCases of family `fid`, made once."""
    found = index.__dict__.setdefault("_family_cases", {})
    cases = found.get(fid)
    if cases is None:
        cases = found[fid] = FamilyCases(index, fid)
    return cases


PAIR_FAMILY_VALUES = 60  # distinct member costs a family's cases are keyed by (FamilyCases: bits of an int64)
