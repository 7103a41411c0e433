"""The command line: recording files, the release-by-variable table, subset queries,
and bad input refused with exit code 2 and nothing written.

Expected figures are computed here by hand from the files' parameters (Tan's
cost rule, docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.4), with the running figure (the Rényi filter at the 22
orders fixed in advance, docs/explanation/accounting.md) evaluated by this module's own formulas. Exit codes are
those of the console entry point `ledger.cli.app:main`: most tests call it in this
process (same code path, no interpreter start-up); a representative few run
`python -m ledger` as a subprocess.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from sqlmodel import Session
from support import Run, cli_main, dump_sqlite
from typer.testing import CliRunner

from ledger.cli import app as cli
from ledger.store import decoded_history, engines

from conftest import _reference_filter

F = Fraction
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# --------------------------------------------------------------------------
# Independent Rényi-filter figures
# --------------------------------------------------------------------------


def rr_divergence(alpha: float, epsilon: float) -> float:
    """Randomized response's Rényi divergence of order alpha (the worst epsilon-DP pair, Mironov 2017):
    log((e^(alpha eps) + e^((1 - alpha) eps)) / (1 + e^eps)) / (alpha - 1), in log-sum-exp form."""
    high, low = alpha * epsilon, (1 - alpha) * epsilon
    top = max(high, low)
    return (top + math.log(math.exp(high - top) + math.exp(low - top)) - math.log1p(math.exp(epsilon))) / (alpha - 1)


def renyi_filter(curve, delta: float) -> float:
    """The running figure of a Rényi curve (alpha -> summed divergence) at `delta`: at each of the 22
    orders fixed in advance, CKS 2020 Prop 12 at half the delta over 22, the smallest."""
    from conftest import REFERENCE_ALLOWANCE, REFERENCE_FILTER_ORDERS

    share = delta * (1 - REFERENCE_ALLOWANCE) / len(REFERENCE_FILTER_ORDERS)
    return min(curve(a) + math.log1p(-1 / a) - (math.log(share) + math.log(a)) / (a - 1) for a in REFERENCE_FILTER_ORDERS)


def test_the_reference_curves_are_within_the_known_bounds():
    # sanity of the references: randomized response's divergence is at most min(eps, alpha eps^2 / 2)
    # (Bun and Steinke 2016, Prop 3.3), and a rho curve's figure is conftest's
    for alpha in (1.2, 2, 16, 1024):
        for epsilon in (0.1, 1, 5):
            assert 0 < rr_divergence(alpha, epsilon) <= min(epsilon, alpha * epsilon ** 2 / 2) * (1 + 1e-12)
    for rho in (0.005, 0.5, 2.005):
        assert renyi_filter(lambda a: a * rho, 1e-9) == pytest.approx(_reference_filter(rho=rho, delta=1e-9), rel=1e-12)


# --------------------------------------------------------------------------
# Running the CLI
# --------------------------------------------------------------------------


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def run_main(db: Path, *args: str) -> Run:
    """`privacy-ledger --db URL ARGS` in this process, through the console entry point
    (`main()` maps InputErrors to exit 2)."""
    return cli_main(sqlite_url(db), *args)


def run_process(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LEDGER_DATABASE_URL": sqlite_url(db)}
    return subprocess.run([sys.executable, "-m", "ledger", *map(str, args)], cwd=db.parent, env=env,
                          capture_output=True, text=True, timeout=120)


runner = CliRunner()


def invoke(db: Path, *args: str) -> Run:
    """The Typer app through CliRunner, for commands expected to succeed."""
    result = runner.invoke(cli.app, ["--db", sqlite_url(db), *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return Run(result.exit_code, result.stdout, "")


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def text_rows(table: str) -> dict[str, list[str]]:
    """A text table's cells by release (first column), header row under "Release"."""
    cells = {}
    for line in table.splitlines():
        if line.startswith("| "):
            parts = [part.strip() for part in line.strip().strip("|").split("|")]
            cells[parts[0]] = parts[1:]
    return cells


