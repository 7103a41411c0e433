"""The one error a mechanism raises for bad input.

A mechanism refuses input it cannot certify a guarantee for (STYLE 5:
unknown is refused, never approximated): a negative count, a non-numeric
contribution, epsilon or delta out of range, a missing variable, a covariance
that is not positive semi-definite. The error names the offending field and
shows the bad value, so the caller (the loader, the CLI) can turn it into a
sourced message.
"""

from __future__ import annotations


class MechanismInputError(ValueError):
    """Bad input to a mechanism: `field` names the input, the message shows the value.

    >>> str(MechanismInputError("epsilon", "must be positive, found -1"))
    'epsilon: must be positive, found -1'
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
