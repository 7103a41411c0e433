"""Loading: files -> validated frozen records, and every problem located by file, line and field.

The input files are written in the tests themselves (like beancount's `load_doc`
tests). Expected values are hand computations from the parameters written in
each file: epsilon = sensitivity / scale (Laplace, geometric), rho =
sensitivity^2 / (2 sigma^2) (Gaussian, Bun and Steinke 2016, Prop 1.6), and
exact fractions as the user wrote them.

The CLI tests (test_cli.py) check the same problems end to end: exit code 2 and
an unchanged database.
"""

from __future__ import annotations

import math
import re
import textwrap
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.input.datasets import build_dataset, load_dataset
from ledger.input.documents import parse_document
from ledger.input.releases import load_releases
from ledger.input.snapshot import LedgerSnapshot
from ledger.core.records import (
    Dataset,
    Family,
    Guarantee,
    Mechanism,
    Notion,
    Relation,
    Release,
    Status,
)

F = Fraction
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

GRADUATES = """\
dataset: graduates
delta: 1e-9
variables:
  - {name: degree, classification: public}
  - {name: income, classification: sensitive}
  - {name: sex, classification: identifying}
groups:
  personal: [income, sex]
"""

FARMS = """\
dataset: farms
variables:
  - {name: region}
  - {name: income}
"""


def dataset_of(text: str, name: str = "dataset.yaml") -> Dataset:
    document, errors = parse_document(name, textwrap.dedent(text))
    assert errors == []
    dataset, errors = build_dataset(document)
    assert errors == [], errors
    return dataset


def ledger(*, releases: tuple[Release, ...] = (), families: tuple[Family, ...] = ()) -> LedgerSnapshot:
    datasets = [dataset_of(GRADUATES), dataset_of(FARMS)]
    return LedgerSnapshot(
        datasets={d.name: d for d in datasets},
        releases={r.id: r for r in releases},
        families={f.id: f for f in families},
    )


def load(tmp_path: Path, *files: tuple[str, str], snapshot: LedgerSnapshot | None = None):
    """Write each (name, text) under tmp_path and load them as one `record`."""
    paths = []
    for name, text in files:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        paths.append(path)
    return load_releases(paths, snapshot or ledger(), recorded_by="tester", recorded_at=WHEN)


def load_ok(tmp_path: Path, text: str, snapshot: LedgerSnapshot | None = None) -> dict[str, Release]:
    releases, _, errors = load(tmp_path, ("releases.yaml", text), snapshot=snapshot)
    assert errors == [], [str(e) for e in errors]
    return {r.id: r for r in releases}


def only_error(errors):
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


# --------------------------------------------------------------------------
# The example files
# --------------------------------------------------------------------------


def test_the_example_files_load_with_the_guarantees_they_state():
    dataset, errors = load_dataset(EXAMPLES / "graduates.dataset.yaml")
    assert errors == []
    assert dataset.name == "graduates"
    assert dataset.variable_names == ("degree", "income", "sex")
    assert dataset.delta == F(1, 10**9)
    assert dataset.group("personal") == {"income", "sex"}

    snapshot = LedgerSnapshot(datasets={"graduates": dataset})
    releases, families, errors = load_releases(
        [EXAMPLES / "graduates.releases.yaml"], snapshot, recorded_by="tester", recorded_at=WHEN
    )
    assert errors == []
    assert families == []
    by_id = {r.id: r for r in releases}
    assert list(by_id) == ["income-by-degree", "consistent-income", "mean-income", "income-by-degree-rounded"]

    # geometric, epsilon 1, nothing stated: epsilon 1 on everything it reads
    assert by_id["income-by-degree"].guarantees == (
        Guarantee(frozenset({"degree", "income"}), Notion.PURE, epsilon=F(1)),
    )
    # Tan's Algorithm 1: income protected, degree released exactly
    assert by_id["consistent-income"].guarantees == (Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1)),)
    assert by_id["consistent-income"].exact_variables == {"degree"}
    # Gaussian sigma 10, sensitivity 1: rho = 1 / (2 * 100)
    assert by_id["mean-income"].guarantees == (Guarantee(frozenset({"income"}), Notion.ZCDP, rho=F(1, 200)),)
    # post-processing: reads nothing, keeps its lineage
    rounded = by_id["income-by-degree-rounded"]
    assert rounded.reads == frozenset()
    assert rounded.guarantees == ()
    assert rounded.derived_from == ("income-by-degree",)
    assert all(r.status is Status.PLANNED and r.recorded_by == "tester" for r in releases)


