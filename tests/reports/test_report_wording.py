"""One wording and one precision for the same figure in every output.

The graduates ledger of the README: degree is public and read exactly by Tan's
consistent counts (its ∞ is expected), income is protected and read by a Gaussian
(sigma 10: rho 1/200) that a pure-epsilon cap cannot bound, region is public and
covered by a guarantee, so it is *not* released exactly. Figures are worked out from
the parameters beside each assertion.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path


from test_report_helpers import clock, context_of, record, run_main

from ledger.reporting.write import render

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
T = lambda month, day, hour=9: datetime(2024, month, day, hour, 0, tzinfo=UTC)  # noqa: E731

DATASET = """\
dataset: graduates
delta: 1e-9
variables:
  - {name: degree, classification: public}
  - {name: region, classification: public}
  - {name: income, classification: sensitive}
  - {name: sex, classification: identifying}
"""

RELEASES = """\
dataset: graduates
releases:
  - id: consistent-income
    reads: [degree, income]
    mechanism: {name: tan-consistent-counts, epsilon: 1}
    guarantees: [{protects: [income], epsilon: 1}]
  - id: mean-income
    reads: [income]
    mechanism: {name: gaussian, sigma: 10, sensitivity: 1}
  - id: by-region
    reads: [region, sex]
    mechanism: {name: geometric, epsilon: 1/8}
