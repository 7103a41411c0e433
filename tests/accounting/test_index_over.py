"""ledger_index.index_over: the index of the same releases over the variables as they stood at a
moment (history.state_as_of) gives the figures of an index built over those variables.

Drawn ledgers (test_engine_properties.ledgers: families keyed and random, several guarantees,
every notion), drawn target columns in a drawn order: every variable read, some not read
(dropped or kept), and a variable the index lacks (a variable removed since: no release reads
it). Every figure of the projected index equals the one of `LedgerIndex(target, ...)`: the
table's total row and whole-dataset column, a subset's cost, every pair.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_properties import VARIABLES, ledgers

from ledger.accounting import index_figures
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.ledger_index import LedgerIndex, index_over

DELTA = Fraction(1, 10**6)
OBJECTIVE = at_delta(DELTA)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_the_index_over_other_columns_is_the_index_built_over_them(ledger, data):
    releases, families = ledger.releases, ledger.families
    read = set().union(*(r.reads for r in releases)) if releases else set()
    unread = sorted(set(VARIABLES) - read)
    kept = data.draw(st.lists(st.sampled_from(unread), unique=True)) if unread else []
    target = data.draw(st.permutations(sorted(read) + kept + (["gone"] if data.draw(st.booleans()) else [])))
    whole = LedgerIndex(VARIABLES, releases, families)
    index_figures.index_events(whole)  # (made before the projection, as the rows' index has them)
    projected = index_over(whole, target)
    built = LedgerIndex(target, releases, families)
    assert projected.variables == tuple(target)
    table, expected = projected.table("survey", OBJECTIVE), built.table("survey", OBJECTIVE)
    assert table.total == expected.total and table.total_dataset_wide == expected.total_dataset_wide
    if target:
        subset = data.draw(st.sets(st.sampled_from(target), min_size=1))
        assert projected.subset_cost(subset, OBJECTIVE) == built.subset_cost(subset, OBJECTIVE)
    assert projected.pairs(OBJECTIVE) == built.pairs(OBJECTIVE)
    # the accountants' figures too (their events are per release, kept from the index)
    assert index_figures.table_figures(projected, table, DELTA, ["basic", "rdp"]) == \
        index_figures.table_figures(built, expected, DELTA, ["basic", "rdp"])
    assert whole.variables == tuple(VARIABLES)  # the index itself is left as it was


def test_dropping_a_column_a_release_reads_is_refused():
    from ledger.core.records import Mechanism, Release

    release = Release("r", "survey", frozenset({"a"}), Mechanism("random"))
    with pytest.raises(ValueError, match="drops variables its releases read"):
        index_over(LedgerIndex(("a", "b"), [release]), ("b",))
