"""Mechanisms run on data: `run`, `assess`, `sample-privacy` and `demo --example graduates`.

Most commands run in this process through the console entry point `ledger.cli.app:main`
(so exit codes are the installed command's); a representative few run as
`python -m ledger` subprocesses. Expected values are worked out here by hand:
the p%, frequency and (n,k) dominance flags of each cell; the bits a pair of
modular sums reveals, by enumerating the 8 equally likely values of three fair
bits; Tan's Table 2 as printed in the paper (section 5.1). "Nothing written" is
a dump of every table of the SQLite file, compared before and after.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import math
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from support import Run, cli_main

F = Fraction

SURVEY = """\
dataset: survey
variables:
  - {name: region, classification: public, categories: [N, S]}
  - {name: sex, categories: [f, m]}
  - {name: income, classification: sensitive}
  - {name: firm}
  - {name: turnover, classification: sensitive}
  - {name: wages, classification: sensitive}
  - {name: bit}
  - {name: height}
  - {name: weight}
caps:
  - {subset: [income], epsilon: 1}
"""

# Ten records; a name that is no variable, and an income outside every clipping interval.
DATA = """\
name,region,sex,income,firm,turnover,wages,bit,height,weight
Zebulon Quux-4471,N,f,12.5,firm-1,100,10,1,160,55
Ann,N,m,40,firm-2,5,0.5,1,172,70
Bo,S,f,987654.321,firm-3,3,0.3,0,181,82
Cy,S,m,7.25,firm-4,7,0.7,1,168,64
Di,N,f,20,firm-5,12,1.2,0,150,50
Ed,N,m,30,firm-6,8,0.8,1,175,77
Flo,S,f,25,firm-7,9,0.9,0,165,60
Gus,S,m,15,firm-8,11,1.1,1,185,90
Hal,N,f,35,firm-9,4,0.4,0,158,52
Ivy,S,m,45,firm-10,6,0.6,1,170,68
"""


@dataclass
class Ledger:
    """A SQLite ledger holding the survey dataset, and a folder for the files of a test."""

    path: Path
    directory: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def __call__(self, *args) -> Run:
        """`privacy-ledger --db URL ARGS` in this process."""
        return cli_main(self.url, *args)

    def process(self, *args) -> Run:
        """`python -m ledger --db URL ARGS` as its own process."""
        done = subprocess.run([sys.executable, "-m", "ledger", "--db", self.url, *map(str, args)], check=False,
                              capture_output=True, text=True, timeout=120, env=os.environ.copy())
        return Run(done.returncode, done.stdout, done.stderr)

    def file(self, name: str, content: str) -> Path:
        path = self.directory / name
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    def dump(self) -> list[str]:
        connection = sqlite3.connect(self.path)
        try:
            return list(connection.iterdump())
        finally:
            connection.close()

    def releases(self) -> dict[str, dict]:
        result = self("releases", "--json")
        assert result.code == 0, result.err
        return {release["id"]: release for release in result.json()}

    def run(self, mechanism: str, *options, data: Path | None = None, release_id: str = "r") -> Run:
        return self("run", mechanism, "--data", data or self.directory / "data.csv", "--id", release_id, *options)


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    ledger = Ledger(tmp_path / "l.db", tmp_path)
    added = ledger("dataset", "add", ledger.file("survey.yaml", SURVEY))
    assert added.code == 0, added.err
    ledger.file("data.csv", DATA)
    return ledger


def params(*pairs: str) -> list[str]:
    return [arg for pair in pairs for arg in ("-p", pair)]


# --------------------------------------------------------------------------
# run: output, record, digest
# --------------------------------------------------------------------------


def test_run_writes_the_output_records_it_and_its_digest(ledger):
    out = ledger.directory / "mean.csv"
    result = ledger.run("laplace-mean", "--out", out, "--seed", "3",
                        *params("column=income", "lower=0", "upper=100", "epsilon=1/2"), release_id="mean-income")
    assert result.code == 0, result.err
    assert "recorded mean-income" in result.err
    written = out.read_text(encoding="utf-8")
    released = pd.read_csv(out)
    assert released.columns.tolist() == ["variable", "statistic", "value"]
    assert released.iloc[0, :2].tolist() == ["income", "mean"]

    stored = ledger.releases()["mean-income"]
    assert stored["output"] == written
    assert stored["output_digest"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert stored["reads"] == ["income"]
    assert stored["guarantees"] == [{"protects": ["income"], "notion": "pure", "epsilon": 0.5, "epsilon_exact": "1/2",
                                     "delta": None, "rho": None, "relation": "replace"}]  # the figure shape
    # mean over the public n = 10, clipped to [0, 100]: sensitivity 10, scale 10 / (1/2) = 20
    mechanism = stored["mechanism"]["params"]
    assert (mechanism["n"], mechanism["sensitivity"], mechanism["scale"], mechanism["lower"], mechanism["upper"]) == \
        (10, 10.0, 20.0, 0.0, 100.0)
    text = "\n".join(ledger.dump())
    for planted in ("Zebulon Quux-4471", "987654.321", "firm-1"):
        assert planted not in text


def test_run_prints_the_output_when_no_file_is_given(ledger):
    result = ledger.run("modular-sum", *params("variable=bit", "modulus=2"), release_id="parity")
    assert result.code == 0, result.err
    # bits 1 1 0 1 0 1 0 1 0 1: six ones, 6 mod 2 = 0
    assert result.out == "variable,statistic,value\nbit,sum mod 2,0\n"
    stored = ledger.releases()["parity"]
    assert stored["output"] == result.out
    assert stored["output_digest"] == hashlib.sha256(result.out.encode()).hexdigest()
    assert stored["guarantees"] == []
    (pufferfish,) = stored["pufferfish"]
    assert pufferfish["kind"] == "perfect-sample-privacy" and pufferfish["parameters"]["n"] == 10


def test_tan_with_nonnegative_prints_the_derived_table_and_records_both(ledger):
    result = ledger.run("tan-consistent-counts", "--seed", "5", "--status", "planned",
                        *params("margin=region", "protected=sex", "epsilon=1", "nonnegative=yes"), release_id="t3")
    assert result.code == 0, result.err
    printed = pd.read_csv(io.StringIO(result.out))
    # by hand: N has 5 records (3 f, 2 m), S has 5 (2 f, 3 m)
    assert printed.groupby("region")["count"].sum().to_dict() == {"N": 5, "S": 5}
    assert (printed["count"] >= 0).all()
    stored = ledger.releases()
    assert set(stored) == {"t3", "t3-nonnegative"}
    assert stored["t3-nonnegative"]["output"] == result.out
    assert stored["t3-nonnegative"]["reads"] == [] and stored["t3-nonnegative"]["derived_from"] == ["t3"]
    assert stored["t3"]["status"] == stored["t3-nonnegative"]["status"] == "planned"
    assert stored["t3"]["guarantees"][0]["protects"] == ["sex"]
    table = {row["release"]: row["exact"] for row in ledger("table", "--json").json()["rows"]}
    assert (table["t3"]["region"], table["t3"]["sex"]) == ("inf", "1")
    assert (table["t3-nonnegative"]["region"], table["t3-nonnegative"]["sex"]) == ("0", "0")


def test_p_percent_from_the_command_line(ledger):
    result = ledger.run("p-percent", "--seed", "2", *params("contributor=firm", "linked=turnover,wages",
                                                            "cells=region", "p=0.1", "epsilon=1"), release_id="pp")
    assert result.code == 0, result.err
    printed = pd.read_csv(io.StringIO(result.out))
    assert sorted(printed["region"]) == ["N", "S"]
    for turnover, wages in zip(printed["turnover"], printed["wages"]):  # wages = turnover / 10, record by record
        assert turnover / wages == pytest.approx(10.0, rel=1e-12)
    stored = ledger.releases()["pp"]
    assert stored["guarantees"] == [] and stored["pufferfish"][0]["kind"] == "p-percent"
    assert stored["pufferfish"][0]["parameters"]["laplace_scale"] == pytest.approx(-4 * math.log(0.9), rel=1e-14)
    row = {r["release"]: r["exact"] for r in ledger("table", "--json").json()["rows"]}["pp"]
    assert [row[v] for v in ("firm", "turnover", "wages", "region", "income")] == ["inf", "inf", "inf", "inf", "0"]


def test_attribute_gaussian_reads_its_covariance_from_a_csv(ledger):
    covariance = ledger.file("covariance.csv", "attribute,height,weight\nheight,4,3\nweight,3,9\n")
    result = ledger.run("attribute-gaussian", "--covariance", covariance, "--seed", "1",
                        *params("query=weight", "protected=height", "diameters=2", "epsilon=0.5", "delta=1e-5"),
                        release_id="w")
    assert result.code == 0, result.err
    stored = ledger.releases()["w"]
    (pufferfish,) = stored["pufferfish"]
    assert pufferfish["kind"] == "dataset-attribute-privacy"
    assert (pufferfish["epsilon"], pufferfish["delta"]) == ("1/2", "1/100000")
    # (c * 3/4 * 2 / 0.5)^2 - (9 - 9/4)/10 with c^2 = 2 ln 125000
    assert stored["mechanism"]["params"]["sigma2"] == pytest.approx(18 * math.log(125000) - 0.675, rel=1e-12)


# --------------------------------------------------------------------------
# Budget first: exit 1, nothing written
# --------------------------------------------------------------------------


def test_a_run_that_would_break_a_cap_exits_1_and_writes_nothing(ledger):
    first = ledger.run("laplace-sum", *params("column=income", "lower=0", "upper=10", "epsilon=0.75"), release_id="a")
    assert first.code == 0, first.err
    dump = ledger.dump()
    refused = ledger.process("run", "laplace-sum", "--data", ledger.directory / "data.csv", "--id", "b",
                             *params("column=income", "lower=0", "upper=10", "epsilon=0.5"))
    assert refused.code == 1, refused.err
    assert "income" in refused.err and "nothing was written" in refused.err
    assert refused.out == ""  # no output was produced
    assert ledger.dump() == dump


# --------------------------------------------------------------------------
# Seeds and subsampling
# --------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_output_in_two_ledgers(ledger, tmp_path):
    other = Ledger(tmp_path / "other.db", tmp_path)
    assert other("dataset", "add", tmp_path / "survey.yaml").code == 0
    args = ("crosstab", "--seed", "42", *params("columns=region,sex", "epsilon=1"))
    first, second = ledger.run(*args), other.run(*args)
    assert first.code == second.code == 0
    assert first.out == second.out
    assert ledger.releases()["r"]["output_digest"] == other.releases()["r"]["output_digest"]


def test_sample_records_the_amplified_epsilon(ledger):
    """1 of 10 records: beta = 0.1, eps' = ln(1 + 0.1 (e - 1)) = 0.1586 (Balle, Barthe and Gaboardi 2018;
    Clifton et al.'s Theorem 2 gives 0.2639)."""
    result = ledger.run("laplace-sum", "--sample", "1", *params("column=income", "lower=0", "upper=10", "epsilon=1"))
    assert result.code == 0, result.err
    stored = ledger.releases()["r"]
    epsilon = F(stored["guarantees"][0]["epsilon"])
    assert 0 <= float(epsilon) - math.log(1 + 0.1 * (math.e - 1)) <= 1e-12
    mechanism = stored["mechanism"]["params"]
    assert (mechanism["sample_size"], mechanism["population"]) == (1, 10)
    assert mechanism["epsilon_before_subsampling"] == {"fraction": "1"}  # exact numbers are kept as fractions


