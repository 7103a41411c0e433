"""A `Release` handed to `record` whole (the Python API, an adapter) meets the rules a release file
meets (docs/explanation/model.md#composition, docs/explanation/accounting.md, docs/explanation/model.md#people-duties-and-the-book-of-record): the recording moment and person are the ledger's own, claims are
checked against the parameters, and the lifecycle fields are those a file may state.

Gaussian releases of rho 1/72 under a cap of epsilon 2 at delta 1e-6, a Rényi filter at the one
order A fixed when the cap was set (where a zCDP spend of the cap's size converts best at half its
delta, CKS 2020 Prop 12): A k / 72 + ln(1 - 1/A) - (ln(5e-7) + ln A) / (A - 1) <= 2 admits six.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction as F

import pytest
from scipy.optimize import brentq, minimize_scalar

from conftest import _reference_filter

import ledger
from ledger.api import front_end
from ledger.core.records import Guarantee, Mechanism, Notion, Release, Status

LONG_AGO = datetime(2025, 1, 1, tzinfo=UTC)
PUBLISHED = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def book(tmp_path):
    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    # (a one-person pipeline records its outputs as published: its own approval, which the dataset allows)
    book.add_dataset({"dataset": "d", "delta": "1e-6", "self_approval": True, "variables": [{"name": "a"}],
                      "caps": [{"subset": ["a"], "epsilon": 2, "delta": "1e-6", "filter": "renyi"}]})
    return book


def gaussian(i: int, **lifecycle) -> Release:
    """sigma 6, sensitivity 1: rho 1/72 (Bun and Steinke 2016, Prop 1.6)."""
    return Release(f"g{i}", "d", frozenset("a"), Mechanism("gaussian", (("sensitivity", F(1)), ("sigma", F(6)))),
                   (Guarantee(frozenset("a"), Notion.ZCDP, rho=F(1, 72)),), **lifecycle)


def renyi_cap_order(epsilon: float, delta: float) -> float:
    """The order where the zCDP spend rho whose CKS 2020 Prop 12 conversion at `delta` is `epsilon`
    converts best: solved for rho, then the minimising order."""
    def best(rho):
        return minimize_scalar(lambda a: renyi_conversion(a, rho, delta), bounds=(1 + 1e-6, 1e4), method="bounded",
                               options={"xatol": 1e-10})

    return float(best(brentq(lambda r: best(r).fun - epsilon, 1e-6, 100)).x)


def renyi_conversion(order: float, rho: float, delta: float) -> float:
    """CKS 2020 Prop 12 at one order of a rho-zCDP curve."""
    return order * rho + math.log1p(-1 / order) - (math.log(delta) + math.log(order)) / (order - 1)


def test_a_recording_moment_dated_back_is_the_ledgers_own(book):
    book.record(gaussian(0, status=Status.PUBLISHED, published_at=PUBLISHED, recorded_at=LONG_AGO))
    recorded = 1
    for i in range(1, 8):
        try:
            book.record(gaussian(i, recorded_at=LONG_AGO))
        except ledger.BudgetRefused:
            break
        recorded += 1
    assert all(r.recorded_at > PUBLISHED for r in book.releases())
    (cap,) = book.caps()
    assert cap.ok and "Rényi filter at order" in cap.decision.theorem
    # as many as the cap's Rényi filter at its one order admits (at delta / 2; the other half is the
    # approximate allowance), whatever the times the records carried
    order = renyi_cap_order(2, 5e-7)
    assert recorded == max(k for k in range(1, 9) if renyi_conversion(order, k / 72, 5e-7) <= 2) == 6
    assert cap.current == pytest.approx(renyi_conversion(order, 6 / 72, 5e-7), abs=1e-3)
    # the running figure of the six (22 orders at delta / 44 each) is a statement at every stopping
    # time, above the cap's filter; the PLD figure is information only
    loss = book.subset(["a"])
    assert loss.epsilon == pytest.approx(_reference_filter(rho=6 / 72, delta=1e-6), rel=1e-9)
    assert not loss.accountants["pld"].valid


def test_a_claim_stronger_than_the_parameters_is_refused(book):
    """Laplace scale 1, sensitivity 1 is 1-DP (Dwork et al. 2006): 1/1000 may not be claimed."""
    claim = Release("l", "d", frozenset("a"), Mechanism("laplace", (("scale", F(1)), ("sensitivity", F(1)))),
                    (Guarantee(frozenset("a"), Notion.PURE, epsilon=F(1, 1000)),))
    with pytest.raises(ledger.InputErrors) as refused:
        book.record(claim)
    assert "release l" in str(refused.value) and "epsilon 1/1000" in str(refused.value)
    assert book.releases() == []


def test_the_recorder_is_whoever_records(book):
    """Separation of duties (docs/explanation/model.md#people-duties-and-the-book-of-record): a record naming another recorder is recorded as the
    recording person's, who then may not approve it."""
    book.record(gaussian(0, recorded_by="someone-else"))
    (release,) = book.releases()
    assert release.recorded_by == "tester"


def test_lifecycle_fields_are_those_a_file_may_state(book):
    future = datetime.now(UTC) + timedelta(days=30)
    for release, named in ((gaussian(0, status=Status.APPROVED, approved_by="grace", approved_at=PUBLISHED),
                            "an approval is never stated with a release"),
                           (gaussian(1, status=Status.PUBLISHED, published_at=future), "in the future"),
                           (gaussian(2, status=Status.CANCELLED), "planned, approved or published")):
        with pytest.raises(ledger.InputErrors) as refused:
            book.record(release)
        assert named in str(refused.value), str(refused.value)
    assert book.releases() == []


def test_an_adapters_output_published_without_a_date_is_published_as_it_is_recorded(book):
    book.record(gaussian(0, status=Status.PUBLISHED, recorded_at=LONG_AGO))
    (release,) = book.releases()
    assert release.published_at == release.recorded_at > PUBLISHED


def test_a_family_member_names_a_recorded_family_and_reads_its_key(tmp_path):
    """docs/explanation/model.md#families: which records a part holds depends on the key, so a member reads it; a member of
    a family the ledger does not know would be charged as nobody can say."""
    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    book.add_dataset({"dataset": "d", "variables": [{"name": "a"}, {"name": "k"}]})
    book.record({"dataset": "d", "families": [{"id": "f", "partition": ["k"]}], "releases": [
        {"id": "m0", "family": "f", "part": "k=0", "reads": ["a", "k"], "mechanism": {"name": "laplace", "epsilon": 1}}]})
    laplace = Mechanism("laplace", (("epsilon", F(1)),))
    for member, named in ((Release("m1", "d", frozenset("a"), laplace, (Guarantee(frozenset("a"), Notion.PURE,
                                                                                   epsilon=F(1)),), family="f", part="k=1"),
                           "it must list k in reads"),
                          (Release("m2", "d", frozenset("ak"), laplace, (Guarantee(frozenset("ak"), Notion.PURE,
                                                                                    epsilon=F(1)),), family="g", part="k=2"),
                           "unknown family 'g'")):
        with pytest.raises(ledger.InputErrors) as refused:
            book.record(member)
        assert named in str(refused.value), str(refused.value)
    assert [r.id for r in book.releases()] == ["m0"]
