"""Accounting events: one release's cost on a subset as the mechanism that produced it (like dp_accounting's `DpEvent`).

A release's cost on a subset U (docs/explanation/model.md#the-cost-of-one-release-on-a-subset) is a guarantee; where the
ledger also knows the mechanism that produced it, a tighter *event* describes the same cost:

    event        from                                   Rényi curve (order a)                 PLD
    gaussian     gaussian sigma, sensitivity            a / (2 m^2), m = sigma / sensitivity   dp_accounting Gaussian
                 (or epsilon, delta: m the smallest the
                 claim allows, catalogue.implied_
                 gaussian_multiplier, Balle-Wang Thm 8)
    laplace      laplace scale, sensitivity (or eps)    Mironov 2017, Prop 6                   dp_accounting Laplace
    dlaplace     geometric scale, integer sensitivity   the pure curve at eps = sens / scale   dp_accounting discrete Laplace
    pure         any pure guarantee (declared, Tan's    randomized response's curve            dp_accounting's worst case for
                 pair noise)                                                                    (eps, 0)-DP, i.e. randomized response
    sampled      a Laplace or geometric release run     the smaller, order by order, of        randomized response at the
                 on sample_size of population (without  randomized response's curve at the    amplified epsilon (dp_accounting
                 replacement): amplified epsilon e',    amplified e' and Wang, Balle and       has no PLD for sampling without
                 beta = n'/n, base epsilon e            Kasiviswanathan 2019, Thm 9 with       replacement; randomized response
                                                        randomized response's curve at e       is the worst e'-DP mechanism)
    zcdp         a rho guarantee without sigma          a * rho                                 none: the subset gets no PLD figure
    approx       an (eps, delta) guarantee              basic: deltas taken out of the target   basic, likewise

Invariant: an event is never invented (STYLE 5): a release whose guarantees are not the ones its
mechanism's parameters imply (explicit claims, old ledgers without the parameters, families) is
charged through its guarantee only (`spend_events`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..core.records import Mechanism, Relation, Release
from .catalogue import derive_guarantees, gaussian_multiplier
from .spend import Spend


@dataclass(frozen=True, slots=True)
class Event:
    """One release's cost on a subset, as an accounting event (module docstring).

    kind: gaussian (a = noise multiplier sigma / sensitivity), laplace (a = scale /
    sensitivity), dlaplace (a = 1 / scale, b = integer sensitivity), pure (a = epsilon),
    zcdp (a = rho), approx (a = epsilon, b = delta), sampled (a = the amplified epsilon the
    release's guarantee records, b = beta = sample_size / population, c = the base
    mechanism's epsilon). Numbers are exact where recorded so.
    """

    kind: str
    a: Fraction
    b: Fraction | int | None = None
    c: Fraction | None = None

    @property
    def key(self) -> str:
        return (f"{self.kind}:{self.a}" + ("" if self.b is None else f":{self.b}")
                + ("" if self.c is None else f":{self.c}"))

    @staticmethod
    def from_key(key: str) -> Event:
        return _event_from_key(key)

    @property
    def pure_epsilon(self) -> float | None:
        """The pure epsilon the event is certified at, if it is pure (its D_infinity)."""
        if self.kind in ("pure", "sampled"):
            return float(self.a)
        if self.kind == "laplace":
            return max(float(1 / self.a), 5e-324)  # (a Fraction quotient: no overflow for a huge scale)
        if self.kind == "dlaplace":
            return float(self.a) * int(self.b)
        return None


@lru_cache(maxsize=65536)
def _event_from_key(key: str) -> Event:
    """Event.from_key, cached: a cap's running state names its events by key."""
    parts = key.split(":")
    b = None if len(parts) < 3 else (int(parts[2]) if parts[0] == "dlaplace" else Fraction(parts[2]))
    return Event(parts[0], Fraction(parts[1]), b, None if len(parts) < 4 else Fraction(parts[3]))


def spend_events(spend: Spend) -> list[Event]:
    """The events of one unit's guarantee (a release's or a family's cost), one per notion
    part: pure, zcdp, approx. A family charged with parts in several notions (docs/explanation/model.md#families,
    a componentwise bound) is charged every part: their composition bounds it. Callers
    handle unbounded spends before; a zero spend has no event. A family's worst-of-alternatives
    cost (`charge_choice.Worst`) enters as its componentwise maximum, which bounds every alternative."""
    from .charge_choice import Worst

    if isinstance(spend, Worst):
        spend = spend.bound()
    if spend.is_zero or spend.unbounded:
        return []
    events = []
    if spend.pure:
        events.append(Event("pure", spend.pure))
    if spend.rho:
        events.append(Event("zcdp", spend.rho))
    if spend.approx_delta or spend.approx_epsilon:
        events.append(Event("approx", spend.approx_epsilon, spend.approx_delta))
    return events


_EVENT_MECHANISMS = ("gaussian", "laplace", "geometric")


def mechanism_event(release: Release) -> Event | None:
    """The event the release's frozen mechanism parameters describe, or None.

    Only when the release's guarantees are exactly the ones its parameters imply
    (catalogue.derive_guarantees: for these mechanisms, one guarantee on everything
    read), for replacement neighbours: then the event covers everything the release
    reads. A Laplace or geometric release run on a sample (sample_size of population
    recorded, the ledger's catalogue deriving its amplified guarantee: Balle, Barthe and
    Gaboardi 2018, rounded up; docs/explanation/model.md#subsampling) keeps its sampling event, `sampled`. A release
    recorded with its amplified guarantee already worked out (epsilon_before_subsampling, run
    by the ledger) or without the sampling parameters is charged through its guarantee, as
    before."""
    mechanism = release.mechanism
    if mechanism.name not in _EVENT_MECHANISMS:
        return None
    event, derived = _mechanism_event(mechanism)
    if event is None or len(release.guarantees) != len(derived):
        return None
    for guarantee in release.guarantees:
        if guarantee.protects != release.reads or _value(guarantee) not in derived:
            return None
        if guarantee.charged_in not in (None, guarantee.relation):
            return None  # the event is the replace-one mechanism's: charged in another relation, not it
    return event


def release_event(release: Release) -> tuple[str | None, bool]:
    """(the key of the event the release's mechanism parameters describe, whether the release
    is charged through it): `IndexEvents` decides both from the whole release; the accounting
    rows (store.accounting_rows) keep them."""
    if release.mechanism.name not in _EVENT_MECHANISMS:
        return None, False
    event, _ = _mechanism_event(release.mechanism)
    if event is None:
        return None, False
    return event.key, mechanism_event(release) is not None


def _plain(value):
    """A parameter as a cheaply hashed key (a Fraction's hash costs a modular power)."""
    return (value.numerator, value.denominator) if type(value) is Fraction else value


def _value(guarantee) -> tuple:
    return (guarantee.notion, guarantee.epsilon, guarantee.delta, guarantee.rho, guarantee.relation)


@lru_cache(maxsize=4096)
def _mechanism_event(mechanism: Mechanism) -> tuple[Event | None, frozenset]:
    """(event, the values of the guarantees the parameters imply), per distinct mechanism."""
    if mechanism.param("sample_size") is not None:
        return _sampled_event(mechanism)
    derived, problems = derive_guarantees(mechanism, frozenset())
    if problems or not derived or any(g.relation != Relation.REPLACE for g in derived):
        return None, frozenset()
    values = frozenset(_value(g) for g in derived)
    if mechanism.name == "gaussian":
        # sigma / sensitivity as recorded, or the smallest an (epsilon, delta) claim allows
        multiplier = gaussian_multiplier(mechanism)
        return (Event("gaussian", multiplier), values) if multiplier else (None, frozenset())
    if mechanism.name == "laplace":
        # dp_accounting's LaplaceDpEvent: noise multiplier scale / L1 sensitivity = 1 / epsilon
        epsilon = derived[0].epsilon
        return (Event("laplace", 1 / Fraction(epsilon)), values) if epsilon else (None, frozenset())
    if mechanism.name == "geometric":
        scale, sensitivity = mechanism.param("scale"), mechanism.param("sensitivity")
        if scale and sensitivity and Fraction(sensitivity).denominator == 1:
            # two-sided geometric P(z) ∝ e^(-|z| / scale): discrete Laplace with a = 1 / scale
            return Event("dlaplace", 1 / Fraction(scale), int(sensitivity)), values
    return None, frozenset()


def _sampled_event(mechanism: Mechanism) -> tuple[Event | None, frozenset]:
    """The sampling event of a Laplace or geometric release run on sample_size of population
    (docs/explanation/model.md#subsampling): its amplified epsilon (the catalogue's, as recorded), beta and the base epsilon."""
    from .catalogue import CATALOGUE

    if (mechanism.name == "gaussian" or mechanism.param("epsilon_before_subsampling") is not None
            or mechanism.param("population") is None):
        return None, frozenset()
    derived, problems = derive_guarantees(mechanism, frozenset())
    base, base_problems = CATALOGUE[mechanism.name](mechanism, frozenset())
    if (problems or base_problems or len(derived) != 1 or len(base) != 1 or derived[0].notion.value != "pure"
            or derived[0].relation != Relation.REPLACE or not derived[0].epsilon or not base[0].epsilon):
        return None, frozenset()
    beta = Fraction(mechanism.param("sample_size"), mechanism.param("population"))
    event = Event("sampled", Fraction(derived[0].epsilon), beta, Fraction(base[0].epsilon))
    return event, frozenset(_value(g) for g in derived)


def unit_events(release: Release, spend: Spend) -> list[Event]:
    """The events charged for a standalone release whose basic cost on the subset is `spend`."""
    if spend.is_zero:
        return []
    event = mechanism_event(release)
    return [event] if event is not None else spend_events(spend)
