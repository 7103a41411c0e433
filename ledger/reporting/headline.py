"""The headline in words (the `table` command's lines): the loss on the protected subset, the
worst protected variable and pair, the public variables apart, the whole dataset as ordinary DP.
The figures are computed below the API (operations/headline.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.numbers import Number, format_number, is_infinite
from ..operations.headline import Headline
from ..operations.reasons import NOT_PROTECTED, PUBLIC, figure_text, infinity_text

PROTECTED_LABEL = "protected subset (every variable not classified public)"
PUBLIC_LABEL = "public variables (not in the headline)"
ORDINARY_LABEL = "whole dataset, ordinary DP (U = V, Tan Prop 3.1)"


def text_lines(head: Headline) -> list[str]:
    """The headline as lines of text (the `table` command)."""
    lines = []
    if not head.protected:
        lines.append(f"{PROTECTED_LABEL}: none (every variable is public)")
    elif head.alarm:
        why = head.why or NOT_PROTECTED
        read = (f": {', '.join(head.unprotected) or 'a protected variable'} read without a certified bound"
                if why == NOT_PROTECTED else "")  # (another reason names its cause itself)
        lines.append(f"ALARM: {PROTECTED_LABEL} {_names(head.protected)}: epsilon {infinity_text(why)}{read}")
    else:
        lines.append(f"{PROTECTED_LABEL} {_names(head.protected)}: epsilon {format_number(head.epsilon)}"
                     + (f" (rho {format_number(head.rho)})" if head.rho is not None else ""))
    if head.worst_variable is not None:
        name, value = head.worst_variable
        lines.append(f"  worst protected variable: {name} ({_text(value, head.worst_why)})")
    if head.worst_pair is not None:
        a, b, value = head.worst_pair
        lines.append(f"  worst protected pair: {{{a}, {b}}} ({_text(value, head.pair_why)})")
    if head.public:
        lines.append(f"{PUBLIC_LABEL}: " + ", ".join(
            f"{name} {figure_text(value, PUBLIC)}" for name, value in head.public_losses))
    lines.append(f"{ORDINARY_LABEL}: {'∞' if is_infinite(head.dataset_wide) else format_number(head.dataset_wide)}")
    return lines


def _text(value: Number, why: str | None = None) -> str:
    return figure_text(value, why or NOT_PROTECTED)  # a protected variable or pair


def _names(names: Sequence[str]) -> str:
    return "{" + ", ".join(names) + "}" if len(names) <= 6 else f"({len(names)} variables)"
