"""How a failure ends a command: one exit code, one short message, never a traceback.

Exit codes (README, `privacy-ledger --help`):
- 0 done;
- 1 a budget check refused, or another step the accounting refuses (cancelling a release
  whose output exists): nothing written;
- 2 bad input: a file, field, option or path that cannot be accepted (nothing written);
- 3 the ledger could not be reached, locked or written -- a lock wait timed out, the disk
  is full, the file system is read-only, the database connection was refused or lost, the
  server has too many clients: nothing was recorded, retry later;
- 4 an unexpected failure (a defect): one line, and the path of a log with the details.

`exit_code(exc)` is the single place that maps an exception to its code and message: a
list of (exception type, handler) pairs, most specific first, that other modules extend
with `register` (a handler prints what the user needs and returns the code).

Invariant: whatever a command raises, `handle` prints at most a few short lines, each
free of control characters, and returns one of the codes above.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable
from datetime import UTC, datetime

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 4

UNAVAILABLE = "the ledger could not be reached, locked or written: nothing was recorded; retry later"
LOG_DIR_ENV = "LEDGER_LOG_DIR"  # where failure logs go (default: <tmp>/privacy-ledger-logs)
EXCERPT = 300  # characters of a value quoted in a message at most


class LedgerUnavailable(Exception):
    """An operational failure: the ledger could not be reached, locked or written (exit 3)."""

    def __init__(self, why: str):
        self.why = why
        super().__init__(why)


Handler = Callable[[BaseException], int]
_HANDLERS: list[tuple[type[BaseException], Handler]] = []


def register(kind: type[BaseException], handler: Handler, *, first: bool = False) -> None:
    """Map exceptions of `kind` to a handler (checked in order of registration; `first`
    puts it before every handler registered so far)."""
    if first:
        _HANDLERS.insert(0, (kind, handler))
    else:
        _HANDLERS.append((kind, handler))


def handle(exc: BaseException, ledger: str | None = None) -> int:
    """Print what the user needs to know about `exc`; return the exit code. `ledger`: the
    ledger's URL, named in an operational failure's line (its password hidden)."""
    why = operational_reason(exc)
    if why is not None:
        say(f"error: {UNAVAILABLE} ({why}" + (f"; ledger {_safe_url(ledger)}" if ledger else "") + ")")
        return EXIT_UNAVAILABLE
    for kind, handler in _HANDLERS:
        if isinstance(exc, kind):
            return handler(exc)
    return unexpected(exc)


def _safe_url(url: str) -> str:
    # the one import of the database library outside the store (tests/test_layers.py): the password
    # is hidden where the library itself finds it in the URL, which a parser of our own could miss
    try:
        from sqlalchemy.engine import make_url

        return excerpt(make_url(url).render_as_string(hide_password=True), 200)
    except Exception:  # noqa: BLE001 -- not a URL: named as given, shortened
        return excerpt(url, 200)


# --------------------------------------------------------------------------
# Operational failures: exit 3
# --------------------------------------------------------------------------

# errno values that mean "the storage or the network failed", not "this input is wrong"
_OPERATIONAL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.ECONNREFUSED, errno.ECONNRESET,
                       errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EPIPE, errno.EAGAIN}

# SQLite and PostgreSQL messages, lower case, and the short reason printed for each
_REASONS = (
    ("database is locked", "the ledger's lock was not granted in time"),
    ("database table is locked", "the ledger's lock was not granted in time"),
    ("lock timeout", "the ledger's lock was not granted in time"),
    ("database or disk is full", "the disk is full"),
    ("no space left", "the disk is full"),
    ("could not extend file", "the disk is full"),
    ("readonly database", "the ledger cannot be written here (read-only file or file system)"),
    ("read-only file system", "the ledger cannot be written here (read-only file system)"),
    ("read-only transaction", "the ledger cannot be written here (read-only)"),
    ("disk i/o error", "the disk failed to read or write"),
    ("too many clients", "the PostgreSQL server's connection limit is reached (too many clients)"),
    ("remaining connection slots", "the PostgreSQL server's connection limit is reached (too many clients)"),
    ("terminating connection", "the database connection was closed by the server"),
    ("server closed the connection", "the database connection was lost"),
    ("connection refused", "the database server refused the connection"),
    ("connection timeout", "the database server did not answer in time"),
    ("timeout expired", "the database server did not answer in time"),
    ("the database system is starting up", "the database server is starting up"),
    ("the database system is shutting down", "the database server is shutting down"),
    ("the database system is in recovery mode", "the database server is recovering"),
    ("consuming input failed", "the database connection was lost"),
    ("connection is lost", "the database connection was lost"),
    ("connection is closed", "the database connection was lost"),
    ("unable to open database file", "the ledger file could not be opened"),
)


def operational_reason(exc: BaseException) -> str | None:
    """A short reason when `exc` (or what it wraps) is an operational failure, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, LedgerUnavailable):
            return current.why
        reason = _reason(current)
        if reason is not None:
            return reason
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return None


