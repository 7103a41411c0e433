"""A mechanism's parameters are the ones the catalogue lists for it (catalogue.PARAMETERS).

A misspelt parameter is refused, bad input (exit 2, nothing written), with the nearest names the
mechanism takes, or all of them when none is near: read as written, it was ignored, and the
guarantee was derived without it (`rho: 0.5, relaton: add-remove` was charged rho 0.5 for
replacement neighbours, a quarter of the 2 that group privacy gives an add/remove rho of 0.5 there,
Bun and Steinke 2016, Prop 1.9). A field written in the wrong place says where it goes. Files, adapters, `run` and the Python API are held to the one
table, and `privacy-ledger mechanisms` prints it.
"""

from __future__ import annotations

import json
import re
import string
from datetime import UTC, datetime
from fractions import Fraction as F
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
from ledger.api import front_end
from ledger.accounting.catalogue import CATALOGUE, NUMERIC_PARAMS, PARAMETERS
from ledger.core.errors import InputErrors
from ledger.core.records import Dataset, Guarantee, Mechanism, Notion, Relation, Release, Variable
from ledger.input.documents import parse_document
from ledger.input.releases import build_releases
from ledger.input.snapshot import LedgerSnapshot
from support import cli_main, cli_ok

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    cli_ok(url, "dataset", "add", EXAMPLES / "graduates.dataset.yaml")
    return url


def release_file(tmp_path: Path, mechanism: str, extra: str = "") -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text("dataset: graduates\nreleases:\n  - id: new\n    reads: [degree, income]\n"
                    f"    mechanism: {mechanism}\n{extra}", encoding="utf-8")
    return path


def recorded(url: str) -> list[str]:
    return [release["id"] for release in cli_ok(url, "releases", "--json").json()]


# --------------------------------------------------------------------------
# A misspelt parameter: refused, with the name meant
# --------------------------------------------------------------------------

MISSPELT = [  # (mechanism as written, the misspelt key, the name meant)
    ("{name: laplace, scale: 2, sensitivty: 1}", "sensitivty", "sensitivity"),
    ("{name: gaussian, rho: 0.5, relaton: add-remove}", "relaton", "relation"),
    ("{name: geometric, epsilon: 1, sample_sise: 10, population: 1000}", "sample_sise", "sample_size"),
    ("{name: tan-consistent-counts, epsilon: 1, protect: [income]}", "protect", "protects"),
    ("{name: gaussian, sigm: 2, sensitivity: 1}", "sigm", "sigma"),
]


@pytest.mark.parametrize("command", ["check", "record"])
@pytest.mark.parametrize("mechanism, key, meant", MISSPELT)
def test_a_misspelt_parameter_is_refused_with_the_name_meant(url, tmp_path, command, mechanism, key, meant):
    cli_ok(url, "record", EXAMPLES / "graduates.releases.yaml")
    before = recorded(url)
    plan = release_file(tmp_path, mechanism)
    run = cli_main(url, command, plan)
    name = re.match(r"\{name: ([\w-]+)", mechanism).group(1)
    assert run.code == 2
    (error,) = run.errors
    assert error.startswith(f"error: {plan}:5: releases[0].mechanism.{key}: {name} takes no parameter {key!r} "
                            f"(did you mean {meant!r}")
    assert recorded(url) == before


def test_a_name_near_no_parameter_lists_the_ones_the_mechanism_takes(url, tmp_path):
    run = cli_main(url, "check", release_file(tmp_path, "{name: gaussian, rho: 0.5, variance: 4}"))
    (error,) = run.errors
    assert run.code == 2 and "gaussian takes no parameter 'variance' (it takes " in error
    taken = error.split("(it takes ")[1].rstrip(")").split(", ")
    assert {"sigma", "sensitivity", "rho", "epsilon", "delta", "relation"} <= set(taken)
    assert "scale" not in taken and "variance" not in taken


