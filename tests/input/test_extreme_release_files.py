"""Bad input is answered with exit 2, never with an arithmetic error.

A hypothesis fuzz test over release files with extreme values: epsilon up to 1e6 and
down to 1e-300, delta down to 1e-300, rho up to 1e6, fractions with 300-digit
denominators, add/remove and replace, families keyed and random, exact releases.
Every command a steward runs on the result either prints figures (exit 0) or, for the
file itself, refuses it (exit 2 with the file and field); an unexpected exception,
a traceback or exit 1 (the "budget refused" code, with no cap set) fails the test.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from support import cli_main

SURVEY = """\
dataset: s
self_approval: true  # (history recorded as published by its recorder)
delta: 1e-9
variables: [{name: region}, {name: a}, {name: b}]
"""
HUGE_DENOMINATOR = "1" + "0" * 299 + "7"

epsilons = st.one_of(
    st.sampled_from(["1e6", "1e-300", "800", "709.9", "1000000/3", f"1/{HUGE_DENOMINATOR}",
                     f"{HUGE_DENOMINATOR}/{HUGE_DENOMINATOR}1", "0", "1e400", "-1", "nan", "1/0"]),
    st.floats(min_value=0, max_value=1e6, allow_nan=False).map(repr),
)
deltas = st.sampled_from(["1e-300", f"1/{HUGE_DENOMINATOR}", "0.999999", "0", "1e-10", "1", "1e-400"])
rhos = st.one_of(st.sampled_from(["1e6", "1e-300", f"1/{HUGE_DENOMINATOR}", "0", "1e308", "1e-330"]),
                 st.floats(min_value=0, max_value=1e6, allow_nan=False).map(repr))


@st.composite
def guarantee(draw, reads):
    protects = draw(st.sets(st.sampled_from(sorted(reads)), min_size=1)) if reads else {"a"}
    relation = draw(st.sampled_from(["replace", "add-remove"]))
    kind = draw(st.sampled_from(["pure", "approx", "rho"]))
    value = {"pure": lambda: f'epsilon: "{draw(epsilons)}"',
             "approx": lambda: f'epsilon: "{draw(epsilons)}", delta: "{draw(deltas)}"',
             "rho": lambda: f'rho: "{draw(rhos)}"'}[kind]()
    return f"{{protects: [{', '.join(sorted(protects))}], {value}, relation: {relation}}}"


@st.composite
def release_file(draw):
    lines = ["dataset: s", "families:", "  - {id: keyed, partition: [region]}", "  - {id: split, partition: random}",
             "releases:"]
    for k in range(draw(st.integers(1, 4))):
        reads = draw(st.sets(st.sampled_from(["region", "a", "b"]), min_size=1))
        family = draw(st.sampled_from([None, "keyed", "split"]))
        if family == "keyed":
            reads |= {"region"}
        lines += [f"  - id: r{k}", "    status: published", '    published_at: "2026-01-05T10:00:00+00:00"',
                  f"    reads: [{', '.join(sorted(reads))}]"]
        if family:
            lines.append(f"    family: {family}")
        mechanism = draw(st.sampled_from(["declared", "laplace", "gaussian", "exact"]))
        if mechanism == "laplace":
            lines.append(f'    mechanism: {{name: laplace, epsilon: "{draw(epsilons)}"}}')
        elif mechanism == "gaussian":
            lines.append(f'    mechanism: {{name: gaussian, rho: "{draw(rhos)}"}}')
        else:
            lines.append(f"    mechanism: {{name: {mechanism}}}")
        if mechanism == "declared" or (mechanism != "exact" and draw(st.booleans())):
            specs = draw(st.lists(guarantee(reads), min_size=1, max_size=2))
            lines.append("    guarantees: [" + ", ".join(specs) + "]")
    return "\n".join(lines) + "\n"


COMMANDS = [  # every kind of figure, each once (a command costs ~0.1 s: CI time)
    ("table",), ("subset", "a", "b", "--json"), ("subset", "region"), ("pairs", "--json"), ("releases", "--json"),
    ("cap", "list"), ("headroom", "a", "--json"), ("table", "--delta", "1e-300", "--json"),
]


@settings(max_examples=12)
@given(text=release_file())
def test_every_command_prints_figures_or_exits_2(text, tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz")
    url = f"sqlite:///{directory / 'ledger.db'}"
    (directory / "s.yaml").write_text(SURVEY)
    assert cli_main(url, "dataset", "add", directory / "s.yaml").code == 0
    (directory / "r.yaml").write_text(text)
    checked = cli_main(url, "check", directory / "r.yaml")
    # no cap yet: only the dataset's approximate allowance can refuse (exit 1)
    assert checked.code in (0, 1, 2), (text, checked.err)
    recorded = cli_main(url, "record", directory / "r.yaml")
    assert recorded.code in (0, 1, 2), (text, recorded.err)
    if recorded.code == 1:
        assert checked.code == 1 and "allowance" in recorded.err, recorded.err
        return
    if recorded.code == 2:
        assert "r.yaml" in recorded.err and recorded.errors, recorded.err
        assert checked.code == 2
        return
    # a pure, an epsilon-at-delta and a rho cap, each computed from the history
    for cap in (("a", "--epsilon", "1"), ("a", "b", "--name", "ab", "--epsilon", "1", "--delta", "1e-9"),
                ("region", "--rho", "1")):
        assert cli_main(url, "cap", "set", *cap).code == 0, text
    for command in COMMANDS:
        result = cli_main(url, *command)
        assert result.code == 0, (command, text, result.err)
        assert result.out.strip(), command
        if "--json" in command:
            json.loads(result.out)
    plan = directory / "plan.yaml"
    plan.write_text(text.replace("id: r", "id: p"))
    result = cli_main(url, "check", plan, "--json")
    assert result.code in (0, 1), (text, result.err)  # caps now: a plan may break one
    json.loads(result.out)
    result = cli_main(url, "report", "--format", "md", "--out", directory / "report.md")
    assert result.code == 0, (text, result.err)
    assert cli_main(url, "audit", "verify").code == 0
