"""The console entry point (`privacy-ledger`, `python -m ledger`): `--version` alone is
answered here, before the command line (typer and every command) is imported; a call is
handed to a resident process when one runs (resident.py: the imports paid once, issue 13,
section 2); anything else goes to `ledger.cli.app.main` in this process.

Invariants: the answer is the one `ledger.cli.app` gives (`privacy-ledger VERSION`, exit 0);
a call handed to a resident process is not also run here (resident.run returns None only
when nothing ran); `privacy-ledger resident ...` always runs here.
"""

from __future__ import annotations

import sys


def main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--version"]:
        from .. import __version__

        sys.stdout.write(f"privacy-ledger {__version__}\n")
        return
    if arguments[:1] != ["resident"]:
        from . import resident

        code = resident.run(arguments)
        if code is not None:
            sys.exit(code)
    from .app import main as cli_main

    cli_main()
