"""`headroom --as-of`, `--delta` and `--mechanism`.

- --as-of T: the ledger as it stood at T, as `cap list --as-of T` reads it (for a pure or a
  rho cap the headroom is the cap's own headroom);
- --delta d: the rho headroom stated as an epsilon at d, what a ledger whose dataset delta is
  d prints (the others' meaning of --delta), by the tests' own CKS conversion;
- --mechanism laplace|gaussian: the figure `check` reaches for a plan of that mechanism: a plan
  of exactly the headroom is admitted, one slightly over is refused (random ledgers).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from unittest import mock

import pytest

from conftest import _reference_filter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import cli_main

import ledger
from ledger.operations.transactions import BudgetRefused

F = Fraction


class Clock:
    """store.now, one minute later at every call."""

    def __init__(self):
        self.at = datetime(2026, 3, 1, tzinfo=UTC)

    def __call__(self):
        self.at += timedelta(minutes=1)
        return self.at


def dataset_yaml(delta: str = "1e-9") -> str:
    return (f"dataset: d\nself_approval: true\ndelta: {delta}\nvariables: [{{name: a}}, {{name: b}}]\ncaps:\n"
            "  - {name: pure, subset: [a], epsilon: 5}\n  - {name: zcdp, subset: [b], rho: 1}\n"
            "  - {name: at-delta, subset: [a, b], epsilon: 50, delta: 1e-9}\n")


def releases_yaml(ids, mechanism="{name: laplace, epsilon: 1}", reads="[a, b]") -> str:
    return "dataset: d\nreleases:\n" + "".join(f"  - {{id: {i}, reads: {reads}, mechanism: {mechanism}}}\n"
                                                 for i in ids)


def new_ledger(tmp_path, delta="1e-9"):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(dataset_yaml(delta))
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    return url


def test_headroom_as_of_is_the_ledger_as_cap_list_as_of_reads_it(tmp_path):
    clock = Clock()
    with mock.patch("ledger.store.session_state.now", clock):
        url = new_ledger(tmp_path)
        capped = (clock.at + timedelta(seconds=30)).isoformat()  # the caps set, nothing recorded yet
        moments = []
        for k, (mechanism, reads) in enumerate([("{name: laplace, epsilon: 1}", "[a, b]"),
                                                ("{name: gaussian, sigma: 2, sensitivity: 1}", "[b]"),
                                                ("{name: laplace, epsilon: 1/2}", "[a]")]):
            (tmp_path / f"r{k}.yaml").write_text(releases_yaml([f"r{k}"], mechanism, reads))
            assert cli_main(url, "record", tmp_path / f"r{k}.yaml").code == 0
            moments.append((clock.at + timedelta(seconds=30)).isoformat())
        now = {v: cli_main(url, "headroom", v, "--json").json() for v in ("a", "b")}
        for moment in moments:
            caps = {c["cap"]: c for c in cli_main(url, "cap", "list", "--as-of", moment, "--json").json()}
            a = cli_main(url, "headroom", "a", "--as-of", moment, "--json").json()
            b = cli_main(url, "headroom", "b", "--as-of", moment, "--json").json()
            assert (a["epsilon"], a["epsilon_binding"]) == (caps["pure"]["headroom"], "pure")
            assert (b["rho"], b["rho_binding"]) == (caps["zcdp"]["headroom"], "zcdp")
        moment = ("as_of", "dataset_added_at", "dataset_existed")  # (--as-of states the moment it used)
        for v in ("a", "b"):
            then = cli_main(url, "headroom", v, "--as-of", moments[-1], "--json").json()
            assert {k: x for k, x in then.items() if k not in moment} == now[v]
        before = cli_main(url, "headroom", "a", "--as-of", capped, "--json").json()
        assert before["epsilon"] == 5  # nothing recorded yet: the whole cap
        # before the caps were set, no cap applied (a cap set after T is not shown at T)
        early = cli_main(url, "headroom", "a", "--as-of", "2026-03-01T00:00:30+00:00", "--json").json()
        assert early["epsilon"] == "inf" and early["epsilon_binding"] is None
        assert "as of 2026-03-01 00:00:30 UTC" in cli_main(url, "headroom", "a", "--as-of",
                                                              "2026-03-01T00:00:30+00:00").out


def test_headroom_at_a_delta_is_what_a_ledger_of_that_delta_prints(tmp_path, reference_cks):
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir(), second.mkdir()
    urls = [new_ledger(first, "1e-9"), new_ledger(second, "1e-6")]
    for url, directory in zip(urls, (first, second)):
        (directory / "r.yaml").write_text(releases_yaml(["g"], "{name: gaussian, sigma: 3, sensitivity: 1}", "[b]"))
        assert cli_main(url, "record", directory / "r.yaml").code == 0
    for mechanism in ("any", "gaussian"):
        asked = cli_main(urls[0], "headroom", "b", "--delta", "1e-6", "--mechanism", mechanism, "--json").json()
        native = cli_main(urls[1], "headroom", "b", "--mechanism", mechanism, "--json").json()
        assert asked == native and asked["delta_exact"] == "1/1000000"
        default = cli_main(urls[0], "headroom", "b", "--mechanism", mechanism, "--json").json()
        assert default["delta_exact"] == "1/1000000000" and default["rho_epsilon"] > asked["rho_epsilon"]
    rho = F(1) - F(1, 18)  # the zcdp cap of 1 less the Gaussian's 1 / (2 * 9)
    any_ = cli_main(urls[0], "headroom", "b", "--delta", "1e-6", "--json").json()
    assert F(any_["rho_exact"]) == rho
    # stated as the basic accountant states a rho: at the Rényi orders fixed in advance, 1/44 of the delta
    # each (the other half is kept for the approximate releases' allowance: conftest's reference_filter)
    assert any_["rho_epsilon"] == pytest.approx(_reference_filter(rho=float(rho), delta=1e-6), rel=1e-9)
    assert any_["rho_epsilon"] >= _reference_filter(rho=float(rho), delta=1e-6) * (1 - 1e-12)


def test_headroom_says_what_it_assumes(tmp_path):
    url = new_ledger(tmp_path)
    text = cli_main(url, "headroom", "a").out
    assert "it assumes any mechanism with that epsilon (the worst case: randomized response)" in text
    assert "a Laplace release" in cli_main(url, "headroom", "a", "--mechanism", "laplace").out
    refused = cli_main(url, "headroom", "a", "--mechanism", "cauchy")
    assert refused.code == 2 and "--mechanism" in refused.err


def test_under_a_pure_epsilon_cap_headroom_says_no_gaussian_fits_rather_than_rho_0(tmp_path):
    url = new_ledger(tmp_path)
    text = cli_main(url, "headroom", "a").out
    assert "{a}: no Gaussian (rho) release fits: cap pure is in pure epsilon" in text
    assert "largest rho 0" not in text
    assert cli_main(url, "headroom", "a", "--json").json()["rho"] == 0


def test_the_headroom_of_an_uncapped_subset_is_unbounded(tmp_path):
    """No cap touches the variables: any epsilon and any rho, no binding cap (the one headroom,
    operations.cap_accounting's; budget's basic-only one is gone)."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text("dataset: d\nself_approval: true\nvariables: [{name: a}, {name: b}]\n"
                                     "caps:\n  - {name: pure, subset: [a], epsilon: 5}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    room = cli_main(url, "headroom", "b", "--json").json()
    assert (room["epsilon"], room["epsilon_binding"], room["rho"], room["rho_binding"]) == ("inf", None, "inf", None)
    assert ledger.open(url).headroom(["b"]).epsilon == math.inf