def test_sample_on_a_gaussian_mechanism_exits_2(ledger):
    dump = ledger.dump()
    refused = ledger.process("run", "gaussian-sum", "--data", ledger.directory / "data.csv", "--id", "g",
                             "--sample", "5", *params("column=income", "lower=0", "upper=10", "rho=1"))
    assert refused.code == 2, refused.err
    assert any("sample" in line for line in refused.errors)
    assert ledger.dump() == dump


# --------------------------------------------------------------------------
# Perfect sample privacy (Rassouli, Rosas and Gündüz; docs/explanation/model.md#pufferfish-guarantees)
# --------------------------------------------------------------------------


def mutual_information_bits(mapping, n: int = 3) -> list[float]:
    """I(X_i; Y) for X uniform on {0,1}^n and Y = mapping(x), by enumerating the 2^n values."""
    xs = list(itertools.product((0, 1), repeat=n))
    p = 1 / len(xs)
    joint_y = Counter(mapping(x) for x in xs)
    bits = []
    for i in range(n):
        joint = Counter((x[i], mapping(x)) for x in xs)
        bits.append(sum(c * p * math.log2((c * p) / (0.5 * joint_y[y] * p)) for (xi, y), c in joint.items()))
    return bits


def test_two_perfectly_private_sums_together_reveal_the_third_bit(ledger):
    bits = ledger.file("bits.csv", "bit\n1\n0\n1\n")
    for release_id, rows in (("y1", "0,1"), ("y2", "0,1,2")):
        result = ledger.run("modular-sum", *params("variable=bit", "modulus=2", f"rows={rows}"),
                            data=bits, release_id=release_id)
        assert result.code == 0, result.err
    assert ledger.releases()["y1"]["output"].endswith("bit,sum mod 2,1\n")  # 1 xor 0
    assert ledger.releases()["y2"]["output"].endswith("bit,sum mod 2,0\n")  # 1 xor 0 xor 1

    # by enumeration: each alone leaks nothing; together (Y1 xor Y2 = X3) they give X3 exactly
    assert mutual_information_bits(lambda x: x[0] ^ x[1]) == [0, 0, 0]
    assert mutual_information_bits(lambda x: x[0] ^ x[1] ^ x[2]) == [0, 0, 0]
    expected = mutual_information_bits(lambda x: (x[0] ^ x[1], x[0] ^ x[1] ^ x[2]))
    assert expected == [0, 0, 1]

    (group,) = ledger("sample-privacy", "--json").json()
    assert (group["variable"], group["n"], group["modulus"], group["releases"]) == ("bit", 3, 2, ["y1", "y2"])
    assert group["alone"] == {"y1": pytest.approx(0, abs=1e-12), "y2": pytest.approx(0, abs=1e-12)}
    assert group["together_bits"] == pytest.approx(expected, abs=1e-12)
    assert group["together_max_bits"] == pytest.approx(1, abs=1e-12)
    assert group["perfect_together"] is False
    text = ledger("sample-privacy").out
    assert "REVEAL record 2" in text


