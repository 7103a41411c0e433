"""The command a command line names, read before typer is imported (the entry point decides
from it whether to keep the garbage collector; the application builds only that command)."""

from __future__ import annotations


def command_name(arguments: list[str]) -> str | None:
    """The command the arguments name: the first word after the application's own options
    (--db URL, --db=URL), or None (none named; --help or --version first)."""
    words = iter(arguments)
    for word in words:
        if word == "--db":
            next(words, None)
        elif word.startswith("--db="):
            continue
        elif word.startswith("-"):
            return None
        else:
            return word
    return None