"""


def ledger(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "graduates.yaml", DATASET, T(1, 1), command="dataset")
    record(url, tmp_path, "releases.yaml", RELEASES, T(1, 2))
    # caps set after the releases (a cap already over is set all the same, and shown over)
    with clock(T(1, 3)):
        assert run_main(url, "cap", "set", "income", "--epsilon", "5", "-d", "graduates").code == 0
        assert run_main(url, "cap", "set", "all", "--epsilon", "10", "--delta", "1e-9", "-d", "graduates").code == 0
    return url


def report(url: str, fmt: str) -> str:
    return render(context_of(url, "graduates", charts=False), fmt).decode()


def test_an_infinity_says_why_in_the_same_words_in_every_format(tmp_path):
    url = ledger(tmp_path)
    md, tex, html = report(url, "md"), report(url, "tex"), report(url, "html")
    # degree: public and read with no guarantee (Tan's margin): released exactly, never "not protected"
    assert "| consistent-income | ∞ (public, released exactly) | 0 | 1 | 0 |" in md
    assert "∞ (not protected)" not in md  # no protected variable is read without a bound
    assert r"\cellcolor{unprotected}" not in tex  # nothing to shade: degree's ∞ is expected
    assert "∞ (public, released exactly)" in tex.replace(r"$\infty$", "∞")
    assert ">∞ (not protected)<" not in html and '<td class="num public">∞ (public, released exactly)</td>' in html
    # the Gaussian against the pure-epsilon cap on income: protected (by rho), with no pure-epsilon bound
    assert "| income | {income} | epsilon | 5 | ∞ (no pure-epsilon bound) | -∞ | over | " \
           "mean-income (∞ (no pure-epsilon bound)), consistent-income (1) |" in md
    # the cap on all: ∞ because degree (public) is read exactly
    assert "consistent-income (∞ (public, released exactly))" in md


def test_public_variables_are_not_called_released_exactly_when_a_guarantee_covers_them(tmp_path):
    url = ledger(tmp_path)
    md = report(url, "md")
    # region is public and covered by by-region's guarantee: 1/8, not "released exactly"
    assert "| Public variables (not in the headline) | {degree} ∞ (public, released exactly), {region} 0.125 |" in md
    assert "Public, released exactly" not in md
    table = run_main(url, "table", "-d", "graduates").out
    assert "public variables (not in the headline): degree ∞ (public, released exactly), region 0.125" in table
    assert "public, released exactly: " not in table


def test_a_report_prints_each_figure_as_the_command_line_does(tmp_path, reference_filter):
    url = ledger(tmp_path)
    md = report(url, "md")
    # mean-income alone: rho 1/200 as a running figure at 1e-9 (CKS 2020 Prop 12 at the 22 fixed
    # orders, 1e-9 / 44 each: ≈ 0.6272, rounded up to 0.6273), as `table` prints it
    own = reference_filter(rho=Fraction(1, 200), delta=1e-9)
    table = run_main(url, "table", "-d", "graduates").out
    cell = next(line for line in table.splitlines() if line.startswith("| mean-income")).split("|")[4].strip()
    assert float(cell) >= own and float(cell) - own < 1e-4
    assert f"| mean-income | 0 | 0 | {cell} | 0 | {cell} |" in md  # 4 decimals, never 0.57
    # a driver's charge as the CLI writes it: 0.125, never 1.25e-1
    assert "by-region (0.125)" in md and "e-1" not in md
    # `releases` shows the same own charge as `table`
    line = next(l for l in run_main(url, "releases").out.splitlines() if l.startswith("mean-income"))
    assert f"ε {cell} at δ 1 × 10⁻⁹" in line


def test_a_cap_at_a_delta_is_described_once_and_correctly(tmp_path):
    url = ledger(tmp_path)
    with clock(T(1, 4)):
        out = run_main(url, "cap", "set", "sex", "--epsilon", "3", "--delta", "1e-9", "-d", "graduates").out
        removed = run_main(url, "cap", "remove", "all", "--reason", "replaced", "-d", "graduates").out
    assert "cap sex on {sex}: epsilon 3 at delta 1 × 10⁻⁹" in out
    assert "at delta 3" not in out
    assert "remove cap all (epsilon 10 at delta 1 × 10⁻⁹ on the whole dataset)" in removed
    html, md = report(url, "html"), report(url, "md")  # the Cap history is in the HTML report
    assert "epsilon 10 at delta 1 × 10⁻⁹ on the whole dataset" in html and "at delta 10" not in html
    assert "| sex | {sex} | epsilon at delta 1 × 10⁻⁹ " in md


def test_the_csv_exact_columns_hold_exact_values_only(tmp_path, reference_filter):
    url = ledger(tmp_path)
    rows = {row[0]: row for row in csv.reader(io.StringIO(report(url, "csv")))}
    header = rows["release"]
    income, exact = header.index("{income}"), header.index("{income} exact")
    # the Gaussian's figure is a zCDP conversion: a float at or above it, and no exact value (JSON's null)
    own = reference_filter(rho=Fraction(1, 200), delta=1e-9)
    assert float(rows["mean-income"][income]) >= own and float(rows["mean-income"][income]) - own < 1e-9
    assert rows["mean-income"][exact] == ""
    assert rows["consistent-income"][exact] == "1" and rows["by-region"][header.index("{sex} exact")] == "1/8"
    assert math.isinf(float(rows["consistent-income"][header.index("{degree}")]))


def test_table_with_an_accountant_states_its_whole_headline_by_that_accountant(tmp_path):
    """`table --accountant rdp` states the protected subset by rdp too, never by the smallest valid
    figure beside a worst variable by rdp (a subset below one of its members)."""
    import re

    url = ledger(tmp_path)
    for accountant in ("rdp", "basic"):
        text = run_main(url, "table", "-d", "graduates", "--accountant", accountant).out
        protected = float(re.search(r"\{income, sex\}: epsilon ([0-9.]+)", text).group(1))
        worst = float(re.search(r"worst protected variable: income \(([0-9.]+)\)", text).group(1))
        pair = float(re.search(r"worst protected pair: \{income, sex\} \(([0-9.]+)\)", text).group(1))
        alone = run_main(url, "subset", "protected", "-d", "graduates", "--accountant", accountant).out
        assert protected == float(re.search(r"epsilon ([0-9.]+)", alone).group(1))  # the same accountant's figure
        income = run_main(url, "subset", "income", "-d", "graduates", "--accountant", accountant).out
        assert worst == float(re.search(r"epsilon ([0-9.]+)", income).group(1))
        assert protected >= worst and pair == protected  # {income, sex} is the protected subset here


def test_the_meeting_pack_lists_every_cap_of_the_period_new_and_removed_ones_too(tmp_path):
    """A cap set and removed in the period is in "How each cap moved", and one set in the period
    shows no status or figure at a date when it did not exist."""
    url = ledger(tmp_path)  # caps income and all set on T(1, 3)
    with clock(T(2, 2)):
        assert run_main(url, "cap", "set", "sex", "--epsilon", "1", "-d", "graduates").code == 0
    with clock(T(2, 3)):
        assert run_main(url, "cap", "set", "region", "--epsilon", "2", "-d", "graduates").code == 0
    with clock(T(2, 4)):
        assert run_main(url, "cap", "remove", "region", "--reason", "not needed", "-d", "graduates").code == 0
        assert run_main(url, "cap", "remove", "all", "--reason", "replaced", "-d", "graduates").code == 0
    md = render(context_of(url, "graduates", since=T(2, 1), charts=False), "md").decode()
    moved = md.split("How each cap moved")[1].split("\n## ")[0]
    # by-region reads sex at 1/8: the new cap's figure now is 0.125; it had none then
    assert "| sex | {sex} | epsilon | 1 | — | 0.125 | — | new → ok |" in moved
    assert "| region | {region} | epsilon | 2 | — | — | — | new → removed |" in moved
    # all existed then (over: consistent-income reads degree, public, exactly) and was removed since
    assert "| all | {degree, region, income, sex} | epsilon at delta 1 × 10⁻⁹ | 10 | ∞ (public, released exactly) " \
           "| — | — | over → removed |" in moved
    assert "| income | {income} | epsilon | 5 | ∞ (no pure-epsilon bound) | ∞ (no pure-epsilon bound) |" in moved


def test_a_chart_over_one_day_has_time_ticks_and_says_which_figure_it_draws(tmp_path):
    """With every release on one day the time axis has hour ticks, and the caption says what the
    lines draw: the smaller of the basic composition then and the running figure now."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"  # three releases planned at 09:00, one more at 15:00 the same day
    record(url, tmp_path, "graduates.yaml", DATASET, T(1, 1), command="dataset")
    record(url, tmp_path, "releases.yaml", RELEASES, T(1, 2))
    record(url, tmp_path, "later.yaml", "dataset: graduates\nreleases:\n  - id: count-by-sex\n    reads: [sex]\n"
           "    mechanism: {name: geometric, epsilon: 1/4}\n", T(1, 2, 15))
    # the page as of that evening: the axis spans 09:00 to 18:00 of one day
    html = render(context_of(url, "graduates", charts=True, as_of=T(1, 2, 18)), "html").decode()
    chart = html.split('id="timeline"')[1].split("</section>")[0]
    assert ">2024-01-02 10:00</text>" in chart and ">14:00</text>" in chart  # hours, the first dated
    assert "the smaller of the basic composition then" in chart and "ends on the risk table's total row" in chart


