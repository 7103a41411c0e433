"""The delta's split between a plan declared in advance and the Rényi filter (schema 17; R1 of the
review of 2026-11-24; spend.DECLARED_SHARE): a declared plan's PLD figure is made at half the
delta, every command and the cap agree on it, the filter's figure after a publication uses the
other half, and a ledger whose caps were decided at the whole delta is decided again on upgrade.

Expected figures are computed here from closed forms: n Gaussians of sigma 3 and sensitivity 1
compose to one Gaussian of mu = sqrt(n) / 3, whose exact hockey-stick is
Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Balle and Wang 2018, Thm 8); dp_accounting's
pessimistic PLD is at or above the exact figure, within its discretisation."""

from __future__ import annotations

import math
import textwrap

import pytest
from conftest import REFERENCE_DECLARED_PART
from scipy.optimize import brentq
from scipy.stats import norm
from support import cli_ok, tick_ledger_clock

DELTA = 1e-6


def exact_gaussian(mu: float, delta: float) -> float:
    """The smallest epsilon at which a Gaussian of mu (sensitivity / sigma) is (epsilon, delta)-DP."""
    return brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta,
                  0, 100, xtol=1e-14)


@pytest.fixture(autouse=True)
def ticking(monkeypatch):
    tick_ledger_clock(monkeypatch)


run = cli_ok


def forget_cached_figures() -> None:
    """Clear the figures this process cached (functools caches of the accounting modules), so a
    rule patched in or out applies to every figure after it."""
    from ledger.accounting import accountants, budget, engine, spend

    for module in (accountants, budget, engine, spend):
        for value in vars(module).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()


def declared_book(url, tmp_path, count: int = 4) -> None:
    (tmp_path / "ds.yaml").write_text(textwrap.dedent("""\
        dataset: d
        delta: 1e-6
        self_approval: true
        variables: [{name: a}, {name: b}]
        caps:
          - {name: ca, subset: [a], epsilon: 10, delta: 1e-6}
        """))
    run(url, "dataset", "add", tmp_path / "ds.yaml")
    lines = "".join(f"  - {{id: g{k}, reads: [a], mechanism: {{name: gaussian, sigma: 3, sensitivity: 1}}}}\n"
                    for k in range(1, count + 1))
    (tmp_path / "plan.yaml").write_text("dataset: d\nreleases:\n" + lines)
    run(url, "record", tmp_path / "plan.yaml")


def test_a_declared_plans_figure_is_made_at_half_the_delta_in_every_command(ledger_url, tmp_path):
    declared_book(ledger_url, tmp_path)
    mu = math.sqrt(4) / 3
    at_share, at_whole = exact_gaussian(mu, DELTA * REFERENCE_DECLARED_PART), exact_gaussian(mu, DELTA)
    shown = run(ledger_url, "subset", "a", "--json").json()
    assert shown["case"] == "declared" and shown["accountant"] == "pld"
    epsilon = float(shown["epsilon"])
    # at or above the exact figure at its share (pessimistic), within the PLD grid's rounding; and
    # so above the exact figure at the whole delta, which the ledger printed before schema 17
    assert at_share <= epsilon <= at_share * (1 + 2e-3)
    assert epsilon > at_whole * (1 + 1e-2)
    (cap,) = [c for c in run(ledger_url, "cap", "list", "--json").json() if c["cap"] == "ca"]
    assert float(cap["current"]) == pytest.approx(epsilon, rel=1e-12)
    table = run(ledger_url, "table", "--json").json()["total_shown"]
    assert (table["values"]["a"], table["accountants"]["a"]) == (pytest.approx(epsilon, rel=1e-12), "pld")