LEDGER_RELEASES = st.lists(st.tuples(
    st.sampled_from(["{name: laplace, epsilon: %s}", "{name: gaussian, sigma: %s, sensitivity: 1}"]),
    st.sampled_from(["1/2", "1", "2", "3"]), st.sampled_from(["[a]", "[a, b]"]),
    st.booleans()), min_size=1, max_size=4)  # (a release the cap refuses is left out)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(releases=LEDGER_RELEASES, limit=st.sampled_from(["6", "9", "14"]))
def test_a_plan_of_the_headroom_passes_check_and_one_slightly_over_is_refused(tmp_path_factory, releases, limit):
    """For each mechanism, the boundary `headroom` states is the one `check` draws, on ledgers
    recorded in full before any output (all planned) or one by one (some published before others
    were recorded): the same filters either way."""
    directory = tmp_path_factory.mktemp("boundary")
    url = f"sqlite:///{directory / 'l.db'}"
    book = ledger.open(url)
    book.add_dataset({"dataset": "d", "delta": "1e-9", "self_approval": True, "variables": [{"name": "a"}, {"name": "b"}],
                      "caps": [{"name": "c", "subset": ["a"], "epsilon": limit, "delta": "1e-9"}]})
    clock = Clock()
    with mock.patch("ledger.store.session_state.now", clock):
        for k, (mechanism, value, reads, published) in enumerate(releases):
            entry = f"  - {{id: r{k}, reads: {reads}, mechanism: {mechanism % value}"
            entry += (f", status: published, published_at: \"{(clock.at + timedelta(seconds=1)).isoformat()}\"}}"
                      if published else "}")
            (directory / f"r{k}.yaml").write_text("dataset: d\nreleases:\n" + entry + "\n")
            try:
                book.record(directory / f"r{k}.yaml")
            except BudgetRefused:
                pass

        def admitted(mechanism: str) -> bool:
            plan = directory / "plan.yaml"
            plan.write_text(f"dataset: d\nreleases:\n  - {{id: p, reads: [a], mechanism: {mechanism}}}\n")
            return book.check(plan).ok

        for kind in ("any", "laplace"):
            room = book.headroom(["a"], mechanism=kind)
            epsilon = F(room.epsilon)
            if math.isinf(float(epsilon)) or epsilon <= 0:
                continue
            over = epsilon * (1 + F(1, 10**6)) + F(1, 10**9)
            plan = ('{name: declared}, guarantees: [{epsilon: "%s"}]' if kind == "any"
                    else '{name: laplace, epsilon: "%s"}')
            assert admitted(plan % epsilon)
            assert not admitted(plan % over)
        room = book.headroom(["a"], mechanism="gaussian")
        assert room.epsilon is None
        if room.multiplier and not math.isinf(float(room.multiplier)):
            m = F(room.multiplier)
            assert room.rho == 1 / (2 * m * m)
            assert admitted('{name: gaussian, sigma: "%s", sensitivity: 1}' % m)
            assert not admitted('{name: gaussian, sigma: "%s", sensitivity: 1}' % (m * (1 - F(1, 10**6))))