# --------------------------------------------------------------------------
# Exact numbers
# --------------------------------------------------------------------------


def test_numbers_stay_exact_as_written(tmp_path):
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - id: fraction
            reads: [income]
            mechanism: {name: gaussian, rho: "104/4099"}
          - id: tenth
            reads: [income]
            mechanism: {name: laplace, epsilon: 0.1}
          - id: tenth-as-text
            reads: [income]
            mechanism: {name: laplace, epsilon: "0.1"}
          - id: approx
            reads: [income]
            mechanism: {name: gaussian, epsilon: 0.5, delta: 1e-9}
        """)
    assert releases["fraction"].guarantees[0].rho == F(104, 4099)
    assert releases["tenth"].guarantees[0].epsilon == F(1, 10)  # not 0.1000000000000000055...
    assert releases["tenth-as-text"].guarantees[0].epsilon == F(1, 10)
    approx, implied = releases["approx"].guarantees  # the claim, and the zCDP bound it implies of a Gaussian
    assert (approx.notion, approx.epsilon, approx.delta) == (Notion.APPROX, F(1, 2), F(1, 10**9))
    assert implied.notion == Notion.ZCDP
    for release in releases.values():
        for guarantee in release.guarantees:
            for value in (guarantee.epsilon, guarantee.delta, guarantee.rho):
                assert value is None or type(value) is Fraction


def test_ten_tenths_sum_to_exactly_one(tmp_path):
    entries = "".join(
        f"  - {{id: r{k}, reads: [income], mechanism: {{name: laplace, epsilon: 0.1}}}}\n" for k in range(10)
    )
    releases = load_ok(tmp_path, "dataset: graduates\nreleases:\n" + entries)
    assert sum(r.guarantees[0].epsilon for r in releases.values()) == 1


# --------------------------------------------------------------------------
# Derived guarantees (catalogue)
# --------------------------------------------------------------------------


def test_scale_and_sensitivity_give_epsilon_sensitivity_over_scale(tmp_path):
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - id: geometric
            reads: [degree, sex]
            mechanism: {name: geometric, scale: 4, sensitivity: 2}
          - id: laplace
            reads: [income]
            mechanism: {name: laplace, scale: "0.3", sensitivity: 2}
        """)
    assert releases["geometric"].guarantees == (Guarantee(frozenset({"degree", "sex"}), Notion.PURE, epsilon=F(1, 2)),)
    # 2 / (3/10) = 20/3, exactly
    assert releases["laplace"].guarantees == (Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(20, 3)),)


def test_gaussian_sigma_and_sensitivity_give_rho_exactly(tmp_path):
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - id: wide
            reads: [income]
            mechanism: {name: gaussian, sigma: 10, sensitivity: 1}
          - id: narrow
            reads: [income, sex]
            mechanism: {name: gaussian, sigma: "0.3", sensitivity: 2}
        """)
    assert releases["wide"].guarantees == (Guarantee(frozenset({"income"}), Notion.ZCDP, rho=F(1, 200)),)
    # 2^2 / (2 * (3/10)^2) = 4 / (18/100) = 200/9
    assert releases["narrow"].guarantees == (Guarantee(frozenset({"income", "sex"}), Notion.ZCDP, rho=F(200, 9)),)


def test_exact_release_has_no_guarantee_so_everything_read_is_exact(tmp_path):
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - id: counts
            reads: [degree, sex]
            mechanism: {name: exact}
        """)
    assert releases["counts"].guarantees == ()
    assert releases["counts"].exact_variables == {"degree", "sex"}


