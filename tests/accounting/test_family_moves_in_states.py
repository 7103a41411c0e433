"""A keyed family's move costs in a cap's running state, on every path (docs/explanation/model.md#families).

A record moving between the parts of a family keyed on a variable of the subset changes what
every member releases, so the family is charged with every member's add/remove guarantee, as
`cost_rule.ledger_cost` charges it. The running state's paths (`state_from_history`, the index's
`state_from_index`, the check's `state_apply`) took only the members reading the subset: a
member reading none of it lost its moves (found by an adversarial review; the loader requires a
keyed family's members to read the key, so it is reached through records built in Python)."""

from __future__ import annotations

from fractions import Fraction as F

from ledger.accounting import cap_states
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.records import Cap, Family, Guarantee, Mechanism, Notion, Relation, Release

FAMILY = Family("F0", "s", partition=frozenset("a"))


def member(i, reads, *guarantees):
    return Release(id=f"m{i}", dataset="s", reads=frozenset(reads), mechanism=Mechanism("random"),
                   guarantees=guarantees, family="F0")


def add_remove_rho(reads, rho):
    return Guarantee(frozenset(reads), Notion.ZCDP, rho=F(rho), relation=Relation.ADD_REMOVE)


def test_every_members_moves_count_on_every_path():
    m0 = member(0, "ac", Guarantee(frozenset("ac"), Notion.PURE, epsilon=F(1, 100)), add_remove_rho("ac", F(1, 8)))
    m1 = member(1, "c", add_remove_rho("c", F(1, 8)))
    cap = Cap("s", "c", frozenset("a"), epsilon=F(10), delta=F(1, 10**6))
    by_index = cap_states.state_from_index(cap, LedgerIndex(("a", "b", "c"), [m0, m1], [FAMILY]))
    by_history = cap_states.state_from_history(cap, [m0, m1], {"F0": FAMILY})
    assert cap_states.state_differences(by_index, by_history) == []
    # a record leaving m0's part and joining m1's: the two add/remove charges, 1/8 + 1/8
    assert "zcdp:1/4" in by_history["families"]["F0"]
    # the check's path: m1 recorded after m0
    before = cap_states.state_from_history(cap, [m0], {"F0": FAMILY})
    after = cap_states.state_apply(before, cap, [m1], {"F0": FAMILY}, {"F0": [m0]})
    assert cap_states.state_differences(after, by_history) == []