def test_a_laplace_plan_may_take_more_than_any_epsilon_dp_plan_and_headroom_says_how_much(tmp_path):
    """The worst epsilon-DP mechanism (randomized response's curve) leaves less room than a Laplace,
    which `check` admits past that headroom. Asked for a Laplace, headroom gives check's boundary
    for it; the worst case stays the default, and says so. The cap, 5 at
    1e-9, is a Rényi filter at order 9 (fixed by its epsilon and delta); it holds a Gaussian of
    sigma/sensitivity 2 (the curve a / 8) and a Laplace of 1 (Mironov 2017, Prop 6): the new
    release's curve at that order may take the statement (CKS 2020 Prop 12 at half the delta) to 5,
    0.7195 for randomized response's curve, 0.7494 for the Laplace's (this test's roots)."""
    from dp_accounting.rdp import rdp_privacy_accountant
    from scipy.optimize import brentq

    from conftest import _reference_cap_order, _reference_prop12
    from test_accountants import rr_curve

    url = f"sqlite:///{tmp_path / 'e.db'}"
    (tmp_path / "d.yaml").write_text("dataset: e\nself_approval: true\ndelta: 1e-9\nvariables: [{name: a}]\n"
                                     "caps:\n  - {name: c, subset: [a], epsilon: 5, delta: 1e-9, filter: renyi}\n")
    (tmp_path / "r.yaml").write_text("dataset: e\nreleases:\n"
                                     "  - {id: g, reads: [a], mechanism: {name: gaussian, sigma: 2, sensitivity: 1}}\n"
                                     "  - {id: l, reads: [a], mechanism: {name: laplace, epsilon: 1}}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    worst = F(cli_main(url, "headroom", "a", "--json").json()["epsilon_exact"])
    laplace = F(cli_main(url, "headroom", "a", "--mechanism", "laplace", "--json").json()["epsilon_exact"])
    order = _reference_cap_order(5, 1e-9)
    assert order == 9
    held = order / 8 + rdp_privacy_accountant._laplace_rdp(1.0, order)
    any_root = brentq(lambda e: _reference_prop12(held + rr_curve(order, e), order, 5e-10) - 5, 1e-3, 5, xtol=1e-14)
    laplace_root = brentq(lambda e: _reference_prop12(held + rdp_privacy_accountant._laplace_rdp(e, order), order,
                                                      5e-10) - 5, 1e-3, 5, xtol=1e-14)
    assert (round(any_root, 4), round(laplace_root, 4)) == (0.7195, 0.7494)
    assert float(worst) == pytest.approx(any_root, rel=1e-7)
    assert float(laplace) == pytest.approx(laplace_root, rel=1e-7)
    assert laplace > worst * F(101, 100)

    def check(mechanism: str) -> int:
        (tmp_path / "p.yaml").write_text(f"dataset: e\nreleases:\n  - {{id: p, reads: [a], mechanism: {mechanism}}}\n")
        return cli_main(url, "check", tmp_path / "p.yaml").code

    assert check('{name: laplace, epsilon: "%s"}' % laplace) == 0
    assert check('{name: declared}, guarantees: [{epsilon: "%s"}]' % laplace) == 1  # any epsilon-DP: over
    assert check('{name: declared}, guarantees: [{epsilon: "%s"}]' % worst) == 0


@pytest.mark.parametrize("multiplier, delta", [(F(3), F(1, 10**6)), (F(1, 2), F(1, 10**9)), (F(40), F(1, 10**3))])
def test_the_gaussian_headroom_at_a_delta_is_its_exact_privacy_profile(multiplier, delta):
    """`headroom --mechanism gaussian`'s epsilon at delta: the exact profile (Balle and Wang 2018,
    Thm 8), by the tests' own mpmath bisection; never below it."""
    import mpmath
    from exact_profiles import epsilon_at

    from ledger.accounting.catalogue import gaussian_epsilon

    exact = epsilon_at(mpmath.mpf(delta.numerator) / delta.denominator, s=1 / mpmath.mpf(multiplier), high=100.0)
    ours = gaussian_epsilon(multiplier, delta)
    assert exact - 1e-12 <= ours <= exact * (1 + 1e-8) + 1e-11


def test_figures_read_as_the_others_delta_as_given_long_ones_rounded(tmp_path):
    """(a) `--delta 0.999999` was printed `1 × 10⁰`; (b) `check`'s charge of an implied
    Gaussian on a rho cap was its 12 digits (`+0.0359257023278`) and the total after it a long
    fraction; (c) `headroom --mechanism gaussian` printed rho 1 / (2 m^2) as a 50-digit
    fraction. Each now reads as the other figures do; --json keeps every one exact."""
    import re

    from ledger.accounting.catalogue import implied_gaussian_multiplier

    url = new_ledger(tmp_path)
    (tmp_path / "g.yaml").write_text(releases_yaml(["g"], "{name: gaussian, sigma: 3, sensitivity: 1}", "[b]"))
    assert cli_main(url, "record", tmp_path / "g.yaml").code == 0
    assert "at delta 0.999999 " in cli_main(url, "subset", "b", "--delta", "0.999999").out
    assert cli_main(url, "subset", "b", "--delta", "0.999999", "--json").json()["delta_exact"] == "999999/1000000"

    (tmp_path / "p.yaml").write_text(releases_yaml(["p"], "{name: gaussian, epsilon: 1, delta: 1e-5}", "[b]"))
    checked = cli_main(url, "check", tmp_path / "p.yaml")
    (line,) = [line for line in checked.out.splitlines() if "cap zcdp" in line]
    assert "this plan +0.036," in line and "after 0.0915," in line  # 1/18 + rho = 0.09148.., rounded up
    assert not re.search(r"\d{6}", line), line
    rho = next(c for c in cli_main(url, "check", tmp_path / "p.yaml", "--json").json()["caps"]
               if c["cap"] == "zcdp")
    multiplier = implied_gaussian_multiplier(F(1), F(1, 10**5))
    assert F(rho["charge_exact"]) >= 1 / (2 * multiplier**2) > F(rho["charge_exact"]) * (1 - F(1, 10**11))

    text = cli_main(url, "headroom", "b", "--mechanism", "gaussian").out
    shown = re.search(r"largest rho ([0-9.]+);", text).group(1)
    room = cli_main(url, "headroom", "b", "--mechanism", "gaussian", "--json").json()
    exact = F(room["rho_exact"])
    assert exact == 1 / (2 * F(room["multiplier_exact"]) ** 2)  # exact in --json
    assert len(shown) <= 6 and F(shown) <= exact < F(shown) + F(1, 10**4)  # rounded down for display