def test_explicit_guarantee_replaces_the_derived_one_and_leaves_the_rest_exact(tmp_path):
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - id: partial
            reads: [degree, income, sex]
            mechanism: {name: laplace, epsilon: 1}
            guarantees:
              - {protects: [income], epsilon: 1}
              - {protects: [income, sex], rho: "1/8", relation: add-remove}
        """)
    assert releases["partial"].guarantees == (
        Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1)),
        Guarantee(frozenset({"income", "sex"}), Notion.ZCDP, rho=F(1, 8), relation=Relation.ADD_REMOVE),
    )
    assert releases["partial"].exact_variables == {"degree"}


def test_mechanism_relation_is_carried_to_the_derived_guarantee(tmp_path):
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - id: unbounded-dp
            reads: [income]
            mechanism: {name: laplace, scale: 4, sensitivity: 1, relation: add-remove}
        """)
    assert releases["unbounded-dp"].guarantees == (
        Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1, 4), relation=Relation.ADD_REMOVE),
    )


def test_gaussian_rho_that_contradicts_sigma_and_sensitivity_is_refused(tmp_path):
    """sigma 1, sensitivity 1 is rho = 1/2; a stated rho of 1/1000 understates the loss
    500-fold. Laplace refuses an epsilon that contradicts sensitivity / scale; the
    Gaussian must refuse the same contradiction rather than record the smaller claim."""
    releases, _, errors = load(tmp_path, ("releases.yaml", """\
        dataset: graduates
        releases:
          - id: understated
            reads: [income]
            mechanism: {name: gaussian, rho: 0.001, sigma: 1, sensitivity: 1}
        """))
    assert errors, f"recorded {releases[0].guarantees} although sigma 1, sensitivity 1 gives rho 1/2"
    error = only_error(errors)
    assert error.field.startswith("releases[0].mechanism")
    assert error.source == f"{tmp_path / 'releases.yaml'}:5"


def test_laplace_epsilon_that_contradicts_scale_is_refused(tmp_path):
    _, _, errors = load(tmp_path, ("releases.yaml", """\
        dataset: graduates
        releases:
          - id: contradicts
            reads: [income]
            mechanism: {name: laplace, epsilon: 1, scale: 2, sensitivity: 1}
        """))
    error = only_error(errors)
    assert error.field == "releases[0].mechanism.epsilon"


# --------------------------------------------------------------------------
# Where problems are reported
# --------------------------------------------------------------------------


def test_every_problem_of_a_file_is_reported_with_its_line_and_field(tmp_path):
    releases, _, errors = load(tmp_path, ("bad.yaml", """\
        dataset: graduates
        releases:
          - id: fine
            reads: [income]
            mechanism: {name: laplace, epsilon: 1}
          - id: negative
            reads: [income]
            mechanism:
              name: laplace
              epsilon: -0.5
          - id: misspelt
            reads: [degree, incom]
            mechanism: {name: geometric, epsilon: 1}
          - id: certain
            reads: [income]
            mechanism: {name: gaussian, epsilon: 1, delta: 1}
        """))
    path = tmp_path / "bad.yaml"
    located = sorted((e.source, e.field) for e in errors)
    assert located == [
        (f"{path}:10", "releases[1].mechanism.epsilon"),
        (f"{path}:12", "releases[2].reads[1]"),
        (f"{path}:16", "releases[3].mechanism.delta"),
    ]
    assert [r.id for r in releases] == ["fine"]  # the caller writes nothing when errors is not empty
    assert str(errors[0]).startswith(f"{path}:10: releases[1].mechanism.epsilon: ")
    assert "-0.5" in str(errors[0])


@pytest.mark.parametrize("value, text", [(".nan", "nan"), (".inf", "inf"), ("-.inf", "inf"), ("true", "true")])
def test_a_non_finite_or_non_numeric_epsilon_is_refused(tmp_path, value, text):
    _, _, errors = load(tmp_path, ("r.yaml", f"""\
        dataset: graduates
        releases:
          - id: odd
            reads: [income]
            guarantees: [{{epsilon: {value}}}]
            mechanism: {{name: declared}}
        """))
    error = only_error(errors)
    assert error.source == f"{tmp_path / 'r.yaml'}:5"
    assert error.field.startswith("releases[0].guarantees[0]")
    assert text in error.message.lower() or "is not valid" in error.message


def test_json_nan_is_refused_and_the_json_file_is_named(tmp_path):
    _, _, errors = load(tmp_path, ("r.json", """\
        {"dataset": "graduates",
         "releases": [{"id": "odd", "reads": ["income"], "mechanism": {"name": "laplace", "epsilon": NaN}}]}
        """))
    error = only_error(errors)
    assert error.source.startswith(str(tmp_path / "r.json"))
    assert error.field == "releases[0].mechanism.epsilon"


