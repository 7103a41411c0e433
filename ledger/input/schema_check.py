"""A document checked against the JSON Schemas in schemas/, in the steward's words.

One validator, jsonschema-rs (compiled): it says whether a document is valid, and each error it
reports is rewritten here to say what was expected and what was found (never a Python repr,
never more than an excerpt of the file), and where a misplaced field belongs. Its errors carry
what the messages need (the keyword, its place in the schema, the value's path), so no second
validator is imported for them. Measured by benchmarks/bench_schema.py (medians): a valid file of
20,000 releases checks in 0.06 s (the Python `jsonschema`: 8.5 s), one refused for one release
in 0.09 s (7 s), the demo's files in 6 microseconds (1.7 ms); importing it and building a
validator costs ~40 ms over a bare interpreter (`jsonschema`: ~165 ms).
Invariant: `schema_problems` is empty exactly when jsonschema-rs accepts the document, which takes
a value JSON has no type for (NaN, a YAML !!binary or !!set) as null, accepted nowhere; but NaN or
an infinity where a number is accepted is left to the builders, which refuse it in words.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ..accounting.catalogue import PARAMETERS
from ..core.errors import LedgerError, did_you_mean
from ..core.lazy import lazy_module
from ..core.numbers import WRITE_A_NUMBER
from .documents import EXCERPT_CHARS, Document, Path_, excerpt
from .limits import field_name

jsonschema_rs = lazy_module("jsonschema_rs")


@cache
def schema(name: str) -> dict:
    text = resources.files("ledger.schemas").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator(name: str) -> Any:
    # formats are not asserted: a date is read, and refused in words, by the builders
    return jsonschema_rs.Draft202012Validator(schema(name), validate_formats=False)


def validate(document: Document, schema_name: str) -> list[LedgerError]:
    """Every place where the document breaks the schema, as errors naming file:line and field."""
    return [error for _at, error in schema_problems(document, schema_name)]


def schema_problems(document: Document, schema_name: str) -> list[tuple[Path_, LedgerError]]:
    """`validate`'s errors, each with the path in the document of the value it is about (the
    builders skip those values and check everything else: every problem in one pass), in the
    order of the file, once each."""
    validator = _validator(schema_name)
    try:
        if validator.is_valid(document.data):
            return []
        errors = list(validator.iter_errors(document.data))
    except ValueError:  # a value JSON has no type for, which jsonschema-rs cannot read: _as_json
        errors = list(validator.iter_errors(_as_json(document.data)))
    root = schema(schema_name)
    refusals = sorted((_Refusal.of(error, document.data, root) for error in errors), key=lambda refusal: refusal.order)
    problems: dict[tuple[Path_, str], LedgerError] = {}
    for refusal in refusals:
        if _not_finite_number(refusal):
            continue
        message = _schema_message(refusal, schema_name) + _group_cap_hint(document, refusal.at, refusal.instance)
        # (a mapping missing two fields is one refusal per field, each saying both: said once)
        problems.setdefault((refusal.at, message),
                            LedgerError(document.source(refusal.at), field_name(refusal.at) or "(top level)", message))
    return [(at, error) for (at, _message), error in problems.items()]


def _as_json(value: Any) -> Any:
    """The document with each value YAML can give and JSON has no type for (!!binary, !!set) as
    null, as jsonschema-rs reads a float that is not finite (NaN in a JSON file): no place of the
    schemas accepts null, and the message says what the file gave."""
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(item) for item in value]
    return value if value is None or isinstance(value, (str, int, float)) else None


def _not_finite_number(refusal: _Refusal) -> bool:
    """NaN or an infinity (a JSON file's NaN, Infinity) where the schema takes a number: jsonschema-rs
    reads it as null; the builders refuse it in words (core.numbers.to_fraction)."""
    if not isinstance(refusal.instance, float) or math.isfinite(refusal.instance) or refusal.key:
        return False
    kinds = [refusal.expected] if refusal.keyword == "type" else \
        [choice.get("type") for choice in refusal.expected] if refusal.keyword in ("oneOf", "anyOf") else []
    return any(kind == "number" or (isinstance(kind, list) and "number" in kind) for kind in kinds)


@dataclass(frozen=True)
class _Refusal:
    """One error of jsonschema-rs, as the messages read it."""

    keyword: str  # the schema keyword that refused ("type", "required", ...)
    expected: Any  # its value in the schema
    where: Mapping  # the schema object holding it
    at: Path_  # the path of the value in the document
    instance: Any  # the value, as the file gives it (a key, for `propertyNames`)
    order: tuple  # where the value is in the file, then where the keyword is in the schema
    key: bool = False  # `instance` is a key of the mapping at `at`

    @classmethod
    def of(cls, error: Any, data: Any, root: dict) -> _Refusal:
        at = tuple(error.instance_path)
        key = error.kind.name == "propertyNames"  # (the path names the mapping; the key is the inner error's)
        where: Any = root
        for part in error.schema_path[:-1]:
            where = where[part]
        keyword = error.schema_path[-1]
        places = []
        for part in at:  # a field's place among its mapping's fields, as the file gives them
            places.append(part if isinstance(part, int) else list(data).index(part))
            data = data[part]
        return cls(keyword, where[keyword], where, at, error.kind.error.instance if key else data,
                   (tuple(places), list(where).index(keyword)), key)


class Taint:
    """The paths of the values the schema refused: a builder skips what it cannot read there
    and goes on with the rest of the document (each refused value is reported once, by the schema)."""

    def __init__(self, paths: Iterable[Path_] = ()):
        self.paths = [tuple(p) for p in paths]

    def within(self, at: Path_) -> bool:
        """The value at `at`, or something inside it, was refused."""
        n = len(at)
        return any(p[:n] == tuple(at) for p in self.paths)

    def at(self, at: Path_) -> bool:
        """The value at `at` itself was refused (a mapping: a field missing or not allowed)."""
        return tuple(at) in self.paths

    def __bool__(self) -> bool:
        return bool(self.paths)


_KINDS = {"array": "a list ([a, b])", "object": "a mapping (key: value)", "string": "text",
          "number": "a number", "integer": "a whole number", "boolean": "true or false", "null": "nothing"}
_NUMBER = "a number (1, 0.1, 1e-3) or a fraction (1/10)"


def _found(value) -> str:
    """What the steward wrote, in words: never a Python repr (a short excerpt of text)."""
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the text {excerpt(value) if value.strip() else repr(value)}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, bytes):
        return "binary data (YAML !!binary)"
    if isinstance(value, (set, frozenset)):
        return "a set (YAML !!set)"
    return f"{value}"[:EXCERPT_CHARS]


def _kinds(wanted: str | list[str]) -> str:
    return " or ".join(_KINDS.get(kind, kind) for kind in ([wanted] if isinstance(wanted, str) else wanted))


def _expected(schema: dict) -> str:
    """One schema alternative in words (`oneOf` branches: the number, a cap's subset)."""
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    if "const" in schema:
        return str(schema["const"])
    kinds = schema.get("type")
    if kinds == "number":
        return _NUMBER
    return "a valid value" if kinds is None else _kinds(kinds)


@cache
def schema_places(schema_name: str) -> dict[str, tuple[Path_, ...]]:
    """Each field of the schema's files -> the mappings it is a field of, as paths in a file
    (None: any index). A mechanism (`$defs/mechanism`) holds every parameter of the catalogue
    (`PARAMETERS`), not only those the schema types."""
    root = schema(schema_name)
    parameters = list(dict.fromkeys(name for accepted in PARAMETERS.values() for name in accepted.names))
    places: dict[str, dict[Path_, None]] = {}

    def walk(node: dict, at: Path_, refs: frozenset[str]) -> None:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in refs:
                if name == "mechanism":
                    for key in parameters:
                        places.setdefault(key, {})[at] = None
                walk(root["$defs"][name], at, refs | {name})
            return
        for key, child in node.get("properties", {}).items():
            places.setdefault(key, {})[at] = None
            walk(child, at + (key,), refs)
        if isinstance(node.get("items"), dict):
            walk(node["items"], at + (None,), refs)
        for choice in (*node.get("oneOf", ()), *node.get("anyOf", ())):
            walk(choice, at, refs)

    walk(root, (), frozenset())
    return {key: tuple(found) for key, found in places.items()}


def nearest_places(places: Iterable[Path_], at: Path_) -> list[str]:
    """The places, other than `at`, that share the longest start with `at` (the same release
    before another release's), written as paths of this file ("releases[0].guarantees[]"; ""
    for the top of the file)."""
    def shared(place: Path_) -> int:
        count = 0
        for mine, theirs in zip(at, place):
            if not (mine == theirs or (theirs is None and isinstance(mine, int))):
                break
            count += 1
        return count

    others = [place for place in places if not (len(place) == len(at) and shared(place) == len(at))]
    best = max(map(shared, others), default=0)
    return [field_name(tuple("[]" if part is None else part for part in at[:best] + place[best:])).replace(".[]", "[]")
            for place in others if shared(place) == best]


def _elsewhere(key: str, at: Path_, known: Iterable[str], schema_name: str) -> str:
    """What to tell of a field `key` not allowed in the mapping at `at`: where it belongs when
    it is a field of another place of the file (`sensitivity` beside `reads` belongs under the
    mechanism; `reads` among a mechanism's parameters, beside them), else the nearest names allowed
    here, else the nearest fields of other places."""
    places = schema_places(schema_name)
    exact = nearest_places(places.get(key, ()), at)
    if exact:
        return f": it belongs {under_places(exact)}"
    near = did_you_mean(key, known)
    if near:
        return near
    for close in difflib.get_close_matches(key, list(places), n=1, cutoff=0.75):
        where = nearest_places(places[close], at)
        if where:
            return f" (did you mean {close!r}, {under_places(where)}?)"
    return ""


def under_places(places: list[str]) -> str:
    return " or ".join(f"under {place}" if place else "at the top of the file" for place in places)


def _group_cap_hint(document: Document, at: tuple, instance) -> str:
    """A cap's `subset` given as one name that is a group of the file (`subset: work`): how a
    cap on a group is written (the schema cannot know the file's groups)."""
    if len(at) < 3 or at[-1] != "subset" or at[-3] != "caps" or not isinstance(instance, str):
        return ""
    groups = document.data.get("groups") if isinstance(document.data, Mapping) else None
    if not isinstance(groups, Mapping) or instance not in groups:
        return ""
    return (f": {excerpt(instance)} is a group; a cap on a group is written {{name: {excerpt(instance)[1:-1]}, ...}} "
            "without `subset`")


# What a `pattern` of the schemas asks for, in words (another pattern is shown as written)
_PATTERNS = {
    "^[A-Za-z0-9][A-Za-z0-9_.:-]*$": "a name of letters, digits and _ . : - that starts with a letter or digit",
    "^[A-Za-z0-9]([A-Za-z0-9 _.:/-]*[A-Za-z0-9_.:-])?$":
        "an id of letters, digits, spaces and _ . : / - that starts with a letter or digit and ends with neither "
        "a space nor /",
    "^\\S(.*\\S)?$": "text that neither starts nor ends with a space",
}


def _schema_message(refusal: _Refusal, schema_name: str) -> str:
    """A refusal in the steward's words: what was expected and what was found."""
    keyword, expected, instance, at = refusal.keyword, refusal.expected, refusal.instance, refusal.at
    if refusal.key:
        return f"a key {_value_message(keyword, expected, instance)}"
    if keyword == "additionalProperties":
        known = refusal.where.get("properties", {})
        return "; ".join(f"unknown field {excerpt(str(key))}{_elsewhere(str(key), at, known, schema_name)}"
                         for key in instance if key not in known)
    if keyword in ("oneOf", "anyOf") and all(set(choice) == {"required"} for choice in expected):
        fields = [name for choice in expected for name in choice["required"]]
        given = [name for name in fields if isinstance(instance, dict) and name in instance]
        if len(given) > 1:
            return f"give one of {' or '.join(fields)}, not {' and '.join(given)}"
        return f"needs {' or '.join(fields)}"
    if keyword in ("oneOf", "anyOf"):
        if any(choice.get("type") == "number" for choice in expected):
            return f"must be a number; found {_found(instance)}: {WRITE_A_NUMBER}"
        return f"must be {' or '.join(_expected(choice) for choice in expected)}; found {_found(instance)}"
    if keyword == "type":
        if not at and instance is None:
            return "the file is empty"
        message = f"must be {_kinds(expected)}; found {_found(instance)}"
        if expected == "array" and isinstance(instance, str) and instance.strip():
            items = [item.strip() for item in instance.split(",") if item.strip()]
            message += f": write it as [{excerpt(', '.join(items))[1:-1]}]"
        if expected == "object" and isinstance(instance, str) and len(at) >= 2 and at[-2] == "variables":
            message += f": write it as {{name: {excerpt(instance)[1:-1]}}}"  # a variable is a mapping with a name
        return message
    if keyword == "required" and isinstance(instance, dict):
        missing = [name for name in expected if name not in instance]
        # written one level down (`reads` among a mechanism's parameters): where it was found
        found = [field_name(at + (key,)) for key, child in instance.items()
                 if isinstance(child, dict) and any(name in child for name in missing)]
        return "missing field " + ", ".join(map(repr, missing)) + \
            (f" (written under {' and '.join(found)}: it belongs here)" if found else "")
    return _value_message(keyword, expected, instance)


def _value_message(keyword: str, expected: Any, instance: Any) -> str:
    """The checks of one value (or key) against a limit of the schema: length, form, choices."""
    if keyword == "enum":
        words = [str(choice) for choice in expected]
        return (f"must be one of {', '.join(words)}; found {_found(instance)}"
                + (did_you_mean(instance, words) if isinstance(instance, str) else ""))
    if keyword == "const":
        return f"must be {expected}; found {_found(instance)}"
    if keyword == "pattern":
        return f"must be {_PATTERNS.get(expected, f'text of the form {expected}')}; found {_found(instance)}"
    if keyword in ("minItems", "minLength") and expected == 1:
        return "must not be empty"
    if keyword in ("minLength", "maxLength"):
        most = "least" if keyword == "minLength" else "most"
        return f"must be at {most} {expected} characters long; found {len(instance)} characters"
    if keyword in ("minItems", "maxItems"):
        most = "least" if keyword == "minItems" else "most"
        return f"must hold at {most} {expected} values; found {len(instance)}"
    if keyword == "uniqueItems":
        seen: set[str] = set()
        for item in instance:
            written = json.dumps(item, sort_keys=True, default=str)
            if written in seen:
                return f"must not hold a value twice; found {_found(item)} more than once"
            seen.add(written)
        return "must not hold a value twice"
    return f"is not what the schema's `{keyword}` allows"


RELEASE_SCHEMA = "release.v1.schema.json"
