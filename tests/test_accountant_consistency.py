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
