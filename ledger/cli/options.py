"""The command line's shared options, defined once: every command that takes one of them takes it
with the same names and help (`-d` / `--dataset`; `--json`; `--as-of`; `--delta`).

Invariant: a command lists in its `-h` only options it accepts, and an option spelt one way by one
command is spelt the same way by every other (a new command takes its options from here).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

DatasetOption = Annotated[Optional[str], typer.Option("--dataset", "-d", help="Dataset (default: the only one).")]
DeltaOption = Annotated[Optional[str], typer.Option("--delta", help="Delta for epsilon figures "
                                                    "(default: the dataset's, else 1e-9).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
AsOfOption = Annotated[Optional[str], typer.Option(
    "--as-of", metavar="DATE", help="The ledger as it stood at this moment (ISO 8601; UTC unless it says "
                                    "otherwise; a date alone is the end of that day, today included): "
                                    "published by then, planned or approved at that time.")]