def test_y_equal_to_one_sample_is_refused(ledger):
    """The issue's Y2 = X2 is not perfectly sample-private: I(X2; Y2) = H(X2) = 1 bit."""
    assert mutual_information_bits(lambda x: x[1]) == [0, 1, 0]
    bits = ledger.file("bits.csv", "bit\n1\n0\n1\n")
    dump = ledger.dump()
    refused = ledger.process("run", "modular-sum", "--data", bits, "--id", "y", *params("variable=bit", "modulus=2",
                                                                                       "rows=1"))
    assert refused.code == 2, refused.err
    assert any("rows" in line and "1 bit" in line for line in refused.errors), refused.err
    assert ledger.dump() == dump


# --------------------------------------------------------------------------
# assess: the p%, frequency and (n,k) dominance rules, by hand
# --------------------------------------------------------------------------

MAGNITUDES = """\
sector,firm,turnover
A,a1,100
A,a2,5
A,a3,3
B,b1,40
B,b2,30
B,b3,20
B,b4,10
C,c1,50
C,c2,50
D,d1,10
D,d1,20
D,d2,25
D,d3,25
D,d4,20
E,e1,60
E,e2,30
E,e3,6
"""


def assessed(ledger, *options) -> tuple[dict, dict]:
    data = ledger.file("magnitudes.csv", MAGNITUDES)
    result = ledger("assess", "--data", data, "--cells", "sector", "--contributor", "firm", "--value", "turnover",
                    "--json", *options)
    assert result.code == 0, result.err
    document = result.json()
    return ({cell["sector"]: cell for cell in document["cells"]},
            {row["status"]: (row["cells"], row["respondents"], row["value"]) for row in document["summary"]})