def test_another_mechanisms_parameter_is_named_as_such(url, tmp_path):
    """A Laplace scale on a Gaussian: no near name of the Gaussian's, but the mechanisms that take it."""
    run = cli_main(url, "check", release_file(tmp_path, "{name: gaussian, rho: 0.5, scale: 2}"))
    (error,) = run.errors
    assert run.code == 2 and "gaussian takes no parameter 'scale', a parameter of geometric, laplace (it takes" in error


def test_a_file_of_correct_parameters_still_passes(url, tmp_path):
    assert cli_ok(url, "check", EXAMPLES / "graduates.releases.yaml").code == 0
    plan = release_file(tmp_path, "{name: laplace, scale: 2, sensitivity: 1, relation: replace, "
                                  "sample_size: 100, population: 1000, query: sum, column: income}")
    cli_ok(url, "record", plan)
    assert recorded(url) == ["new"]


# --------------------------------------------------------------------------
# A field in the wrong place says where it goes
# --------------------------------------------------------------------------

WRONG_PLACE = [  # (the releases of a file, its errors: line, field, message)
    ("  - id: a\n    reads: [income]\n    sensitivity: 1\n    mechanism: {name: laplace, scale: 2}\n",
     [(3, "releases[0]", "unknown field 'sensitivity': it belongs under releases[0].mechanism")]),
    ("  - id: a\n    reads: [income]\n    epsilon: 1\n    mechanism: {name: laplace}\n",
     [(3, "releases[0]",
       "unknown field 'epsilon': it belongs under releases[0].mechanism or under releases[0].guarantees[]")]),
    ("  - id: a\n    reads: []\n  - id: b\n    reads: [income]\n    rho: 0.5\n    mechanism: {name: gaussian}\n",
     [(5, "releases[1]",
       "unknown field 'rho': it belongs under releases[1].mechanism or under releases[1].guarantees[]")]),
    ("  - id: a\n    reads: [income]\n    sample_size: 10\n    population: 100\n    mechanism: {name: laplace, "
     "epsilon: 1}\n",
     [(3, "releases[0]", "unknown field 'sample_size': it belongs under releases[0].mechanism; unknown field "
                         "'population': it belongs under releases[0].mechanism")]),
    ("  - id: a\n    mechanism: {name: laplace, epsilon: 1, reads: [income]}\n",
     [(3, "releases[0]", "missing field 'reads' (written under releases[0].mechanism: it belongs here)"),
      (4, "releases[0].mechanism.reads", "laplace takes no parameter 'reads': it belongs under releases[0]")]),
    ("  - id: a\n    reads: [income]\n    mechanism: {name: gaussian, sigma: 2, sensitivity: 1}\n"
     "    guarantees: [{epsilon: 1, delta: 0.001, sigma: 2}]\n",
     [(6, "releases[0].guarantees[0]", "unknown field 'sigma': it belongs under releases[0].mechanism")]),
    ("delta: 0.001\n  - id: a\n    reads: [income]\n    mechanism: {name: laplace, epsilon: 1}\n",
     [(1, "(top level)",
       "unknown field 'delta': it belongs under releases[].mechanism or under releases[].guarantees[]")]),
    ("  - id: a\n    reads: [income]\n    sensitivty: 1\n    mechanism: {name: laplace, epsilon: 1}\n",
     [(3, "releases[0]", "unknown field 'sensitivty' (did you mean 'sensitivity', under releases[0].mechanism?)")]),
]


@pytest.mark.parametrize("releases, errors", WRONG_PLACE)
def test_a_field_in_the_wrong_place_says_where_it_goes(url, tmp_path, releases, errors):
    plan = tmp_path / "plan.yaml"
    head, _, rest = releases.partition("  - id: a")
    plan.write_text(f"dataset: graduates\n{head}releases:\n  - id: a{rest}", encoding="utf-8")
    run = cli_main(url, "record", plan)
    assert run.code == 2 and run.errors == [f"error: {plan}:{line}: {field}: {message}" for line, field, message in errors]
    assert recorded(url) == []


