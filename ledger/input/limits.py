"""Limits on what input text may be: sizes, nesting, characters (README, "Input limits").

Every name, id and title the ledger records is printed later -- on a terminal, in
Markdown, LaTeX, HTML and CSV reports, in charts -- so what it may contain is
decided once, here, at input:
- names and ids (ids, dataset, variable, group, family, part, cap and steward names,
  every entry of `reads`, `protects`, `subset`, `partition`, `derived_from`, and
  every mapping key): at most MAX_NAME characters, no control character;
- titles: at most MAX_TITLE characters, no control character (no line breaks);
- descriptions and any other text: at most MAX_TEXT characters, no control
  character but newline and tab;
- a document nests at most `max_depth` levels.
"Control character": C0 (NUL, ESC, CR, ...), DEL, C1, and the Unicode
bidirectional overrides, which reorder what a reader sees. No text holds a lone
surrogate (U+D800..U+DFFF, which JSON's `\ud800` escape can write): it is half of
a character, and no output (UTF-8 above all) can encode it.

Invariant: a document `check_values` accepts holds no string that breaks these rules.
Outputs neutralise control characters as well (terminal.py, the report escapes), for
ledgers recorded before these rules.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import LedgerError


def field_name(at: tuple) -> str:
    """("releases", 1, "mechanism", "epsilon") -> "releases[1].mechanism.epsilon"."""
    text = ""
    for part in at:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text

MAX_NAME = 200
MAX_TITLE = 1000
MAX_TEXT = 10_000

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # newline, tab allowed
_SURROGATE = re.compile("[\ud800-\udfff]")

_NAME_FIELDS = {"id", "name", "dataset", "family", "part", "reads", "protects", "subset", "partition", "derived_from",
                "groups", "recorded_by", "approved_by", "steward", "by", "actor"}
_TEXT_FIELDS = {"description", "notes", "reason", "secrets", "assumptions"}


def text_problem(value: str, kind: str) -> str | None:
    """What is wrong with `value` as a `kind` ("name", "title" or "text"), or None."""
    limit = {"name": MAX_NAME, "title": MAX_TITLE, "text": MAX_TEXT}[kind]
    if len(value) > limit:
        return f"{len(value)} characters; a {kind} has at most {limit}"
    found = _SURROGATE.search(value)
    if found is not None:
        return (f"contains a lone surrogate U+{ord(found.group(0)):04X} at position {found.start() + 1}: half of a "
                "character (a JSON \\u escape without its pair), which no text can hold")
    found = (_CONTROL_IN_TEXT if kind == "text" else _CONTROL).search(value)
    if found is not None:
        return (f"contains the control character U+{ord(found.group(0)):04X} at position {found.start() + 1}; "
                f"control characters are not allowed in a {kind}")
    return None


def check_text(value: str, source: str, field: str, kind: str = "name") -> list[LedgerError]:
    problem = text_problem(value, kind)
    return [] if problem is None else [LedgerError(source, field, problem)]


def check_values(document, max_depth: int) -> list[LedgerError]:
    """Every string and key of a parsed document against the rules above; the depth too."""
    errors: list[LedgerError] = []
    stack: list[tuple[Any, tuple, str, int]] = [(document.data, (), "text", 0)]
    while stack and len(errors) < 20:
        value, at, kind, depth = stack.pop()
        if isinstance(value, (dict, list)) and depth >= max_depth:
            errors.append(LedgerError(document.source(at), field_name(at) or "(top level)",
                                      f"nested deeper than {max_depth} levels"))
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    problem = text_problem(key, "name")
                    if problem is not None:
                        errors.append(LedgerError(document.source(at), field_name(at) or "(top level)",
                                                  f"a key: {problem}"))
                        continue
                stack.append((item, at + (key,), _kind(key, kind), depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, at + (index,), kind, depth + 1))
        elif isinstance(value, str):
            problem = text_problem(value, kind)
            if problem is not None:
                errors.append(LedgerError(document.source(at), field_name(at) or "(top level)", problem))
    return errors


def _kind(key: object, parent: str) -> str:
    if key == "title":
        return "title"
    if key in _NAME_FIELDS:
        return "name"
    if key in _TEXT_FIELDS:
        return "text"
    return "name" if parent == "name" else "text"


def refuse_duplicate_json_keys(pairs: list[tuple[str, Any]]) -> dict:
    """json.loads' object_pairs_hook: a key given twice is an error, never the last one winning."""
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:60]!r}")
        result[key] = value
    return result