def test_assess_with_the_default_rules(ledger):
    """p = 10, fewer than 3 contributors, (2, 85) dominance:
    A 100, 5, 3:     X - x1 - x2 = 3 < 10;          top 2 = 105 > 91.8;  3 contributors
    B 40, 30, 20, 10: 30 >= 4;                      70 <= 85;            4
    C 50, 50:        0 < 5;                         100 > 85;            2 < 3
    D 30 (10 + 20, one respondent), 25, 25, 20: 45 >= 3; 55 <= 85;       4
    E 60, 30, 6:     6 < 6 is false (the rule is strict); 90 > 81.6;     3"""
    cells, summary = assessed(ledger)
    flags = {sector: (cell["p%"], cell["frequency"], cell["dominance"], cell["status"])
             for sector, cell in cells.items()}
    assert flags == {
        "A": (True, False, True, "unsafe"),
        "B": (False, False, False, "safe"),
        "C": (True, True, True, "unsafe"),
        "D": (False, False, False, "safe"),
        "E": (False, False, True, "unsafe"),
    }
    assert cells["A"]["rules"] == "p%,dominance" and cells["E"]["rules"] == "dominance" and cells["B"]["rules"] == ""
    assert (cells["D"]["contributors"], cells["D"]["largest"], cells["D"]["second"], cells["D"]["total"]) == \
        (4, 30, 25, 100)
    # safe: B, D (4 + 4 respondents, 100 + 100); unsafe: A, C, E (3 + 2 + 3, 108 + 100 + 96)
    assert summary == {"safe": (2, 8, 200), "unsafe": (3, 8, 304)}