def test_malformed_files_name_the_file_and_line(tmp_path):
    _, _, errors = load(tmp_path, ("a.yaml", "dataset: graduates\nreleases:\n  - {id: x, reads: [income]\n  - y\n"))
    error = only_error(errors)
    assert error.source in (f"{tmp_path / 'a.yaml'}:3", f"{tmp_path / 'a.yaml'}:4")
    assert "YAML" in error.message

    _, _, errors = load(tmp_path, ("b.json", '{"dataset": "graduates",\n "releases": [,]}'))
    error = only_error(errors)
    assert error.source == f"{tmp_path / 'b.json'}:2"
    assert "JSON" in error.message


def test_duplicate_ids_name_both_places(tmp_path):
    first = """\
        dataset: graduates
        releases:
          - {id: twin, reads: [income], mechanism: {name: laplace, epsilon: 1}}
        """
    _, _, errors = load(tmp_path, ("one.yaml", first), ("two.yaml", first))
    error = only_error(errors)
    assert error.source == f"{tmp_path / 'two.yaml'}:3"
    assert error.field.endswith("id")
    assert f"{tmp_path / 'one.yaml'}:3" in error.message


def test_a_family_declared_differently_in_two_files_names_a_file(tmp_path):
    """Two files of one record declare family `split` for different datasets, so its
    members would read different datasets. Every error names its file (STYLE 3)."""
    _, _, errors = load(
        tmp_path,
        ("graduates.yaml", """\
            dataset: graduates
            families: [{id: split, partition: random}]
            releases:
              - {id: g1, reads: [income], family: split, part: half 1, mechanism: {name: laplace, epsilon: 1}}
            """),
        ("farms.yaml", """\
            dataset: farms
            families: [{id: split, partition: random}]
            releases:
              - {id: f1, reads: [income], family: split, part: half 1, mechanism: {name: laplace, epsilon: 1}}
            """),
    )
    assert errors, "a family whose members read two datasets was accepted"
    text = "\n".join(str(e) for e in errors)
    assert "split" in text
    assert "graduates.yaml" in text or "farms.yaml" in text, text


def test_a_recorded_family_cannot_take_a_member_from_another_dataset(tmp_path):
    family = Family("by-region", "farms", frozenset({"region"}))
    _, _, errors = load(tmp_path, ("r.yaml", """\
        dataset: graduates
        releases:
          - id: stray
            reads: [income]
            family: by-region
            part: region=north
            mechanism: {name: laplace, epsilon: 1}
        """), snapshot=ledger(families=(family,)))
    error = only_error(errors)
    assert (error.source, error.field) == (f"{tmp_path / 'r.yaml'}:5", "releases[0].family")
    assert "farms" in error.message and "graduates" in error.message


def test_lineage_must_name_recorded_releases_and_never_loop(tmp_path):
    _, _, errors = load(tmp_path, ("r.yaml", """\
        dataset: graduates
        releases:
          - {id: a, reads: [], derived_from: [b]}
          - {id: b, reads: [], derived_from: [a]}
          - {id: c, reads: [], derived_from: [nowhere]}
        """))
    by_message = {("cycle" in e.message, "nowhere" in e.message): e for e in errors}
    assert set(by_message) == {(True, False), (False, True)}, [str(e) for e in errors]
    cycle, unknown = by_message[(True, False)], by_message[(False, True)]
    assert cycle.source.startswith(f"{tmp_path / 'r.yaml'}:")
    assert cycle.field.endswith("derived_from")
    assert unknown.source == f"{tmp_path / 'r.yaml'}:5"
    assert unknown.field.endswith("derived_from")


def test_a_parent_may_be_a_recorded_release(tmp_path):
    parent = Release("table-1", "graduates", frozenset({"income"}), Mechanism("laplace", (("epsilon", F(1)),)),
                     (Guarantee(frozenset({"income"}), Notion.PURE, epsilon=F(1)),))
    releases = load_ok(tmp_path, """\
        dataset: graduates
        releases:
          - {id: table-1-rounded, reads: [], derived_from: [table-1]}
        """, snapshot=ledger(releases=(parent,)))
    assert releases["table-1-rounded"].derived_from == ("table-1",)


