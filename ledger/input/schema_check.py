"""A document checked against the JSON Schemas in schemas/, in the steward's words.

jsonschema-rs recognises a valid document; jsonschema, only for one it refuses, gives the
problems, each rewritten to say what was expected and what was found (never a Python repr,
never more than an excerpt of the file), and where a misplaced field belongs.
Invariant: `schema_problems` is empty exactly when jsonschema accepts the document.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from ..accounting.catalogue import PARAMETERS
from ..core.errors import LedgerError, did_you_mean
from ..core.lazy import lazy_module
from ..core.numbers import WRITE_A_NUMBER
from .documents import EXCERPT_CHARS, Document, Path_, excerpt
from .limits import field_name

jsonschema_rs = lazy_module("jsonschema_rs")

if TYPE_CHECKING:
    import jsonschema


@cache
def schema(name: str) -> dict:
    text = resources.files("ledger.schemas").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    import jsonschema  # only for a document the fast check refuses: it gives the messages

    return jsonschema.Draft202012Validator(schema(name))


@cache
def _fast_validator(name: str) -> jsonschema_rs.Draft202012Validator:
    # the same schema and draft; formats are not asserted, as jsonschema does not by default
    return jsonschema_rs.Draft202012Validator(schema(name), validate_formats=False)


def validate(document: Document, schema_name: str) -> list[LedgerError]:
    """Every place where the document breaks the schema, as errors naming file:line and field."""
    return [error for _at, error in schema_problems(document, schema_name)]


def schema_problems(document: Document, schema_name: str) -> list[tuple[Path_, LedgerError]]:
    """`validate`'s errors, each with the path in the document of the value it is about (the
    builders skip those values and check everything else: every problem in one pass).

    A valid document is recognised by jsonschema-rs (compiled; some fifty times faster
    than jsonschema, which matters when mechanisms record one release at a time); any
    other is validated by jsonschema, whose errors give the messages. Only the second
    can refuse a document."""
    try:
        if _fast_validator(schema_name).is_valid(document.data):
            return []
    except (ValueError, TypeError, OverflowError):  # a YAML value JSON has no type for: jsonschema decides
        pass
    problems = []
    for error in sorted(_validator(schema_name).iter_errors(document.data),
                        key=lambda e: list(map(str, e.absolute_path))):
        at = tuple(error.absolute_path)
        message = _schema_message(error, schema_name) + _group_cap_hint(document, at, error.instance)
        shown = repr(error.instance)
        if len(shown) > EXCERPT_CHARS and shown in message:  # never echo more than an excerpt of the file
            message = message.replace(shown, excerpt(str(error.instance)) if isinstance(error.instance, str)
                                      else shown[:EXCERPT_CHARS] + "…")
        problems.append((at, LedgerError(document.source(at), field_name(at) or "(top level)", message)))
    return problems


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
    if isinstance(value, list):
        return "a list"
    return f"{value}"[:EXCERPT_CHARS]


def _expected(schema: dict) -> str:
    """One schema alternative in words (`oneOf` branches: the number, a cap's subset)."""
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    if "const" in schema:
        return str(schema["const"])
    kinds = schema.get("type")
    if kinds == "number":
        return _NUMBER
    if kinds is not None:
        return " or ".join(_KINDS.get(kind, kind) for kind in ([kinds] if isinstance(kinds, str) else kinds))
    return "a valid value"


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


def _schema_message(error: jsonschema.ValidationError, schema_name: str) -> str:
    """jsonschema's error in the steward's words: what was expected and what was found."""
    instance = error.instance
    if error.validator == "additionalProperties":
        known = error.schema.get("properties", {})
        unknown = [key for key in instance if key not in known]
        at = tuple(error.absolute_path)
        return "; ".join(f"unknown field {key!r}{_elsewhere(str(key), at, known, schema_name)}" for key in unknown) \
            or error.message.replace("Additional properties are not allowed", "unknown field")
    if error.validator in ("oneOf", "anyOf") and all(set(c) == {"required"} for c in error.validator_value):
        fields = [name for choice in error.validator_value for name in choice["required"]]
        given = [name for name in fields if isinstance(instance, dict) and name in instance]
        if len(given) > 1:
            return f"give one of {' or '.join(fields)}, not {' and '.join(given)}"
        return f"needs {' or '.join(fields)}"
    if error.validator in ("oneOf", "anyOf"):
        choices = error.validator_value
        if any(choice.get("type") == "number" for choice in choices):
            return f"must be a number; found {_found(instance)}: {WRITE_A_NUMBER}"
        return f"must be {' or '.join(_expected(choice) for choice in choices)}; found {_found(instance)}"
    if error.validator == "type":
        if not error.absolute_path and instance is None:
            return "the file is empty"
        wanted = error.validator_value
        message = f"must be {_KINDS.get(wanted, wanted)}; found {_found(instance)}"
        if wanted == "array" and isinstance(instance, str) and instance.strip():
            items = [item.strip() for item in instance.split(",") if item.strip()]
            message += f": write it as [{excerpt(', '.join(items))[1:-1]}]"
        path = list(error.absolute_path)
        if wanted == "object" and isinstance(instance, str) and len(path) >= 2 and path[-2] == "variables":
            message += f": write it as {{name: {excerpt(instance)[1:-1]}}}"  # a variable is a mapping with a name
        return message
    if error.validator == "enum":
        words = [str(choice) for choice in error.validator_value]
        return (f"must be one of {', '.join(words)}; found {_found(instance)}"
                + (did_you_mean(instance, words) if isinstance(instance, str) else ""))
    if error.validator == "minItems" and error.validator_value == 1:
        return "must not be empty"
    if error.validator == "required" and isinstance(instance, dict):
        missing = [name for name in error.validator_value if name not in instance]
        # written one level down (`reads` among a mechanism's parameters): where it was found
        found = [field_name(tuple(error.absolute_path) + (key,)) for key, child in instance.items()
                 if isinstance(child, dict) and any(name in child for name in missing)]
        return "missing field " + ", ".join(map(repr, missing)) + \
            (f" (written under {' and '.join(found)}: it belongs here)" if found else "")
    return error.message


RELEASE_SCHEMA = "release.v1.schema.json"