def test_a_cap_field_at_the_top_of_a_dataset_file_says_where_it_goes(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    dataset = tmp_path / "d.yaml"
    dataset.write_text("dataset: d\nvariables: [{name: a}]\nepsilon: 1\n", encoding="utf-8")
    run = cli_main(url, "dataset", "add", dataset)
    assert run.code == 2 and run.errors == [f"error: {dataset}:1: (top level): unknown field 'epsilon': it "
                                            "belongs under caps[]"]


# --------------------------------------------------------------------------
# Every catalogue mechanism's parameters make a file the catalogue derives from
# --------------------------------------------------------------------------

GRADUATES = Dataset("graduates", (Variable("degree", "public"), Variable("income", "sensitive")))
SNAPSHOT = LedgerSnapshot(datasets={"graduates": GRADUATES})
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
POSITIVE = st.fractions(min_value=F(1, 100), max_value=F(50), max_denominator=100).filter(bool)
DELTA = st.fractions(min_value=F(1, 10**9), max_value=F(1, 10), max_denominator=10**9).filter(bool)
TEXT = st.text(alphabet=string.ascii_letters, min_size=1, max_size=12)


def needed(name: str):
    """A value for a parameter a guarantee is derived from."""
    if name == "protects":
        return st.just(["income"])
    return (DELTA if name == "delta" else POSITIVE).map(str)


def describing(name: str):
    """Any value a release file may give a parameter that only describes the release."""
    if name in NUMERIC_PARAMS:
        return (DELTA if name == "delta" else POSITIVE).map(str)
    if name == "relation":
        return st.sampled_from(["replace", "add-remove"])
    return st.one_of(TEXT, st.integers(0, 10**6), st.booleans(), st.lists(TEXT, max_size=3))


@st.composite
def catalogue_releases(draw):
    name = draw(st.sampled_from(sorted(CATALOGUE)))
    accepted = PARAMETERS[name]
    need = draw(st.sampled_from(accepted.needs)) if accepted.needs else ()
    params = {key: draw(needed(key)) for key in need}
    if "relation" in accepted.reads and draw(st.booleans()):
        params["relation"] = draw(st.sampled_from(["replace", "add-remove"]))
    described = {key: draw(describing(key)) for key in draw(st.sets(st.sampled_from(accepted.describes)))
                 if key not in params} if accepted.describes else {}
    return name, params, described


def loaded(name: str, params: dict) -> Release:
    entry = {"id": "r", "reads": [] if name == "post-processing" else ["degree", "income"],
             "mechanism": {"name": name, **params}}
    if name == "declared":
        entry["guarantees"] = [{"protects": ["income"], "epsilon": "1"}]
    document, errors = parse_document("plan.json", json.dumps({"dataset": "graduates", "releases": [entry]}))
    assert errors == []
    releases, _, errors = build_releases(document, SNAPSHOT, recorded_by="tester", recorded_at=WHEN)
    assert errors == [], [str(error) for error in errors]
    (release,) = releases
    return release


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogue_releases())
def test_every_mechanisms_parameters_make_a_file_its_guarantee_is_derived_from(drawn):
    """What a file derives from the parameters a guarantee needs, closed forms each: epsilon, or
    sensitivity / scale (Dwork et al. 2006); sensitivity^2 / (2 sigma^2) (Bun and Steinke 2016,
    Prop 1.6); rho; the (epsilon, delta) claimed; Tan's epsilon on what it protects (Prop 5.1).
    The parameters that describe the release change nothing."""
    name, params, described = drawn
    release = loaded(name, {**params, **described})
    assert release.guarantees == loaded(name, params).guarantees
    relation = Relation(params.get("relation", "replace"))
    value = {key: F(text) for key, text in params.items() if key in NUMERIC_PARAMS}
    reads = frozenset({"degree", "income"})
    if "scale" in params:
        assert release.guarantees == (Guarantee(reads, Notion.PURE, epsilon=value["sensitivity"] / value["scale"],
                                                relation=relation),)
    elif "sigma" in params:
        rho = value["sensitivity"] ** 2 / (2 * value["sigma"] ** 2)
        assert release.guarantees == (Guarantee(reads, Notion.ZCDP, rho=rho, relation=relation),)
    elif "rho" in params:
        assert release.guarantees == (Guarantee(reads, Notion.ZCDP, rho=value["rho"], relation=relation),)
    elif "delta" in params:
        claim = Guarantee(reads, Notion.APPROX, epsilon=value["epsilon"], delta=value["delta"], relation=relation)
        assert claim in release.guarantees
    elif "protects" in params:
        assert release.guarantees == (Guarantee(frozenset({"income"}), Notion.PURE, epsilon=value["epsilon"],
                                                relation=relation),)
    elif "epsilon" in params:
        assert release.guarantees == (Guarantee(reads, Notion.PURE, epsilon=value["epsilon"], relation=relation),)
    elif name == "declared":
        assert release.guarantees == (Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1)),)
    else:  # no noise, reading nothing, or no DP guarantee: nothing derived (∞ or 0, docs/explanation/model.md#the-cost-of-one-release-on-a-subset, docs/explanation/model.md#post-processing-and-lineage, docs/explanation/model.md#pufferfish-guarantees)
        assert release.guarantees == ()


