"""What the command line prints cannot drive a terminal.

A title, a name or a steward recorded with an escape sequence (or recorded before
input was checked for them) reaches every command that prints it: `releases`,
`table`, `cap list`, `pairs`, error messages. `neutral_streams()` wraps standard
output and standard error for the length of a command so that every control
character but newline and tab is printed as a visible escape (`\\x1b`), whatever
printed it (failures.neutralise).

Invariant: inside `neutral_streams()`, no C0/C1 control character other than
newline and tab, and no bidirectional override, is written to either stream.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ..core.failures import neutralise


class NeutralStream:
    """A text stream that neutralises control characters before writing (no `buffer`:
    nothing can write around it)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("a text stream")
        self._stream.write(neutralise(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        """Nothing: the wrapped stream is not ours (a logging handler that kept this wrapper,
        absl's from dp_accounting, closes it at exit)."""

    def isatty(self) -> bool:
        return False  # no colour codes either: they would be neutralised into visible text

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self._stream, "errors", None) or "strict"

    @property
    def closed(self) -> bool:
        return getattr(self._stream, "closed", False)


@contextmanager
def neutral_streams() -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = NeutralStream(saved[0]), NeutralStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
