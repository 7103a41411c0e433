"""An older ledger is upgraded in place, and its caps at a delta become filters (docs/explanation/accounting.md).

A cap at a delta is a privacy filter of a kind recorded with it (accounting/filters.py). A ledger
made before caps carried one (fixtures/ledger_before_filters.sql, written by privacy-ledger at
that schema: fixtures/make_ledger_before_filters.py says how) is upgraded by the first command
that opens it: one `ledger.migrated` event, each cap at a delta given its filter from the releases
it holds (Gaussian DP when they are all Gaussian, else the Rényi filter at the order its epsilon
and delta fix, cap_decisions.cap_order, an input here) in a `cap.set` event by privacy-ledger, its
figure the filter's, and `audit verify` passes.

Expected figures, computed here: a Gaussian-DP cap's is the exact epsilon of one Gaussian of
mu^2 = sum of the mu_i^2 at the whole delta (Balle and Wang 2018, Thm 8; Dong, Roth and Su 2022,
Cor 2.13); a Rényi cap's is CKS 2020 Prop 12 at its order at half the delta, the Laplace curve by
Mironov 2017, Prop 6, a Gaussian's a * rho; a cap holds by the running figure too (conftest's
reference_filter, the other statements fixed in advance, at the other half), the smaller.
"""

from __future__ import annotations

import json
import math
import sqlite3
from fractions import Fraction as F
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import _reference_filter
from stopping_rules import exact_gaussian_epsilon
from support import acting_as, cli_main, cli_ok, migrations

from ledger.accounting import cap_decisions
from ledger.accounting.spend import cks_epsilon
from ledger.store import schema_migrations

FIXTURE = Path(__file__).resolve().parents[1].joinpath("fixtures") / "ledger_before_filters.sql"
DELTA = 1e-6


def sql(url: str, *statements: str) -> list[list[tuple]]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            found = []
            for statement in statements:
                result = connection.execute(text(statement))
                found.append([tuple(row) for row in result] if result.returns_rows else [])
            return found
    finally:
        engine.dispose()


def laplace_divergence(alpha: float, epsilon: float) -> float:
    """Mironov 2017, Prop 6: the Laplace mechanism of epsilon at order alpha."""
    return math.log(alpha / (2 * alpha - 1) * math.exp((alpha - 1) * epsilon)
                    + (alpha - 1) / (2 * alpha - 1) * math.exp(-alpha * epsilon)) / (alpha - 1)


def renyi_cap_figure(order: float, divergence: float, delta: float = DELTA) -> float:
    """CKS 2020, Prop 12 at `order`, at half the cap's delta (the other half is the allowance)."""
    return divergence + math.log1p(-1 / order) - (math.log(delta / 2) + math.log(order)) / (order - 1)


@pytest.fixture
def old_ledger(tmp_path) -> str:
    path = tmp_path / "old.db"
    connection = sqlite3.connect(path)
    try:
        connection.executescript(FIXTURE.read_text(encoding="utf-8"))
    finally:
        connection.close()
    return f"sqlite:///{path}"


def test_the_fixture_is_a_ledger_before_cap_filters(old_ledger):
    assert sql(old_ledger, "SELECT value FROM ledger_meta WHERE key = 'schema_version'")[0] == [("17",)]
    assert "filter" not in {row[1] for row in sql(old_ledger, "PRAGMA table_info(caps)")[0]}


def test_an_older_ledger_is_upgraded_in_place_its_caps_given_filters(old_ledger):
    (events,), = sql(old_ledger, "SELECT max(seq) FROM audit_events")[0]
    caps = {c["cap"]: c for c in cli_ok(old_ledger, "cap", "list", "--json").json()}
    assert sql(old_ledger, "SELECT value FROM ledger_meta WHERE key = 'schema_version'")[0] == [
        (str(schema_migrations.SCHEMA_VERSION),)] == [("20",)]
    written = sql(old_ledger, f"SELECT kind, subject, actor, payload FROM audit_events WHERE seq > {events} ORDER BY seq")[0]
    assert [(kind, subject, actor) for kind, subject, actor, _ in written] == [
        ("cap.set", "d/ga", "privacy-ledger"), ("cap.set", "d/mb", "privacy-ledger"),
        ("ledger.migrated", "schema 18", "privacy-ledger"), ("ledger.migrated", "schema 19", "privacy-ledger"),
        ("ledger.migrated", "schema 20", "privacy-ledger")]
    assert [(k, s, json.dumps(json.loads(p), separators=(",", ":"))) for k, s, _, p in written[2:]] == migrations(18, 20)
    filters = dict(sql(old_ledger, "SELECT name, filter FROM caps")[0])
    assert filters == {"ga": "gaussian", "mb": "running", "pc": None, "re": None}
    assert json.loads(written[0][3])["cap"]["filter"] == "gaussian"
    assert json.loads(written[1][3])["cap"]["filter"] == "running"

    # ga: four Gaussians of sigma 3, one Gaussian of mu = sqrt(4) / 3 at the whole delta
    exact = exact_gaussian_epsilon(2 / 3, DELTA)
    assert caps["ga"]["current"] == pytest.approx(exact, rel=1e-6) and caps["ga"]["current"] >= exact * (1 - 1e-9)
    assert "Gaussian-DP filter" in caps["ga"]["theorem"]
    # mb: a Laplace of 1/2 and a Gaussian of rho 1/18, held to the running figure of {b}
    running = cli_ok(old_ledger, "subset", "b", "--json").json()["epsilon"]
    assert caps["mb"]["current"] == pytest.approx(running, rel=1e-12)
    assert running <= _reference_filter(pure=0.5, pure_rho=0.125, rho=1 / 18, delta=DELTA) * (1 + 1e-9)
    assert "running figure as a filter" in caps["mb"]["theorem"]
    # the pure cap keeps the pure sum, the rho cap the sum of rho (1 / (2 * 3^2))
    assert caps["pc"]["current"] == 1
    assert caps["re"]["current"] == pytest.approx(1 / 18, rel=1e-12)

    assert cli_main(old_ledger, "audit", "verify").code == 0
    cli_ok(old_ledger, "cap", "list")  # once only
    assert sql(old_ledger, "SELECT count(*) FROM audit_events")[0] == [(events + len(written),)]


