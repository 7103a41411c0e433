"""A cancelled reservation stops counting; the figure is that of the releases left (docs/explanation/accounting.md).

A planned release whose output was never computed is a reservation: it counts while planned (a
figure is what the plan will have spent) and cancelling it frees it. Eight Gaussians (sigma 3,
sensitivity 1) planned together on {a}, g1-g3 published, g4-g8 cancelled: every reader prints the
filter's figure of the three left, rho = 3 / (2 * 9) = 1/6 (Bun and Steinke 2016), at the 22
Rényi orders fixed in advance (conftest's reference_filter), before the cancellation that of the
eight, and --as-of either moment the figure then. Whether the cancellation came before or after a
publication changes nothing: no figure depends on the moments. The caps {a} and {a, b}, set in the
dataset file before any release, are Rényi filters at the order fixed by their epsilon and delta
(cap_decisions.cap_order, an input here), whose figure is computed here by CKS 2020 Prop 12 at
delta / 2: A * rho + ln(1 - 1/A) - (ln(delta / 2) + ln A) / (A - 1).
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction as F
from types import SimpleNamespace

import pytest
from sqlalchemy import create_engine, text
from support import cli_main, tick_ledger_clock

from ledger.accounting import cap_decisions

DELTA = 1e-6
DATASET = """\
dataset: d
delta: 1e-6
self_approval: true
variables: [{name: a}, {name: b}]
caps:
  - {name: a, subset: [a], epsilon: 6, delta: 1e-6}
  - {name: ab, subset: [a, b], epsilon: 9, delta: 1e-6}
"""


def gaussians(reads: str, ids) -> str:
    return "dataset: d\nreleases:\n" + "".join(
        f"  - {{id: {rid}, reads: [{reads}], mechanism: {{name: gaussian, sigma: 3, sensitivity: 1}}}}\n"
        for rid in ids)


def cap_figure(limit: float, rho: float) -> float:
    """A Rényi-filter cap of `limit` at DELTA holding `rho`: its order's CKS 2020 Prop 12 at DELTA / 2."""
    order = cap_decisions.cap_order(SimpleNamespace(epsilon=F(limit), delta=F(1, 10**6), allowance=F(1, 2)))
    return order * rho + math.log1p(-1 / order) - (math.log(DELTA / 2) + math.log(order)) / (order - 1)


class Book:
    def __init__(self, url, directory):
        self.url, self.directory = url, directory

    def __call__(self, *args):
        result = cli_main(self.url, *map(str, args))
        assert result.code == 0, (args, result.out, result.err)
        return result

    def file(self, name, content):
        path = self.directory / name
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    def moment(self, kind, subject) -> str:
        engine = create_engine(self.url)
        try:
            with engine.connect() as connection:
                return connection.execute(text("SELECT at FROM audit_events WHERE kind = :k AND subject = :s"),
                                          {"k": kind, "s": subject}).scalar_one()
        finally:
            engine.dispose()

    def subset(self, *names, as_of=None):
        return self("subset", *names, "--json", *(("--as-of", as_of) if as_of else ())).json()

    def table(self, as_of=None):
        return self("table", "--json", *(("--as-of", as_of) if as_of else ())).json()

    def caps(self, as_of=None):
        return {c["cap"]: c for c in self("cap", "list", "--json", *(("--as-of", as_of) if as_of else ())).json()}

    def pairs(self, as_of=None):
        return self("pairs", "--json", *(("--as-of", as_of) if as_of else ())).json()

    def figures(self, as_of=None) -> dict:
        """Every reader's figure of {a} and {a, b} (which the same releases read)."""
        caps = self.caps(as_of)
        pair = {tuple(p["subset"]): p for p in self.pairs(as_of)}[("a", "b")]
        return {"subset": self.subset("a", as_of=as_of)["epsilon"], "pair": pair["epsilon"],
                "both": self.subset("a", "b", as_of=as_of)["epsilon"],
                "table": self.table(as_of)["total_shown"]["values"]["a"],
                "cap a": caps["a"]["current"], "cap ab": caps["ab"]["current"]}


def book(url, directory, cancel_first: bool) -> Book:
    """Eight planned on {a}; g1-g3 published; g4-g8 cancelled after g3's publication, or before
    g1's (`cancel_first`)."""
    ledger = Book(url, directory)
    ledger("dataset", "add", ledger.file("ds.yaml", DATASET))
    ledger("record", ledger.file("plan.yaml", gaussians("a", [f"g{k}" for k in range(1, 9)])))
    cancelled = [f"g{k}" for k in range(4, 9)]
    if cancel_first:
        for rid in cancelled:
            ledger("cancel", rid, "--reason", "the plan is smaller")
    for k in (1, 2, 3):
        ledger("approve", f"g{k}")
        ledger("publish", f"g{k}")
    if not cancel_first:
        ledger.before = ledger.moment("release.published", "g3")  # published, nothing cancelled yet
        ledger.figures_before = ledger.figures()
        for rid in cancelled:
            ledger("cancel", rid, "--reason", "stop: the published figures were enough")
    return ledger


@pytest.fixture(autouse=True)
def ticking(monkeypatch):
    tick_ledger_clock(monkeypatch)


@pytest.fixture
def stopped(ledger_url, tmp_path):
    return book(ledger_url, tmp_path, cancel_first=False)


