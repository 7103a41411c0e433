"""The same answer to the same question in every command (issue 11, DESIGN 2.4, 2.10).

`headroom` is derived from the decision `record` makes: a release at the printed headroom
is admitted and one slightly above it is refused. Monotonicity: adding a release never
lowers a printed figure nor a cap's figure. `audit verify` recomputes the caps' running
accountant states.
"""

from __future__ import annotations

import json
import math
import sqlite3
from fractions import Fraction as F

import pytest
from support import cli_main

from ledger import accountants

DATASET = """\
dataset: d
delta: 1e-6
variables:
  - {name: a, classification: sensitive}
  - {name: b, classification: sensitive}
  - {name: c, classification: sensitive}
caps:
  - {name: a-cap, subset: [a], epsilon: 9, delta: 1e-6}
"""


def laplace_history(path, n=100, epsilon="0.1", prefix="l", reads="[a]"):
    """n Laplace releases, each published: an adaptive history."""
    path.write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: {prefix}{i}, reads: {reads}, status: published, published_at: \"2026-03-01T00:00:00Z\", "
        f"mechanism: {{name: laplace, epsilon: {epsilon}}}}}\n" for i in range(n)))
    return path


def declared_pure(path, rid, epsilon, reads="[a]"):
    path.write_text(f"dataset: d\nreleases:\n  - {{id: {rid}, reads: {reads}, mechanism: {{name: declared}}, "
                    f"guarantees: [{{protects: {reads}, epsilon: \"{epsilon}\"}}]}}\n")
    return path


@pytest.fixture
def ledger(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET)
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    return url, tmp_path


def test_a_release_at_the_printed_headroom_is_admitted_and_above_it_refused(ledger):
    """100 Laplace releases of 0.1 published one by one: the pure sum 10 is over the cap of 9
    at delta 1e-6, the Rényi filter holds them. The headroom comes from that filter: the basic
    figure alone would say 0 (the cap is already over by basic composition)."""
    url, tmp = ledger
    assert cli_main(url, "record", laplace_history(tmp / "h.yaml")).code == 0
    room = cli_main(url, "headroom", "a", "--json").json()
    assert room["epsilon_binding"] == "a-cap"
    assert 0.5 < room["epsilon"] < 9 - 5.5  # the filter's figure for the history is about 5.5
    exact = F(room["epsilon_exact"])
    above = exact + F(1, 10**6)
    refused = cli_main(url, "check", declared_pure(tmp / "above.yaml", "x", above))
    assert refused.code == 1, refused.out
    admitted = cli_main(url, "record", declared_pure(tmp / "at.yaml", "x", exact))
    assert admitted.code == 0, admitted.err + admitted.out
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["accountant"] == "rdp" and cap["current"] <= 9
    # and the text names the binding cap and the accountant deciding it
    text = cli_main(url, "headroom", "a").out
    assert "binding cap: a-cap" in text


def test_headroom_of_a_pure_cap_is_the_pure_difference(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET.replace("epsilon: 9, delta: 1e-6", "epsilon: 3"))
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    assert cli_main(url, "record", laplace_history(tmp_path / "h.yaml", n=5, epsilon="1/3")).code == 0
    room = cli_main(url, "headroom", "a", "b", "--json").json()
    assert room["epsilon_exact"] == "4/3"


MIXED = """\
dataset: d
releases:
  - {id: g1, reads: [a, b], mechanism: {name: gaussian, sigma: 3, sensitivity: 1}}
  - {id: g2, reads: [b], status: published, published_at: "2026-03-01T00:00:00Z", mechanism: {name: gaussian, sigma: 2, sensitivity: 1}}
  - {id: l1, reads: [a, c], mechanism: {name: laplace, epsilon: 0.5}}
  - {id: d1, reads: [c], mechanism: {name: declared}, guarantees: [{protects: [c], epsilon: 0.3}]}
  - {id: r1, reads: [a], mechanism: {name: declared}, guarantees: [{protects: [a], rho: 0.1}]}
  - {id: t1, reads: [a, b, c], mechanism: {name: declared}, guarantees: [{protects: [a, b, c], epsilon: 1, delta: 1e-8}]}
"""


def test_pairs_print_the_figures_subset_prints(ledger):
    """Every pair: the basic and rdp figures `subset A B` gives, and the smaller valid of them."""
    url, tmp = ledger
    (tmp / "m.yaml").write_text(MIXED)
    assert cli_main(url, "record", tmp / "m.yaml").code == 0
    pairs = cli_main(url, "pairs", "--json").json()
    assert len(pairs) == 3
    for entry in pairs:
        one = cli_main(url, "subset", *entry["subset"], "--json").json()
        for name in ("basic", "rdp"):
            assert entry["accountants"][name]["epsilon"] == pytest.approx(one["accountants"][name]["epsilon"],
                                                                          rel=1e-12)
        smaller = min(("basic", "rdp"), key=lambda n: float(one["accountants"][n]["epsilon"]))
        assert entry["epsilon"] == pytest.approx(float(one["accountants"][smaller]["epsilon"]), rel=1e-3)
        assert entry["epsilon"] <= float(one["accountants"]["basic"]["epsilon"])
        assert entry["accountant"] in ("basic", "rdp")
    assert cli_main(url, "pairs", "--accountant", "pld").code == 2
    text = cli_main(url, "pairs").out
    assert "no pld per pair" in text