GRADUATES = """\
dataset: graduates
delta: 1e-9
variables:
  - {name: degree}
  - {name: income}
  - {name: sex}
groups:
  personal: [income, sex]
"""

FARMS = """\
dataset: farms
variables:
  - {name: region}
  - {name: income}
"""

RECORDED = """\
dataset: graduates
families:
  - {id: by-degree, partition: [degree]}
releases:
  - {id: recorded-one, reads: [degree, income], family: by-degree, part: degree=BA, mechanism: {name: laplace, epsilon: 1}}
"""


@pytest.fixture
def db(tmp_path):
    return tmp_path / "ledger.db"


@pytest.fixture
def graduates(db, tmp_path):
    """A ledger holding the graduates dataset and nothing else."""
    assert run_main(db, "dataset", "add", write(tmp_path, "graduates.dataset.yaml", GRADUATES)).code == 0
    return db


@pytest.fixture
def busy(graduates, tmp_path):
    """Two datasets, a family of graduates, and one recorded release of it."""
    assert run_main(graduates, "dataset", "add", write(tmp_path, "farms.dataset.yaml", FARMS)).code == 0
    result = run_main(graduates, "record", write(tmp_path, "recorded.yaml", RECORDED))
    assert result.code == 0, result.err
    return graduates


def record(db: Path, directory: Path, text: str) -> Run:
    result = run_main(db, "record", write(directory, "releases.yaml", text))
    assert result.code == 0, result.err
    return result


# --------------------------------------------------------------------------
# The example files, end to end
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def examples_ledger(tmp_path_factory):
    """The issue's dataset and release files, the releases recorded through `python -m ledger`."""
    db = tmp_path_factory.mktemp("examples") / "ledger.db"
    added = run_main(db, "dataset", "add", EXAMPLES / "graduates.dataset.yaml")  # (its admin: the user running the tests)
    assert added.code == 0, added.err
    recorded = run_process(db, "record", EXAMPLES / "graduates.releases.yaml")
    assert recorded.returncode == 0, recorded.stderr
    assert "recorded 4 releases" in recorded.stdout
    return db


def test_example_table_json_has_the_documented_shape_and_hand_computed_values(examples_ledger):
    result = invoke(examples_ledger, "table", "--json")
    assert result.code == 0
    table = result.json()
    assert {"dataset", "notion", "delta", "variables", "rows", "total"} <= set(table)
    assert table["dataset"] == "graduates"
    assert table["variables"] == ["degree", "income", "sex"]
    assert table["delta"] == 1e-9  # the dataset's delta; mean-income is zCDP so figures are at a delta
    assert [row["release"] for row in table["rows"]] == [
        "income-by-degree", "consistent-income", "mean-income", "income-by-degree-rounded"]
    for row in table["rows"]:
        assert {"release", "values", "dataset_wide"} <= set(row)
    assert {"values", "dataset_wide"} <= set(table["total"])

    # sigma 10, sensitivity 1: rho = 1/200; a release's own cell is the figure of it alone (docs/explanation/accounting.md)
    mean_income = renyi_filter(lambda a: a / 200, 1e-9)
    rows = {row["release"]: row for row in table["rows"]}
    assert rows["income-by-degree"]["values"] == {"degree": 1, "income": 1, "sex": 0}
    assert rows["income-by-degree"]["dataset_wide"] == 1
    # Algorithm 1 protects income only: degree is released exactly
    assert rows["consistent-income"]["values"] == {"degree": "inf", "income": 1, "sex": 0}
    assert rows["consistent-income"]["dataset_wide"] == "inf"
    assert rows["mean-income"]["values"]["degree"] == 0
    assert rows["mean-income"]["values"]["sex"] == 0
    assert rows["mean-income"]["values"]["income"] == pytest.approx(mean_income, rel=1e-9)
    assert rows["mean-income"]["dataset_wide"] == pytest.approx(mean_income, rel=1e-9)
    assert rows["income-by-degree-rounded"]["values"] == {"degree": 0, "income": 0, "sex": 0}
    assert rows["income-by-degree-rounded"]["dataset_wide"] == 0

    # income: pure 1 + 1 and rho 1/200: the smaller of the statements fixed in advance, each at its
    # share of delta (docs/explanation/accounting.md): at each fixed Rényi order the pure 2 plus a / 200, or the zCDP filter
    # of 1/200 plus each pure release as 1^2/2 (Bun-Steinke Prop 3.3)
    income = _reference_filter(pure=2, pure_rho=1, rho=1 / 200, delta=1e-9)
    assert table["total"]["values"]["degree"] == "inf"
    assert table["total"]["values"]["income"] == pytest.approx(income, rel=1e-9)
    assert table["total"]["values"]["sex"] == 0
    assert table["total"]["dataset_wide"] == "inf"