def test_caps_decided_at_the_whole_delta_are_decided_again_on_upgrade(ledger_url, tmp_path, monkeypatch,
                                                                       reference_filter):
    """A ledger whose caps were decided by the rule before schema 17 (patched in here: the declared
    statements at the whole delta, the filter's orders at 1/22 each) and left at schema 16 is
    brought up by the first command that opens it: the migration is one audit event, the declared
    cap's figure and the adaptive cap's (stored in its running total) are the new ones, and
    `audit verify` passes (with the migration left out, the adaptive cap keeps its old total)."""
    from ledger.accounting import accountants
    from ledger.store import database as store

    from ledger.accounting import spend

    with monkeypatch.context() as patch:  # the rule before schema 17: the whole delta, 1/22 per order
        patch.setattr(accountants, "declared_delta", lambda delta: delta)
        patch.setattr(spend, "ORDER_SHARE", 1 / 22)
        patch.setattr(accountants, "ORDER_SHARE", 1 / 22)
        forget_cached_figures()
        declared_book(ledger_url, tmp_path)
        run(ledger_url, "cap", "set", "b", "--name", "cb", "--epsilon", "10", "--delta", "1e-6")
        for k in (1, 2):  # (rho without its Gaussian, h2 after h1's publication: the filter decides)
            (tmp_path / f"h{k}.yaml").write_text(
                f"dataset: d\nreleases:\n  - {{id: h{k}, reads: [b], mechanism: {{name: declared}}, "
                "guarantees: [{protects: [b], rho: 1/8}]}\n")
            run(ledger_url, "record", tmp_path / f"h{k}.yaml")
            if k == 1:
                run(ledger_url, "approve", "h1")
                run(ledger_url, "publish", "h1")
        old = float(next(c for c in run(ledger_url, "cap", "list", "--json").json()
                         if c["cap"] == "ca")["current"])
        old_b = float(next(c for c in run(ledger_url, "cap", "list", "--json").json()
                           if c["cap"] == "cb")["current"])
    forget_cached_figures()
    engine = store.make_engine(ledger_url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("UPDATE ledger_meta SET value = '16' WHERE key = 'schema_version'")
    finally:
        engine.dispose()
    mu = math.sqrt(4) / 3
    assert exact_gaussian(mu, DELTA) <= old < exact_gaussian(mu, DELTA * REFERENCE_DECLARED_PART)
    cap = next(c for c in run(ledger_url, "cap", "list", "--json").json() if c["cap"] == "ca")
    assert float(cap["current"]) >= exact_gaussian(mu, DELTA * REFERENCE_DECLARED_PART) > old
    assert float(cap["current"]) == pytest.approx(float(run(ledger_url, "subset", "a", "--json").json()["epsilon"]),
                                                  rel=1e-12)
    cap_b = next(c for c in run(ledger_url, "cap", "list", "--json").json() if c["cap"] == "cb")
    assert float(cap_b["current"]) == pytest.approx(reference_filter(rho=1 / 4, delta=DELTA), rel=1e-9) != old_b
    run(ledger_url, "audit", "verify")
    engine = store.make_engine(ledger_url)
    try:
        with engine.connect() as connection:
            kinds = connection.exec_driver_sql("SELECT kind, subject FROM audit_events ORDER BY seq").fetchall()
    finally:
        engine.dispose()
    assert [tuple(k) for k in kinds].count(("ledger.migrated", "schema 17")) == 1


def test_after_a_publication_the_next_release_is_held_to_the_filters_half(ledger_url, tmp_path, reference_filter):
    """g1-g4 declared and published, then g5 recorded: adaptive, the filter at delta / 44 per order
    (conftest's reference_filter: rho = 5 / 18)."""
    declared_book(ledger_url, tmp_path)
    for k in range(1, 5):
        run(ledger_url, "approve", f"g{k}")
        run(ledger_url, "publish", f"g{k}")
    (tmp_path / "g5.yaml").write_text(
        "dataset: d\nreleases:\n  - {id: g5, reads: [a], mechanism: {name: gaussian, sigma: 3, sensitivity: 1}}\n")
    run(ledger_url, "record", tmp_path / "g5.yaml")
    shown = run(ledger_url, "subset", "a", "--json").json()
    assert shown["case"] == "adaptive"
    assert float(shown["epsilon"]) == pytest.approx(reference_filter(rho=5 / 18, delta=DELTA), rel=1e-9)
    assert float(shown["epsilon"]) >= reference_filter(rho=5 / 18, delta=DELTA)
