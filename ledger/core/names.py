"""A person's name, as the ledger keeps it: NFC-normalized, one line, letters of one writing
system. Checked where a name enters the ledger, whatever authenticated it (store/identity.py,
operations/people.py).

Invariant: two spellings of one name ("José" as é, or as e and a combining acute) are one
person; a name mixing scripts (Latin "grace" with a Cyrillic "а") is refused, since it reads as
another person's.
"""

from __future__ import annotations

import unicodedata

from .errors import fail

NAME_LIMIT = 200


def control_characters(text: str) -> bool:
    # (Cs: a lone surrogate, from a command line that is not valid UTF-8)
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") and ch not in "\n\t" for ch in text)


# Scripts that may share one name (UTS #39, "Highly Restrictive"): Latin with the Han and kana
# of Japanese, the Han and Bopomofo of Chinese, or the Han and Hangul of Korean; any other two
# scripts in one name are refused.
_SCRIPT_SETS = (frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA"}), frozenset({"LATIN", "CJK", "BOPOMOFO"}),
                frozenset({"LATIN", "CJK", "HANGUL"}))


def _scripts(name: str) -> list[str]:
    """The scripts of the letters of `name`, by the first word of their Unicode names (LATIN,
    CYRILLIC, GREEK, CJK, ...), in order of appearance."""
    found: dict[str, None] = {}
    for ch in name:
        if unicodedata.category(ch).startswith("L"):
            word = unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]
            if word not in ("MODIFIER", "KATAKANA-HIRAGANA"):  # shared by scripts
                found[word] = None
    return list(found)


def mixed_scripts(name: str) -> list[str]:
    """The scripts `name` mixes, when no single writing system uses them together; else []."""
    scripts = _scripts(name)
    if len(scripts) < 2 or any(set(scripts) <= allowed for allowed in _SCRIPT_SETS):
        return []
    return scripts


def check_person(name: str, field: str, source: str = "command line") -> str:
    """A person's name, NFC-normalized: not empty, one line, no control characters, at most
    NAME_LIMIT characters, letters of one writing system (`mixed_scripts`)."""
    cleaned = unicodedata.normalize("NFC", name.strip())
    if not cleaned:
        raise fail(source, field, "a person's name cannot be empty")
    if len(cleaned) > NAME_LIMIT:
        raise fail(source, field, f"a person's name is at most {NAME_LIMIT} characters")
    if control_characters(cleaned) or "\n" in cleaned or "\t" in cleaned:
        raise fail(source, field, f"a person's name is one line without control characters: {cleaned!r}")
    scripts = mixed_scripts(cleaned)
    if scripts:
        mixed = " and ".join(script.title() for script in scripts)
        raise fail(source, field, f"a person's name is written in one script; {cleaned!r} mixes {mixed} "
                                  "letters (a look-alike of another name, perhaps: write it in one)")
    return cleaned