def test_example_table_text_shows_unbounded_as_infinity(examples_ledger):
    result = invoke(examples_ledger, "table")
    assert result.code == 0
    cells = text_rows(result.out)
    assert cells["Release"] == ["{degree}", "{income}", "{sex}", "whole dataset"]
    assert cells["consistent-income"][0] == "∞"
    assert cells["consistent-income"][3] == "∞"
    assert cells["income-by-degree"] == ["1", "1", "0", "1"]
    total = next(values for name, values in cells.items() if name not in {
        "Release", "income-by-degree", "consistent-income", "mean-income", "income-by-degree-rounded"})
    assert total[0] == "∞" and total[2] == "0" and total[3] == "∞"
    # a printed bound is never below the true one: the exact profile of the worst case for two
    # pure releases of 1 (randomized response) with the Gaussian of sigma 10 (Balle and Wang 2018)
    from exact_profiles import epsilon_at, rr_atoms

    assert float(total[1]) >= epsilon_at(1e-9, rr_atoms([1, 1]), s=0.1)
    assert float(total[1]) <= _reference_filter(pure=2, pure_rho=1, rho=1 / 200, delta=1e-9) + 1e-4  # never above basic
    assert "inf" not in result.out


def test_example_subsets(examples_ledger):
    degree = invoke(examples_ledger, "subset", "degree", "--json").json()
    assert {"subset", "epsilon", "rho", "delta", "releases"} <= set(degree)
    assert degree["subset"] == ["degree"]
    assert degree["epsilon"] == "inf"
    assert degree["rho"] is None
    assert set(degree["releases"]) == {"income-by-degree", "consistent-income"}

    income = invoke(examples_ledger, "subset", "income", "--json").json()
    assert income["subset"] == ["income"]
    basic = _reference_filter(pure=2, pure_rho=1, rho=1 / 200, delta=1e-9)
    assert income["accountants"]["basic"]["epsilon"] == pytest.approx(basic, rel=1e-9)
    assert income["epsilon"] <= income["accountants"]["basic"]["epsilon"]  # the smallest valid figure
    # every history is adaptive (docs/explanation/accounting.md): the Rényi filter at the 22 fixed orders, 1/44 of the
    # delta each, with the two pure releases of 1 at randomized response's curve (Mironov 2017)
    assert income["case"] == "adaptive" and income["accountant"] in ("basic", "rdp")
    expected = renyi_filter(lambda a: 2 * rr_divergence(a, 1) + a / 200, 1e-9)
    assert expected <= income["epsilon"] <= expected * (1 + 1e-8)  # rounded up, never down
    assert income["accountants"]["pld"]["valid"] is False  # information only, never the figure
    assert income["delta"] == 1e-9
    # the total as zCDP: each epsilon-1 release is 1^2/2-zCDP (Bun-Steinke Prop 1.4), and rho adds
    assert income["rho"] == pytest.approx(1 / 2 + 1 / 2 + 1 / 200)
    assert set(income["releases"]) == {"income-by-degree", "consistent-income", "mean-income"}

    sex = invoke(examples_ledger, "subset", "sex", "--json").json()
    assert sex["epsilon"] == 0
    assert (sex["rho"], sex["delta"], sex["releases"]) == (None, None, [])

    # a named group is the subset of its members
    personal = invoke(examples_ledger, "subset", "personal", "--json").json()
    assert sorted(personal["subset"]) == ["income", "sex"]
    assert personal["epsilon"] == pytest.approx(income["epsilon"], rel=1e-12)

    text = invoke(examples_ledger, "subset", "degree", "sex")
    assert "∞" in text.out and "inf" not in text.out