def _timeline_styles(chart: str) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """(each named line's stroke in the plot, in the legend): colour, width and dashes, by name."""
    import re

    def style(attributes: str) -> dict[str, str]:
        return {key: value for key, value in re.findall(r'(stroke(?:-width|-dasharray)?)="([^"]*)"', attributes)}

    drawn = {name: style(attributes) for attributes, name in
             re.findall(r'<path fill="none" ([^>]*)><title>([^<]*)</title></path>', chart)}
    legend = chart.split('<g id="legend-timeline">')[1].split("</g>")[0]
    shown = {name: style(attributes) for attributes, name in
             re.findall(r'<line ([^>]*)/><text [^>]*>([^<]*)</text>', legend)}
    return drawn, shown


def test_the_timeline_of_an_as_of_report_draws_each_named_line_apart_and_its_legend_alike(tmp_path):
    """The legend: named lines that differ by colour and width only coincide where two variables have
    the same history, and a legend drawing every line 2 px wide tells none apart. Each named line
    has its own dash pattern, and the legend draws each exactly as the plot does. by-region reads region and sex at 1/8: their lines coincide."""
    url = ledger(tmp_path)
    html = render(context_of(url, "graduates", charts=True, as_of=T(1, 2, 18)), "html").decode()
    chart = html.split('id="timeline"')[1].split("</section>")[0]
    drawn, shown = _timeline_styles(chart)
    named = [name for name in shown if name.startswith("{")]
    assert {"{income}", "{sex}"} <= set(named) and set(named) == set(drawn)
    for name in named:
        assert shown[name] == drawn[name], name  # colour, width and dashes as drawn
    # apart without colour too: no two named lines share a width and a dash pattern
    assert len({(s["stroke-width"], s.get("stroke-dasharray", "")) for s in drawn.values()}) == len(drawn)


