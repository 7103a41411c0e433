"""Adapters: releases recorded straight from OpenDP, dp_accounting and
diffprivlib, against the real libraries. Expected figures are closed forms
(Laplace: sensitivity / scale; Gaussian: rho = sensitivity^2 / (2 sigma^2)) or
the library's own accountant."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import pytest

import ledger
from ledger.api import front_end
from ledger.adapters import dp_accounting as from_dpa
from ledger.adapters import diffprivlib as from_dpl
from ledger.adapters import loss_fraction
from ledger.adapters import opendp as from_opendp
from ledger.core.records import Notion, Relation

dp = pytest.importorskip("opendp.prelude")
dpa = pytest.importorskip("dp_accounting")
dpl = pytest.importorskip("diffprivlib")
dp.enable_features("contrib")


@pytest.fixture
def book(tmp_path):
    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    book.add_dataset({"dataset": "survey", "delta": "1e-6",
                      "variables": [{"name": "age"}, {"name": "income"}, {"name": "region"}]})
    return book


def _count(then_noise):
    return (dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()) >> dp.t.then_count() >> then_noise


# -- OpenDP -----------------------------------------------------------------------


def test_opendp_laplace_count_is_pure_add_remove(book):
    release = from_opendp.release(_count(dp.m.then_laplace(scale=2.0)), id="n", dataset="survey", reads=["age"])
    (g,) = release.guarantees
    assert (g.notion, g.relation, g.protects) == (Notion.PURE, Relation.ADD_REMOVE, frozenset({"age"}))
    assert g.epsilon >= Fraction(1, 2) and float(g.epsilon) == pytest.approx(0.5)  # sensitivity 1 / scale 2
    book.record(release)
    # an add-remove guarantee bounds replacement by group privacy: 2 epsilon (docs/explanation/model.md#variables-subsets-and-neighbours)
    assert book.subset(["age"]).epsilon == pytest.approx(1.0)


def test_opendp_gaussian_is_zcdp_and_replace_doubles_d_in():
    meas = _count(dp.m.then_gaussian(scale=2.0))
    (g,) = from_opendp.release(meas, id="g", dataset="survey", reads=["income"]).guarantees
    assert g.notion == Notion.ZCDP and float(g.rho) == pytest.approx(1 / 8)  # 1 / (2 * 2^2)
    (r,) = from_opendp.release(meas, id="g", dataset="survey", reads=["income"], relation="replace").guarantees
    assert r.relation == Relation.REPLACE and float(r.rho) == pytest.approx(4 / 8)  # distance 2: 2^2 / (2 * 4)


def test_opendp_approximate_and_profile():
    zcdp = _count(dp.m.then_gaussian(scale=2.0))
    fixed = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(zcdp), 1e-6)
    (g,) = from_opendp.release(fixed, id="a", dataset="survey", reads=["age"]).guarantees
    assert g.notion == Notion.APPROX and g.delta >= Fraction(1, 10**6)
    epsilon, delta = fixed.map(1)
    assert float(g.epsilon) == pytest.approx(epsilon)
    profile = dp.c.make_zCDP_to_approxDP(zcdp)
    with pytest.raises(ledger.InputErrors, match="give the delta"):
        from_opendp.release(profile, id="p", dataset="survey", reads=["age"])
    (p,) = from_opendp.release(profile, id="p", dataset="survey", reads=["age"], delta=1e-6).guarantees
    assert float(p.epsilon) == pytest.approx(epsilon)


def test_opendp_metric_that_cannot_tell_is_refused_naming_what_to_declare():
    meas = (dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)) >> dp.m.then_laplace(scale=4.0)
    with pytest.raises(ledger.InputErrors) as caught:
        from_opendp.release(meas, id="x", dataset="survey", reads=["income"])
    message = caught.value.errors[0].message
    assert "AbsoluteDistance" in message and "d_in" in message and "relation" in message
    (g,) = from_opendp.release(meas, id="x", dataset="survey", reads=["income"], d_in=2.0,
                               relation="replace").guarantees
    assert g.relation == Relation.REPLACE and float(g.epsilon) == pytest.approx(0.5)  # 2 / 4


def test_opendp_metrics_relations():
    assert from_opendp.metric_relation(dp.symmetric_distance()) == Relation.ADD_REMOVE
    assert from_opendp.metric_relation(dp.insert_delete_distance()) == Relation.ADD_REMOVE
    assert from_opendp.metric_relation(dp.change_one_distance()) == Relation.REPLACE
    assert from_opendp.metric_relation(dp.hamming_distance()) == Relation.REPLACE
    assert from_opendp.metric_relation(dp.absolute_distance(T=float)) is None


def test_opendp_context_records_its_budget(book):
    context = dp.Context.compositor(data=[1, 2, 3], privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(epsilon=1.0), split_evenly_over=2)
    release = from_opendp.release(context, id="ctx", dataset="survey", reads=["age", "income"])
    (g,) = release.guarantees
    assert g.relation == Relation.ADD_REMOVE and float(g.epsilon) == pytest.approx(1.0)


def test_recorded_adapter_release_is_checked_against_caps(book):
    book.set_cap(["age"], epsilon="1.5")
    first = from_opendp.release(_count(dp.m.then_laplace(scale=2.0)), id="one", dataset="survey", reads=["age"])
    book.record(first)  # replace cost 2 * 0.5 = 1 <= 1.5
    second = from_opendp.release(_count(dp.m.then_laplace(scale=2.0)), id="two", dataset="survey", reads=["age"])
    with pytest.raises(ledger.BudgetRefused):
        book.record(second)
    assert [r.id for r in book.releases()] == ["one"]


def test_unknown_variable_in_adapter_release_is_bad_input(book):
    release = from_opendp.release(_count(dp.m.then_laplace(scale=2.0)), id="u", dataset="survey", reads=["agee"])
    with pytest.raises(ledger.InputErrors, match="agee"):
        book.record(release)


# -- dp_accounting -----------------------------------------------------------------


def test_dp_accounting_gaussian_and_laplace(book):
    (gauss,) = from_dpa.releases(dpa.GaussianDpEvent(2.0), id="g", dataset="survey", reads=["income"])
    assert gauss.mechanism.name == "gaussian" and gauss.mechanism.param("sigma") == 2
    assert gauss.guarantees[0].rho == Fraction(1, 8) and gauss.guarantees[0].relation == Relation.ADD_REMOVE
    (lap,) = from_dpa.releases(dpa.LaplaceDpEvent(4.0), id="l", dataset="survey", reads=["age"])
    assert lap.guarantees[0].epsilon == Fraction(1, 4)
    # the library's own accountant agrees on the Laplace epsilon (pure: delta 0)
    pld = dpa.pld.PLDAccountant()
    pld.compose(dpa.LaplaceDpEvent(4.0))
    assert pld.get_epsilon(1e-10) == pytest.approx(0.25, rel=1e-6)
    book.record(gauss, lap)
    # the ledger's zCDP bound on income is valid: never below the tight PLD epsilon at the same delta
    pld = dpa.pld.PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    pld.compose(dpa.GaussianDpEvent(2.0))  # dp_accounting's replace-one Gaussian has sensitivity 2
    tight = pld.get_epsilon(1e-6)
    loss = book.subset(["income"])
    assert tight <= loss.epsilon <= 1.25 * tight


def test_dp_accounting_composed_self_composed_and_sampled():
    event = dpa.ComposedDpEvent([
        dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 10),
        dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)),
        dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(2.0), 3),
        dpa.NoOpDpEvent(),
    ])
    made = from_dpa.releases(event, id="sgd", dataset="survey", reads=["income"])
    assert [r.id for r in made] == ["sgd/1", "sgd/2", "sgd/3"]
    assert made[0].guarantees[0].rho == Fraction(10, 8)  # 10 runs of rho 1/8
    assert made[0].mechanism.param("count") == 10
    assert made[1].mechanism.param("sampling_probability") == Fraction(0.01)
    assert made[1].guarantees[0].rho == Fraction(1, 2)  # not amplified: still a valid bound
    assert made[2].guarantees[0].epsilon == Fraction(3, 2)


def test_dp_accounting_refusals():
    with pytest.raises(ledger.InputErrors, match="relation='replace'"):
        from_dpa.releases(dpa.SampledWithoutReplacementDpEvent(1000, 10, dpa.GaussianDpEvent(1.0)),
                          id="s", dataset="survey", reads=["age"])
    with pytest.raises(ledger.InputErrors, match="UnsupportedDpEvent"):
        from_dpa.releases(dpa.UnsupportedDpEvent(), id="s", dataset="survey", reads=["age"])


def test_a_sample_drawn_with_replacement_is_not_amplified_as_one_drawn_without():
    """Balle, Barthe and Gaboardi's ln(1 + beta (e^eps - 1)) is for a sample drawn without
    replacement. Drawn with replacement (100 of 1000), the changed record is in the sample
    k ~ Binomial(100, 1/1000) times and a Laplace count moves by k (loss k epsilon, up to 100),
    which that theorem does not cover; the ledger recorded ln(1 + 0.1 (e - 1)) = 0.159 all the
    same. Refused, naming the sampling; without replacement it stays the tight bound."""
    with pytest.raises(ledger.InputErrors, match="drawn with replacement can hold a record several times"):
        from_dpa.releases(dpa.SampledWithReplacementDpEvent(1000, 100, dpa.LaplaceDpEvent(1.0)),
                          id="s", dataset="survey", reads=["age"], relation="replace")
    made = from_dpa.releases(dpa.SampledWithoutReplacementDpEvent(1000, 100, dpa.LaplaceDpEvent(1.0)),
                             id="s", dataset="survey", reads=["age"], relation="replace")
    assert float(made[0].guarantees[0].epsilon) == pytest.approx(math.log1p(0.1 * math.expm1(1.0)))


# -- diffprivlib -----------------------------------------------------------------


def test_diffprivlib_mechanisms():
    lap = from_dpl.release(dpl.mechanisms.Laplace(epsilon=0.3, sensitivity=1), id="l", dataset="survey",
                           reads=["age"])
    assert lap.mechanism.name == "laplace" and lap.guarantees[0].epsilon == Fraction(3, 10)
    gauss = from_dpl.release(dpl.mechanisms.Gaussian(epsilon=0.5, delta=1e-5, sensitivity=1), id="g",
                             dataset="survey", reads=["income"])
    (g,) = gauss.guarantees
    assert g.notion == Notion.APPROX and g.epsilon == Fraction(1, 2)
    assert g.delta == Fraction(1, 10**5)  # as written: the float's shortest decimal, not its binary value
    geo = from_dpl.release(dpl.mechanisms.Geometric(epsilon=1.0, sensitivity=1), id="q", dataset="survey",
                           reads=["region"])
    assert geo.mechanism.name == "geometric" and geo.guarantees[0].epsilon == 1


def test_diffprivlib_accountant_spent_budget(book):
    accountant = dpl.BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dpl.tools.mean([1.0, 2.0, 3.0], bounds=(0, 5), epsilon=0.3, accountant=accountant)
        dpl.tools.var([1.0, 2.0, 3.0], bounds=(0, 5), epsilon=0.2, accountant=accountant)
    made = from_dpl.from_accountant(accountant, id="stats", dataset="survey", reads=["income"])
    assert [r.id for r in made] == ["stats/1", "stats/2"]
    book.record(*made)
    # each float as written: 0.3 is 3/10, 0.2 is 1/5
    loss = book.subset(["income"])
    assert loss.exact == Fraction(3, 10) + Fraction(1, 5)
    assert loss.epsilon >= loss.exact and loss.epsilon == pytest.approx(accountant.total()[0])  # the library's total


def test_loss_fraction_is_the_number_as_written():
    for written, value in (("0.4", 0.4), ("0.3", 0.3), ("1e-9", 1e-9), ("2.0", 2.0), (repr(1 / 3), 1 / 3)):
        assert loss_fraction(value) == Fraction(written)
    assert loss_fraction(0.4) != Fraction(0.4)  # not the binary float 3602879701896397 / 2^53
    assert loss_fraction(Fraction(1, 3)) == Fraction(1, 3) and loss_fraction(3) == 3  # exact stays exact