def test_assess_with_other_rule_parameters(ledger):
    """p = 20, fewer than 4 contributors, (1, 50) dominance:
    A: 3 < 20; 3 < 4; 100 > 54        B: 30 >= 8; 4; 40 <= 50
    C: 0 < 10; 2 < 4; 50 > 50 false   D: 45 >= 6; 4; 30 <= 50
    E: 6 < 12; 3 < 4; 60 > 48"""
    cells, summary = assessed(ledger, "--p", "20", "--threshold", "4", "--dominance", "1,50")
    assert {sector: cell["rules"] for sector, cell in cells.items()} == {
        "A": "p%,frequency,dominance", "B": "", "C": "p%,frequency", "D": "", "E": "p%,frequency,dominance"}
    assert summary == {"safe": (2, 8, 200), "unsafe": (3, 8, 304)}


# --------------------------------------------------------------------------
# The graduates demo (Tan, section 5: Table 2 and a Table-3-like release)
# --------------------------------------------------------------------------

# Tan (2023), Table 2: graduates by degree programme and annual income band.
TABLE_2 = {
    "Bachelor of Arts": [231, 5, 10, 47, 68, 54, 33, 12, 2],
    "Bachelor of Science": [392, 1, 13, 44, 92, 131, 75, 21, 15],
    "Bachelor of Engineering": [777, 2, 25, 78, 218, 237, 153, 46, 18],
}
BANDS = ["<$30,000", "$30,000 - $39,999", "$40,000 - $49,999", "$50,000 - $59,999", "$60,000 - $79,999",
         "$80,000 - $99,999", "$100,000 - $119,999", "$120,000 and above"]