def test_subset_at_another_delta(examples_ledger):
    result = invoke(examples_ledger, "subset", "income", "--delta", "1e-6", "--json").json()
    assert result["delta"] == 1e-6
    basic = result["accountants"]["basic"]["epsilon"]
    assert basic == pytest.approx(_reference_filter(pure=2, pure_rho=1, rho=1 / 200, delta=1e-6), rel=1e-9)
    assert result["epsilon"] <= basic  # the smallest valid figure


# --------------------------------------------------------------------------
# Exact numbers through the CLI
# --------------------------------------------------------------------------


def test_ten_releases_of_a_tenth_total_exactly_one(graduates, tmp_path):
    entries = "".join(f"  - {{id: r{k}, reads: [income], mechanism: {{name: laplace, epsilon: 0.1}}}}\n"
                      for k in range(10))
    record(graduates, tmp_path, "dataset: graduates\nreleases:\n" + entries)

    table = invoke(graduates, "table", "--json").json()
    assert table["delta"] is None  # every guarantee is pure: no delta applies
    total = table["total"]["values"]["income"]
    assert total == 1 and type(total) is int
    assert table["total"]["dataset_wide"] == 1 and type(table["total"]["dataset_wide"]) is int
    assert table["total"]["values"]["degree"] == 0

    subset = invoke(graduates, "subset", "income", "--json").json()
    assert subset["epsilon"] == 1 and type(subset["epsilon"]) is int
    assert subset["rho"] is None and subset["delta"] is None  # a pure subset
    assert len(subset["releases"]) == 10

    text = text_rows(invoke(graduates, "table").out)
    assert text["r0"][1] == "0.1"
    assert [values[1] for name, values in text.items() if name not in {"Release", *(f"r{k}" for k in range(10))}] == ["1"]


def test_a_fraction_rho_is_kept_exactly(graduates, tmp_path):
    record(graduates, tmp_path, """\
        dataset: graduates
        releases:
          - {id: exact-rho, reads: [income], mechanism: {name: gaussian, rho: "104/4099"}}
        """)
    engine = engines.make_engine(sqlite_url(graduates))
    with Session(engine) as session:
        (guarantee,) = decoded_history.snapshot(session).releases["exact-rho"].guarantees
    engine.dispose()
    assert guarantee.rho == Fraction(104, 4099)
    listed = invoke(graduates, "releases", "--json").json()
    assert listed[0]["guarantees"][0]["rho_exact"] == "104/4099"  # the figure shape
    assert F(repr(listed[0]["guarantees"][0]["rho"])) >= F(104, 4099)  # a float at or above it


# --------------------------------------------------------------------------
# Derived guarantees, as the table charges them
# --------------------------------------------------------------------------


def table_of(db: Path) -> dict[str, dict]:
    table = invoke(db, "table", "--json").json()
    return {row["release"]: {**row["values"], "*": row["dataset_wide"]} for row in table["rows"]}


