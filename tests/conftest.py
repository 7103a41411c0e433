"""Shared test settings and an independent zCDP-to-(epsilon, delta) conversion.

`reference_cks` evaluates the Canonne-Kamath-Steinke (2020) bound, Corollary 13,
by its own search over the Renyi order (a dense grid, then a local refinement),
so tests can check `ledger.accounting.spend.cks_epsilon` without calling it.
`reference_filter` evaluates a subset's running figure at a delta, the smallest of the
statements docs/explanation/accounting.md allows with the delta split among them in advance (half of it, the
allowance `REFERENCE_ALLOWANCE`, kept for the approximate releases' deltas; the Rényi filter at 22
fixed orders at 1/44 each; the pure sum free), from the closed forms, so tests can check
`Spend.epsilon` without calling it. A cap at a delta is one filter (docs/explanation/
accounting.md): `reference_cap_order` is a Rényi-filter cap's order, chosen from its epsilon and
delta alone, and `reference_prop12` the CKS 2020 Prop 12 conversion at one order.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import Phase, settings
from scipy.optimize import minimize_scalar

# The engine runs a numerical minimiser for zCDP totals: no per-example deadline.
# No "explain" phase: it traces every line of a failing example again (minutes on the CLI tests); the
# failing example itself is still printed.
settings.register_profile("ledger", deadline=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ledger"))

# The suite runs with no resident process, whatever the shell that started it exported.
os.environ.pop("LEDGER_RESIDENT", None)


def _reference_cks(rho: float, delta: float) -> float:
    """inf over alpha > 1 of alpha rho + (ln(1/delta) + (alpha - 1) ln(1 - 1/alpha) - ln(alpha)) / (alpha - 1)."""
    rho, delta = float(rho), float(delta)
    if rho == 0:
        return 0.0
    log_inv_delta = math.log(1 / delta)

    def bound(alpha):
        return alpha * rho + (log_inv_delta + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)) / (alpha - 1)

    alphas = 1 + np.logspace(-6, 6, 6001)
    values = bound(alphas)
    k = int(np.argmin(values))
    low, high = alphas[max(k - 1, 0)], alphas[min(k + 1, len(alphas) - 1)]
    refined = minimize_scalar(bound, bounds=(low, high), method="bounded", options={"xatol": 1e-12})
    return float(min(values[k], bound(refined.x)))


@pytest.fixture(scope="session", autouse=True)
def _command_line_built_once():
    """CliRunner tests reuse the click command the console entry point builds once per process
    (`ledger.cli.app.command()`). Typer's CliRunner builds the app into a click command on every
    `invoke` (inspecting every command's signature and type hints, about 0.1 s of CPU); the
    command built is the same every time (the app's commands are fixed at import). Other Typer
    apps are built as usual; `cli_main` calls `main()`, which uses `command()` itself."""
    from unittest import mock

    import typer.testing

    from ledger.cli import app as cli

    build = typer.testing._get_command

    def get_command(typer_instance):
        return cli.command() if typer_instance is cli.app else build(typer_instance)

    with mock.patch.object(typer.testing, "_get_command", get_command):
        yield


@pytest.fixture(scope="session")
def reference_cks():
    return _reference_cks


# The Rényi orders the adaptive statements are fixed at (ledger.accounting.spend.FILTER_ORDERS, written out)
REFERENCE_FILTER_ORDERS = (1.2, 1.5, 1.8, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 128, 256, 512, 1024)
# The delta's split fixed in advance (spend.ALLOWANCE, written out): half to the approximate
# releases' deltas, the other half to the filters' statements.
REFERENCE_ALLOWANCE = 0.5  # the share of a figure's delta kept for approximate releases


def _reference_filter(pure=0, pure_rho=None, rho=0, approx_epsilon=0, approx_delta=0, delta=1e-9,
                      allowance=REFERENCE_ALLOWANCE) -> float:
    """The running figure at `delta`, written from the model: the approximate deltas must fit the
    allowance, the dataset's share of the delta (half by default; else ∞); the pure sum with the
    approximate epsilons beside it when there is no rho; else, at each of 22 fixed orders a,
    min(pure, a * pure_rho) + a * rho converted by CKS 2020 Prop 12 at 1/22 of the rest of the
    delta, the smallest, plus the approximate epsilons (statements that hold at every stopping time)."""
    pure, rho, approx_epsilon = float(pure), float(rho), float(approx_epsilon)
    pure_rho = pure * pure / 2 if pure_rho is None else float(pure_rho)
    if float(approx_delta) > allowance * float(delta) * (1 + 1e-15):
        return math.inf
    if rho == 0:
        return pure + approx_epsilon
    share = float(delta) * (1 - allowance) / len(REFERENCE_FILTER_ORDERS)
    orders = min(min(pure, a * pure_rho) + a * rho + math.log1p(-1 / a) - (math.log(share) + math.log(a)) / (a - 1)
                 for a in REFERENCE_FILTER_ORDERS)
    return approx_epsilon + orders


@pytest.fixture(scope="session")
def reference_filter():
    return _reference_filter


# The Rényi orders a cap's one order is chosen from (renyi_curves.ORDERS, written out: dp_accounting's
# default grid, then large orders for small deltas)
REFERENCE_CAP_ORDERS = tuple([1 + x / 10 for x in range(1, 100)] + list(range(11, 64))
                             + [64, 80, 96, 128, 192, 256, 384, 512, 1024])


def _reference_prop12(divergence: float, order: float, delta: float) -> float:
    """Canonne, Kamath and Steinke (2020), Prop 12: a mechanism whose Rényi divergence at `order` is
    `divergence` is (epsilon, delta)-DP with this epsilon (not below 0)."""
    return max(divergence + math.log1p(-1 / order) - (math.log(delta) + math.log(order)) / (order - 1), 0.0)


def _reference_cap_order(epsilon: float, delta: float) -> float:
    """A Rényi-filter cap's order, from the model: of REFERENCE_CAP_ORDERS, the one at which the
    largest rho-zCDP spend (the curve a * rho) fits within epsilon by Prop 12 at the filter's share
    of delta, (1 - allowance) delta. The largest rho by bisection, then the order that converts it."""
    share = (1 - REFERENCE_ALLOWANCE) * float(delta)

    def best(rho):
        return min(REFERENCE_CAP_ORDERS, key=lambda a: _reference_prop12(a * rho, a, share))

    low, high = 0.0, float(epsilon)
    for _ in range(200):
        middle = (low + high) / 2
        a = best(middle)
        if _reference_prop12(a * middle, a, share) <= float(epsilon):
            low = middle
        else:
            high = middle
    return float(best(low))


# --------------------------------------------------------------------------
# A ledger database on each backend
# --------------------------------------------------------------------------

POSTGRES_ENV = "LEDGER_TEST_POSTGRES_URL"


def _psycopg_url(url) -> str:
    """psycopg wants postgresql://...; SQLAlchemy's form is postgresql+psycopg://..."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def _new_database(kind: str, tmp_path, stem: str = "ledger", icu_locale: str | None = None):
    """A new, empty ledger database: a SQLite file under tmp_path, or a fresh PostgreSQL
    database `ledger_test_<hex>` on the server of $LEDGER_TEST_POSTGRES_URL, dropped
    afterwards (WITH (FORCE): connections a test left open do not keep it alive). The
    PostgreSQL case is skipped, visibly, when the variable is not set. `icu_locale`: the
    PostgreSQL database collates text by that ICU locale (`en-US`: `b` before `C`), as a
    server made under a language's locale does, not by the server's default."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / f'{stem}.db'}"
        return
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    import secrets

    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(server)
    name = f"ledger_test_{secrets.token_hex(6)}"
    with psycopg.connect(_psycopg_url(base), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"' + (f" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{icu_locale}'"
                                                      if icu_locale else ""))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_psycopg_url(base), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path):
    """The SQLAlchemy URL of a new, empty ledger database on each backend (_new_database)."""
    with _new_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def collated_ledger_url(request, tmp_path):
    """As ledger_url, with the PostgreSQL database collating by the en-US locale (ICU)."""
    with _new_database(request.param, tmp_path, icu_locale="en-US") as url:
        yield url


@pytest.fixture
def other_ledger_url(ledger_url, tmp_path):
    """A second new, empty ledger database, on ledger_url's backend."""
    with _new_database("sqlite" if ledger_url.startswith("sqlite") else "postgresql", tmp_path, "other") as url:
        yield url