def test_dataset_file_problems_are_located(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent("""\
        dataset: survey
        delta: 1
        variables:
          - {name: age}
          - {name: age}
        groups:
          g: [age, height]
        """))
    dataset, errors = load_dataset(path)
    assert dataset is None
    assert sorted((e.source, e.field) for e in errors) == [
        (f"{path}:2", "delta"),
        (f"{path}:5", "variables[1].name"),
        (f"{path}:7", "groups.g[1]"),
    ]


def test_a_member_of_a_keyed_family_must_read_the_key(tmp_path):
    # Which records a part holds depends on the key variable, so its output does too (docs/explanation/model.md#families):
    # a member that leaves the key out of `reads` would cost 0 on the key, which is false.
    _, _, errors = load(tmp_path, ("r.yaml", """\
        dataset: graduates
        families:
          - {id: by-degree, partition: [degree]}
        releases:
          - {id: part-1, reads: [income], family: by-degree, part: degree=BA, mechanism: {name: laplace, epsilon: 1}}
          - {id: part-2, reads: [degree, income], family: by-degree, part: degree=MA, mechanism: {name: laplace, epsilon: 1}}
        """))
    error = only_error(errors)
    assert (error.source, error.field) == (f"{tmp_path / 'r.yaml'}:5", "releases[0].reads")
    assert "degree" in error.message and "by-degree" in error.message


# --------------------------------------------------------------------------
# The schema check: what jsonschema-rs refuses, in the steward's words
# --------------------------------------------------------------------------

_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
    | st.sampled_from(["laplace", "gaussian", "pure", "zcdp", "replace", "add-remove", "random", "1/3", "x",
                       "income", "sex", "all", "public", "sensitive"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "reads", "mechanism", "name", "epsilon", "delta", "rho", "sigma", "scale",
                         "sensitivity", "protects", "notion", "relation", "guarantees", "family", "status",
                         "partition", "title", "derived_from", "variables", "caps", "subset", "extra",
                         "classification", "categories", "groups", "description"]),
        inner, max_size=4),
    max_leaves=8,
)
_VALID_RELEASES = {
    "dataset": "graduates",
    "families": [{"id": "halves", "partition": "random"}],
    "releases": [
        {"id": "a", "reads": ["income"], "mechanism": {"name": "laplace", "epsilon": "1/2"}, "family": "halves",
         "part": "first half"},
        {"id": "b", "title": "t", "reads": ["income", "sex"], "derived_from": ["a"], "status": "planned",
         "mechanism": {"name": "gaussian", "sigma": 2, "sensitivity": 1},
         "guarantees": [{"protects": ["income"], "rho": "1/8"}]},
    ],
}

_VALID_DATASET = {
    "dataset": "graduates",
    "delta": "1e-9",
    "variables": [{"name": "income", "classification": "sensitive"},
                  {"name": "sex", "categories": ["f", "m"]}, {"name": "degree", "description": "programme"}],
    "groups": {"personal": ["income", "sex"]},
    "caps": [{"subset": ["income"], "epsilon": 1}, {"name": "health", "subset": ["sex"], "rho": "1/2"},
             {"subset": "all", "epsilon": 10, "delta": "1e-9"}],
}


def _paths(value, at=()):
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, at + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, at + (index,))


def _value_at(document, at):
    for part in at:
        document = document[part]
    return document


