"""The headline's figures: the loss on the protected subset (docs/explanation/model.md#public-and-protected-variables; Tan, section 3).

Tan's point is that some variables are public by design and released exactly:
a table by degree programme is published with its exact margins, and that
variable's ∞ is expected. The headline of every report and of `table` is
therefore the loss on the *protected* subset P, every variable not classified
public -- Tan's epsilon on U = P (Definition 2.2; the cost composes over the
releases' restrictions to P, Prop 3.4) -- with the worst single protected
variable and the worst protected pair. ∞ on P is an alarm. The public
variables are listed apart, an ∞ of theirs neutral ("public, released exactly":
read by a release with no guarantee covering it; reasons.py). The
whole-dataset figure (U = V, Prop 3.1) stays, labelled as ordinary DP.

Pure: figures come from the engine (`LedgerIndex.subset_cost`, the risk
table's total row, the pair grid); floats only rank pairs, the printed pair
figure is the exact one. `best_headline` puts in the figures `subset`, `table`
and `pairs` print (the smallest valid one of the accountants). Computed here,
below the API, so that `table`, the façade and the report show one headline;
reporting/headline.py puts it in words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from ..accounting import every_pair, index_figures
from ..accounting.exact_sums import SpendGrid
from ..accounting.grid_figures import epsilon_floats
from ..accounting.ledger_index import LedgerIndex
from ..accounting.spend import Spend
from ..core.lazy import lazy_module
from ..core.numbers import Number, is_infinite
from ..core.records import Dataset
from .reasons import unbounded_reason
from .shown_figures import ShownPairs, TableAccounts, choose, shown_pair_floats

np = lazy_module("numpy")  # imported on first use: `--help` never needs it

@dataclass(frozen=True)
class Headline:
    """protected / public: the variables on each side, in dataset order.
    epsilon: the loss on the protected subset at `delta` (∞: an alarm); rho: the same
    as rho-zCDP, None when it has (epsilon, delta) parts; worst_variable: (name,
    epsilon) of the most exposed protected variable; worst_pair: (a, b, epsilon) of the
    most exposed pair of protected variables (None with fewer than two);
    public_losses: (name, epsilon) of each public variable (∞ expected, neutral);
    dataset_wide: the whole-dataset epsilon (ordinary DP)."""

    protected: tuple[str, ...]
    public: tuple[str, ...]
    epsilon: Number
    rho: Number | None
    worst_variable: tuple[str, Number] | None
    worst_pair: tuple[str, str, Number] | None
    public_losses: tuple[tuple[str, Number], ...]
    dataset_wide: Number
    unprotected: tuple[str, ...]  # protected variables whose loss is ∞: each an alarm
    # why `epsilon`, the worst variable's and the worst pair's figures are ∞, when they are
    # (reasons.unbounded_reason: a read without a certified bound, or a keyed family's move)
    why: str | None = None
    worst_why: str | None = None
    pair_why: str | None = None
    # what `epsilon` means for an attacker (risk.risk_sentence); None with no finite protected figure
    in_words: str | None = None

    @property
    def alarm(self) -> bool:
        return bool(self.protected) and is_infinite(self.epsilon)

    def to_json(self) -> dict:
        from ..core.numbers import figure_fields, to_json

        return {
            "protected": list(self.protected),
            "public": list(self.public),
            # the one JSON shape of a figure: `_exact` is null for an irrational figure (README, "JSON figures")
            **figure_fields("epsilon", self.epsilon),
            **figure_fields("rho", self.rho),
            "alarm": self.alarm,
            "worst_variable": None if self.worst_variable is None else
            {"variable": self.worst_variable[0], **figure_fields("epsilon", self.worst_variable[1])},
            "worst_pair": None if self.worst_pair is None else
            {"subset": list(self.worst_pair[:2]), **figure_fields("epsilon", self.worst_pair[2])},
            "public_released_exactly": {name: to_json(value) for name, value in self.public_losses},
            "unprotected": list(self.unprotected),
            **figure_fields("dataset_wide_ordinary_dp", self.dataset_wide),
        }


def headline(index: LedgerIndex, dataset: Dataset, delta: Fraction, objective, totals: Sequence[Spend],
             dataset_wide: Spend, pair_grid: SpendGrid | None = None,
             pair_floats: np.ndarray | None = None,
             worst_pair: tuple[str, str, Number] | None = None) -> Headline:
    """The headline of a dataset's ledger. `totals`: the risk table's total row (one Spend per
    variable, in index order); `pair_grid` (and its float epsilons): the pair grid when the
    caller has it (the report does), else it is computed here."""
    variables = list(index.variables)
    public = set(dataset.public_names)
    protected = tuple(v for v in variables if v not in public)
    column = {name: k for k, name in enumerate(variables)}
    allowance = index.allowance  # (the dataset's: Dataset.allowance)
    loss = {name: totals[column[name]].epsilon(delta, allowance) for name in variables}
    if protected:
        spend = index.subset_spend(frozenset(protected), objective)
        epsilon = spend.epsilon(delta, allowance)
        rho = None if spend.is_pure or spend.unbounded else spend.zcdp_rho()
        if spend.unbounded:
            rho = None
        worst = max(protected, key=lambda name: (_key(loss[name]), -column[name]))
        worst_variable = (worst, loss[worst])
    else:
        epsilon, rho, worst_variable = Fraction(0), None, None
    infinite = [name for name in protected if is_infinite(loss[name])]
    if len(protected) >= 2 and worst_pair is None and infinite and pair_grid is None:
        # a pair holding a variable with ∞ loss is ∞ (the loss is monotone in the subset, Tan
        # Prop 3.2): the first such pair in dataset order, without the O(V²) pair grid
        first = next(k for k, name in enumerate(protected) if name in infinite)
        a, b = (protected[0], protected[1]) if first <= 1 else (protected[0], protected[first])
        worst_pair = (a, b, loss[protected[first]])
    if len(protected) >= 2 and worst_pair is None:
        if pair_grid is None:
            pair_grid = index.pair_matrix(objective)
        if pair_floats is None:

            pair_floats = epsilon_floats(pair_grid, delta, allowance)
        ids = np.asarray([column[name] for name in protected])
        sub = pair_floats[np.ix_(ids, ids)]
        upper = np.triu_indices(len(ids), k=1)
        best = int(np.argmax(sub[upper]))  # the first of the largest, in dataset order
        i, j = ids[upper[0][best]], ids[upper[1][best]]
        worst_pair = (variables[i], variables[j], pair_grid.spend(int(i), int(j)).epsilon(delta, allowance))
    elif len(protected) < 2:
        worst_pair = None
    return with_reasons(Headline(
        protected=protected,
        public=tuple(v for v in variables if v in public),
        epsilon=epsilon,
        rho=rho,
        worst_variable=worst_variable,
        worst_pair=worst_pair,
        public_losses=tuple((v, loss[v]) for v in variables if v in public),
        dataset_wide=dataset_wide.epsilon(delta, allowance),
        unprotected=tuple(v for v in protected if is_infinite(loss[v])),
    ), index)


def with_reasons(head: Headline, index: LedgerIndex) -> Headline:
    """The headline with the reason of each of its ∞ figures (reasons.unbounded_reason, from the
    releases of `index`: the words `subset` prints for the same subset); asked only of an ∞."""
    public = frozenset(head.public)

    def why(names, value) -> str | None:
        return unbounded_reason(index, names, public) if is_infinite(value) else None

    return replace(head, why=why(head.protected, head.epsilon) if head.protected else None,
                   worst_why=None if head.worst_variable is None else why(head.worst_variable[:1], head.worst_variable[1]),
                   pair_why=None if head.worst_pair is None else why(head.worst_pair[:2], head.worst_pair[2]))


def _key(value: Number) -> float:
    return float("inf") if is_infinite(value) else float(value)


def best_headline(head, index, delta: Fraction, accounts: TableAccounts, pairs=None, grid=None):
    """The headline with the figures `subset` and `table` print: the protected subset's smallest
    valid figure, the worst variable by the total row shown, the worst protected pair by the
    figures `pairs` prints (from the report's pairs panel when given), the whole dataset's."""
    from ..accounting.charge_choice import at_delta

    per_variable, wide = accounts.shown()
    loss = {name: f.epsilon for name, f in zip(accounts.variables, per_variable)}
    changes = {"dataset_wide": wide.epsilon,
               "public_losses": tuple((name, loss[name]) for name, _ in head.public_losses)}
    chosen = accounts.accountant  # `--accountant NAME`: every figure of the headline is that accountant's
    if head.protected:
        spend = index.subset_spend(frozenset(head.protected), at_delta(delta))  # (its releases are not listed)
        if not spend.unbounded:
            changes["epsilon"] = choose(index_figures.subset_figures(index, head.protected, delta, spend,
                                                                   invalid_pld=chosen == "pld"), chosen).epsilon
        column = {name: k for k, name in enumerate(accounts.variables)}
        worst = max(head.protected, key=lambda name: (float(loss[name]), -column[name]))
        changes["worst_variable"] = (worst, loss[worst])
    if head.worst_pair is not None and not is_infinite(head.worst_pair[2]):
        if pairs is not None and pairs.protected_only and pairs.highest:
            top = pairs.highest[0]
            changes["worst_pair"] = (top.a, top.b, top.epsilon)
        elif pairs is not None and pairs.highest and len(head.protected) == len(accounts.variables):
            top = pairs.highest[0]
            changes["worst_pair"] = (top.a, top.b, top.epsilon)
        else:
            if grid is None:
                grid = index.pair_matrix(at_delta(delta))
            rdp = every_pair.pair_rdp(index, delta, grid, pld_limit=0)  # (the PLD is never shown)
            shown = shown_pair_floats(grid, rdp, epsilon_floats(grid, delta, index.allowance))
            names = list(index.variables)
            ids = np.asarray([names.index(name) for name in head.protected])
            sub = shown[np.ix_(ids, ids)]
            upper = np.triu_indices(len(ids), k=1)
            best = int(np.argmax(sub[upper]))  # the first of the largest, in dataset order
            i, j = int(ids[upper[0][best]]), int(ids[upper[1][best]])
            figure = ShownPairs(index, delta, grid, rdp).figure(i, j)
            changes["worst_pair"] = (names[i], names[j], figure.epsilon)
    if chosen is not None and changes.get("worst_pair", head.worst_pair) is not None:
        a, b, value = changes.get("worst_pair", head.worst_pair)
        if not is_infinite(value):  # the pair's figure by the accountant asked for, as `subset A B --accountant`
            pair_spend = index.subset_spend(frozenset((a, b)), at_delta(delta))
            changes["worst_pair"] = (a, b, choose(index_figures.subset_figures(
                index, (a, b), delta, pair_spend, invalid_pld=chosen == "pld"), chosen).epsilon)
    if head.protected and not is_infinite(changes.get("epsilon", head.epsilon)):
        from ..accounting.risk import figure_risks, short_sentence

        stated = None if spend.is_pure else delta  # (a pure figure holds at delta 0)
        changes["in_words"] = short_sentence(figure_risks(float(changes.get("epsilon", head.epsilon)), stated))
    return with_reasons(replace(head, **changes), index)
