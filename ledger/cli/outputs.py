"""Where a command may write a file of its own (`--out`), and how.

A report, a mechanism's output or the demo's HTML table is written only:
- to a new path, or over an existing regular file (never a directory, a FIFO, a
  device, a socket, or a symbolic link, which would be replaced or followed);
- never onto the ledger itself: not its SQLite database file, nor that file's
  write-ahead log, shared-memory index or rollback journal (`-wal`, `-shm`,
  `-journal`), by any name (a hard link, a symlinked directory, `./` spellings);
- whole or not at all: a temporary file in the same directory, renamed into place.

Every refusal is bad input (exit 2) and comes before any work is done.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import fail

LEDGER_COMPANIONS = ("", "-wal", "-shm", "-journal")


def output_target(out: str | Path, ledger_url: str | None, option: str = "--out") -> Path:
    """The --out path, checked: refused (exit 2) when it cannot or must not be written."""
    text = str(out)
    if not text.strip():
        raise fail("command line", option, "no file given")
    path = Path(text).expanduser()
    try:
        found = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a new path (its directory is checked below)
        found = None
    except OSError as exc:
        raise fail("command line", option, f"cannot write {path}: {exc.strerror or exc}") from None
    if found is not None:
        if stat.S_ISDIR(found.st_mode):
            raise fail("command line", option, f"{path} is a directory; give a file name")
        if stat.S_ISLNK(found.st_mode):
            raise fail("command line", option, f"{path} is a symbolic link; give the file itself or a new name")
        if not stat.S_ISREG(found.st_mode):
            raise fail("command line", option, f"{path} is not a regular file (a FIFO, a device or a socket); "
                                               "give a regular file or a new name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise fail("command line", option, f"cannot write {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (found is not None and not os.access(path, os.W_OK)):
        raise fail("command line", option, f"cannot write {path}: permission denied")
    if ledger_url is not None and _is_ledger_file(path, found, ledger_url):
        raise fail("command line", option, f"{path} is the ledger's own database (or its journal); "
                                           "a report never overwrites the ledger -- give another file name")
    return path


def _is_ledger_file(path: Path, found: os.stat_result | None, ledger_url: str) -> bool:
    from ..store.database import sqlite_path

    database = sqlite_path(ledger_url)
    if database is None:
        return False
    target = Path(os.path.realpath(path))
    for suffix in LEDGER_COMPANIONS:
        companion = Path(f"{database}{suffix}")
        if Path(os.path.realpath(companion)) == target:
            return True
        if found is not None:
            try:
                other = os.stat(companion)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (found.st_dev, found.st_ino):  # a hard link to it
                return True
    return False


def write_atomically(path: Path, data: bytes | str, option: str = "--out") -> None:
    """Write the whole file or nothing: a temporary file beside it, renamed into place."""
    write_streaming(path, (data,), option)


def write_streaming(path: Path, chunks: Iterable[bytes | str], option: str = "--out") -> None:
    """`write_atomically` of a file given in pieces (a register of a million releases is
    written a chunk at a time, never held whole): the temporary file grows, then is renamed."""
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                                             prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "wb") as stream:
            for data in chunks:
                stream.write(data.encode("utf-8") if isinstance(data, str) else data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # as an ordinary new file (mkstemp makes it private)
        os.replace(temporary, path)
    except BaseException as exc:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        raise fail("command line", option, f"cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
