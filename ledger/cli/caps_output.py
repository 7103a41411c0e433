"""How caps are shown: `check`, `cap list`, `cap set` and `record` print the same lines and JSON
for each cap (its spend, charge, headroom, drivers, filter), and a refusal's JSON lists them."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from ..accounting.spend import CONVERSION_SHORT, cks_epsilon
from ..core.numbers import figure_fields, format_delta, format_number, is_infinite
from ..core.lazy import lazy_module
from .context import open_engine

# imported on first use: `--help` and a `check` against a pure cap need neither
budget = lazy_module("ledger.accounting.budget")
configuration = lazy_module("ledger.store.configuration")
sessions = lazy_module("ledger.store.sessions")


def rho_cap_epsilon(cap, delta: Fraction) -> float | None:
    """A rho cap's statement as (epsilon, delta): the zCDP filter of the cap converted at the
    dataset's whole delta (a rho cap admits no approximate release, so none of that delta is set
    aside for one; docs/explanation/accounting.md), by Canonne, Kamath and Steinke (2020), Prop 12 / Cor 13, at the
    best order, rounded up. None for a cap in epsilon."""
    return None if cap.rho is None else cks_epsilon(cap.rho, float(delta))


def rho_cap_epsilon_json(cap, delta: Fraction) -> dict:
    """`cap list --json`'s statement of a rho cap at the dataset's delta (`rho_cap_epsilon`); {} for
    a cap in epsilon, whose `limit` is already in epsilon."""
    if cap.rho is None:
        return {}
    return {**figure_fields("epsilon_at_delta", rho_cap_epsilon(cap, delta)),
            **figure_fields("conversion_delta", delta), "conversion": CONVERSION_SHORT}


def infinite_driver_reasons(checks, when=None) -> dict[tuple[str, str], tuple[str | None, ...]]:
    """Per cap (dataset, name) with an ∞ driver, each driver's own reason in reasons.py's words
    (reasons.driver_reasons, as the report's caps table), from the releases charged now or at
    `when`; the releases are read only when some driver is ∞."""
    wanted = [c for c in checks if any(is_infinite(value) for _name, value in c.drivers)]
    if not wanted:
        return {}
    from ..operations.cap_accounting import index_at  # (only when a driver is ∞: not on check's path)
    from ..operations.reasons import driver_reasons

    found = {}
    with sessions.read_session(open_engine()) as session:
        datasets = configuration.write_context(session).datasets
        for dataset in sorted({c.cap.dataset for c in wanted}):
            mine = [c for c in wanted if c.cap.dataset == dataset]
            index = index_at(session, dataset, [c.cap for c in mine], when)
            for c in mine:
                found[(dataset, c.cap.name)] = driver_reasons(c.cap, c.drivers, index,
                                                              datasets[dataset].public_names)
    return found


def check_lines(checks, planned: bool = True, why: Mapping | None = None,
                rho_at_delta: Fraction | None = None) -> list[str]:
    """The text of `check`, `cap list`, `cap set` and `record`: the figures `check_json` states;
    `why`: per cap (dataset, name), each driver's reason when its charge is ∞ (`infinite_driver_reasons`);
    `rho_at_delta`: state each rho cap as epsilon at this delta too (`rho_cap_epsilon`)."""
    lines = []
    for c in checks:
        unit = c.cap.unit_text
        figures = [f"spent {format_number(c.current)}"]
        if planned:
            figures += [f"this plan +{format_number(c.charge)}", f"after {format_number(c.after)}"]
        figures += [f"cap {format_number(c.cap.limit, down=True)}", f"headroom {format_number(c.headroom, down=True)}"]
        lines.append(f"[{c.status}] cap {c.cap.name} ({unit}) on {{{', '.join(c.cap.ordered_subset)}}}: "
                     + ", ".join(figures))
        if rho_at_delta is not None and c.cap.rho is not None:
            epsilon = format_number(rho_cap_epsilon(c.cap, rho_at_delta))
            lines.append(f"      the cap: {c.cap.limit_text}, epsilon {epsilon} at delta {format_delta(rho_at_delta)}"
                         f" ({CONVERSION_SHORT})")
        if planned:
            for charge in c.charges:
                who = f"family {charge.family} (its members charged once)" if charge.family else charge.release
                lines.append(f"      this plan: {who} +{format_number(charge.value)}"
                             + (f": {charge.reason}" if charge.reason else ""))
        if c.drivers:
            reasons_ = (why or {}).get((c.cap.dataset, c.cap.name)) or (None,) * len(c.drivers)
            lines.append("      driven by: " + ", ".join(_driver_text(rid, v, w)
                                                        for (rid, v), w in zip(c.drivers, reasons_)))
        if c.reason and not (planned and any(charge.reason and c.reason in charge.reason for charge in c.charges)):
            lines.append(f"      no bound: {c.reason}")  # (said once: a charge line above may give it)
        if c.decision is not None:
            lines.append(f"      filter: {c.decision.theorem}")
        if c.running is not None and c.running != c.after:
            lines.append(f"      running figure of the subset (as `subset` prints it): {format_number(c.running)}"
                         " (the cap is decided by its filter's figure above)")
    return lines


def _driver_text(rid: str, value, why: str | None = None) -> str:
    """A driver and its charge; an ∞ one with its reason, `∞ (why)` as every command prints it."""
    figure = format_number(value)
    if is_infinite(value) and value > 0:
        from ..operations.reasons import infinity_text

        figure = infinity_text(why)
    if rid.startswith(budget.FAMILY_DRIVER):
        return f"{rid} ({figure}, charged once)"
    return f"{rid} ({figure})"


def check_json(c, why: Mapping | None = None) -> dict:
    """One cap in `check --json` and `cap list --json`; every figure through `figure_fields`;
    `why`: as `check_lines` takes it (`infinite_driver_reasons`), each ∞ driver's reason, in its "reason"."""
    reasons_ = (why or {}).get((c.cap.dataset, c.cap.name)) or (None,) * len(c.drivers)
    return {
        "cap": c.cap.name,
        "dataset": c.cap.dataset,
        "subset": list(c.cap.ordered_subset),  # dataset order, as `subset --json` lists a subset
        "unit": c.cap.unit,
        **figure_fields("delta", c.cap.delta),
        **figure_fields("limit", c.cap.limit, down=True),
        **figure_fields("current", c.current),
        **figure_fields("charge", c.charge),
        **figure_fields("after", c.after),
        **figure_fields("headroom", c.headroom, down=True),
        "status": c.status,
        "reason": c.reason,
        "charges": [{"release": charge.release, "family": charge.family, **figure_fields("value", charge.value),
                     "reason": charge.reason} for charge in c.charges],
        "drivers": [_driver_json(rid, v, w) for (rid, v), w in zip(c.drivers, reasons_)],
        **({"accountant": c.decision.accountant, "case": c.decision.case, "theorem": c.decision.theorem,
            "filter": c.cap.filter} if c.decision is not None else {}),
        **(figure_fields("running", c.running) if c.running is not None else {}),
    }


def _driver_json(rid: str, value, why: str | None = None) -> dict:
    """A driver as JSON: its release or family, its charge, and for an ∞ charge the reason the text
    prints beside it (`_driver_text`; reasons.py's words), else null."""
    family = rid[len(budget.FAMILY_DRIVER):] if rid.startswith(budget.FAMILY_DRIVER) else None
    reason = why if is_infinite(value) and value > 0 else None
    return {"release": None if family else rid, "family": family, **figure_fields("value", value), "reason": reason}
