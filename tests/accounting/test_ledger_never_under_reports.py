"""No sequence of ordinary steps makes the ledger print less than what was published.

A hypothesis `RuleBasedStateMachine` records releases (derived ones, families keyed and
random, mixed notions, explicit guarantees, exact releases), approves, publishes,
retracts and cancels them through `ledger.operations.transactions`, on a SQLite file, with a cap that
refuses some steps. After every step, for every subset U of the dataset's variables:

- the ledger's figure (`LedgerIndex.subset_cost`, what `subset` and `table` print) is
  at least the loss of what has been published, computed by a brute-force reference
  written here from docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6: every admissible choice of guarantee (the steward's
  choice: the minimum), every family case (the adversary's: the maximum), composed per
  notion and converted by the tests' own CKS conversion (conftest.py);
- the cap's stored figure is the figure `subset --delta` prints for its subset (one
  accounting, docs/explanation/model.md#composition);
and every refused step (exit 2 or 1) wrote nothing.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import tempfile
from decimal import Decimal, localcontext
from fractions import Fraction
from itertools import chain, combinations, product
from pathlib import Path

from conftest import _reference_cks
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from support import cli_main

from ledger.operations import transactions as operations
from ledger.store import configuration, decoded_history, engines, running_totals
from ledger.accounting.charge_choice import at_delta
from ledger.accounting.ledger_index import LedgerIndex
from ledger.core.errors import InputErrors
from ledger.core.records import CHARGED_STATUSES, Notion, Relation, Status

F = Fraction
VARIABLES = ("region", "a", "b")
SUBSETS = [frozenset(c) for c in chain.from_iterable(combinations(VARIABLES, k) for k in range(1, 4))]
DELTA = F(1, 10**9)
CAP = F(6)  # epsilon at 1e-9 on {a}: some steps are refused
MAX_RELEASES = 6
DATASET = f"""\
dataset: s
delta: 1e-9
variables: [{{name: region}}, {{name: a}}, {{name: b}}]
caps:
  - {{subset: [a], epsilon: {CAP}, delta: 1e-9}}
families:
"""
FAMILIES = "families:\n  - {id: keyed, partition: [region]}\n  - {id: random, partition: random}\n"
PUBLISHED_AT = '"2026-01-05T10:00:00+00:00"'

# --------------------------------------------------------------------------
# The reference: docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6, brute force. A loss is (pure, approx epsilon, approx
# delta, rho, pure as rho) of Fractions; None is "no certified bound".
# --------------------------------------------------------------------------

ZERO = (F(0),) * 5


def certified(g, relation):
    """docs/explanation/model.md#variables-subsets-and-neighbours: a guarantee for add/remove bounds replacement by group privacy of size 2."""
    pure = lambda e: (e, F(0), F(0), F(0), e * e / 2)  # noqa: E731
    if g.relation == relation:
        return {Notion.PURE: lambda: pure(g.epsilon), Notion.APPROX: lambda: (F(0), g.epsilon, g.delta, F(0), F(0)),
                Notion.ZCDP: lambda: (F(0), F(0), F(0), g.rho, F(0))}[g.notion]()
    if g.relation == Relation.REPLACE:
        return None  # a replacement guarantee says nothing of adding a record
    if g.notion == Notion.PURE:
        return pure(2 * g.epsilon)
    if g.notion == Notion.ZCDP:
        return (F(0), F(0), F(0), 4 * g.rho, F(0))
    with localcontext() as ctx:
        ctx.prec = 40
        e = (Decimal(g.epsilon.numerator) / Decimal(g.epsilon.denominator)).exp()
    return (F(0), 2 * g.epsilon, min(g.delta * (1 + F(e)), F(1)), F(0), F(0))


def release_options(release, subset, relation=Relation.REPLACE, whole=False):
    """docs/explanation/model.md#the-cost-of-one-release-on-a-subset: every cost c_r(U) the rules allow ([None]: not protected)."""
    touched = release.reads if whole else subset & release.reads
    if not touched:
        return [ZERO]
    options = [certified(g, relation) for g in release.guarantees if touched <= g.protects]
    options = [o for o in options if o is not None]
    return options or [None]


