"""Where a command may write a file of its own (`--out`), and how: the output guard (store/files.py,
through ledger.api) for the ledger the command runs on.

Every command that writes a file goes through here, so none can skip the guard: never the
ledger's database or its `-wal`, `-shm`, `-journal` files, never a directory, a FIFO, a device,
a socket or a symbolic link out of its directory; whole or not at all; an existing file keeps
its permissions. Every refusal is bad input (exit 2), named by the option, and comes before
any work is done (and again at the moment of writing).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..core.lazy import lazy_callable
from .context import state

guarded_target = lazy_callable("ledger.api.outputs", "guarded_target")
guarded_write = lazy_callable("ledger.api.outputs", "guarded_write")


def output_target(out: str | Path, option: str = "--out", *, new: bool = False) -> Path:
    """The path given to `option`, checked (exit 2 when it cannot or must not be written)."""
    return guarded_target(out, state.url, option, new=new)


def write_atomically(path: Path, data: bytes | str, option: str = "--out", *, new: bool = False,
                     mode: int | None = None) -> Path:
    """Write the whole file or nothing, under the guard (files.write)."""
    return guarded_write(path, data, state.url, option, new=new, mode=mode)


def write_streaming(path: Path, chunks: Iterable[bytes | str], option: str = "--out") -> Path:
    """`write_atomically` of a file given in pieces (a register of a million releases is
    written a chunk at a time, never held whole)."""
    return guarded_write(path, chunks, state.url, option)
