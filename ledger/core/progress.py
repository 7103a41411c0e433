"""Progress for long work (verify, report, table on a large ledger, building a benchmark
ledger): a rich progress bar on standard error when it is a terminal, and nothing at
all otherwise (pipes, files, CI logs and tests see no control characters).

    with progress("verifying the audit chain") as advance:   # indeterminate: a spinner
        ...
    with progress("recording", total=n) as advance:          # a bar
        for ...: advance()
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Protocol


class Advance(Protocol):
    """What `progress` yields: `advance()` one step, `advance(steps)` several."""

    def __call__(self, steps: float = 1, /) -> None:
        ...


def _noop(_steps: float = 1) -> None:
    return None


def enabled(stream: IO[str] | None = None) -> bool:
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress(description: str, total: float | None = None, *,
             stream: IO[str] | None = None) -> Iterator[Advance]:
    """A transient progress bar (or spinner, without `total`) on `stream` (standard error)
    while the block runs, only when the stream is a terminal; yields `advance(steps=1)`."""
    if not enabled(stream):
        yield _noop
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(file=stream or sys.stderr)
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f}")]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(steps: float = 1) -> None:
            bar.advance(task, steps)

        yield advance