def _finite(value):
    """`value` with each float that is not finite replaced by a number that is not whole."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return 0.5 if isinstance(value, float) and not math.isfinite(value) else value


def _replaced(document, at, new):
    if not at:
        return new
    copy = dict(document) if isinstance(document, dict) else list(document)
    copy[at[0]] = _replaced(document[at[0]], at[1:], new)
    return copy


@pytest.mark.parametrize("name, valid", [("release.v1.schema.json", _VALID_RELEASES),
                                         ("dataset.v1.schema.json", _VALID_DATASET)])
@settings(max_examples=400)
@given(data=st.data())
def test_every_refusal_of_the_schema_is_one_line_naming_a_value_of_the_file(name, valid, data):
    import jsonschema_rs

    from ledger.input.documents import Document
    from ledger.input.limits import field_name
    from ledger.input.schema_check import schema, schema_problems

    validator = jsonschema_rs.Draft202012Validator(schema(name), validate_formats=False)
    assert validator.is_valid(valid) and schema_problems(Document("f.json", valid), name) == []
    document = valid
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.sampled_from(list(_paths(document))))
        document = _replaced(document, at, data.draw(_JSONISH))
    problems = schema_problems(Document("f.json", document), name)
    # NaN or an infinity where a number is accepted is left to the builders (refused in words)
    assert (problems == []) == validator.is_valid(_finite(document)), document
    for at, error in problems:
        assert at in set(_paths(document)) and error.field == (field_name(at) or "(top level)")
        assert "\n" not in error.message and len(error.message) < 1000, error
        # in words: no Python repr of the list or mapping refused, no validator's phrase or pattern
        value = _value_at(document, at)
        assert not (isinstance(value, (list, dict)) and value and repr(value) in error.message), error
        assert not re.search(r"is not of type|does not match|is not valid under|\[A-Za-z0-9\]", error.message), error


def test_a_value_only_yaml_can_give_is_refused_saying_what_the_file_gave(tmp_path):
    _, _, errors = load(tmp_path, ("r.yaml", """\
        dataset: graduates
        releases:
          - id: a
            reads: !!binary aW5jb21l
            mechanism: {name: laplace, epsilon: 1}
          - id: b
            reads: !!set {income: null}
            mechanism: {name: laplace, epsilon: 1}
        """))
    assert [(error.field, error.message) for error in errors] == [
        ("releases[0].reads", "must be a list ([a, b]); found binary data (YAML !!binary)"),
        ("releases[1].reads", "must be a list ([a, b]); found a set (YAML !!set)")]


def test_a_refusal_by_the_schema_is_said_once_in_the_order_of_the_file(tmp_path):
    fine = "".join(f"  - {{id: r{k}, reads: [income], mechanism: {{name: laplace, epsilon: 1}}}}\n" for k in range(9))
    path = tmp_path / "r.yaml"
    path.write_text("dataset: graduates\nreleases:\n" + fine + "  - {title: no id nor reads}\n"
                    "  - {id: r10, reads: income, mechanism: {name: laplace, epsilon: 1}}\n", encoding="utf-8")
    _, _, errors = load_releases([path], ledger(), recorded_by="tester", recorded_at=WHEN)
    # (releases[10] after releases[9]; a mapping missing two fields, one line)
    assert [(error.source, error.field, error.message) for error in errors] == [
        (f"{path}:12", "releases[9]", "missing field 'id', 'reads'"),
        (f"{path}:13", "releases[10].reads", "must be a list ([a, b]); found the text 'income': write it as [income]")]


@pytest.mark.parametrize("text, field, message", [
    ("{dataset: graduates, variables: [{name: a, categories: [x, 1.5]}]}",
     "variables[0].categories[1]", "must be text or a whole number; found 1.5"),
    ("{dataset: graduates, variables: [{name: a, categories: [x, x]}]}",
     "variables[0].categories", "must not hold a value twice; found the text 'x' more than once"),
    ("{dataset: graduates, variables: [{name: ''}]}", "variables[0].name", "must not be empty"),
    ("{dataset: 'graduates 2024', variables: [{name: a}]}", "dataset",
     "must be a name of letters, digits and _ . : - that starts with a letter or digit; found the text "
     "'graduates 2024'"),
    ("{dataset: graduates, variables: [{name: a}], groups: {'my group': [a]}}", "groups",
     "a key must be a name of letters, digits and _ . : - that starts with a letter or digit; found the text "
     "'my group'"),
    ("{version: 2, dataset: graduates, variables: [{name: a}]}", "version", "must be 1; found 2"),
])
def test_a_value_the_dataset_schema_refuses_is_described_not_quoted_whole(text, field, message):
    document, errors = parse_document("d.yaml", text)
    assert errors == []
    _, errors = build_dataset(document)
    assert (field, message) in [(error.field, error.message) for error in errors], errors


def test_a_name_too_long_for_the_schema_is_counted_not_quoted():
    from ledger.input.documents import Document
    from ledger.input.schema_check import validate

    errors = validate(Document("d.json", {"dataset": "d" * 201, "variables": [{"name": "a"}]}), "dataset.v1.schema.json")
    assert [(error.field, error.message) for error in errors] == [
        ("dataset", "must be at most 200 characters long; found 201 characters")]
