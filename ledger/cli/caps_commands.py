"""The caps' commands: `headroom` (what a new release could take), `cap set` and `cap list`.

Thin adapters (STYLE 8) over the façade (ledger.api.Ledger); how a cap is shown is
cli/caps_output.py's, the same lines for `check`, `record` and `cap list`.
"""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..core.errors import InputErrors, LedgerError, fail
from ..core.numbers import figure_fields, format_delta, format_number, is_infinite
from ..operations import choices
from . import json_output as cli_json
from .caps_output import check_json, check_lines, infinite_driver_reasons, rho_cap_epsilon_json
from ..operations.moments import moment_text, parse_date
from .context import as_of_json, as_of_lines, book
from .options import AsOfOption, DatasetOption, DeltaOption, JsonOption


def headroom_command(
    variables: Annotated[list[str], typer.Argument(help="The variables a new release would read.")],
    dataset: DatasetOption = None,
    delta: DeltaOption = None,
    as_json: JsonOption = False,
    as_of: AsOfOption = None,
    mechanism: Annotated[str, typer.Option(
        "--mechanism", help="What the new release is: any (any epsilon-DP or rho-zCDP mechanism, the worst "
                            "case; the default), laplace (a Laplace release of that epsilon) or gaussian (a "
                            "Gaussian: the smallest sigma / sensitivity). `check` of such a plan draws the "
                            "same boundary.")] = "any",
) -> None:
    """The largest epsilon (and rho) a new release reading exactly these variables could take such
    that every cap's enforcement (the decision `record` makes, with the smallest valid filter
    figure) would still admit it; --as-of: as the ledger stood then; --delta: the delta the rho
    headroom is also stated at as an epsilon (the dataset's by default)."""
    from ..operations.cap_accounting import HEADROOM_MECHANISMS

    when = parse_date(as_of, "--as-of")
    if mechanism not in HEADROOM_MECHANISMS:
        raise fail("command line", "--mechanism", f"must be one of {', '.join(HEADROOM_MECHANISMS)}. "
                                                  f"Found {mechanism!r}.")
    ledger = book()  # (opened once: the dataset's names and the caps' totals from the same ledger)
    # its variables and groups as they stood then (history.state_as_of)
    chosen = ledger.dataset_as_of(dataset, when, field="--dataset")
    names = choices.resolve_variables(chosen, variables)
    room = ledger.room(chosen.name, names, when=when, mechanism=mechanism, delta=choices.parse_delta(delta, chosen))
    if as_json:
        typer.echo(json.dumps({
            "variables": list(room.variables),
            "mechanism": room.mechanism,
            "assumes": HEADROOM_ASSUMES[room.mechanism],
            **figure_fields("epsilon", room.epsilon, down=True),
            "epsilon_binding": room.epsilon_binding and room.epsilon_binding.name,
            "epsilon_accountant": room.epsilon_accountant,
            **figure_fields("rho", room.rho, down=True),
            "rho_binding": room.rho_binding and room.rho_binding.name,
            "rho_accountant": room.rho_accountant,
            **({} if room.multiplier is None else figure_fields("multiplier", room.multiplier)),
            **figure_fields("delta", room.delta),
            **figure_fields("rho_epsilon", room.rho_epsilon),
            **({} if when is None else as_of_json(chosen.name, when)),
        }, indent=2, ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    label = "{" + ", ".join(room.variables) + "}"

    def binding(cap, accountant) -> str:
        if cap is None:
            return " (no cap applies)"
        return f" (binding cap: {cap.name}" + (f", decided by {accountant}" if accountant not in (None, "basic")
                                                else "") + ")"

    as_epsilon = (f"; as epsilon at delta {format_delta(room.delta)}: {format_number(room.rho_epsilon)}"
                  if room.rho_epsilon is not None and room.rho and not is_infinite(room.rho) else "")
    if room.epsilon is not None:
        typer.echo(f"{label}: largest epsilon {format_number(room.epsilon, down=True)}"
                   + binding(room.epsilon_binding, room.epsilon_accountant))
    if room.multiplier is not None:
        smallest = ("no Gaussian fits" if is_infinite(room.multiplier)
                    else f"smallest sigma / sensitivity {format_number(room.multiplier)}")
        typer.echo(f"{label}: {smallest}, largest rho {format_number(room.rho, down=True)}{as_epsilon}"
                   + binding(room.rho_binding, room.rho_accountant))
    elif room.rho is not None and room.rho == 0 and room.rho_binding is not None and room.rho_binding.delta is None \
            and room.rho_binding.rho is None:
        typer.echo(f"{label}: no Gaussian (rho) release fits: cap {room.rho_binding.name} is in pure epsilon, which "
                   "a Gaussian never meets (a cap with a delta or in rho would admit one)")
    elif room.rho is not None:
        typer.echo(f"{label}: largest rho {format_number(room.rho, down=True)}{as_epsilon}"
                   + binding(room.rho_binding, room.rho_accountant))
    typer.echo(f"  (a new release of at most this much, reading exactly these variables, is admitted by every "
               f"cap's enforcement, as `record` decides; the largest epsilon and rho are that threshold itself, "
               f"to 10⁻⁹ and rounded down, not rounded to 4 decimals as other figures are; it assumes "
               f"{HEADROOM_ASSUMES[room.mechanism]}"
               + (f"; the ledger as of {moment_text(when)}" if when is not None else "") + ")")


HEADROOM_ASSUMES = {
    "any": "any mechanism with that epsilon (the worst case: randomized response) or that rho; "
           "--mechanism laplace or gaussian answers for that mechanism, as `check` would",
    "laplace": "a Laplace release of that epsilon (its own Rényi curve and privacy loss distribution)",
    "gaussian": "a Gaussian release of that sigma / sensitivity (rho = 1 / (2 (sigma / sensitivity)^2))",
}

def cap_set(
    subset: Annotated[list[str], typer.Argument(help="Variables, a group name, or `all`.")],
    epsilon: Annotated[Optional[str], typer.Option(help="Cap in epsilon.")] = None,
    delta: Annotated[Optional[str], typer.Option(help="With --epsilon: epsilon at this delta.")] = None,
    rho: Annotated[Optional[str], typer.Option(help="Cap in rho (zCDP).")] = None,
    name: Annotated[Optional[str], typer.Option(help="The cap's name.")] = None,
    filter_: Annotated[Optional[str], typer.Option("--filter", help=(
        "With --delta: running (the subset's running figure stays within the cap), gaussian (Gaussian DP, "
        "exact for Gaussian releases) or renyi (one Rényi order fixed now, tight near the cap for many "
        "similar releases). Default: gaussian when the releases it already holds are all Gaussian, else "
        "running."))] = None,
    dataset: DatasetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add or replace a cap on a variable, a group, or the whole dataset. A cap is a privacy
    filter fixed when it is set: it admits releases while its statement holds, whatever order
    they come in.
"""
    ledger = book()
    chosen = choices.pick_dataset(ledger.overview(), dataset)
    entry: dict = {}
    if subset == ["all"]:
        entry["subset"] = "all"
    elif subset == ["protected"] and chosen.group("protected") is None and "protected" not in chosen.variable_names:
        entry["subset"] = "protected"
    elif len(subset) == 1 and chosen.group(subset[0]) is not None:
        entry["name"] = subset[0]
        if name:  # the group's variables, under another name
            entry["subset"] = sorted(chosen.group(subset[0]))
    else:
        entry["subset"] = subset
    if name:
        entry["name"] = name
    for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho), ("filter", filter_)):
        if value is not None:
            entry[key] = value
    try:
        caps, checks = ledger.set_caps(chosen.name, [entry], "command line")
    except InputErrors as exc:  # named as the steward typed them: --epsilon, SUBSET (not caps[0].epsilon)
        raise InputErrors([LedgerError(e.source, _cap_option(e.field), e.message) for e in exc.errors]) from None
    if as_json:
        why = infinite_driver_reasons(checks)
        typer.echo(cli_json.dumps({"ok": True, "caps": [check_json(c, why) for c in checks]}))
        return
    for cap in caps:
        typer.echo(f"cap {cap.name} on {{{', '.join(cap.ordered_subset)}}}: {cap.limit_text}")
    for line in check_lines(checks, planned=False, why=infinite_driver_reasons(checks)):  # a cap below what is spent is over at once
        typer.echo(line)


def _cap_option(field: str) -> str:
    """`cap set`'s one entry's field ("caps[0].epsilon", "caps[0].subset[1]") as its option or argument."""
    if not field.startswith("caps[0]."):
        return field
    key = field.removeprefix("caps[0].").split("[")[0]
    return "SUBSET" if key == "subset" else f"--{key}"


def cap_list(dataset: DatasetOption = None, as_json: JsonOption = False, as_of: AsOfOption = None) -> None:
    """Every cap, its spend (reservations included), headroom and status; --as-of: as it stood then."""
    when = parse_date(as_of, "--as-of")
    ledger = book()
    chosen = choices.pick_dataset(ledger.overview(), dataset)
    # the caps as they stood then: set by then, with the limit each had, checked by the same
    # accountants as `cap list`, from the accounting rows of the releases charged then
    checks = ledger.caps(chosen.name, as_of=when)
    delta = choices.parse_delta(None, chosen)
    if as_json:  # (a list, as without --as-of: each cap states the moment)
        why = infinite_driver_reasons(checks, when)
        typer.echo(json.dumps([{**check_json(c, why), **rho_cap_epsilon_json(c.cap, delta),
                                **({} if when is None else as_of_json(chosen.name, when))}
                               for c in checks], indent=2, ensure_ascii=False))
        return
    if when is not None:
        for line in as_of_lines(chosen.name, when):
            typer.echo(line)
    if not checks:
        typer.echo(f"dataset {chosen.name} has no caps" + (" then" if when is not None else ""))
    for line in check_lines(checks, planned=False, why=infinite_driver_reasons(checks, when), rho_at_delta=delta):
        typer.echo(line)
