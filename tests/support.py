"""Shared by the tests: the command line run in this process, as a user runs it.

`cli_main(url, *args)` is `privacy-ledger --db URL ARGS` through the console entry
point `ledger.cli.app.main()`, which maps bad input to exit 2 and a refused budget
check to exit 1; it returns the exit code and what was printed.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from unittest import mock

from ledger.cli import app as cli


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    @property
    def errors(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error: ")]


def cli_main(url: str, *args) -> Run:
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(sys, "argv", ["privacy-ledger", "--db", url, *map(str, args)]), \
            redirect_stdout(out), redirect_stderr(err):
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Run(code, out.getvalue(), err.getvalue())