def test_the_table_covers_every_catalogue_mechanism():
    assert PARAMETERS.keys() == CATALOGUE.keys()


# --------------------------------------------------------------------------
# Adapters, `run` and the Python API: the same table
# --------------------------------------------------------------------------


def test_an_adapter_is_held_to_the_table():
    from ledger.adapters import make_release

    with pytest.raises(InputErrors) as refused:
        make_release(id="r", dataset="graduates", reads=["income"], mechanism="laplace",
                     params={"epsilon": 1, "sensitivty": 1}, source="an adapter")
    (error,) = refused.value.errors
    assert error.field == "mechanism.sensitivty" and "did you mean 'sensitivity'?" in error.message


def test_what_run_records_from_its_command_line_a_file_may_state():
    """`run crosstab -p columns=... -p epsilon=...` records a geometric release with those parameters:
    each parameter a run mechanism takes on the command line is one its catalogue mechanism accepts
    (the covariance and category tables are read, not recorded)."""
    from ledger.operations.run_mechanisms import CATALOGUE_NAME, MECHANISMS

    for name, definition in MECHANISMS.items():
        taken = set(definition.required + definition.optional) - {"covariance", "categories"}
        assert taken <= set(PARAMETERS[CATALOGUE_NAME[name]].names), name


def test_a_release_handed_to_the_api_is_held_to_the_table(tmp_path):
    book = ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", person=front_end("tester", "test"))
    book.add_dataset({"dataset": "d", "variables": [{"name": "a"}]})
    release = Release("r", "d", frozenset("a"), Mechanism("gaussian", (("relaton", "add-remove"), ("rho", F(1, 2)))),
                      (Guarantee(frozenset("a"), Notion.ZCDP, rho=F(1, 2)),))
    with pytest.raises(ledger.InputErrors) as refused:
        book.record(release)
    assert "release r: mechanism.relaton: gaussian takes no parameter 'relaton' (did you mean 'relation'?)" \
        in str(refused.value)
    assert book.releases() == []


# --------------------------------------------------------------------------
# One place a user reads them
# --------------------------------------------------------------------------


def test_the_mechanisms_command_prints_the_table(url):
    run = cli_ok(url, "mechanisms")
    rows = [line for line in run.out.splitlines() if line.startswith("| `")]
    listed = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        listed[cells[0].strip("`")] = set(re.findall(r"`([^`]+)`", " ".join(cells[1:])))
    assert listed == {name: set(accepted.names) for name, accepted in PARAMETERS.items()}
    gaussian = next(row for row in rows if row.startswith("| `gaussian`"))
    assert "`sigma` and `sensitivity`; or `rho`; or `epsilon` and `delta`" in gaussian
    as_json = cli_ok(url, "mechanisms", "--json").json()
    assert as_json["laplace"]["needs"] == [["epsilon"], ["scale", "sensitivity"]]
    assert set(as_json) == set(CATALOGUE)
