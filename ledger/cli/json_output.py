"""The command line's JSON: one shape for every error and every refusal.

With `--json`, a command that fails prints on standard output

    {"ok": false, "exit_code": 2, "errors": [{"file": "releases.yaml", "line": 12,
      "field": "releases[1].mechanism.epsilon", "message": "..."}]}

and keeps its exit code (2 bad input, 1 a refused budget check, whose object
also lists the caps as `check --json` does, or another refusal of the accounting,
such as cancelling a release whose output exists: `refused` is its line). `file` is the file or what stands
for it ("command line", "release ID"); `line` is null where there is none.
`main()` calls `print_errors` / `print_refusal` when `wants_json()`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence

from ..core.errors import LedgerError
from ..core.failures import short_quotes

_LINE = re.compile(r"^(?P<file>.*):(?P<line>\d+)$")


def wants_json(argv: Sequence[str] | None = None) -> bool:
    """Was --json given on this command line?"""
    return "--json" in (sys.argv[1:] if argv is None else argv)


def error_json(error: LedgerError) -> dict:
    match = _LINE.match(error.source)
    return {"file": match["file"] if match else error.source, "line": int(match["line"]) if match else None,
            "field": error.field or None, "message": short_quotes(error.message)}


def errors_json(errors: Sequence[LedgerError], exit_code: int = 2) -> dict:
    return {"ok": False, "exit_code": exit_code, "errors": [error_json(e) for e in errors]}


def refusal_json(refused) -> dict:
    """A BudgetRefused (operations.py) as JSON: its message per broken cap, and every cap checked."""
    from .caps_output import check_json, infinite_driver_reasons

    lines = str(refused).splitlines()
    why = infinite_driver_reasons(refused.checks)  # (each ∞ driver's reason, as cap list gives it)
    return {"ok": False, "exit_code": 1, "refused": lines[0] if lines else "refused",
            "errors": [{"file": None, "line": None, "field": f"cap {c.cap.dataset}/{c.cap.name}", "message": message}
                       for c, message in refused.cap_messages],
            "caps": [check_json(c, why) for c in refused.checks]}


def refused_json(refused) -> dict:
    """A `Refused` (core.errors) as JSON: its one line, and the same line as the error it is."""
    return {"ok": False, "exit_code": 1, "refused": short_quotes(refused.error.message),
            "errors": [error_json(refused.error)]}


def print_refused(refused) -> None:
    print(dumps(refused_json(refused)))


def dumps(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def print_errors(errors: Sequence[LedgerError], exit_code: int = 2) -> None:
    print(dumps(errors_json(errors, exit_code)))


def print_refusal(refused) -> None:
    print(dumps(refusal_json(refused)))
