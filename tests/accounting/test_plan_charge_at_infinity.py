"""What a plan adds to a cap whose history is already ∞ (budget.plan_charge).

`check` printed "spent ∞, this plan +0, after ∞" (and "charge": 0 in --json) for a plan that
charges the cap: after - current is ∞ - ∞, which the difference took for 0. Where the history
is ∞ the charge is now the plan's own figure on the cap: its releases composed alone in the
cap's unit (the pure sum, the rho sum, epsilon at the cap's delta), as if it were the first plan.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from support import cli_main

DATASET = """dataset: s
self_approval: true
delta: 1e-9
variables:
  - {name: a, classification: sensitive}
  - {name: b, classification: sensitive}
"""
# a reads b exactly (its guarantee protects a only): every cap on b is ∞ from the start
EXACT_ON_B = ("  - {id: h, status: published, published_at: 2026-01-05, reads: [a, b], mechanism: {name: declared}, "
              "guarantees: [{protects: [a], epsilon: 1}]}\n")


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", write(tmp_path, "s.yaml", DATASET)).code == 0
    assert cli_main(url, "record", write(tmp_path, "h.yaml", "dataset: s\nreleases:\n" + EXACT_ON_B)).code == 0
    return url


def checked(url, tmp_path, plan: str) -> dict:
    run = cli_main(url, "check", "--json", write(tmp_path, "plan.yaml", "dataset: s\nreleases:\n" + plan))
    assert run.code == 1, run.out + run.err  # refused: the cap is already over
    (cap,) = json.loads(run.out)["caps"]
    assert cap["current"] == "inf" and cap["after"] == "inf"
    return cap


def test_a_pure_cap_at_infinity_shows_the_plans_sum(url, tmp_path):
    assert cli_main(url, "cap", "set", "b", "--epsilon", "5").code == 0
    cap = checked(url, tmp_path, "  - {id: p1, reads: [b], mechanism: {name: laplace, epsilon: 1/10}}\n"
                                 "  - {id: p2, reads: [b], mechanism: {name: laplace, epsilon: 1/5}}\n")
    assert Fraction(cap["charge_exact"]) == Fraction(3, 10)  # 1/10 + 1/5, exactly (docs/explanation/model.md#composition)
    assert [c["value_exact"] for c in cap["charges"]] == ["1/10", "1/5"]
    run = cli_main(url, "check", write(tmp_path, "plan.yaml", "dataset: s\nreleases:\n"
                                       "  - {id: p1, reads: [b], mechanism: {name: laplace, epsilon: 1/10}}\n"))
    assert "spent ∞, this plan +0.1, after ∞" in run.out and "+0," not in run.out


def test_a_rho_cap_at_infinity_shows_the_plans_rho(url, tmp_path):
    assert cli_main(url, "cap", "set", "b", "--rho", "1").code == 0
    cap = checked(url, tmp_path, "  - {id: p1, reads: [b], mechanism: {name: laplace, epsilon: 1/2}}\n"
                                 "  - {id: p2, reads: [b], mechanism: {name: gaussian, rho: 1/4, sensitivity: 1}}\n")
    # pure epsilon enters as epsilon^2 / 2 (Bun and Steinke 2016, Prop 3.3): 1/8 + 1/4
    assert Fraction(cap["charge_exact"]) == Fraction(3, 8)


def test_a_cap_at_a_delta_at_infinity_shows_the_plans_own_figure(url, tmp_path):
    assert cli_main(url, "cap", "set", "b", "--epsilon", "5", "--delta", "1e-9").code == 0
    cap = checked(url, tmp_path, "  - {id: p1, reads: [b], mechanism: {name: laplace, epsilon: 1/2}}\n")
    assert Fraction(cap["charge_exact"]) == Fraction(1, 2)
    # a Gaussian alone: at least its CKS-free lower bound, rho + 2 sqrt(rho ln(1/delta)) at most (Bun-Steinke)
    cap = checked(url, tmp_path, "  - {id: p1, reads: [b], mechanism: {name: gaussian, rho: 1/50, sensitivity: 1}}\n")
    rho, delta = 1 / 50, 1e-9
    assert 0 < float(cap["charge"]) <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
