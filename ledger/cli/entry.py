"""The console entry point (`privacy-ledger`, `python -m ledger`): `--version` alone is
answered here, before the command line (typer and every command) is imported; anything else
goes to `ledger.cli.app.main`.

A fresh `check` or `record` runs without the cyclic garbage collector (`gc.disable`): its
collections, about 200 while a few hundred modules are imported (whose objects live as long as
the process), cost 45-90 ms of a 0.5 s command, 0.2-0.3 s of a file of 2,000 releases, and
found about 570 objects in all; switched off, what is left unreachable at exit is 1,400-1,800
objects (measured on a 10k-release ledger, whatever the file's length), and the peak memory
is the same. Reference counting frees everything else as always. Other commands (reports,
verification, long reads) keep the collector.

Invariant: the answer to `--version` is the one `ledger.cli.app` gives (`privacy-ledger VERSION`,
exit 0).
"""

from __future__ import annotations

import sys

from .arguments import command_name

WITHOUT_COLLECTOR = frozenset({"check", "record"})  # short commands whose garbage is a few objects (above)


def main() -> None:
    arguments = sys.argv[1:]
    if command_name(arguments) in WITHOUT_COLLECTOR:
        import gc

        gc.disable()
    if arguments == ["--version"]:
        from .. import __version__

        sys.stdout.write(f"privacy-ledger {__version__}\n")
        return
    from .app import main as cli_main

    cli_main()
