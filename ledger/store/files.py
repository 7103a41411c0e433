"""Every file the ledger writes besides its database: one guard, one way of writing.

A report, a register, a registry record, a checkpoint, a key, a mechanism's output or the
demo's table is written only:
- to a new path, or over an existing regular file; never a directory, a FIFO, a device or a
  socket; through a symbolic link only when the file it names lies in the link's own
  directory (a link elsewhere could make an output land anywhere: refused);
- never onto the ledger: not its SQLite database file, nor that file's write-ahead log,
  shared-memory index or rollback journal (`-wal`, `-shm`, `-journal`), by any name (a hard
  link, a symbolic link, a symlinked directory, `./` spellings), whether or not they exist;
- whole or not at all: a temporary file in the same directory, flushed to disk, renamed into
  place; an existing file keeps its permissions (a 0600 file stays 0600), a new one is made
  as any new file is (0666 less the umask).

`checked` refuses a path before any work; `write` checks it again, at the moment it writes
(the work in between may be long). A refusal is bad input (`InputErrors`: exit 2 on the
command line) naming the option or argument, and nothing is written.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import fail

# The files SQLite keeps for a database `x`: x itself, x-wal, x-shm (WAL mode), x-journal (rollback)
LEDGER_COMPANIONS = {"": "the ledger's own database", "-wal": "the ledger's write-ahead log",
                     "-shm": "the ledger's shared-memory index", "-journal": "the ledger's rollback journal"}

_SQLITE_URL = re.compile(r"sqlite(\+\w+)?:///(?P<path>[^?]*)")


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite ledger URL (`sqlite:///x.db`, `sqlite+pysqlite:///x.db`); None for
    memory and for other databases."""
    found = _SQLITE_URL.match(url)
    if found is None or found["path"] in ("", ":memory:"):
        return None
    return Path(found["path"])


def checked(out: str | Path, ledger_url: str | None, option: str = "--out", source: str = "command line",
            *, new: bool = False) -> Path:
    """The path `out`, refused (InputErrors) when it must not or cannot be written; `new`: when
    it exists at all (a key is never overwritten). `ledger_url` is the ledger's URL (None only
    where there is no ledger)."""
    text = str(out)
    if not text.strip():
        raise fail(source, option, "no file given")
    path = Path(text).expanduser()
    _destination(path, ledger_url, option, source, new)
    return path


def write(path: Path, data: bytes | str | Iterable[bytes | str], ledger_url: str | None, option: str = "--out",
          source: str = "command line", *, new: bool = False, mode: int | None = None) -> Path:
    """Write `data` (or its pieces, in order: a register of a million releases is never held
    whole) to `path`, whole or not at all, after the checks of `checked`; `new` writes only a
    file that does not exist (never replacing one), `mode` sets a new file's permissions (a
    private key: 0600). The file written is returned (a link's target, when `path` is a link)."""
    target, found = _destination(path, ledger_url, option, source, new)
    pieces = (data,) if isinstance(data, (bytes, str)) else data
    directory = target.parent
    temporary = None
    try:
        # A new file is created as any is (the kernel applies the umask, thread-safely); the
        # replacement of an existing one private while written, then given the old one's mode.
        keep = None if found is None else stat.S_IMODE(found.st_mode) & 0o777
        descriptor, temporary = _temporary(directory, target.name, 0o600 if keep is not None or mode is not None
                                           else 0o666)
        with os.fdopen(descriptor, "wb") as stream:
            for piece in pieces:
                stream.write(piece.encode("utf-8") if isinstance(piece, str) else piece)
            stream.flush()
            if keep is not None or mode is not None:
                os.fchmod(stream.fileno(), keep if keep is not None else mode)
            os.fsync(stream.fileno())
        if new:  # a hard link is made only where no file is: never replaces one, even one made meanwhile
            os.link(temporary, target)
            os.unlink(temporary)
        else:
            _destination(path, ledger_url, option, source, new)  # nothing put in its place meanwhile
            os.replace(temporary, target)
        temporary = None
        _sync_directory(directory)
    except FileExistsError:
        raise fail(source, option, f"{path} exists; it is never overwritten") from None
    except OSError as exc:
        raise fail(source, option, f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
    return target


def _destination(path: Path, ledger_url: str | None, option: str, source: str,
                 new: bool) -> tuple[Path, os.stat_result | None]:
    """The file the bytes of `path` go to, and its status (None: a new file); refused when it
    must not or cannot be written."""
    target, found = path, _lstat(path, option, source)
    if found is not None and stat.S_ISLNK(found.st_mode):
        if new:
            raise fail(source, option, f"{path} is a symbolic link; a new file is written only where none is")
        target = Path(os.path.realpath(path))
        here = Path(os.path.realpath(path.parent if str(path.parent) else "."))
        if target.parent != here:
            raise fail(source, option, f"{path} is a symbolic link to {target}, outside {here}; "
                                       "give the file itself or a new name")
        found = _lstat(target, option, source)
        if found is not None and stat.S_ISLNK(found.st_mode):  # a loop of links
            raise fail(source, option, f"{path} is a symbolic link that names no file; give a new name")
    if found is not None:
        if stat.S_ISDIR(found.st_mode):
            raise fail(source, option, f"{path} is a directory; give a file name")
        if not stat.S_ISREG(found.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(found.st_mode) else "a socket" if stat.S_ISSOCK(found.st_mode)
                    else "a device")
            raise fail(source, option, f"{path} is not a regular file ({kind}): writing would block or reach "
                                       "something else; give a regular file or a new name")
    what = _ledger_file(target, found, ledger_url)
    if what is not None:
        name, companion = what
        named = "" if companion == str(path) else f" ({companion})"
        raise fail(source, option, f"{path} is {name}{named}: an output never overwrites the ledger; "
                                   "give another file name")
    if found is not None and new:
        raise fail(source, option, f"{path} exists; it is never overwritten")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise fail(source, option, f"cannot write {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (found is not None and not os.access(target, os.W_OK)):
        raise fail(source, option, f"cannot write {path}: permission denied")
    return target, found


def _lstat(path: Path, option: str, source: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a new path (its directory is checked after)
        return None
    except OSError as exc:
        raise fail(source, option, f"cannot write {path}: {exc.strerror or exc}") from None


def _ledger_file(target: Path, found: os.stat_result | None, ledger_url: str | None) -> tuple[str, str] | None:
    """What of the ledger `target` is (its database, or a file SQLite keeps beside it) and that
    file's name: by name once every link is resolved, or as the same file (a hard link); None:
    none of it."""
    database = None if ledger_url is None else sqlite_path(ledger_url)
    if database is None:
        return None
    real = os.path.realpath(target)
    for suffix, what in LEDGER_COMPANIONS.items():
        companion = f"{database}{suffix}"
        if os.path.realpath(companion) == real or (
                found is not None and os.path.exists(companion) and os.path.samefile(companion, target)):
            return what, companion
    return None


def _temporary(directory: Path, name: str, mode: int) -> tuple[int, str]:
    """A new file beside the target (hidden, unique), open for writing."""
    for _ in range(100):
        candidate = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode), \
                candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


def _sync_directory(directory: Path) -> None:
    """The rename itself made durable (POSIX: a directory's entries are synced with it)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:  # (some file systems refuse to sync a directory: the rename is done all the same)
        pass
    finally:
        os.close(descriptor)
