"""A subset's figure in words a review board reads: what was composed, by which statement, and the
strongest attack it allows (`subset --explain`).

The attack is read off the figure's own epsilon and delta (accounting/risk.py: the (epsilon,
delta) trade-off curve of Dong, Roth and Su 2022), never recomputed from the releases, so the
sentence says no more and no less than the figure printed above it. The figures are for Tan's
U-neighbours (one person's values of the subset's variables replaced), so the test is between
two values of those variables.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..accounting.risk import Risk, risk_sentence

CASE_WORDS = {"adaptive": "valid under full adaptivity", "fixed": "had the plan been fixed in advance"}
RELEASES_NAMED = 5  # at most this many release ids in the sentence; the `charged by` line lists all


def releases_text(releases: Sequence[str]) -> str:
    """"no release", "1 release (g1)", "3 releases (l1, g1, g2)", "40 releases (r1, ..., r5 and 35 more)"."""
    if not releases:
        return "no release"
    count = f"{len(releases)} release{'s' if len(releases) != 1 else ''}"
    named = ", ".join(releases[:RELEASES_NAMED])
    if len(releases) > RELEASES_NAMED:
        named += f" and {len(releases) - RELEASES_NAMED} more"
    return f"{count} ({named})"


def figure_explanation(variables: Sequence[str], releases: Sequence[str], figure: str, risks: Sequence[Risk],
                       *, theorem: str | None, case: str | None) -> str:
    """One sentence: `releases` composed by `theorem` (`case`) give `figure` (its text as printed) on
    `variables`, and what `risks` allow an attacker; `theorem` None: an unbounded figure (`figure`
    says why)."""
    label = "{" + ", ".join(variables) + "}"
    attack = f"So {risk_sentence(risks, variables=variables)}."
    if not releases:
        return f"no release reads {label}, so {figure}. {attack}"
    one = len(releases) == 1
    if theorem is None:
        return f"{releases_text(releases)} {'leaves' if one else 'leave'} {label} {figure}. {attack}"
    return (f"{releases_text(releases)} composed by {statement_name(theorem)}, {CASE_WORDS.get(case, case)}, "
            f"{'gives' if one else 'give'} {figure} on {label}. {attack}")


def statement_name(theorem: str) -> str:
    """The statement's name and source, without the detail after its colon (the `accountant:`
    line above the sentence prints it whole): `Rényi DP composition (Mironov 2017, Prop 1)`."""
    return theorem.split(": ", 1)[0]