def demo(directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "LEDGER_DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "ledger", "demo", "--example", "graduates", *args], cwd=directory,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def printed_tables(output: str) -> tuple[dict, dict]:
    rows = re.findall(r"^(Bachelor of \w+)\s+((?:-?\d+\s*)+)$", output, flags=re.MULTILINE)
    assert len(rows) == 6, output
    parsed = [(name, [int(v) for v in values.split()]) for name, values in rows]
    return dict(parsed[:3]), dict(parsed[3:])


def ledger_rows(output: str) -> dict[str, list[str]]:
    lines = [line for line in output.splitlines() if line.startswith("| ")]
    cells = [[part.strip() for part in line.strip().strip("|").split("|")] for line in lines]
    return {row[0]: row[1:] for row in cells}


def test_graduates_demo(tmp_path):
    first = demo(tmp_path, "--seed", "1")
    assert first.returncode == 0, first.stderr
    exact, released = printed_tables(first.stdout)
    assert exact == TABLE_2
    headers = [line for line in first.stdout.splitlines() if line.lstrip().startswith("Total")]
    assert len(headers) == 2
    for header in headers:
        assert [band in header for band in BANDS] == [True] * 8
        assert [header.index(band) for band in BANDS] == sorted(header.index(band) for band in BANDS)
    for programme, (total, *cells) in released.items():
        assert total == TABLE_2[programme][0] and sum(cells) == total and len(cells) == 8  # exact margins, integers
    assert released != exact  # the cells are noised
    table = ledger_rows(first.stdout)
    assert table["Release"] == ["{degree_programme}", "{income_band}", "whole dataset"]
    assert table["table-3"] == ["∞", "1", "∞"]

    database = tmp_path / "ledger.db"
    before = sqlite3.connect(database)
    dump = list(before.iterdump())
    before.close()
    again = demo(tmp_path, "--seed", "1")
    assert again.returncode == 0, again.stderr
    assert "nothing recorded" in again.stdout
    assert printed_tables(again.stdout) == (exact, released)
    after = sqlite3.connect(database)
    assert list(after.iterdump()) == dump
    after.close()


def test_graduates_demo_refuses_a_ledger_with_other_data(ledger):
    dump = ledger.dump()
    env = {key: value for key, value in os.environ.items() if key != "LEDGER_DATABASE_URL"}
    refused = subprocess.run([sys.executable, "-m", "ledger", "--db", ledger.url, "demo", "--example", "graduates"],
                             capture_output=True, text=True, timeout=120, env=env, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "other data" in refused.stderr
    assert ledger.dump() == dump


# --------------------------------------------------------------------------
# Bad input: exit 2, the field named, nothing written
# --------------------------------------------------------------------------

PPERCENT = ("contributor=firm", "linked=turnover,wages", "cells=region", "p=0.1", "epsilon=1")
ATTRIBUTE = ("query=weight", "protected=height", "diameters=2", "epsilon=0.5", "delta=1e-5")
LAPLACE = ("column=income", "lower=0", "upper=10", "epsilon=1")


def replaced(pairs: tuple[str, ...], **values) -> list[str]:
    pairs = [p for p in pairs if p.split("=")[0] not in values] + [f"{k}={v}" for k, v in values.items()]
    return params(*pairs)


BAD_RUNS = {
    "text contributions": ("p-percent", "text.csv", [], params(*PPERCENT), "linked"),
    "negative contributions": ("p-percent", "negative.csv", [], params(*PPERCENT), "linked"),
    "text summed": ("laplace-sum", "data.csv", [], replaced(LAPLACE, column="region"), "column"),
    "negative sample value": ("modular-sum", "negative.csv", [], params("variable=bit", "modulus=2"), "variable"),
    "p = 0": ("p-percent", "data.csv", [], replaced(PPERCENT, p=0), "p"),
    "p = 1": ("p-percent", "data.csv", [], replaced(PPERCENT, p=1), "p"),
    "p = 1.5": ("p-percent", "data.csv", [], replaced(PPERCENT, p=1.5), "p"),
    "epsilon = 0": ("laplace-sum", "data.csv", [], replaced(LAPLACE, epsilon=0), "epsilon"),
    "epsilon < 0": ("laplace-sum", "data.csv", [], replaced(LAPLACE, epsilon=-1), "epsilon"),
    "epsilon NaN": ("crosstab", "data.csv", [], params("columns=region", "epsilon=nan"), "epsilon"),
    "delta = 0": ("attribute-gaussian", "data.csv", ["--covariance", "covariance.csv"],
                  replaced(ATTRIBUTE, delta=0), "delta"),
    "delta = 1": ("attribute-gaussian", "data.csv", ["--covariance", "covariance.csv"],
                  replaced(ATTRIBUTE, delta=1), "delta"),
    "empty table": ("crosstab", "empty.csv", [], params("columns=region", "epsilon=1"), "data"),
    "protected variable not in the data": ("tan-consistent-counts", "no-sex.csv", [],
                                           params("margin=region", "protected=sex", "epsilon=1"), "sex"),
    "protected attribute not in the data": ("attribute-gaussian", "no-height.csv", ["--covariance", "covariance.csv"],
                                            params(*ATTRIBUTE), "protected"),
    "covariance not PSD": ("attribute-gaussian", "data.csv", ["--covariance", "not-psd.csv"], params(*ATTRIBUTE),
                           "covariance"),
    "unknown mechanism": ("laplace-median", "data.csv", [], params(*LAPLACE), "mechanism"),
    "missing parameter": ("laplace-sum", "data.csv", [], params("column=income", "lower=0", "upper=10"), "epsilon"),
    "--param without =": ("laplace-sum", "data.csv", [], params(*LAPLACE, "epsilon1"), "--param"),
    "no such data file": ("crosstab", "missing.csv", [], params("columns=region", "epsilon=1"), "--data"),
    "malformed CSV": ("crosstab", "malformed.csv", [], params("columns=region", "epsilon=1"), "--data"),
    "binary data file": ("crosstab", "binary.csv", [], params("columns=region", "epsilon=1"), "--data"),
    "--out in a missing folder": ("crosstab", "data.csv", ["--out", "no-such-folder/out.csv"],
                                  params("columns=region", "epsilon=1"), "--out"),
    "bad status": ("crosstab", "data.csv", ["--status", "released"], params("columns=region", "epsilon=1"),
                   "--status"),
}


@pytest.fixture
def bad_files(ledger) -> Ledger:
    frame = pd.read_csv(io.StringIO(DATA))
    frame.assign(turnover=["100", "5", "three"] + frame["turnover"].astype(str).tolist()[3:]).to_csv(
        ledger.directory / "text.csv", index=False)
    frame.assign(turnover=-frame["turnover"], bit=-frame["bit"]).to_csv(ledger.directory / "negative.csv", index=False)
    ledger.file("empty.csv", DATA.splitlines()[0] + "\n")
    frame.drop(columns="sex").to_csv(ledger.directory / "no-sex.csv", index=False)
    frame.drop(columns="height").to_csv(ledger.directory / "no-height.csv", index=False)
    ledger.file("covariance.csv", "attribute,height,weight\nheight,4,3\nweight,3,9\n")
    ledger.file("not-psd.csv", "attribute,height,weight\nheight,1,2\nweight,2,1\n")  # eigenvalues 3 and -1
    ledger.file("malformed.csv", "region,sex\nN,f\nS,m,extra,fields\n")
    (ledger.directory / "binary.csv").write_bytes(b"\xff\xfe\x00\x81region\x00\x9c\n\x80\x81")
    return ledger


@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_bad_input_exits_2_names_the_field_and_writes_nothing(bad_files, case):
    mechanism, data, options, pairs, field = BAD_RUNS[case]
    options = [bad_files.directory / o if o.endswith(".csv") else o for o in options]
    dump = bad_files.dump()
    result = bad_files.run(mechanism, *options, *pairs, data=bad_files.directory / data)
    assert result.code == 2, (result.code, result.err)
    assert result.errors and any(field in line for line in result.errors), result.err
    assert "nothing was written" in result.err
    assert result.out == ""
    assert bad_files.dump() == dump


def test_bad_input_exit_codes_as_a_process(bad_files):
    dump = bad_files.dump()
    for args, field in [
        (["run", "crosstab", "--data", bad_files.directory / "missing.csv", "--id", "x", "-p", "columns=region",
          "-p", "epsilon=1"], "--data"),
        (["run", "p-percent", "--data", bad_files.directory / "data.csv", "--id", "x",
          *replaced(PPERCENT, p=1.5)], "p"),
    ]:
        result = bad_files.process(*args)
        assert result.code == 2, result.err
        assert any(field in line for line in result.errors), result.err
    assert bad_files.dump() == dump


def test_assess_refuses_non_numeric_and_negative_contributions(ledger):
    for name, content in (("text.csv", "sector,firm,turnover\nA,a1,100\nA,a2,five\n"),
                          ("negative.csv", "sector,firm,turnover\nA,a1,100\nA,a2,-5\n")):
        result = ledger("assess", "--data", ledger.file(name, content), "--cells", "sector", "--contributor", "firm",
                        "--value", "turnover")
        assert result.code == 2, result.err
        assert any("turnover" in line and "value" in line for line in result.errors), result.err