def test_the_upgraded_ledger_goes_on_under_its_caps_filters(old_ledger):
    """A fifth Gaussian of sigma 3 on {a} is admitted by ga's Gaussian-DP filter (mu^2 = 5 / 9); a
    cap set now on {a} with --filter renyi gets the order its epsilon and delta fix."""
    cli_ok(old_ledger, "cap", "list")
    with acting_as("steward"):
        cli_ok(old_ledger, "record", _file(old_ledger, "g5", "a"))
    caps = {c["cap"]: c for c in cli_ok(old_ledger, "cap", "list", "--json").json()}
    assert caps["ga"]["current"] == pytest.approx(exact_gaussian_epsilon(math.sqrt(5) / 3, DELTA), rel=1e-6)
    with acting_as("steward"):
        cli_ok(old_ledger, "cap", "set", "a", "--name", "ra", "--epsilon", "5", "--delta", "1e-6", "--filter", "renyi"
    )
    order = cap_decisions.cap_order(SimpleNamespace(epsilon=F(5), delta=F(1, 10**6), allowance=F(1, 2)))
    (ra,) = [c for c in cli_ok(old_ledger, "cap", "list", "--json").json() if c["cap"] == "ra"]
    five = renyi_cap_figure(order, 5 * order / 18)  # five Gaussians of rho 1/18 at the order
    assert ra["current"] == pytest.approx(five, rel=1e-9)  # its filter alone
    assert cli_main(old_ledger, "audit", "verify").code == 0
    assert cli_main(old_ledger, "audit", "verify").code == 0


def test_a_renyi_cap_set_with_its_filter_named_records_its_order(old_ledger):
    with acting_as("steward"):
        cli_ok(old_ledger, "cap", "set", "a", "--name", "ra", "--epsilon", "5", "--delta", "1e-6", "--filter", "renyi"
    )
    order = cap_decisions.cap_order(SimpleNamespace(epsilon=F(5), delta=F(1, 10**6), allowance=F(1, 2)))
    assert dict(sql(old_ledger, "SELECT name, filter FROM caps WHERE name = 'ra'")[0]) == {"ra": f"renyi:{order:g}"}
    (ra,) = [c for c in cli_ok(old_ledger, "cap", "list", "--json").json() if c["cap"] == "ra"]
    assert f"Rényi filter at order {order:g}," in ra["theorem"]


def _file(url: str, rid: str, variable: str) -> Path:
    path = Path(url.removeprefix("sqlite:///")).with_name(f"{rid}.yaml")
    path.write_text(f"dataset: d\nreleases:\n  - {{id: {rid}, reads: [{variable}], "
                    "mechanism: {name: gaussian, sigma: 3, sensitivity: 1}}\n")
    return path


def test_a_caps_running_total_from_an_older_rule_is_computed_again(tmp_path):
    """A cap at a delta keeps its figure in its running total: one left by an older rule (the zCDP
    conversion at the whole delta, at schema 11) is computed again by the upgrades, each with an
    audit event; the cap shows its filter's figure and `audit verify` agrees."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text("dataset: d\nself_approval: true\ndelta: 1e-6\nvariables:\n  - {name: a, classification: sensitive}\n"
                                     "caps:\n  - {subset: [a], epsilon: 50, delta: 1e-6}\n")
    cli_ok(url, "dataset", "add", tmp_path / "d.yaml")
    (tmp_path / "r.yaml").write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: g{i}, reads: [a], status: published, published_at: \"2026-03-01T00:00:0{i}Z\", "
        f"mechanism: {{name: gaussian, rho: \"1/4\"}}}}\n" for i in range(4)))
    cli_ok(url, "record", tmp_path / "r.yaml")
    expected = _reference_filter(rho=1, delta=DELTA)  # the running figure's filter (set before any release)
    (cap,) = cli_ok(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(expected, rel=1e-9)
    (text,), = sql(url, "SELECT total FROM cap_totals")[0]
    stored = json.loads(text)
    stored["value"] = repr(cks_epsilon(F(1), DELTA))  # the older rule's figure, below the filter's
    assert float(stored["value"]) < expected
    sql(url, f"UPDATE cap_totals SET total = '{json.dumps(stored)}'",
        "UPDATE ledger_meta SET value = '11' WHERE key = 'schema_version'")
    (events,), = sql(url, "SELECT count(*) FROM audit_events")[0]
    (cap,) = cli_ok(url, "cap", "list", "--json").json()
    assert cap["current"] == pytest.approx(expected, rel=1e-9)
    (migrated,) = sql(url, f"SELECT kind, subject FROM audit_events WHERE seq > {events}")
    assert migrated == [(kind, subject) for kind, subject, _ in migrations(12, schema_migrations.SCHEMA_VERSION)]
    assert cli_main(url, "audit", "verify").code == 0
