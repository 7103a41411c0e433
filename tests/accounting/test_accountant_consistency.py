"""The same answer to the same question in every command.

`headroom` is derived from the decision `record` makes: a release at the printed headroom
is admitted and one slightly above it is refused. Monotonicity: adding a release never
lowers a printed figure nor a cap's filter figure. `audit verify` recomputes the caps' running
accountant states. A subset's Rényi figure and a Rényi-filter cap's are statements about the same
summed curve, at 1/44 of the delta over 22 fixed orders and at half of it at the cap's one order.
"""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime, timedelta
from fractions import Fraction as F

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import REFERENCE_ALLOWANCE, REFERENCE_FILTER_ORDERS, _reference_cap_order, _reference_prop12
from support import cli_main
from test_engine_properties import ALL_SUBSETS, VARIABLES, ledgers

from ledger.accounting import cap_decisions, cap_states, composition_figures, dp_events, figure_validity, index_figures, renyi_curves, subset_composition

DATASET = """\
dataset: d
self_approval: true  # (history recorded as published by its recorder)
delta: 1e-6
variables:
  - {name: a, classification: sensitive}
  - {name: b, classification: sensitive}
  - {name: c, classification: sensitive}
caps:
  - {name: a-cap, subset: [a], epsilon: 9, delta: 1e-6, filter: renyi}
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
    assert 0.5 < room["epsilon"] < 9 - 5.5  # the filter's figure for the history is about 5.65
    exact = F(room["epsilon_exact"])
    above = exact + F(1, 10**6)
    refused = cli_main(url, "check", declared_pure(tmp / "above.yaml", "x", above))
    assert refused.code == 1, refused.out
    admitted = cli_main(url, "record", declared_pure(tmp / "at.yaml", "x", exact))
    assert admitted.code == 0, admitted.err + admitted.out
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert cap["accountant"] == "rdp" and cap["current"] <= 9
    # and the text names the binding cap and the accountant deciding it
    assert room["epsilon_accountant"] == "rdp"  # the filter decides, not the pure sum
    text = cli_main(url, "headroom", "a").out
    assert "binding cap: a-cap, decided by rdp" in text


def test_headroom_of_a_pure_cap_is_the_pure_difference(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET.replace("epsilon: 9, delta: 1e-6, filter: renyi", "epsilon: 3"))
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
    """Every pair: the basic, rdp and pld figures `subset A B` gives, and the smallest valid of them."""
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
        assert entry["accountant"] == one["accountant"]
        assert entry["epsilon"] == pytest.approx(float(one["epsilon"]), rel=1e-12)  # (rdp over arrays: ulps)
        assert entry["epsilon"] <= float(one["accountants"]["basic"]["epsilon"])
    assert cli_main(url, "pairs", "--accountant", "pld").code == 0
    assert cli_main(url, "pairs", "--accountant", "exact").code == 2
    text = cli_main(url, "pairs").out
    assert "smallest valid figure of basic and rdp" in text  # (the PLD: information, never chosen)


# --------------------------------------------------------------------------
# Monotonicity: a property over random ledgers
# --------------------------------------------------------------------------


from exact_profiles import epsilon_at, rr_atoms  # noqa: E402

from ledger.accounting import budget  # noqa: E402
from ledger.accounting.catalogue import derive_guarantees  # noqa: E402
from ledger.core.records import Cap, Guarantee, Mechanism, Notion, Release, Status  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SUBSETS = (frozenset("a"), frozenset("b"), frozenset("ab"))


@st.composite
def a_release(draw, i: int):
    kind = draw(st.sampled_from(["pure", "gaussian", "laplace", "rho", "approx"]))
    reads = frozenset(draw(st.sampled_from(["a", "b", "ab"])))
    if kind == "gaussian":
        m = draw(st.sampled_from([F(1), F(2), F(5), F(10)]))
        mechanism = Mechanism("gaussian", (("sensitivity", F(1)), ("sigma", m)))
        guarantee = Guarantee(reads, Notion.ZCDP, rho=F(1, 2) / m**2)
    elif kind == "laplace":
        e = draw(st.sampled_from([F(1, 10), F(1, 2), F(1)]))
        mechanism, guarantee = Mechanism("laplace", (("epsilon", e),)), Guarantee(reads, Notion.PURE, epsilon=e)
    elif kind == "pure":
        e = draw(st.sampled_from([F(1, 10), F(1, 4), F(1)]))
        mechanism, guarantee = Mechanism("declared"), Guarantee(reads, Notion.PURE, epsilon=e)
    elif kind == "rho":
        r = draw(st.sampled_from([F(1, 100), F(1, 8), F(1, 2)]))
        mechanism, guarantee = Mechanism("declared"), Guarantee(reads, Notion.ZCDP, rho=r)
    else:
        e = draw(st.sampled_from([F(1, 10), F(1, 2)]))
        mechanism = Mechanism("declared")
        guarantee = Guarantee(reads, Notion.APPROX, epsilon=e, delta=draw(st.sampled_from([F(1, 10**9), F(1, 10**8)])))
    published = draw(st.booleans())
    times = {"recorded_at": T0 + timedelta(seconds=10 * i)}
    if published:
        times.update(status=Status.PUBLISHED, published_at=T0 + timedelta(seconds=10 * i + 5))
    else:
        times.update(status=Status.PLANNED)
    return Release(f"r{i}", "d", reads, mechanism, (guarantee,), **times)


@st.composite
def histories(draw):
    """Batches of identical releases (many small pure ones are where the Rényi filter beats the
    pure sum), each batch recorded together; a history is a list of batches."""
    batches, i = [], 0
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        template = draw(a_release(i))
        count = draw(st.sampled_from([1, 1, 10, 60]))
        batch = []
        for k in range(count):
            times = {"recorded_at": template.recorded_at + timedelta(milliseconds=k)}
            if template.published_at is not None:
                times["published_at"] = template.published_at + timedelta(milliseconds=k)
            batch.append(Release(f"r{i}-{k}", "d", template.reads, template.mechanism, template.guarantees,
                                 status=template.status, **times))
        batches.append(batch)
        i += 1
    return batches


def _summary(history) -> list:
    return [(b[0].mechanism.name, str(b[0].guarantees[0].epsilon or b[0].guarantees[0].rho), len(b),
             "".join(sorted(b[0].reads)), b[0].status.value) for b in history]


def printed(releases, subset, delta):
    return figure_validity.best(composition_figures.figures(subset_composition.composition(releases, [], subset), delta))


def cap_figure(releases, cap):
    """The figure a cap's filter holds `releases` to (cap_decisions.cap_decision on the running
    state): the Gaussian-DP or one-order Rényi statement, or the pure sum of a pure history."""
    total = budget.total_from_history(cap, releases, {})
    state = cap_states.state_from_history(cap, releases, {})
    return float(cap_decisions.cap_decision(cap, total.value, total.spend, state).value)


def filter_caps(delta, epsilon=F(10)) -> list[Cap]:
    """On each subset, a Rényi-filter cap (its order fixed by its epsilon and delta, conftest's
    reference) and a Gaussian-DP cap, both of `epsilon` at `delta`."""
    order = _reference_cap_order(float(epsilon), float(delta))
    return [Cap("d", f"{kind}-{''.join(sorted(s))}", s, epsilon=epsilon, delta=delta, filter=kind)
            for s in SUBSETS for kind in (f"renyi:{order:g}", "gaussian")]


@settings(max_examples=40, deadline=None)
@given(histories(), st.sampled_from([F(1, 10**6), F(1, 10**9)]))
def test_adding_a_release_never_lowers_a_printed_figure_nor_a_caps(history, delta):
    """Each prefix of a random history (releases recorded in order, some published at once)
    prints figures and cap filter figures that never fall, never above basic."""
    caps = filter_caps(delta)
    before_printed = {s: 0.0 for s in SUBSETS}
    before_accountant = {s: "basic" for s in SUBSETS}
    before_caps = {cap.name: 0.0 for cap in caps}
    for k in range(1, len(history) + 1):
        prefix = [r for batch in history[:k] for r in batch]
        for subset in SUBSETS:
            found = composition_figures.figures(subset_composition.composition(prefix, [], subset), delta)
            shown = figure_validity.best(found)
            assert float(shown.epsilon) <= float(found["basic"].epsilon) * (1 + 1e-12)
            # no tolerance (pld_accountant.pld_interval argues why the PLD figure cannot fall)
            assert float(shown.epsilon) >= before_printed[subset], (k, subset, shown, _summary(history))
            before_printed[subset], before_accountant[subset] = float(shown.epsilon), shown.accountant
        for cap in caps:
            value = cap_figure(prefix, cap)
            assert value >= before_caps[cap.name], (k, cap.name, value, before_caps[cap.name])
            before_caps[cap.name] = value


@st.composite
def one_release(draw, i: int):
    """One release of any kind the accountants know: Laplace, Gaussian, two-sided geometric, a
    subsampled Laplace (charged at its amplified epsilon), declared pure, rho or approximate;
    recorded at step i, published at once or only planned (the case turns adaptive)."""
    kind = draw(st.sampled_from(["other", "other", "other", "geometric", "subsampled"]))
    if kind == "other":  # Laplace, Gaussian, declared pure, rho or approximate (`a_release`)
        template = draw(a_release(i))
        reads, mechanism, guarantees = template.reads, template.mechanism, template.guarantees
    else:
        reads = frozenset(draw(st.sampled_from(["a", "b", "ab"])))
        if kind == "geometric":
            mechanism = Mechanism("geometric", (("scale", draw(st.sampled_from([F(2), F(5), F(20)]))),
                                                ("sensitivity", F(1))))
        else:
            mechanism = Mechanism("laplace", (("epsilon", draw(st.sampled_from([F(1, 2), F(1), F(2)]))),
                                              ("sample_size", draw(st.sampled_from([10, 50]))), ("population", 100)))
        derived, problems = derive_guarantees(mechanism, reads)
        assert not problems, problems
        guarantees = tuple(Guarantee(reads, g.notion, epsilon=g.epsilon, delta=g.delta, rho=g.rho,
                                     relation=g.relation) for g in derived)
    times = {"recorded_at": T0 + timedelta(seconds=10 * i)}
    if draw(st.booleans()):
        times.update(status=Status.PUBLISHED, published_at=T0 + timedelta(seconds=10 * i + 5))
    else:
        times.update(status=Status.PLANNED)
    return Release(f"r{i}", "d", reads, mechanism, guarantees, **times)


@st.composite
def sequences(draw):
    """Up to 12 releases, some repeated a few times (a setting met again), added one at a time."""
    found: list[Release] = []
    for i in range(draw(st.integers(min_value=1, max_value=8))):
        release = draw(one_release(i))
        for k in range(draw(st.sampled_from([1, 1, 2, 4]))):
            found.append(Release(f"{release.id}-{k}", "d", release.reads, release.mechanism, release.guarantees,
                                 status=release.status, recorded_at=release.recorded_at,
                                 published_at=release.published_at))
    return found


@settings(max_examples=60, deadline=None)
@given(sequences(), st.sampled_from([F(1, 10**6), F(1, 10**9)]))
def test_one_release_at_a_time_no_figure_ever_falls(releases, delta):
    """Adding a release never lowers a figure, strictly (no tolerance): the printed best
    figure, each accountant's own figure (PLD included, valid or not), and every cap's filter
    figure, on every subset; and `check` can never refuse A while `record` admits A + B."""
    caps = filter_caps(delta)
    before = {(s, name): 0.0 for s in SUBSETS for name in ("best", *figure_validity.ACCOUNTANTS)}
    before_caps = {cap.name: 0.0 for cap in caps}
    for k in range(1, len(releases) + 1):
        prefix = releases[:k]
        for subset in SUBSETS:
            found = composition_figures.figures(subset_composition.composition(prefix, [], subset), delta)
            shown = {"best": figure_validity.best(found), **found}
            for name, figure in shown.items():
                if not figure.available:
                    continue
                value = float(figure.epsilon)
                assert value >= before[subset, name], (k, "".join(sorted(subset)), name, value,
                                                       before[subset, name], _steps(prefix))
                before[subset, name] = value
        for cap in caps:
            value = cap_figure(prefix, cap)
            assert value >= before_caps[cap.name], (k, cap.name, value, before_caps[cap.name], _steps(prefix))
            before_caps[cap.name] = value


def _steps(releases) -> list:
    return [(r.mechanism.name, r.mechanism.params, [(g.notion.value, str(g.epsilon), str(g.rho), str(g.delta))
                                                    for g in r.guarantees], "".join(sorted(r.reads)), r.status.value)
            for r in releases]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from([F(1, 10), F(1, 2), F(1)]), max_size=5),
       st.lists(st.sampled_from([F(1), F(3), F(10)]), max_size=3),
       st.sampled_from([F(1, 10**6), F(1, 10**9)]))
def test_the_printed_and_cap_figures_are_never_below_the_exact_one(pure, noise, delta):
    """Declared pure releases (worst case: randomized response) and Gaussians: every printed
    figure and every cap figure (Rényi filter or Gaussian DP, the pure releases at the mu of
    randomized response) is at or above the exact privacy profile (Balle and Wang 2018)."""
    if not pure and not noise:
        return
    releases = [Release(f"p{i}", "d", frozenset("a"), Mechanism("declared"),
                        (Guarantee(frozenset("a"), Notion.PURE, epsilon=e),), recorded_at=T0 + timedelta(seconds=i),
                        status=Status.PUBLISHED, published_at=T0 + timedelta(seconds=i, milliseconds=500))
                for i, e in enumerate(pure)]
    releases += [Release(f"g{i}", "d", frozenset("a"),
                         Mechanism("gaussian", (("sensitivity", F(1)), ("sigma", m))),
                         (Guarantee(frozenset("a"), Notion.ZCDP, rho=F(1, 2) / m**2),),
                         recorded_at=T0 + timedelta(seconds=100 + i), status=Status.PLANNED)
                 for i, m in enumerate(noise)]
    s = math.sqrt(sum(1 / float(m) ** 2 for m in noise)) if noise else None
    exact = epsilon_at(float(delta), rr_atoms([float(e) for e in pure]) if pure else None, s=s)
    assert float(printed(releases, {"a"}, delta).epsilon) >= exact - 1e-12
    for cap in filter_caps(delta, epsilon=F(5)):
        if cap.subset == frozenset("a"):
            assert cap_figure(releases, cap) >= exact - 1e-12, cap.filter


def test_a_rho_release_joining_a_pure_history_never_lowers_its_caps_figure():
    """100 Laplace releases of 0.1 published one by one under a Rényi-filter cap of 9 at delta 1e-6
    (its order 4.3, fixed by (9, 1e-6)): the pure sum 10 is over, the filter's statement is Mironov's
    Laplace curve at 4.3 (as dp_accounting evaluates it) converted at half the delta, 5.725. A rho
    of 1/100 more adds 4.3 / 100 to the curve at that order: the figure rises by exactly that."""
    from dp_accounting.rdp import rdp_privacy_accountant

    def published(i, mechanism, guarantee):
        return Release(f"r{i}", "d", frozenset("a"), mechanism, (guarantee,), status=Status.PUBLISHED,
                       recorded_at=T0 + timedelta(seconds=10 * i), published_at=T0 + timedelta(seconds=10 * i + 5))

    history = [published(i, Mechanism("laplace", (("epsilon", F(1, 10)),)),
                         Guarantee(frozenset("a"), Notion.PURE, epsilon=F(1, 10))) for i in range(100)]
    rho = published(100, Mechanism("declared"), Guarantee(frozenset("a"), Notion.ZCDP, rho=F(1, 100)))
    order = _reference_cap_order(9, 1e-6)
    assert order == 4.3
    cap = Cap("d", "a", frozenset("a"), epsilon=F(9), delta=F(1, 10**6), filter=f"renyi:{order:g}")
    before, after = cap_figure(history, cap), cap_figure(history + [rho], cap)
    laplace = 100 * rdp_privacy_accountant._laplace_rdp(0.1, order)
    half = (1 - REFERENCE_ALLOWANCE) * 1e-6
    expected = _reference_prop12(laplace, order, half)
    assert round(expected, 3) == 5.725
    assert expected <= before <= expected * (1 + 1e-8)
    expected_after = _reference_prop12(laplace + order / 100, order, half)
    assert expected_after <= after <= expected_after * (1 + 1e-8)


# --------------------------------------------------------------------------
# cap list --as-of, and audit verify of the running accountant states
# --------------------------------------------------------------------------


def test_cap_list_as_of_uses_the_same_accountants_as_cap_list(ledger):
    url, tmp = ledger
    assert cli_main(url, "record", laplace_history(tmp / "h.yaml")).code == 0
    now = cli_main(url, "cap", "list", "--json").json()
    import time

    time.sleep(1.1)  # --as-of is never in the future; the store's clock keeps whole seconds
    later = cli_main(url, "cap", "list", "--json", "--as-of", datetime.now(UTC).isoformat()).json()
    assert now[0]["accountant"] == "rdp" and now[0]["current"] < 9  # the pure sum 10 would be over
    moment = ("as_of", "dataset_added_at", "dataset_existed")  # (--as-of states the moment it used)
    running = ("running", "running_exact")  # (test_cap_list_as_of_prints_the_running_figure_beside_a_renyi_caps)
    assert [{k: v for k, v in cap.items() if k not in moment + running} for cap in later] == [
        {k: v for k, v in cap.items() if k not in running} for cap in now]


def test_cap_list_as_of_prints_the_running_figure_beside_a_renyi_caps(ledger):
    """100 Laplace releases of 0.1 under a Rényi-filter cap: `cap list` prints beside the cap's figure
    the subset's running figure (22 fixed orders at 1/44 of the delta, with dp_accounting's Laplace
    curve 5.651); `--as-of` a moment after them prints the same."""
    from dp_accounting.rdp import rdp_privacy_accountant

    url, tmp = ledger
    assert cli_main(url, "record", laplace_history(tmp / "h.yaml")).code == 0
    share = 1e-6 * (1 - REFERENCE_ALLOWANCE) / len(REFERENCE_FILTER_ORDERS)
    running = min(100 * rdp_privacy_accountant._laplace_rdp(0.1, a) + math.log1p(-1 / a)
                  - (math.log(share) + math.log(a)) / (a - 1) for a in REFERENCE_FILTER_ORDERS)
    (now,) = cli_main(url, "cap", "list", "--json").json()
    assert running <= now["running"] <= running * (1 + 1e-8)
    import time

    time.sleep(1.1)  # --as-of is never in the future; the store's clock keeps whole seconds
    (later,) = cli_main(url, "cap", "list", "--json", "--as-of", datetime.now(UTC).isoformat()).json()
    assert later.get("running") == now["running"]


def test_audit_verify_recomputes_the_running_accountant_states(ledger):
    url, tmp = ledger
    assert cli_main(url, "record", laplace_history(tmp / "h.yaml", n=20)).code == 0
    assert cli_main(url, "record", declared_pure(tmp / "p.yaml", "p", "0.2")).code == 0
    assert cli_main(url, "audit", "verify").code == 0
    db = sqlite3.connect(url.removeprefix("sqlite:///"))
    (state,) = db.execute("SELECT state FROM cap_accountant_state WHERE cap = 'a-cap'").fetchone()
    state = json.loads(state)
    assert state["events"] == {"laplace:10": 20, "pure:1/5": 1}
    state["events"]["laplace:10"] = 2  # fewer releases: a looser filter would admit more
    db.execute("UPDATE cap_accountant_state SET state = ? WHERE cap = 'a-cap'", (json.dumps(state),))
    db.commit()
    verified = cli_main(url, "audit", "verify")
    assert verified.code == 1
    assert "running accountant state differs" in verified.out + verified.err
    assert "laplace:10" in verified.out + verified.err


# --------------------------------------------------------------------------
# The same figure in the report, the table, the headline and the Python API
# --------------------------------------------------------------------------


def test_the_report_the_table_and_the_api_print_the_figures_subset_prints(ledger):
    import csv
    import io

    import ledger as ledger_api

    url, tmp = ledger
    (tmp / "m.yaml").write_text(MIXED)
    assert cli_main(url, "record", tmp / "m.yaml").code == 0
    table = cli_main(url, "table", "--json").json()
    shown = table["total_shown"]["values"]
    for name in ("a", "b", "c"):
        one = cli_main(url, "subset", name, "--json").json()
        assert shown[name] == one["epsilon"], name
        assert table["total_shown"]["accountants"][name] == one["accountant"]
    whole = cli_main(url, "subset", "a", "b", "c", "--json").json()
    assert table["total_shown"]["dataset_wide"] == whole["epsilon"]
    assert table["headline"]["epsilon"] == whole["epsilon"]  # every variable is protected
    worst = max(cli_main(url, "pairs", "--json").json(), key=lambda p: p["epsilon"])
    assert table["headline"]["worst_pair"] == {"subset": worst["subset"], "epsilon": worst["epsilon"],
                                               "epsilon_exact": worst["epsilon_exact"]}
    # the report's CSV: its total row is the table's
    assert cli_main(url, "report", "--format", "csv", "--out", tmp / "r.csv").code == 0
    rows = {row["release"]: row for row in csv.DictReader(io.StringIO((tmp / "r.csv").read_text()))}
    total = rows[next(k for k in rows if k not in {"g1", "g2", "l1", "d1", "r1", "t1"})]
    for name in ("a", "b", "c"):
        assert float(total["{" + name + "}"]) == pytest.approx(shown[name], rel=1e-12)
    # the Python API
    book = ledger_api.open(url)
    loss = book.subset(["a"])
    assert (loss.epsilon, loss.accountant) == (pytest.approx(shown["a"], rel=1e-15), shown and
                                              table["total_shown"]["accountants"]["a"])
    assert set(loss.accountants) == {"basic", "rdp", "pld"}
    frame = book.table()
    assert frame.loc["All releases", "b"] == pytest.approx(shown["b"], rel=1e-15)
    api_pairs = book.pairs()
    cli_pairs = {tuple(p["subset"]): p for p in cli_main(url, "pairs", "--json").json()}
    for row in api_pairs.itertuples():
        assert row.epsilon == pytest.approx(cli_pairs[(row.variable_1, row.variable_2)]["epsilon"], rel=1e-15)
        assert row.accountant == cli_pairs[(row.variable_1, row.variable_2)]["accountant"]
    assert book.caps()[0].current == pytest.approx(cli_main(url, "cap", "list", "--json").json()[0]["current"])


def test_the_report_names_the_filter_behind_a_cap_figure(ledger):
    """A cap at a delta in the report names the filter its spend is decided by, as `cap list` does."""
    url, tmp = ledger
    assert cli_main(url, "record", laplace_history(tmp / "h.yaml")).code == 0
    listed = cli_main(url, "cap", "list", "--json").json()[0]
    out = tmp / "r.md"
    assert cli_main(url, "report", "--format", "md", "--out", out).code == 0
    row = next(line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith(f"| {listed['cap'].split('/')[-1]} |"))
    kind, _, order = listed["filter"].partition(":")
    assert kind == "renyi" and f"(filter: Rényi order {float(order):g})" in row and "at delta at" not in row


def test_the_reports_notion_line_names_the_accountants_that_decided(ledger):
    """The Notion line says which accountants' figures the report prints, not "basic
    composition" when the Rényi (or PLD) accountant decides the total row."""
    url, tmp = ledger
    out = tmp / "r.md"
    assert cli_main(url, "record", declared_pure(tmp / "p.yaml", "p", "0.2")).code == 0
    assert cli_main(url, "report", "--format", "md", "--out", out).code == 0
    notion = next(line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| Notion |"))
    assert "pure epsilon" in notion and "Rényi" not in notion  # one pure release: the pure sum
    assert cli_main(url, "record", laplace_history(tmp / "h.yaml")).code == 0
    assert cli_main(url, "report", "--format", "md", "--out", out).code == 0
    notion = next(line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| Notion |"))
    assert "the Rényi DP accountant" in notion and "smallest valid figure" in notion, notion
    subset = cli_main(url, "subset", "a", "--json").json()
    assert subset["accountant"] == "rdp"


def test_a_caps_state_keeps_no_pld_figure_and_check_decides_by_the_filter(ledger):
    """The PLD figure is information, never a cap's: 100 Laplace releases of 0.1 recorded as one plan
    before any output, under a Rényi-filter cap of 6 at 1e-6 (order 5.6), leave a running state of
    their events alone (no PLD memo), and `check` of one more release is decided by the filter, its
    figure the Laplace curves at that order plus the pure release's, converted at half the delta
    (5.188, below the pure sum 10); a PLD figure slipped into the state is never read."""
    from dp_accounting.rdp import rdp_privacy_accountant

    url, tmp = ledger
    assert cli_main(url, "cap", "set", "a", "--name", "a-cap", "--epsilon", "6", "--delta", "1e-6",
                    "--filter", "renyi").code == 0
    planned = tmp / "planned.yaml"
    planned.write_text("dataset: d\nreleases:\n" + "".join(
        f"  - {{id: p{i}, reads: [a], mechanism: {{name: laplace, epsilon: 0.1}}}}\n" for i in range(100)))
    assert cli_main(url, "record", planned).code == 0
    db = sqlite3.connect(url.removeprefix("sqlite:///"))
    (text,) = db.execute("SELECT state FROM cap_accountant_state WHERE cap = 'a-cap'").fetchone()
    kept = json.loads(text)
    assert kept["events"] == {"laplace:10": 100} and "pld" not in kept
    plan = declared_pure(tmp / "plan.yaml", "q", "0.1")
    (cap,) = cli_main(url, "check", plan, "--json").json()["caps"]
    assert (cap["accountant"], cap["case"]) == ("rdp", "adaptive") and "order 5.6" in cap["theorem"]
    order = _reference_cap_order(6, 1e-6)
    assert order == 5.6

    def rr(a, e):  # randomized response's Rényi divergence (Mironov 2017, Prop 5)
        p = math.exp(e) / (1 + math.exp(e))
        return math.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)

    half = (1 - REFERENCE_ALLOWANCE) * 1e-6
    laplace = 100 * rdp_privacy_accountant._laplace_rdp(0.1, order)
    assert round(_reference_prop12(laplace, order, half), 3) == 5.188
    for field, curve in (("current", laplace), ("after", laplace + rr(order, 0.1))):
        expected = _reference_prop12(curve, order, half)
        assert expected <= cap[field] <= expected * (1 + 1e-8), field
    # a PLD figure slipped into the state (as one was kept there for a plan fixed in advance) is
    # never read: the decision is the filter's, the same
    from ledger.store import process_caches

    db.execute("UPDATE cap_accountant_state SET state = ? WHERE cap = 'a-cap'",
               (json.dumps({**kept, "pld": {"of": "0" * 64, "epsilon": 0.001}}),))
    db.commit()
    process_caches.STATES_CACHE.clear()  # (this process keeps the states it read while the head stands still)
    (again,) = cli_main(url, "check", plan, "--json").json()["caps"]
    assert again == cap


def test_an_adaptive_subset_shows_the_renyi_filter_figure_its_cap_is_held_to(tmp_path, reference_cks, reference_filter):
    """A release published before 50 Gaussians were recorded: the releases may have been chosen
    after its output was seen (adaptive, docs/explanation/accounting.md), so the Rényi order cannot be chosen
    afterwards. `subset` gives the Rényi filter's figure (the orders fixed in advance, the delta
    split over them), the one a cap at that delta is decided by, not the best single order's
    2.1101: a loss below the cap's own figure would let `subset` say a release fits that the cap
    refuses."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "s.yaml").write_text("dataset: s\nself_approval: true\ndelta: 1e-6\nvariables:\n  - {name: x}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "s.yaml").code == 0
    (tmp_path / "r.yaml").write_text(
        "dataset: s\nreleases:\n  - {id: old, reads: [x], mechanism: {name: laplace, epsilon: 0.5}, status: published,"
        " published_at: '2025-01-01'}\n" + "".join(
            f"  - {{id: g{k}, reads: [x], mechanism: {{name: gaussian, sigma: 20, sensitivity: 1}}}}\n"
            for k in range(50)))
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    shown = cli_main(url, "subset", "x", "--json").json()
    basic, rdp = shown["accountants"]["basic"], shown["accountants"]["rdp"]
    assert rdp["case"] == "adaptive"
    # independently: the summed curves (Laplace of scale 2, Mironov 2017 Prop 6; the Gaussians
    # a / (2 * 20^2)) converted by CKS 2020 Prop 12 at each of the 22 fixed orders with delta / 44 (the
    # filters' half of the delta, the other half kept for the approximate releases' allowance), the
    # least (statements fixed in advance share the delta)
    grid = renyi_curves._grids()
    laplace = renyi_curves.event_curve(dp_events.Event("laplace", F(2)))
    orders = grid["FILTER_ORDERS"]
    curve = laplace[grid["_FILTER_INDEX"]] + 50 * orders / (2 * 20 ** 2)
    share = 1e-6 * (1 - REFERENCE_ALLOWANCE) / len(REFERENCE_FILTER_ORDERS)
    by_order = curve + numpy.log1p(-1 / orders) - (math.log(share) + numpy.log(orders)) / (orders - 1)
    expected = float(by_order.min())
    assert expected * (1 - 1e-12) <= rdp["epsilon"] == pytest.approx(expected, rel=1e-8)  # rounded up (float noise aside)
    best, _ = renyi_curves.rdp_epsilon(laplace + 50 * grid["ORDERS"] / 800, 1e-6)
    assert best == pytest.approx(2.1101, abs=1e-4) and rdp["epsilon"] > best  # not valid here: not shown
    # basic: the pure 0.5 and rho 50/800 at the fixed orders or the zCDP filter, each at its share
    # (conftest's reference_filter); the smaller of the valid figures is shown
    assert shown["epsilon"] == min(basic["epsilon"], rdp["epsilon"])
    assert basic["epsilon"] == pytest.approx(reference_filter(pure=0.5, pure_rho=0.125, rho=50 / 800, delta=1e-6),
                                             rel=1e-6)
    # a cap set at that figure is, by default, the running figure as a filter (the releases are not all
    # Gaussian): it holds them to the very figure `subset` shows, so it is not over
    limit = f"{shown['epsilon'] * (1 + 1e-6):.7f}"
    assert cli_main(url, "cap", "set", "x", "--epsilon", limit, "--delta", "1e-6").code == 0
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    assert "running figure as a filter" in cap["theorem"]
    assert cap["current"] == shown["epsilon"] and cap["status"] != "over"
    # set as a Rényi filter, at the order its epsilon and delta fix, it holds the same curve at that
    # order converted at half the delta: a statement made before the releases, below the running figure
    assert cli_main(url, "cap", "set", "x", "--epsilon", limit, "--delta", "1e-6", "--filter", "renyi").code == 0
    (cap,) = cli_main(url, "cap", "list", "--json").json()
    order = _reference_cap_order(float(limit), 1e-6)
    assert f"Rényi filter at order {order:g}," in cap["theorem"]
    at_order = float(renyi_curves.laplace_curve(2.0, numpy.asarray([order]))[0]) + 50 * order / 800
    expected = _reference_prop12(at_order, order, (1 - REFERENCE_ALLOWANCE) * 1e-6)
    assert expected <= cap["current"] <= expected * (1 + 1e-8)
    assert cap["current"] < shown["epsilon"] and cap["status"] != "over"


@settings(max_examples=100, deadline=None)
@given(ledger=ledgers(max_releases=6), subset=st.sampled_from([s for s in ALL_SUBSETS if s]),
       delta=st.sampled_from([F(1, 10**9), F(1, 10**6), F(1, 10**3)]))
def test_a_subsets_renyi_figure_and_a_renyi_caps_state_one_curve_at_two_shares_of_the_delta(ledger, subset, delta):
    """The Rényi figure `subset` shows (each of 22 fixed orders at 1/44 of the delta, the smallest)
    and the figure a Rényi-filter cap at order a holds the same releases to (that order at half the
    delta) convert one summed curve by CKS 2020 Prop 12, whose delta term is -ln(delta) / (a - 1):
    at each order they differ by ln(22) / (a - 1). So a cap at any fixed order, plus that gap, is at
    or above the subset's figure, and the smallest over the orders is the subset's figure.
    (Histories without approximate releases: their epsilons enter the two statements differently,
    inside the cap's conversion, beside the subset's.)"""
    from hypothesis import assume

    from ledger.accounting import budget
    from ledger.accounting.charge_choice import at_delta
    from ledger.accounting.ledger_index import LedgerIndex
    from ledger.core.records import Cap

    families = {f.id: f for f in ledger.families}
    caps = [Cap("survey", f"c{a:g}", frozenset(subset), epsilon=F(10**6), delta=delta, filter=f"renyi:{a:g}")
            for a in REFERENCE_FILTER_ORDERS]
    total = budget.total_from_history(caps[0], ledger.releases, families)
    assume(total.spend.unbounded or not (total.spend.approx_epsilon or total.spend.approx_delta))
    index = LedgerIndex(VARIABLES, ledger.releases, ledger.families)
    basic = index.subset_cost(frozenset(subset), at_delta(delta)).spend
    shown = float(index_figures.subset_figures(index, subset, delta, basic)["rdp"].epsilon)
    state = cap_states.state_from_history(caps[0], ledger.releases, families)
    shifted, clamped = [], False
    for a, cap in zip(REFERENCE_FILTER_ORDERS, caps):
        decided = cap_decisions.cap_decision(cap, total.value, total.spend, state)
        if math.isinf(shown) or shown == 0:  # unprotected, or nothing spent (a zero curve is 0-DP)
            assert float(decided.value) == shown, (a, decided)
            continue
        if decided.accountant == "basic":  # a pure history its pure sum holds: no statement at the order
            assert float(decided.value) == float(total.value) and total.spend.is_pure
            continue
        if float(decided.value) == 0:  # (a statement below 0 at a large order and delta: 0)
            clamped = True
            continue
        value = float(decided.value) + math.log(len(REFERENCE_FILTER_ORDERS)) / (a - 1)
        # (each figure rounded up by a relative margin, renyi_curves._MARGIN, and summed in its own order)
        assert value >= shown * (1 - 1e-8), (a, decided, shown)
        shifted.append(value)
    if len(shifted) == len(caps) and not clamped:
        assert min(shifted) == pytest.approx(shown, rel=1e-8)
