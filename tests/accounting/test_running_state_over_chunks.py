"""A cap's running state applied a chunk at a time over a LedgerIndex (`state_apply_chunk`, what
`audit verify` recomputes) is the state `state_apply` gives on the same releases: for every kind
of release the charge knows (mechanism events, sampled ones, guarantees charged in another
relation, several guarantees leaving a choice, uncovered reads) and for every cap on the dataset."""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.accounting import cap_states
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.records import Cap, Guarantee, Mechanism, Notion, Relation, Release

VARIABLES = ("a", "b", "c", "d")
CAPS = [Cap("s", f"cap-{''.join(sorted(subset))}", frozenset(subset), epsilon=F(10), delta=F(1, 10**6))
        for subset in ("a", "b", "ab", "cd", "abcd")]


@st.composite
def a_release(draw, i: int) -> Release:
    reads = frozenset(draw(st.sampled_from(["a", "b", "ab", "bc", "acd", "abcd"])))
    kind = draw(st.sampled_from(["laplace", "gaussian", "geometric", "sampled", "pure", "rho", "approx", "choice",
                                 "uncovered", "zero"]))
    relation = draw(st.sampled_from([Relation.REPLACE, Relation.ADD_REMOVE]))
    charged_in = draw(st.sampled_from([None, Relation.REPLACE, Relation.ADD_REMOVE]))
    mechanism = Mechanism("declared")
    if kind == "laplace":
        e = draw(st.sampled_from([F(1, 10), F(1, 2)]))
        mechanism, guarantees = Mechanism("laplace", (("epsilon", e),)), [Guarantee(reads, Notion.PURE, epsilon=e)]
    elif kind == "gaussian":
        m = draw(st.sampled_from([F(1), F(4)]))
        mechanism = Mechanism("gaussian", (("sensitivity", F(1)), ("sigma", m)))
        guarantees = [Guarantee(reads, Notion.ZCDP, rho=F(1, 2) / m**2)]
    elif kind == "geometric":
        mechanism = Mechanism("geometric", (("scale", F(10)), ("sensitivity", F(1))))
        guarantees = [Guarantee(reads, Notion.PURE, epsilon=F(1, 10))]
    elif kind == "sampled":
        mechanism = Mechanism("laplace", (("epsilon", F(1)), ("sample_size", 100), ("population", 1000)))
        guarantees = [Guarantee(reads, Notion.PURE, epsilon=F(1))]
    elif kind == "rho":
        guarantees = [Guarantee(reads, Notion.ZCDP, rho=draw(st.sampled_from([F(1, 100), F(1, 8)])))]
    elif kind == "approx":
        guarantees = [Guarantee(reads, Notion.APPROX, epsilon=F(1, 2), delta=F(1, 10**8))]
    elif kind == "choice":  # a pure epsilon beside a rho: a choice (cost_rule.one_charge), charged one by one
        guarantees = [Guarantee(reads, Notion.PURE, epsilon=F(2)), Guarantee(reads, Notion.ZCDP, rho=F(1, 50)),
                      Guarantee(reads, Notion.APPROX, epsilon=F(1, 10), delta=F(1, 10**7))]
    elif kind == "uncovered":  # one variable read is protected by no guarantee
        guarantees = [Guarantee(frozenset(sorted(reads)[:-1]), Notion.PURE, epsilon=F(1, 4))] if len(reads) > 1 else []
    else:
        guarantees = [Guarantee(reads, Notion.PURE, epsilon=F(0))]
    if kind not in ("laplace", "gaussian", "geometric", "sampled"):
        guarantees = [Guarantee(g.protects, g.notion, g.epsilon, g.delta, g.rho, relation, charged_in)
                      for g in guarantees]
    elif draw(st.booleans()):  # a mechanism's guarantee charged in another relation: not its event
        guarantees = [Guarantee(g.protects, g.notion, g.epsilon, g.delta, g.rho, g.relation, Relation.ADD_REMOVE)
                      for g in guarantees]
    return Release(f"r{i}", "s", reads, mechanism, tuple(guarantees))


@st.composite
def chunks(draw) -> list[list[Release]]:
    count = draw(st.integers(min_value=1, max_value=3))
    made, i = [], 0
    for _ in range(count):
        chunk = []
        for _ in range(draw(st.integers(min_value=0, max_value=12))):
            chunk.append(draw(a_release(i)))
            i += 1
        made.append(chunk)
    return made


@settings(max_examples=150, deadline=None)
@given(chunks())
def test_a_running_state_applied_over_chunks_is_state_apply_on_the_releases(made):
    for cap in CAPS:
        by_releases = by_chunks = cap_states.state_from_history(cap, (), {})
        for chunk in made:
            by_releases = cap_states.state_apply(by_releases, cap, chunk, {}, {})
            if chunk:
                by_chunks = cap_states.state_apply_chunk(by_chunks, cap,
                                                         cap_states.ChunkEvents(LedgerIndex(VARIABLES, chunk, ())))
        assert by_chunks == by_releases


@settings(max_examples=150, deadline=None)
@given(chunks())
def test_a_running_state_from_the_index_is_the_state_from_the_releases(made):
    releases = [release for chunk in made for release in chunk]
    for cap in CAPS:
        assert cap_states.state_from_index(cap, LedgerIndex(VARIABLES, releases, ())) == \
            cap_states.state_from_history(cap, releases, {})
