"""A dataset's approximate allowance: the share of every delta a figure is stated at that its
(epsilon, delta) releases' deltas may use together, fixed when the dataset is recorded
(docs/explanation/accounting.md). The Rényi filter's 22 orders share the rest.

One ledger per allowance (1/4; 0, which admits no approximate release; the default 1/2): every
view prints the same figure for the same subset (`subset`, `table`, `pairs`, `cap list`, the
Python API, the Markdown report, the registry export), and that figure is the one written here
from the closed forms: at each fixed order a, a * rho converted by Canonne, Kamath and Steinke
(2020) Prop 12 at (1 - allowance) x delta / 22, the smallest, plus the approximate epsilons
(conftest._reference_filter with the dataset's allowance).
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction as F

import pytest
from conftest import _reference_filter
from support import cli_main, cli_ok, tick_ledger_clock

import ledger as ledger_api
from ledger.core.numbers import format_number

DELTA = 1e-6
RHO_XY, RHO_X = F(1, 50), F(1, 100)  # a Gaussian reading {x, y}, another reading {x}
APPROX = (F(1, 10), F(2, 10**7))  # (epsilon, delta) of a release reading {y}: within 1/4 of 1e-6


@pytest.fixture(autouse=True)
def ticking(monkeypatch):
    tick_ledger_clock(monkeypatch)


def dataset_text(allowance: str | None) -> str:
    return textwrap.dedent(f"""\
        dataset: d
        delta: 1e-6
        self_approval: true
        {'' if allowance is None else f'allowance: "{allowance}"'}
        variables: [{{name: x}}, {{name: y}}, {{name: z}}]
        caps:
          - {{name: cx, subset: [x], epsilon: 100, delta: 1e-6, filter: running}}
          - {{name: cxy, subset: [x, y], epsilon: 100, delta: 1e-6, filter: running}}
        """)


def releases_text(approximate: bool) -> str:
    text = ("dataset: d\nreleases:\n"
            f"  - {{id: g1, reads: [x, y], mechanism: {{name: gaussian, rho: \"{RHO_XY}\"}}}}\n"
            f"  - {{id: g2, reads: [x], mechanism: {{name: gaussian, rho: \"{RHO_X}\"}}}}\n")
    if approximate:
        text += (f"  - {{id: ap, reads: [y], mechanism: {{name: declared}}, guarantees: [{{protects: [y], "
                 f"epsilon: \"{APPROX[0]}\", delta: \"{APPROX[1]}\"}}]}}\n")
    return text


def expected(subset: str, allowance: F, approximate: bool) -> float:
    """The running figure of `subset` at DELTA, from the closed forms."""
    rho = {"x": RHO_XY + RHO_X, "y": RHO_XY, "xy": RHO_XY + RHO_X}[subset]
    with_approx = approximate and "y" in subset
    return _reference_filter(rho=rho, approx_epsilon=APPROX[0] if with_approx else 0,
                             approx_delta=APPROX[1] if with_approx else 0, delta=DELTA, allowance=float(allowance))


def close(found, reference: float) -> bool:
    return math.isclose(float(found), reference, rel_tol=1e-9)


def make_ledger(tmp_path, allowance: str | None) -> tuple[str, bool]:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(dataset_text(allowance))
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    approximate = allowance != "0"
    (tmp_path / "r.yaml").write_text(releases_text(approximate))
    cli_ok(url, "record", tmp_path / "r.yaml")
    return url, approximate


@pytest.mark.parametrize("allowance", ["1/4", "0", None])
def test_every_view_prints_the_figure_the_dataset_allowance_gives(tmp_path, allowance):
    url, approximate = make_ledger(tmp_path, allowance)
    share = F(1, 2) if allowance is None else F(allowance)
    x, y, xy = (expected(s, share, approximate) for s in ("x", "y", "xy"))
    if allowance is not None:  # the allowance matters: the figure at the default is another one
        assert not close(_reference_filter(rho=RHO_XY + RHO_X, delta=DELTA), x)

    subset = {s: cli_ok(url, "subset", *s, "--json").json() for s in ("x", "y", "xy")}
    assert close(subset["x"]["epsilon"], x) and close(subset["y"]["epsilon"], y) and close(subset["xy"]["epsilon"], xy)
    table = cli_ok(url, "table", "--json").json()
    assert close(table["total_shown"]["values"]["x"], x) and close(table["total_shown"]["values"]["y"], y)
    own = {row["release"]: row["values"]["x"] for row in table["rows"]}  # a release's own cell: it alone
    assert close(own["g1"], _reference_filter(rho=RHO_XY, delta=DELTA, allowance=float(share)))
    assert close(own["g2"], _reference_filter(rho=RHO_X, delta=DELTA, allowance=float(share)))
    pairs = {tuple(e["subset"]): e for e in cli_ok(url, "pairs", "--json").json()}
    assert close(pairs[("x", "y")]["epsilon"], xy)
    caps = {c["cap"]: c for c in cli_ok(url, "cap", "list", "--json").json()}
    assert close(caps["cx"]["current"], x) and close(caps["cxy"]["current"], xy)
    said = "of half the delta each" if allowance is None else f"of the {1 - share} of the delta"
    assert said in caps["cx"]["theorem"], caps["cx"]["theorem"]  # the filter's sentence names its share

    api = ledger_api.open(url)
    assert close(api.subset(["x", "y"]).epsilon, xy)
    assert close(api.table()["x"]["All releases"], x) and close(api.table()["y"]["All releases"], y)
    frame = api.pairs()
    assert close(frame[(frame.variable_1 == "x") & (frame.variable_2 == "y")].epsilon.iloc[0], xy)
    assert {c.cap.name: close(c.current, {"cx": x, "cxy": xy}[c.cap.name]) for c in api.caps()} == \
        {"cx": True, "cxy": True}

    report = tmp_path / "report.md"
    cli_ok(url, "report", "--format", "md", "--out", report)
    text = report.read_text()
    cells = [_reference_filter(rho=rho, delta=DELTA, allowance=float(share)) for rho in (RHO_XY, RHO_X)]
    for figure in (x, y, xy, *cells):  # (the risk table, the pairs, the headline: printed to 4 places)
        assert f"| {format_number(figure)} |" in text or f"**{format_number(figure)}**" in text, (figure, text[:3000])
    words = "half" if allowance is None else allowance
    assert f"approximate deltas drawn from its allowance ({words})" in text

    record = cli_ok(url, "export", "registry", "--tier", "3", "--out", "-", "--json").json()
    loss = record["deployment"]["privacy_loss"]
    assert close(loss["privacy_parameters"]["epsilon"], xy), loss  # the protected variables: {x, y, z}


def test_record_and_check_refuse_an_approximate_release_past_the_dataset_allowance(tmp_path):
    url, _ = make_ledger(tmp_path, "1/4")
    # 2e-7 held on {y}: 1e-7 more fits half of 1e-6, not a quarter (2.5e-7)
    (tmp_path / "more.yaml").write_text(
        "dataset: d\nreleases:\n  - {id: more, reads: [y], mechanism: {name: declared}, "
        "guarantees: [{protects: [y], epsilon: \"1/10\", delta: \"1e-7\"}]}\n")
    before = cli_ok(url, "releases", "--json").out
    for command in ("check", "record"):
        refused = cli_main(url, command, tmp_path / "more.yaml")
        assert refused.code == 1, (command, refused.out, refused.err)
        assert "{y}" in refused.out + refused.err and "1/4" in refused.out + refused.err, refused.err
    assert cli_ok(url, "releases", "--json").out == before  # nothing written


def test_an_allowance_of_0_admits_no_approximate_release(tmp_path):
    url, _ = make_ledger(tmp_path, "0")
    (tmp_path / "ap.yaml").write_text(releases_text(True).split("  - {id: g2")[0].replace("g1", "g3") +
                                      releases_text(True).split("\n")[-2] + "\n")
    refused = cli_main(url, "record", tmp_path / "ap.yaml")
    assert refused.code == 1 and "{y}" in refused.out + refused.err, (refused.out, refused.err)


@pytest.mark.parametrize("value", ["1", "3/2", "-1/4", "half"])
def test_a_bad_allowance_is_refused_naming_the_file_and_the_field(tmp_path, value):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(dataset_text(value))
    refused = cli_main(url, "dataset", "add", tmp_path / "d.yaml")
    assert refused.code == 2 and "d.yaml" in refused.err and "allowance" in refused.err, refused.err
    assert cli_main(url, "dataset", "list", "--json").code != 0 or "d" not in cli_main(
        url, "dataset", "list", "--json").out


def test_the_allowance_is_kept_exactly_and_never_changed(tmp_path):
    url, _ = make_ledger(tmp_path, "0.25")
    assert ledger_api.open(url).dataset("d").allowance == F(1, 4)
    (tmp_path / "d2.yaml").write_text(dataset_text("1/2"))
    refused = cli_main(url, "dataset", "amend", tmp_path / "d2.yaml", "--reason", "more room")
    assert refused.code == 2 and "allowance" in refused.err, refused.err
    (tmp_path / "d3.yaml").write_text(dataset_text(None))  # (a file without it asks for the default)
    assert cli_main(url, "dataset", "amend", tmp_path / "d3.yaml", "--reason", "r").code == 2
    again = cli_main(url, "dataset", "add", tmp_path / "d2.yaml")  # (adding it again is no way round)
    assert again.code == 2 and "allowance" in again.err, again.err
    assert ledger_api.open(url).dataset("d").allowance == F(1, 4)
    assert cli_main(url, "audit", "verify").code == 0
