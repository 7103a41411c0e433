"""The console entry point (`privacy-ledger`, `python -m ledger`): `--version` alone is
answered here, before the command line (typer and every command) is imported; anything
else goes to `ledger.cli.app.main` (issue 13, section 2: a pipeline calls the CLI once per release).

Invariant: the answer is the one `ledger.cli.app` gives (`privacy-ledger VERSION`, exit 0).
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from .. import __version__

        sys.stdout.write(f"privacy-ledger {__version__}\n")
        return
    from .app import main as cli_main

    cli_main()