def expected(reference_filter, count: int) -> dict:
    """The figures of `count` of the Gaussians: the running figure for every reader of a subset, the
    caps too (set before any release, each is the running figure's filter)."""
    figure = reference_filter(rho=count / 18, delta=DELTA)
    return {"subset": figure, "pair": figure, "both": figure, "table": figure, "cap a": figure, "cap ab": figure}


def test_a_plan_cut_short_is_charged_for_the_releases_left_in_every_view(stopped, reference_filter):
    shown = stopped.figures()
    assert shown == pytest.approx(expected(reference_filter, 3), rel=1e-9)
    assert stopped.subset("a")["releases"] == ["g1", "g2", "g3"]
    assert stopped.subset("a")["accountants"]["pld"]["valid"] is False  # information only
    assert all(c["status"] == "ok" for c in stopped.caps().values())
    assert cli_main(stopped.url, "audit", "verify").code == 0


def test_the_eight_count_until_the_cancellation_and_as_of_then(stopped, reference_filter):
    assert stopped.figures_before == pytest.approx(expected(reference_filter, 8), rel=1e-9)
    assert stopped.figures(as_of=stopped.before) == pytest.approx(stopped.figures_before, rel=1e-12)
    after = stopped.moment("release.cancelled", "g8")  # the last cancellation
    assert stopped.figures(as_of=after) == pytest.approx(expected(reference_filter, 3), rel=1e-9)


def test_the_moment_of_a_cancellation_changes_no_figure(stopped, tmp_path, reference_filter):
    """Cancelled before any output was seen or after three were published: the same figures."""
    (tmp_path / "first").mkdir()
    early = book(f"sqlite:///{tmp_path / 'first' / 'l.db'}", tmp_path / "first", cancel_first=True)
    assert early.figures() == stopped.figures()
    assert cli_main(early.url, "audit", "verify").code == 0


def test_a_cancellation_on_another_variable_changes_only_what_read_it(tmp_path, reference_filter):
    """g1-g3 read {a}, h1 reads {b} (all planned together); g1 is published, then h1 cancelled:
    {a} and {a, b} hold g1-g3, {b} nothing."""
    ledger = Book(f"sqlite:///{tmp_path / 'l.db'}", tmp_path)
    ledger("dataset", "add", ledger.file("ds.yaml", DATASET))
    ledger("record", ledger.file("plan.yaml", gaussians("a", ["g1", "g2", "g3"]) + textwrap.indent(
        "- {id: h1, reads: [b], mechanism: {name: gaussian, sigma: 3, sensitivity: 1}}\n", "  ")))
    assert ledger.subset("a", "b")["epsilon"] == pytest.approx(reference_filter(rho=4 / 18, delta=DELTA), rel=1e-9)
    ledger("approve", "g1")
    ledger("publish", "g1")
    ledger("cancel", "h1", "--reason", "b is not needed")
    assert ledger.figures() == pytest.approx(expected(reference_filter, 3), rel=1e-9)
    assert ledger.subset("b")["epsilon"] == 0
    assert cli_main(ledger.url, "audit", "verify").code == 0


def test_the_api_prints_the_commands_figure(stopped, reference_filter):
    from ledger import api

    found = api.open(stopped.url).subset(["a"])
    assert found.case == "adaptive"
    assert float(found.epsilon) == pytest.approx(stopped.subset("a")["epsilon"], rel=1e-12)
    assert float(found.epsilon) == pytest.approx(reference_filter(rho=1 / 6, delta=DELTA), rel=1e-9)


def test_a_cancellation_frees_room_under_a_cap(tmp_path, reference_filter):
    """As many planned under a cap of 5.1 at 1e-6 on {a} as it admits, and one more refused; the
    last cancelled (never computed), the one more fits. `cancel --json` names no cap over."""
    ledger = Book(f"sqlite:///{tmp_path}/l.db", tmp_path)
    ledger("dataset", "add", ledger.file("ds.yaml", DATASET.replace(
        "caps:\n  - {name: a, subset: [a], epsilon: 6, delta: 1e-6}\n  - {name: ab, subset: [a, b], epsilon: 9, delta: 1e-6}\n",
        "caps:\n  - {name: ca, subset: [a], epsilon: 5.1, delta: 1e-6, filter: renyi}\n")))
    def held(n):
        return cap_figure(5.1, n / 18)  # the Rényi filter at the cap's order

    count = next(n for n in range(1, 100) if held(n + 1) > 5.1)  # the most the cap admits
    ledger("record", ledger.file("plan.yaml", gaussians("a", [f"g{k}" for k in range(1, count + 1)])))
    assert ledger.caps()["ca"]["current"] == pytest.approx(held(count), rel=1e-9)
    tenth = ledger.file("tenth.yaml", gaussians("a", ["extra"]))
    assert cli_main(ledger.url, "record", tenth).code == 1
    assert ledger("cancel", f"g{count}", "--reason", "not needed", "--json").json()["caps_over"] == []
    assert ledger.caps()["ca"]["current"] == pytest.approx(held(count - 1), rel=1e-9)
    ledger("record", tenth)
    assert ledger.caps()["ca"]["current"] == pytest.approx(held(count), rel=1e-9)
    assert cli_main(ledger.url, "audit", "verify").code == 0
