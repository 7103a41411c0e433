"""A dataset's neighbour relation (docs/explanation/model.md#variables-subsets-and-neighbours): its figures are in replace-one or add/remove;
a guarantee in its own relation is charged as stated, one in the other is converted where it is
recorded. Expected figures come from OpenDP's own privacy map, called here, and from closed forms
(group privacy for k = 2: 2 epsilon, (2 epsilon, (1 + e^epsilon) delta); Laplace: sensitivity / scale)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

import ledger
from ledger.api import front_end
from ledger.accounting.relation import NOT_IMPLIED
from ledger.adapters import diffprivlib as from_dpl
from ledger.adapters import opendp as from_opendp
from ledger.core.records import Relation

from support import cli_main, cli_ok, dump_tables

dp = pytest.importorskip("opendp.prelude")
dpl = pytest.importorskip("diffprivlib")
dp.enable_features("contrib")

VARIABLES = [{"name": "age"}, {"name": "income"}]


def _book(tmp_path, relation: str | None):
    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    dataset = {"dataset": "survey", "delta": "1e-6", "variables": VARIABLES}
    if relation is not None:
        dataset["relation"] = relation
    book.add_dataset(dataset)
    return book


def _count():
    return (dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()) >> dp.t.then_count()


def _as_written(x: float) -> Fraction:
    return Fraction(repr(x))


def test_add_remove_dataset_charges_an_opendp_laplace_count_its_own_map(tmp_path):
    measurement = _count() >> dp.m.then_laplace(scale=2.0)
    book = _book(tmp_path, "add-remove")
    book.record(from_opendp.release(measurement, id="n", dataset="survey", reads=["age"]))
    stated = measurement.map(1)  # OpenDP: one record added or removed (SymmetricDistance 1)
    assert stated == 0.5
    loss = book.subset(["age"])
    assert loss.exact == _as_written(stated) and loss.epsilon == stated


def test_replace_one_dataset_charges_the_same_measurement_twice_its_map(tmp_path):
    measurement = _count() >> dp.m.then_laplace(scale=2.0)
    book = _book(tmp_path, None)  # a dataset file without `relation`: replace-one
    book.record(from_opendp.release(measurement, id="n", dataset="survey", reads=["age"]))
    # a replacement is a removal and an addition: group privacy, k = 2 (Dwork and Roth 2014, Thm 2.2)
    assert book.subset(["age"]).exact == 2 * _as_written(measurement.map(1)) == 1


def _approximate():
    """A Gaussian count, zCDP converted to (epsilon, delta) at delta 1e-9 by OpenDP."""
    gaussian = _count() >> dp.m.then_gaussian(scale=2.0)
    return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gaussian), 1e-9)


def test_add_remove_dataset_charges_an_opendp_approximate_measurement_as_stated(tmp_path):
    measurement = _approximate()
    epsilon, delta = measurement.map(1)
    book = _book(tmp_path, "add-remove")
    book.record(from_opendp.release(measurement, id="g", dataset="survey", reads=["income"]))
    (guarantee,) = book.release("g").guarantees
    assert (guarantee.epsilon, guarantee.delta) == (_as_written(epsilon), _as_written(delta))
    loss = book.subset(["income"])  # at the dataset's delta, 1e-6: above the release's 1e-9
    assert math.isfinite(loss.epsilon) and loss.exact == _as_written(epsilon)


def test_an_approximate_add_remove_guarantee_in_a_replace_one_dataset_is_shown_converted(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    cli_ok(url, "init")
    # (the dataset's allowance, half of 1e-7, holds the converted delta; the cap's 1e-9 does not)
    (tmp_path / "survey.yaml").write_text("dataset: survey\ndelta: 1e-7\nvariables: [{name: age}, {name: income}]\n"
                                          "caps:\n  - {subset: all, epsilon: 10, delta: 1e-9}\n")
    cli_ok(url, "dataset", "add", str(tmp_path / "survey.yaml"))
    (tmp_path / "plan.yaml").write_text("dataset: survey\nreleases:\n  - id: r2\n    reads: [income]\n"
                                        "    mechanism: {name: declared}\n"
                                        "    guarantees: [{epsilon: 3.058, delta: 1e-9, relation: add-remove}]\n")
    run = cli_main(url, "check", "--json", str(tmp_path / "plan.yaml"))
    assert run.code == 1  # the charged delta is above the cap's
    (conversion,) = run.json()["conversions"]
    charged = conversion["charged"]
    assert Fraction(charged["epsilon"]) == 2 * Fraction("3.058")
    closed_form = (1 + math.exp(3.058)) * 1e-9  # (1 + e^epsilon) delta
    assert Fraction(charged["delta"]) >= Fraction(closed_form) * (1 - Fraction(1, 10**12))
    assert float(Fraction(charged["delta"])) == pytest.approx(closed_form, rel=1e-12)
    text = cli_main(url, "check", str(tmp_path / "plan.yaml")).out
    assert "r2: add/remove (epsilon 3.058, delta 1 × 10⁻⁹), charged as replace-one (epsilon 6.116" in text
    assert "passes the approximate releases' allowance" in text and "group privacy, k = 2" in text


def test_a_replace_one_guarantee_without_parameters_bounds_nothing_in_an_add_remove_dataset(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    cli_ok(url, "init")
    (tmp_path / "survey.yaml").write_text("dataset: survey\nrelation: add-remove\n"
                                          "variables: [{name: age}, {name: income}]\n"
                                          "caps:\n  - {subset: all, epsilon: 10}\n")
    cli_ok(url, "dataset", "add", str(tmp_path / "survey.yaml"))
    (tmp_path / "plan.yaml").write_text("dataset: survey\nreleases:\n  - id: r1\n    reads: [age]\n"
                                        "    mechanism: {name: declared}\n"
                                        "    guarantees: [{epsilon: 0.5, relation: replace}]\n")
    before = dump_tables(url)
    run = cli_main(url, "record", str(tmp_path / "plan.yaml"))
    assert run.code == 1 and dump_tables(url) == before
    assert NOT_IMPLIED in run.err + run.out
    (conversion,) = cli_main(url, "check", "--json", str(tmp_path / "plan.yaml")).json()["conversions"]
    assert conversion["charged"] is None and conversion["reason"] == NOT_IMPLIED


def test_a_cap_set_after_an_unbounded_replace_one_laplace_is_over_and_the_chain_verifies(tmp_path):
    """A Laplace release stated for replace-one neighbours without the query's add/remove
    sensitivity bounds nothing in an add/remove dataset: a cap set afterwards starts unbounded on
    every path (its stored running state is the one `audit verify` recomputes from the releases)."""
    book = _book(tmp_path, "add-remove")
    book.record({"dataset": "survey", "releases": [
        {"id": "r1", "reads": ["age"], "mechanism": {"name": "laplace", "epsilon": "1/2"}}]})
    assert math.isinf(book.subset(["age"]).epsilon)
    book.set_cap(["age"], epsilon=10, delta="1e-6", dataset="survey")
    (check,) = book.caps("survey")
    assert check.status == "over" and math.isinf(check.current)
    verification = book.verify()
    assert verification.ok, verification.problems


def test_a_replace_one_laplace_histogram_is_derived_again_for_add_remove(tmp_path):
    book = _book(tmp_path, "add-remove")
    # replacing a record moves one count between two cells (L1 sensitivity 2); adding or removing
    # one changes one cell (1): the same noise, scale 2, is epsilon 1 / 2 for add/remove neighbours
    book.record({"dataset": "survey", "releases": [{
        "id": "t", "reads": ["age"],
        "mechanism": {"name": "laplace", "scale": 2, "sensitivity": 2, "query": "crosstab"}}]})
    assert book.subset(["age"]).exact == Fraction(1, 2)


def test_the_relation_of_a_recorded_dataset_cannot_be_changed(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    cli_ok(url, "init")
    (tmp_path / "survey.yaml").write_text("dataset: survey\nrelation: add-remove\nvariables: [{name: age}]\n")
    cli_ok(url, "dataset", "add", str(tmp_path / "survey.yaml"))
    (tmp_path / "changed.yaml").write_text("dataset: survey\nrelation: replace-one\nvariables: [{name: age}]\n")
    before = dump_tables(url)
    for command in (("dataset", "add"), ("dataset", "amend")):
        run = cli_main(url, *command, str(tmp_path / "changed.yaml"))
        assert run.code == 2 and dump_tables(url) == before
        assert "relation" in run.errors[0] and "never changed" in run.errors[0]
    assert ledger.open(url).dataset("survey").relation == Relation.ADD_REMOVE


def test_diffprivlib_laplace_epsilon_is_recorded_and_shown_as_written(tmp_path):
    release = from_dpl.release(dpl.mechanisms.Laplace(epsilon=0.4, sensitivity=1), id="l", dataset="survey",
                               reads=["age"])
    assert release.guarantees[0].epsilon == Fraction(2, 5)
    book = _book(tmp_path, None)
    book.record(release)
    assert book.subset(["age"]).exact == Fraction(2, 5)
    shown = cli_ok(f"sqlite:///{tmp_path / 'ledger.db'}", "subset", "age").out
    assert "{age}: epsilon 0.4 " in shown