def test_costs_derived_from_mechanism_parameters(graduates, tmp_path):
    record(graduates, tmp_path, """\
        dataset: graduates
        releases:
          - id: geometric
            reads: [degree]
            mechanism: {name: geometric, scale: 4, sensitivity: 2}
          - id: laplace
            reads: [sex]
            mechanism: {name: laplace, scale: "0.4", sensitivity: 1}
          - id: exact
            reads: [income]
            mechanism: {name: exact}
          - id: partial
            reads: [degree, sex]
            mechanism: {name: laplace, epsilon: "1/3"}
            guarantees: [{protects: [sex], epsilon: "1/3"}]
          - id: unbounded-dp
            reads: [degree]
            mechanism: {name: laplace, epsilon: "0.25", relation: add-remove}
          - id: unbounded-claim
            reads: [sex]
            mechanism: {name: declared}
            guarantees: [{epsilon: "0.2", relation: add-remove}]
        """)
    rows = table_of(graduates)
    assert rows["geometric"] == {"degree": 0.5, "income": 0, "sex": 0, "*": 0.5}  # 2 / 4
    assert rows["laplace"] == {"degree": 0, "income": 0, "sex": 2.5, "*": 2.5}  # 1 / 0.4
    assert rows["exact"] == {"degree": 0, "income": "inf", "sex": 0, "*": "inf"}
    assert rows["partial"]["degree"] == "inf"  # read, but outside every guarantee
    assert rows["partial"]["sex"] == pytest.approx(1 / 3)
    assert rows["partial"]["*"] == "inf"
    # a replacement is a removal plus an addition: twice the add/remove epsilon (docs/explanation/model.md#variables-subsets-and-neighbours)
    assert rows["unbounded-dp"]["degree"] == 0.5
    assert rows["unbounded-claim"]["sex"] == pytest.approx(0.4)

    total = invoke(graduates, "table", "--json").json()["total"]["values"]
    assert total == {"degree": "inf", "income": "inf", "sex": pytest.approx(2.5 + 1 / 3 + 0.4)}
    assert invoke(graduates, "subset", "degree", "--json").json()["epsilon"] == "inf"


def test_gaussian_sigma_gives_an_exact_rho(graduates, tmp_path):
    record(graduates, tmp_path, """\
        dataset: graduates
        releases:
          - {id: g, reads: [income], mechanism: {name: gaussian, sigma: 5, sensitivity: 2}}
        """)
    engine = engines.make_engine(sqlite_url(graduates))
    with Session(engine) as session:
        (guarantee,) = decoded_history.snapshot(session).releases["g"].guarantees
    engine.dispose()
    assert guarantee.rho == F(2 * 2, 2 * 5 * 5)  # 2/25
    subset = invoke(graduates, "subset", "income", "--json").json()
    assert subset["rho"] == pytest.approx(2 / 25)
    # a rho at the Rényi orders fixed in advance, 1/44 of the delta each (docs/explanation/accounting.md; the other half
    # is the approximate releases' allowance: conftest's reference_filter), one release or many
    expected = _reference_filter(rho=2 / 25, delta=1e-9)
    assert subset["accountants"]["basic"]["epsilon"] == pytest.approx(expected, rel=1e-9)
    assert subset["case"] == "adaptive" and subset["epsilon"] == pytest.approx(expected, rel=1e-9)
    # the PLD figure "had the plan been fixed in advance" is shown at the whole delta, information only:
    # never below the Gaussian's exact profile there (sensitivity / sigma 0.4, Balle and Wang 2018),
    # within the discretisation above it, and not the figure
    from exact_profiles import epsilon_at

    pld = subset["accountants"]["pld"]
    exact = epsilon_at(1e-9, s=0.4)
    assert pld["valid"] is False and subset["accountant"] != "pld"
    assert exact <= pld["epsilon"] <= exact + 2e-3 and pld["epsilon"] < subset["epsilon"]