def test_the_heat_map_cells_follow_the_precision_rule_of_the_tables(tmp_path):
    """The heat map's cells were rounded up to 2 decimals (2.53 where the tables print 2.524; 0.01
    for 1/4000): they are now format_number's text (4 decimals rounded up, exact decimals kept), a
    fraction's rounded-up decimal alone (no room for `n/d (≈ x)`)."""
    import numpy as np

    from ledger.reporting.chart_data import Pairs
    from ledger.reporting.charts import heat_map_svg

    names = ("a", "b", "c")
    # a: 631/250 exactly (2.524), b: 1/4000 (0.00025), c: 1/3 (0.3333..., up: 0.3334); pairs 2.52409 (float)
    figures = ((Fraction(631, 250), 2.52409, 2.52409), (2.52409, Fraction(1, 4000), 2.52409),
               (2.52409, 2.52409, Fraction(1, 3)))
    svg = str(heat_map_svg(Pairs(variables=names, count=3, unprotected=0, highest=(), matrix=figures,
                                 colour=np.asarray([[float(v) for v in row] for row in figures]), svg="")))
    import re

    cells = re.findall(r'fill="(?:white|#1b1b1b)">([^<]*)</text>', svg)
    assert cells == ["2.524", "2.5241", "2.5241", "2.5241", "0.00025", "2.5241", "2.5241", "2.5241", "0.3334"]
    assert 2.5241 >= 2.52409 and Fraction(3334, 10000) >= Fraction(1, 3)  # rounded up: bounds


def test_the_reports_heat_map_prints_the_pairs_as_the_pairs_table_does(tmp_path):
    """End to end: the heat map's cell of {income, sex} is the text of the pairs table beside it."""
    import re

    url = ledger(tmp_path)
    html = render(context_of(url, "graduates", charts=True), "html").decode()
    heat = html.split('id="heat-map"')[1].split("</svg>")[0]
    cells = re.findall(r'fill="(?:white|#1b1b1b)">([^<]*)</text>', heat)
    table = run_main(url, "pairs", "-d", "graduates").out
    pair = next(line for line in table.splitlines() if line.startswith("{income, sex}")).split("\t")[1]
    assert len(pair.split(".")[-1]) > 2  # a figure the old 2-decimal labels changed
    assert pair in cells


def test_an_infinity_past_the_allowance_says_so_beside_a_keyed_family(tmp_path):
    """A (1/10, 1e-10) release on a 1e-9 dataset, stated at 1e-12: its delta passes the allowance,
    half of 1e-12, so {a} and {a, b} are ∞ there, though every release is bounded; in a ledger with a
    family split by a key (whose move could be a cause) the report's pair cells name the allowance."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    record(url, tmp_path, "t.yaml", "dataset: t\ndelta: 1e-9\nvariables: [{name: a}, {name: b}, {name: k}]\n",
           T(1, 1), command="dataset")
    record(url, tmp_path, "r.yaml", """\
dataset: t
families: [{id: split, partition: [k]}]
releases:
  - {id: approximate, reads: [a], mechanism: {name: declared}, guarantees: [{epsilon: 1/10, delta: 1e-10}]}
  - {id: part-1, reads: [b, k], family: split, part: one, mechanism: {name: declared},
     guarantees: [{epsilon: 1/4, relation: add-remove}]}
""", T(1, 2))
    out = tmp_path / "r.md"
    assert run_main(url, "report", "--format", "md", "--delta", "1e-12", "--out", str(out)).code == 0
    md = out.read_text(encoding="utf-8")
    pair_row = next(line for line in md.splitlines() if line.startswith("| {a} |"))
    assert "∞ (approximate deltas past the allowance)" in pair_row and "not protected" not in pair_row


def test_the_charts_last_point_the_heat_maps_diagonal_and_the_risk_table_agree(tmp_path, reference_filter):
    """The README's graduates ledger: income is charged by two pure releases of 1 and a Gaussian of rho
    1/200. Its running figure at 1e-9 is the Rényi statement at the 22 orders, ≈ 2.6173 (each pure
    release by randomized response's curve), below the basic one, ≈ 2.6272 (the pure epsilons as
    1/2-zCDP each). The risk table's total, the heat map's diagonal and the cumulative chart's last
    point are one figure."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert run_main(url, "dataset", "add", str(EXAMPLES / "graduates.dataset.yaml")).code == 0
    assert run_main(url, "record", str(EXAMPLES / "graduates.releases.yaml")).code == 0
    context = context_of(url, "graduates", charts=False)
    income = list(context.risk.variables).index("income")
    basic = reference_filter(pure=2, pure_rho=1, rho=Fraction(1, 200), delta=1e-9)
    total = float(context.risk.total[income])
    assert total < basic - 5e-3
    assert float(context.pairs.matrix[income][income]) == total
    assert float(context.timeline.y[-1][list(context.timeline.variables).index("income")]) == total