def add(x, y):
    return None if x is None or y is None else tuple(a + b for a, b in zip(x, y))


def family_alternatives(family, members, subset):
    """docs/explanation/model.md#families: for each choice of the members' guarantees, the costs the adversary picks from."""
    if not any(subset & m.reads for m in members):
        return [[ZERO]]
    keyed = family.partition is not None and family.partition & subset
    stays = [release_options(m, subset) for m in members]
    if not keyed:
        return [list(choice) for choice in product(*stays)]
    moves = [release_options(m, subset, Relation.ADD_REMOVE, whole=True) for m in members]
    result = []
    for stay, move in product(product(*stays), product(*moves)):
        result.append([*stay, *move, *(add(x, y) for x, y in combinations(move, 2))])
    return result


def epsilon_of(value, delta=DELTA) -> float:
    """docs/explanation/model.md#composition: deltas out of delta, rho by CKS, pure added after or converted first."""
    if value is None:
        return math.inf
    pure, approx_epsilon, approx_delta, rho, pure_rho = value
    remaining = delta - approx_delta
    if rho == 0:
        return math.inf if remaining < 0 else float(pure + approx_epsilon)
    if remaining <= 0:
        return math.inf
    return float(approx_epsilon) + min(float(pure) + _reference_cks(float(rho), float(remaining)),
                                       _reference_cks(float(rho + pure_rho), float(remaining)))


def reference_loss(releases, families, subset) -> float:
    """The loss on `subset` of these releases: the steward's best choice of guarantees,
    each family charged the adversary's worst case (Tan Prop 3.4; docs/explanation/model.md#the-cost-of-one-release-on-a-subset-2.6)."""
    units = [[[option] for option in release_options(r, subset)] for r in releases if r.family is None]
    for family in families.values():
        members = [r for r in releases if r.family == family.id]
        if members:
            units.append(family_alternatives(family, members, subset))
    best = math.inf
    for choice in product(*units):
        worst = max(epsilon_of(_sum(picked)) for picked in product(*choice))
        best = min(best, worst)
    return best


def _sum(values):
    total = ZERO
    for value in values:
        total = add(total, value)
    return total


# --------------------------------------------------------------------------
# Random steps
# --------------------------------------------------------------------------

reads_st = st.sets(st.sampled_from(VARIABLES), min_size=1).map(frozenset)
guarantee_st = st.tuples(
    st.sampled_from(["epsilon: 1/2", "epsilon: 1", "epsilon: 1/2, delta: 1e-10", "rho: 1/8", "rho: 1/2"]),
    st.sampled_from(["replace", "add-remove"]),
    st.booleans(),  # protect everything read, or a part of it
)


def guarantee_yaml(spec, reads, data) -> str:
    value, relation, everything = spec
    protects = sorted(reads) if everything else sorted(data.draw(st.sets(st.sampled_from(sorted(reads)), min_size=1)))
    numbers = ", ".join(f"{k.strip()}: \"{v.strip()}\"" for k, v in (part.split(":") for part in value.split(",")))
    return f"{{protects: [{', '.join(protects)}], {numbers}, relation: {relation}}}"