def test_tan_consistent_counts_under_add_remove_costs_double_on_replacement(graduates, tmp_path):
    """The catalogue states a derived guarantee for the mechanism's `relation`. Algorithm 1
    declared with relation add-remove and epsilon 1 is 1-DP for adding or removing a
    record, so replacing one costs 2 (docs/explanation/model.md#variables-subsets-and-neighbours), as it does for Laplace."""
    record(graduates, tmp_path, """\
        dataset: graduates
        releases:
          - id: tan
            reads: [degree, income]
            mechanism: {name: tan-consistent-counts, epsilon: 1, protects: [income], relation: add-remove}
          - id: laplace
            reads: [income]
            mechanism: {name: laplace, epsilon: 1, relation: add-remove}
        """)
    rows = table_of(graduates)
    assert rows["laplace"]["income"] == 2
    assert rows["tan"]["income"] == 2, "the add-remove relation of tan-consistent-counts was dropped"


# --------------------------------------------------------------------------
# Bad input: exit 2, every problem named by file and field, nothing written
# --------------------------------------------------------------------------

RELEASE = "{id: %s, reads: [income], mechanism: {name: laplace, epsilon: 1}}"

BAD_INPUTS = {
    "unknown dataset": (
        [("r.yaml", """\
            dataset: census
            releases:
              - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 1}}
            """)],
        ["r.yaml:1: dataset: ", "census"]),
    "unknown variable in reads": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [degree, salary]
                mechanism: {name: laplace, epsilon: 1}
            """)],
        ["r.yaml:4: releases[0].reads[1]: ", "salary"]),
    "unknown variable in a guarantee": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [income]
                mechanism: {name: laplace, epsilon: 1}
                guarantees:
                  - {protects: [salary], epsilon: 1}
            """)],
        ["r.yaml:7: releases[0].guarantees[0].protects[0]: ", "salary"]),
    "unknown variable in a family partition": (
        [("r.yaml", """\
            dataset: graduates
            families:
              - id: by-faculty
                partition: [faculty]
            releases:
              - {id: a, reads: [income], family: by-faculty, part: faculty=arts, mechanism: {name: laplace, epsilon: 1}}
            """)],
        ["r.yaml:4: families[0].partition[0]: ", "faculty"]),
    "negative epsilon in the second release": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: fine
                reads: [income]
                mechanism: {name: laplace, epsilon: 1}
              - id: bad
                reads: [income]
                mechanism:
                  name: laplace
                  epsilon: -1
            """)],
        ["r.yaml:10: releases[1].mechanism.epsilon: ", "-1"]),
    "NaN epsilon in YAML": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [income]
                mechanism: {name: laplace, epsilon: .nan}
            """)],
        ["r.yaml:5: releases[0].mechanism.epsilon: ", "nan"]),
    "NaN epsilon in JSON": (
        [("r.json", """\
            {"dataset": "graduates",
             "releases": [{"id": "a", "reads": ["income"], "mechanism": {"name": "laplace", "epsilon": NaN}}]}
            """)],
        ["r.json", "releases[0].mechanism.epsilon: ", "nan"]),
    "delta 1": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [income]
                mechanism: {name: gaussian, epsilon: 1, delta: 1}
            """)],
        ["r.yaml:5: releases[0].mechanism.delta: "]),
    "delta -0.1": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [income]
                mechanism: {name: declared}
                guarantees:
                  - {epsilon: 1, delta: -0.1}
            """)],
        ["r.yaml:7: releases[0].guarantees[0].delta: ", "-0.1"]),
    "negative rho": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [income]
                mechanism: {name: gaussian, rho: "-1/200"}
            """)],
        ["r.yaml:5: releases[0].mechanism.rho: "]),
    "duplicate id in one file": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - %s
              - %s
            """ % (RELEASE % "twin", RELEASE % "twin"))],
        ["r.yaml:4: ", "id", "twin"]),
    "duplicate id across two files": (
        [("r.yaml", "dataset: graduates\nreleases:\n  - %s\n" % (RELEASE % "twin")),
         ("s.yaml", "dataset: graduates\nreleases:\n  - %s\n" % (RELEASE % "twin"))],
        ["s.yaml:3: ", "id", "r.yaml:3", "twin"]),
    "duplicate of a recorded release": (
        [("r.yaml", "dataset: graduates\nreleases:\n  - %s\n" % (RELEASE % "recorded-one"))],
        ["r.yaml:3: ", "id", "recorded-one"]),
    "derived_from cycle": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - {id: a, reads: [], derived_from: [b]}
              - {id: b, reads: [], derived_from: [a]}
            """)],
        ["r.yaml:", "derived_from", "cycle"]),
    "unknown parent": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - {id: a, reads: [], derived_from: [ghost]}
            """)],
        ["r.yaml:3: ", "derived_from", "ghost"]),
    "malformed YAML": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - {id: a, reads: [income]
              - {id: b}
            """)],
        ["r.yaml:", "YAML"]),
    "malformed JSON": (
        [("r.json", '{"dataset": "graduates",\n "releases": [{"id": "a",}]}\n')],
        ["r.json:2", "JSON"]),
    "unknown mechanism": (
        [("r.yaml", """\
            dataset: graduates
            releases:
              - id: a
                reads: [income]
                mechanism: {name: staircase, epsilon: 1}
            """)],
        ["r.yaml:5: releases[0].mechanism.name: ", "staircase"]),
    "family member from another dataset": (
        [("r.yaml", """\
            dataset: farms
            releases:
              - id: a
                reads: [income]
                family: by-degree
                part: a
                mechanism: {name: laplace, epsilon: 1}
            """)],
        ["r.yaml:5: releases[0].family: ", "by-degree"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_names_file_and_field_and_writes_nothing(busy, tmp_path, case):
    files, expected = BAD_INPUTS[case]
    paths = [write(tmp_path, name, text) for name, text in files]
    before = dump_sqlite(busy)
    result = run_main(busy, "record", *paths)
    assert result.code == 2, (result.out, result.err)
    assert dump_sqlite(busy) == before
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert errors, result.err
    text = "\n".join(errors).replace(str(tmp_path) + os.sep, "")
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    assert "nothing was written" in result.err


def test_one_bad_release_among_several_records_none_through_the_console_script(busy, tmp_path):
    """The exit code of the installed command, in its own process."""
    path = write(tmp_path, "batch.yaml", """\
        dataset: graduates
        releases:
          - {id: one, reads: [income], mechanism: {name: laplace, epsilon: 1}}
          - {id: two, reads: [degree], mechanism: {name: geometric, epsilon: 0.5}}
          - {id: three, reads: [sex], mechanism: {name: laplace, epsilon: -2}}
          - {id: four, reads: [], derived_from: [one]}
        """)
    before = dump_sqlite(busy)
    result = run_process(busy, "record", path)
    assert result.returncode == 2
    assert dump_sqlite(busy) == before
    assert f"{path}:5: releases[2].mechanism.epsilon" in result.stderr
    assert result.stdout == ""


def test_unknown_dataset_exits_2_through_the_console_script(busy, tmp_path):
    path = write(tmp_path, "r.json", '{"dataset": "census", "releases": [%s]}' %
                 '{"id": "a", "reads": [], "mechanism": {"name": "post-processing"}}')
    before = dump_sqlite(busy)
    result = run_process(busy, "record", path)
    assert result.returncode == 2
    assert dump_sqlite(busy) == before
    assert str(path) in result.stderr and "dataset" in result.stderr and "census" in result.stderr


def test_every_problem_of_a_record_is_printed(busy, tmp_path):
    first = write(tmp_path, "a.yaml", """\
        dataset: graduates
        releases:
          - {id: a1, reads: [salary], mechanism: {name: laplace, epsilon: 1}}
        """)
    second = write(tmp_path, "b.yaml", """\
        dataset: graduates
        releases:
          - {id: b1, reads: [income], mechanism: {name: laplace, epsilon: -1}}
          - {id: b2, reads: [income], mechanism: {name: staircase}}
        """)
    result = run_main(busy, "record", first, second)
    assert result.code == 2
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 3, result.err
    assert any(f"{first}:3" in e for e in errors)
    assert sum(f"{second}:" in e for e in errors) == 2


def test_a_bad_dataset_file_exits_2_and_writes_nothing(graduates, tmp_path):
    path = write(tmp_path, "bad.dataset.yaml", """\
        dataset: census
        delta: 1
        variables:
          - {name: age}
        """)
    before = dump_sqlite(graduates)
    result = run_main(graduates, "dataset", "add", path)
    assert result.code == 2
    assert dump_sqlite(graduates) == before
    assert f"{path}:2: delta" in result.err


def test_a_recorded_dataset_is_never_rewritten(graduates, tmp_path):
    same = run_main(graduates, "dataset", "add", tmp_path / "graduates.dataset.yaml")
    assert same.code == 0  # the same file again is a no-op
    before = dump_sqlite(graduates)
    changed = write(tmp_path, "changed.yaml", GRADUATES.replace("  - {name: sex}\n", "  - {name: sex}\n  - {name: age}\n"))
    result = run_main(graduates, "dataset", "add", changed)
    assert result.code == 2
    assert dump_sqlite(graduates) == before
    assert str(changed) in result.err


def test_the_table_and_subset_refuse_unknown_names(graduates):
    unknown = run_main(graduates, "subset", "salary")
    assert unknown.code == 2
    assert unknown.err.splitlines()[0].endswith("command line: VARIABLES: unknown variable or group 'salary' in 'graduates' "
                                        "(variables: degree, income, sex; groups: personal, protected, all)")
    assert "(did you mean 'income'?)" in run_main(graduates, "subset", "incme").err
    assert unknown.err.splitlines()[-1].endswith("docs/reference/commands.md.")


def test_dataset_list_and_show_give_the_names_the_other_commands_take(busy):
    listed = run_main(busy, "dataset", "list", "--json").json()
    assert [(d["dataset"], d["variables"], d["groups"]) for d in listed] == [("graduates", 3, 1), ("farms", 2, 0)]
    shown = run_main(busy, "dataset", "show", "-d", "graduates", "--json").json()
    assert [v["name"] for v in shown["variables"]] == ["degree", "income", "sex"]
    assert shown["groups"] == {"personal": ["income", "sex"]}
    text = run_main(busy, "dataset", "show", "-d", "graduates").out
    assert "  income\t" in text and "group personal = {income, sex}" in text
    unknown = run_main(busy, "dataset", "show", "-d", "census")
    assert unknown.code == 2 and "command line: --dataset: unknown dataset 'census'" in unknown.err


def test_an_error_footer_names_the_page_that_explains_the_first_field(graduates, tmp_path):
    typo = run_main(graduates, "record", write(tmp_path, "typo.yaml", """\
dataset: graduates
releases:
  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 1, sensitivty: 1}}
"""))
    assert typo.code == 2 and typo.err.splitlines()[-1].endswith("docs/reference/mechanisms.md.")
    unread = run_main(graduates, "record", write(tmp_path, "unread.yaml", """\
dataset: graduates
releases:
  - {id: a, reeds: [income], mechanism: {name: laplace, epsilon: 1, sensitivity: 1}}
"""))
    assert unread.code == 2 and unread.err.splitlines()[-1].endswith("docs/reference/file-formats.md.")
    unknown_dataset = run_main(graduates, "table", "-d", "census")
    assert unknown_dataset.code == 2 and unknown_dataset.err.splitlines()[-1].endswith("docs/reference/commands.md.")
    assert run_main(graduates, "table", "--dataset", "census").code == 2
    assert run_main(graduates, "table", "--delta", "1").code == 2