def _reason(exc: BaseException) -> str | None:
    if isinstance(exc, OSError) and exc.errno in _OPERATIONAL_ERRNOS:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return "the disk is full"
        if exc.errno == errno.EROFS:
            return "the ledger cannot be written here (read-only file system)"
        return os.strerror(exc.errno).lower()
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    database = module.startswith(("sqlite3", "psycopg", "sqlalchemy"))
    if not database:
        return None
    text = str(exc).lower()
    for needle, reason in _REASONS:
        if needle in text:
            return reason
    if name in ("OperationalError", "InterfaceError", "TimeoutError") or getattr(exc, "connection_invalidated", False):
        # an operational failure with a message not listed above: name it by its first line
        return "database: " + excerpt(str(exc).strip().splitlines()[0] if str(exc).strip() else name, 160)
    return None


# --------------------------------------------------------------------------
# Unexpected failures: exit 4, details in a log
# --------------------------------------------------------------------------


def unexpected(exc: BaseException) -> int:
    path = write_log(exc)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    summary = f"{type(exc).__name__}: {excerpt(first, 160)}" if first else type(exc).__name__
    where = f"details in {path}" if path else "no log could be written"
    say(f"error: unexpected failure ({summary}); nothing was recorded unless a message above says so; {where}")
    return EXIT_INTERNAL


def write_log(exc: BaseException) -> str | None:
    """The traceback and command line, in a new file under LEDGER_LOG_DIR; its path."""
    directory = os.environ.get(LOG_DIR_ENV) or os.path.join(tempfile.gettempdir(), "privacy-ledger-logs")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        handle, path = tempfile.mkstemp(dir=directory, prefix=f"failure-{stamp}-{os.getpid()}-", suffix=".log")
        with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace") as stream:
            stream.write(f"privacy-ledger failure at {datetime.now(UTC).isoformat()}\n")
            stream.write(f"command: {sys.argv!r}\n\n")
            stream.write("".join(traceback.format_exception(exc)))
        return path
    except OSError:
        return None


# --------------------------------------------------------------------------
# Safe text for messages and terminals
# --------------------------------------------------------------------------

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def neutralise(text: str) -> str:
    """Control characters made visible (`\\x1b`), so no text can drive a terminal."""
    # every character _CONTROL finds is not printable: the common case, fast (a newline is not
    # printable either, so text of many lines is looked at line by line, still at C speed)
    if text.isprintable() or all(map(str.isprintable, text.split("\n"))):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 256
                        else f"\\u{ord(m.group(0)):04x}", text)


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """At most `limit` characters of `text`, control characters neutralised."""
    text = neutralise(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters)"


QUOTED = 80  # characters of a value an error message quotes at most (as of a line of a file: documents.EXCERPT_CHARS)
# a quoted value opens after a non-word character and closes before one: the text between two quoted
# names ('root' recorded ... dataset 'graduates') is not a value
_QUOTED = re.compile(r"""(?<!\w)'[^'\n]{%d,}'(?!\w)|(?<!\w)"[^"\n]{%d,}"(?!\w)|[^\s'"/]{%d,}"""
                     % (QUOTED + 3, QUOTED + 3, QUOTED + 1))


def short_quotes(message: str, limit: int = QUOTED) -> str:
    """`message` with every value it quotes (a text in quotes, or any run of characters without a
    space or a slash: a file's path is named whole) cut to `limit` characters: an error never echoes more of the input than a short excerpt,
    whatever the message was built from (a name given on the command line, a file's value)."""
    def cut(found: re.Match) -> str:
        text = found.group(0)
        quote = text[0] if text[0] in "'\"" and text[-1] == text[0] and len(text) > 1 else ""
        inner = text[1:-1] if quote else text
        if len(inner) <= limit:
            return text
        return f"{quote}{inner[:limit]}…{quote} ({len(inner) - limit} more characters)"

    return _QUOTED.sub(cut, message)


def say(line: str) -> None:
    """One line to standard error, neutralised and never longer than a screenful."""
    try:
        print(excerpt(line.replace("\n", " "), 2000), file=sys.stderr)
    except (OSError, ValueError):
        pass
