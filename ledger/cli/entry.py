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

The interpreter's teardown still runs the collector, over every object the imports made: about
0.1 s of a 0.6 s `check`. So, once the command has returned, the ledgers it opened are closed
(their connections: a SQLite ledger's last close checkpoints its WAL into the file, as the
collector's would have) and every object alive is frozen (`gc.freeze`: out of the collector's
reach); the teardown then frees what the modules hold by reference counting, runs the exit
handlers and flushes the streams as always, without traversing them all again.

Invariant: the answer to `--version` is the one `ledger.cli.app` gives (`privacy-ledger VERSION`,
exit 0).
"""

from __future__ import annotations

import sys

from .arguments import command_name

WITHOUT_COLLECTOR = frozenset({"check", "record"})  # short commands whose garbage is a few objects (above)


def main() -> None:
    arguments = sys.argv[1:]
    short = command_name(arguments) in WITHOUT_COLLECTOR
    if short:
        import gc

        gc.disable()
    if arguments == ["--version"]:
        from .. import __version__

        sys.stdout.write(f"privacy-ledger {__version__}\n")
        return
    from .app import main as cli_main

    try:
        cli_main()
    finally:
        if short:
            from .context import close_ledgers

            close_ledgers()
            gc.freeze()