class Steps(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="ledger-steps-"))
        self.path = self.directory / "ledger.db"
        self.url = f"sqlite:///{self.path}"
        (self.directory / "dataset.yaml").write_text(DATASET.replace("families:\n", ""))
        assert cli_main(self.url, "dataset", "add", self.directory / "dataset.yaml").code == 0
        self.engine = engines.make_engine(self.url)
        self.ids: list[str] = []
        self.count = 0
        self.families_declared = False

    def teardown(self):
        self.engine.dispose()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- the steps -----------------------------------------------------------

    def attempt(self, step):
        """Run one step; a refusal (bad input, a broken cap) must write nothing."""
        before = self.dump()
        try:
            step()
        except (InputErrors, operations.BudgetRefused):
            assert self.dump() == before, "a refused step wrote something"
            return False
        return True

    @rule(data=st.data(), reads=reads_st, kind=st.sampled_from(["declared", "laplace", "gaussian", "exact", "derived"]),
          status=st.sampled_from(["planned", "published"]), family=st.sampled_from([None, None, "keyed", "random"]))
    def record(self, data, reads, kind, status, family):
        if len(self.ids) >= MAX_RELEASES:
            return
        rid = f"r{self.count}"
        self.count += 1
        lines = [f"  - id: {rid}", f"    status: {status}"]
        if status == "published":
            lines.append(f"    published_at: {PUBLISHED_AT}")
        if kind == "derived":
            if not self.ids:
                return
            parent = data.draw(st.sampled_from(self.ids))
            lines += ["    reads: []", f"    derived_from: [{parent}]"]
        else:
            if family == "keyed":
                reads = reads | {"region"}
            lines.append(f"    reads: [{', '.join(sorted(reads))}]")
            if family:
                lines.append(f"    family: {family}")
            if kind == "exact":
                lines.append("    mechanism: {name: exact}")
            elif kind == "gaussian":
                lines.append("    mechanism: {name: gaussian, rho: \"1/8\"}")
            else:
                lines.append("    mechanism: {name: laplace, epsilon: \"1/2\"}" if kind == "laplace"
                             else "    mechanism: {name: declared}")
                if kind == "declared" or data.draw(st.booleans()):  # a laplace may carry claims too
                    specs = data.draw(st.lists(guarantee_st, min_size=1, max_size=2))
                    lines.append("    guarantees: [" + ", ".join(guarantee_yaml(s, reads, data) for s in specs) + "]")
        text = "dataset: s\n" + FAMILIES + "releases:\n" + "\n".join(lines) + "\n"
        path = self.directory / f"{rid}.yaml"
        path.write_text(text)
        if self.attempt(lambda: operations.record(self.engine, operations.release_builder([path], "clerk"), "clerk")):
            self.ids.append(rid)

    @rule(which=st.integers(0, MAX_RELEASES), action=st.sampled_from(["approve", "publish", "retract", "cancel"]))
    def change(self, which, action):
        if not self.ids:
            return
        rid = self.ids[which % len(self.ids)]
        self.attempt(lambda: operations.change_status(self.engine, rid, action, "approver"))

    @rule(which=st.integers(0, MAX_RELEASES))
    def approve_and_publish(self, which):
        if not self.ids:
            return
        rid = self.ids[which % len(self.ids)]
        if self.attempt(lambda: operations.change_status(self.engine, rid, "approve", "approver")):
            self.attempt(lambda: operations.change_status(self.engine, rid, "publish", "approver"))

    # -- what must hold after every step -------------------------------------

    def dump(self) -> dict:
        with sqlite3.connect(self.path) as connection:
            tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return {t: sorted(map(repr, connection.execute(f'SELECT * FROM "{t}"'))) for t in tables}

    @invariant()
    def never_below_what_was_published(self):
        from sqlmodel import Session

        with Session(self.engine) as session:
            snapshot = decoded_history.snapshot(session, "s")
            totals = running_totals.cap_totals(session, "s")
            (cap,) = configuration.caps(session, "s")
        releases = list(snapshot.releases.values())
        charged = [r for r in releases if r.status in CHARGED_STATUSES]
        published = [r for r in releases if r.status in (Status.PUBLISHED, Status.RETRACTED)]
        index = LedgerIndex(VARIABLES, charged, snapshot.families.values())
        for subset in SUBSETS:
            figure = index.subset_cost(subset, at_delta(DELTA)).spend.epsilon(DELTA)
            truth = reference_loss(published, snapshot.families, subset)
            assert float(figure) >= truth * (1 - 1e-9) - 1e-12, (sorted(subset), float(figure), truth,
                                                                  [r.id for r in published])
            if subset == cap.subset:
                stored = totals[cap.name].value
                assert float(stored) == float(figure) or math.isclose(float(stored), float(figure), rel_tol=1e-12), \
                    ("one accounting", float(stored), float(figure))
            if not charged or all(r.status in (Status.PUBLISHED, Status.RETRACTED) for r in charged):
                # nothing reserved: the figure is the reference's, not more
                assert float(figure) <= truth * (1 + 1e-9) + 1e-12, (sorted(subset), float(figure), truth)


Steps.TestCase.settings = settings(max_examples=40, stateful_step_count=12, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_ledger_never_under_reports = Steps.TestCase
