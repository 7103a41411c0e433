"""From files to frozen records: parse -> validate -> build -> check.

Like beancount's loader, one pipeline of functions that take and return
values. The only I/O is `read_document`. Every problem becomes a
`LedgerError` naming the file, line and field; the caller decides what to do
with the list (the CLI prints it and exits 2 without writing anything).

Invariant: when the returned error list is empty, the records satisfy every
invariant stated in records.py, against the ledger snapshot given.
"""

from __future__ import annotations

import difflib
import json
import stat
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..accounting.catalogue import (
    CATALOGUE,
    NUMERIC_PARAMS,
    PARAMETERS,
    derive_guarantees,
    overclaims,
    unknown_parameters,
)
from ..accounting.lineage import PUBLISHED_STATUSES, describe, publish_blockers
from ..accounting.relation import in_dataset
from ..core.errors import InputErrors, LedgerError
from ..core.numbers import WRITE_A_NUMBER, NumberError, plain_decimal, to_fraction
from ..core.lazy import lazy_module
from ..core.records import (
    CHARGED_STATUSES,
    DEFAULT_ALLOWANCE,
    PUBLIC,
    Cap,
    Dataset,
    Family,
    Guarantee,
    Mechanism,
    Notion,
    Relation,
    Release,
    Status,
    Variable,
    misread_public,
)

from .limits import check_values, field_name, refuse_duplicate_json_keys

# read when a file is (not by `--help` or `--version`)
yaml = lazy_module("yaml")
jsonschema_rs = lazy_module("jsonschema_rs")

if TYPE_CHECKING:
    import jsonschema
    import networkx as nx

Path_ = tuple[Any, ...]


# --------------------------------------------------------------------------
# Parse
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """A parsed input file and the line of every value in it (YAML only)."""

    path: str
    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    release_schema_checked: bool = False  # validated_release_documents passed it (before any lock)
    # validated_release_documents found these schema problems (path, error): build_releases reports
    # them with every other problem of the file, in one pass
    release_schema_problems: tuple = ()

    def source(self, at: Path_ = ()) -> str:
        """`file:line` for the value at `at` (or its nearest located parent)."""
        for cut in range(len(at), -1, -1):
            line = self.lines.get(tuple(at[:cut]))
            if line is not None:
                return f"{self.path}:{line}"
        return self.path


# Input limits (README, "Input limits"): a file larger, deeper, or with more aliases than
# these is refused as bad input before anything else is done with it.
MAX_FILE_BYTES = 16 * 1024 * 1024  # one release or dataset file
MAX_DEPTH = 64  # nesting of mappings and lists
MAX_ALIASES = 1000  # YAML aliases (*name) in one file
# values the aliases of one file add, each alias counted as what it expands to (an alias bomb);
# the values written in the file are bounded by its size
MAX_NODES = 200_000


@cache
def _yaml_loader():
    """libyaml's loader when available: same results, faster."""
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_document(path: str | Path) -> tuple[Document | None, list[LedgerError]]:
    path = Path(path)
    name = str(path)
    try:
        found = path.stat()
    except FileNotFoundError:
        return None, [LedgerError(name, "", "no such file")]
    except OSError as exc:
        return None, [LedgerError(name, "", f"cannot read: {exc.strerror or exc}")]
    if not stat.S_ISREG(found.st_mode):  # a FIFO or a device could block for ever or never end
        return None, [LedgerError(name, "", "not a regular file")]
    if found.st_size > MAX_FILE_BYTES:
        return None, [LedgerError(name, "", f"file of {found.st_size} bytes; the limit is {MAX_FILE_BYTES}")]
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            return None, [LedgerError(name, "", f"file larger than the limit of {MAX_FILE_BYTES} bytes")]
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [LedgerError(name, "", f"cannot read: {exc}")]
    if looks_like_csv(name, text):  # confidential microdata, perhaps: never echoed beyond a short excerpt
        return None, [LedgerError(f"{name}:1", "", "this looks like CSV data: did you mean `run --data "
                                                   f"{name}`? (first line: {excerpt(text)})")]
    return parse_document(name, text)


EXCERPT_CHARS = 80  # an error quotes at most this much of a line of a user's file


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first line of `text`, cut to `limit` characters, quoted: what an error may show of a file."""
    line = text.lstrip("\ufeff").splitlines()[0] if text.strip() else ""
    return repr(line[:limit] + ("…" if len(line) > limit or "\n" in text.strip() else ""))


def looks_like_csv(name: str, text: str) -> bool:
    """A .csv/.tsv file, or text whose first two lines are comma-separated fields without a YAML key."""
    if name.lower().endswith((".csv", ".tsv")):
        return True
    lines = [line for line in text.lstrip("\ufeff").splitlines() if line.strip()][:2]
    if len(lines) < 2 or name.lower().endswith(".json"):
        return False
    first, second = lines
    if first.lstrip()[:1] in "[{#-\"'" or ":" in first:
        return False
    return first.count(",") >= 1 and first.count(",") == second.count(",")


def parse_document(name: str, text: str) -> tuple[Document | None, list[LedgerError]]:
    if name.endswith(".json"):
        try:
            data = json.loads(text, object_pairs_hook=refuse_duplicate_json_keys)
        except json.JSONDecodeError as exc:
            return None, [LedgerError(f"{name}:{exc.lineno}", "", f"malformed JSON: {exc.msg} (column {exc.colno})")]
        except ValueError as exc:  # a duplicate key
            return None, [LedgerError(name, "", f"malformed JSON: {exc}")]
        except RecursionError:
            return None, [LedgerError(name, "", f"malformed JSON: nested deeper than {MAX_DEPTH} levels")]
        errors = check_values(Document(name, data), MAX_DEPTH)
        return (None, errors) if errors else (Document(name, data), [])
    try:
        problem = _yaml_limits(text)
        if problem is not None:
            return None, [LedgerError(f"{name}:{problem[0]}", "", f"refused YAML: {problem[1]}")]
        loader = _yaml_loader()(text)
        try:
            node = loader.get_single_node()
            problem = _node_problem(node)
            if problem is not None:
                return None, [LedgerError(f"{name}:{problem[0]}", "", f"refused YAML: {problem[1]}")]
            _timestamps_as_text(node)
            lines: dict[Path_, int] = {}
            if node is not None:
                _collect_lines(node, (), lines)
            errors = _numbers_not_as_written(loader, node, Document(name, None, lines))
            if errors:
                return None, errors
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc)
        if "maximum nesting depth" in problem:  # (PyYAML 6.0.3 and later stop at a depth of their own,
            # far past MAX_DEPTH, before _yaml_limits counts to it: the same refusal, in its words)
            return None, [LedgerError(where, "", f"malformed YAML: nested deeper than {MAX_DEPTH} levels")]
        return None, [LedgerError(where, "", f"malformed YAML: {problem}")]
    except (ValueError, TypeError, OverflowError, ArithmeticError, RecursionError) as exc:
        # a tag or value YAML's constructors cannot build (`!!int abc`, an integer of
        # thousands of digits): the message quotes at most a short excerpt
        return None, [LedgerError(name, "", f"malformed YAML: a value that cannot be read "
                                            f"({type(exc).__name__}: {str(exc)[:120]})")]
    document = Document(name, data, lines)
    errors = check_values(document, MAX_DEPTH)
    return (None, errors) if errors else (document, [])


def _yaml_limits(text: str) -> tuple[int, str] | None:
    """(line, problem) when the YAML nests deeper than MAX_DEPTH or has more than
    MAX_ALIASES aliases: read as events, stopped at the first excess, so neither an
    alias bomb nor a 100,000-deep nesting costs more than that."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=_yaml_loader()):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                return event.start_mark.line + 1, f"nested deeper than {MAX_DEPTH} levels"
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                return event.start_mark.line + 1, f"more than {MAX_ALIASES} aliases"
    return None


def _node_problem(root: yaml.Node | None) -> tuple[int, str] | None:
    """(line, problem): a duplicate key, a key that is not a string, or aliases that add more
    than MAX_NODES values once expanded (each shared node counted once per use, beyond the
    values written: a long file without aliases is limited by its size alone)."""
    if root is None:
        return None
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order, iterative: the size of a node is 1 + the sizes of its children
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) else \
            list(node.value) if isinstance(node, yaml.SequenceNode) else []
        if not done:
            if isinstance(node, yaml.MappingNode):
                seen: dict = {}
                for key, _ in node.value:
                    if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
                        if key.tag == "tag:yaml.org,2002:merge":
                            continue
                        return key.start_mark.line + 1, "a key that is not text (write it in quotes)"
                    if key.value in seen:
                        return key.start_mark.line + 1, (f"duplicate key {key.value[:60]!r} (first at line "
                                                         f"{seen[key.value]})")
                    seen[key.value] = key.start_mark.line + 1
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
        # every node below this one is among those counted (len(sizes)): what exceeds them is what
        # its aliases add (exact at the root; the first excess stops the count, so it stays small)
        if sizes[id(node)] - len(sizes) > MAX_NODES:
            return node.start_mark.line + 1, (f"its aliases expand to more than {MAX_NODES} values besides those "
                                              "written")
    return None


TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


def _timestamps_as_text(root: yaml.Node | None) -> None:
    """A date or time written without quotes (`published_at: 2026-11-01`) is read as the text
    written, exactly as if it were quoted: YAML 1.1 would make it a date object, which the
    schema's date-time strings refuse with a message about Python types."""
    stack = [root] if root is not None else []
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: a shared node, visited once
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag == TIMESTAMP_TAG:
                node.tag = "tag:yaml.org,2002:str"
        elif isinstance(node, yaml.MappingNode):
            stack.extend(child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


YAML_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _numbers_not_as_written(loader, root: yaml.Node | None, document: Document) -> list[LedgerError]:
    """Every unquoted number written other than as a plain decimal (numbers.plain_decimal): YAML 1.1
    reads 1:30 as 90, 017 as 15, 0x10 as 16, 1_000 as 1000, .inf as infinity; refused, quoting the
    text written, wherever it is (a value meant as text is quoted). A tag given explicitly that
    YAML would not infer from the text (`!!int abc`) is left to the constructors. (A plain scalar's
    style is None, or "" with libyaml's loader; a quoted one's is a quote.)"""
    errors: list[LedgerError] = []
    stack = [(root, ())] if root is not None else []
    seen: set[int] = set()
    scalar, mapping, sequence = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode  # (looked up once)
    while stack and len(errors) < 20:
        node, at = stack.pop()
        if id(node) in seen:  # an alias: a shared node, reported once
            continue
        seen.add(id(node))
        if isinstance(node, scalar):
            if node.tag in YAML_NUMBER_TAGS and not node.style and not plain_decimal(node.value) \
                    and loader.resolve(scalar, node.value, (True, False)) == node.tag:
                try:
                    read = f" (YAML reads it as {loader.construct_object(node)!r})"
                except (ValueError, TypeError, OverflowError, ArithmeticError):
                    read = ""
                errors.append(LedgerError(document.source(at), field_name(at) or "(top level)",
                                          f"{excerpt(node.value)} is not a plain decimal{read}: {WRITE_A_NUMBER}, "
                                          "or quote it if it is text"))
        elif isinstance(node, mapping):
            stack.extend((value, at + (key.value,)) for key, value in reversed(node.value))
        elif isinstance(node, sequence):
            stack.extend((value, at + (index,)) for index, value in reversed(list(enumerate(node.value))))
    return errors


def _collect_lines(node: yaml.Node, at: Path_, lines: dict[Path_, int]) -> None:
    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _collect_lines(value, at + (key.value,), lines)
            lines[at + (key.value,)] = key.start_mark.line + 1  # point at the key, not the value
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            _collect_lines(value, at + (index,), lines)


# --------------------------------------------------------------------------
# Validate against the JSON Schemas in schemas/
# --------------------------------------------------------------------------


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


class _Taint:
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
def _places(schema_name: str) -> dict[str, tuple[Path_, ...]]:
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


def _nearest(places: Iterable[Path_], at: Path_) -> list[str]:
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
    places = _places(schema_name)
    exact = _nearest(places.get(key, ()), at)
    if exact:
        return f": it belongs {_under(exact)}"
    near = _did_you_mean(key, known)
    if near:
        return near
    for close in difflib.get_close_matches(key, list(places), n=1, cutoff=0.75):
        where = _nearest(places[close], at)
        if where:
            return f" (did you mean {close!r}, {_under(where)}?)"
    return ""


def _under(places: list[str]) -> str:
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
                + (_did_you_mean(instance, words) if isinstance(instance, str) else ""))
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


# --------------------------------------------------------------------------
# Build and check
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerSnapshot:
    """What the ledger already holds, as the loader needs it for its checks."""

    datasets: Mapping[str, Dataset] = field(default_factory=dict)
    releases: Mapping[str, Release] = field(default_factory=dict)  # may be a lazy lookup (store.ReleaseLookup)
    families: Mapping[str, Family] = field(default_factory=dict)
    # the charged recorded releases holding given (family, part) pairs: a function of the pairs asked
    # about, giving (family, part) -> release id (store.parts_held: under the write lock, reading only
    # those). None: found among `releases` (a snapshot that holds them all)
    parts_held: Callable[[Collection[tuple[str, str]]], Mapping[tuple[str, str], str]] | None = field(
        default=None, compare=False)
    # release id -> when it was retracted or cancelled (history.ended; store.snapshot reads it):
    # the `--as-of` views date a status by it. None: not read
    ended: Mapping[str, datetime] | None = field(default=None, compare=False)


class _Collector:
    """Errors of one document, each located by its path in the document."""

    def __init__(self, document: Document):
        self.document = document
        self.errors: list[LedgerError] = []

    def add(self, at: Path_, message: str) -> None:
        self.errors.append(LedgerError(self.document.source(at), field_name(at), message))

    def number(self, value: Any, at: Path_, *, below_one: bool = False, positive: bool = False) -> Fraction | None:
        try:
            result = to_fraction(value)
        except NumberError as exc:
            self.add(at, str(exc))
            return None
        if result < 0 or (positive and result == 0):
            self.add(at, f"must be {'positive' if positive else 'non-negative'}. Found {value}.")
            return None
        if below_one and result >= 1:
            self.add(at, f"must be in [0, 1). Found {value}.")
            return None
        return result


RESERVED_SUBSETS = ("all", "protected")  # subsets every command takes (docs/explanation/model.md#public-and-protected-variables): never a variable or group


def reserved_name(name: str) -> str:
    return (f"{name!r} is the name of a subset every command takes (all: the whole dataset; protected: every "
            "variable not classified public); a variable or group of that name would shadow it")


def build_dataset(document: Document) -> tuple[Dataset | None, list[LedgerError]]:
    """A dataset document -> Dataset, or every problem of the file: the schema's, and, for the
    values it accepted, the rest (duplicate or reserved names, a near-miss of `public`, the delta,
    groups naming unknown variables), in one pass."""
    problems = schema_problems(document, "dataset.v1.schema.json")
    out = _Collector(document)
    out.errors.extend(error for _at, error in problems)
    refused = _Taint(at for at, _error in problems)
    data = document.data
    if not isinstance(data, dict):
        return None, out.errors
    names: set[str] = set()
    variables = []
    for index, entry in enumerate(data.get("variables") if isinstance(data.get("variables"), list) else ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue  # (the schema said so)
        at = ("variables", index)
        if entry["name"] in names:
            out.add(at + ("name",), f"duplicate variable {entry['name']!r}")
        if entry["name"] in RESERVED_SUBSETS:
            out.add(at + ("name",), reserved_name(entry["name"]))
        names.add(entry["name"])
        if refused.within(at):
            continue
        categories = tuple(entry["categories"]) if "categories" in entry else None
        misread = misread_public(entry.get("classification", PUBLIC))
        if misread:
            out.add(at + ("classification",), misread)
        variables.append(Variable(entry["name"], entry.get("classification", "unclassified"),
                                  entry.get("description", ""), categories))
    delta = None
    if "delta" in data and not refused.within(("delta",)):
        delta = out.number(data["delta"], ("delta",), below_one=True)
    allowance = DEFAULT_ALLOWANCE
    if "allowance" in data and not refused.within(("allowance",)):
        allowance = out.number(data["allowance"], ("allowance",), below_one=True)
    groups = []
    # every variable named (else a group's member may be a variable whose name was refused)
    listed = data.get("variables")
    known_names = isinstance(listed, list) and all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                   for e in listed)
    for group, members in (data.get("groups") if isinstance(data.get("groups"), dict) else {}).items():
        if refused.within(("groups", group)) or not isinstance(members, list):
            continue
        for index, member in enumerate(members):
            if known_names and member not in names:
                out.add(("groups", group, index), f"unknown variable {member!r} in group {group!r}")
        if group in names:
            out.add(("groups", group), f"group {group!r} has the name of a variable")
        if group in RESERVED_SUBSETS:
            out.add(("groups", group), reserved_name(group))
        groups.append((group, frozenset(members)))
    if out.errors:
        # the caps checked too, against the variables and groups that could be read (not when the
        # variables themselves were refused: every name a cap gives could then be reported unknown)
        if known_names and isinstance(data.get("dataset"), str) and isinstance(data.get("caps", []), list):
            named = {v.name: v for v in variables}
            provisional = Dataset(data["dataset"], tuple(named.get(e["name"], Variable(e["name"], "unclassified"))
                                                         for e in {e["name"]: e for e in listed}.values()),
                                  "", delta, tuple(groups))
            out.errors.extend(build_caps(document, provisional, refused=refused)[1])
        return None, out.errors
    return Dataset(data["dataset"], tuple(variables), data.get("description", ""), delta, tuple(groups),
                   self_approval=bool(data.get("self_approval", False)),
                   relation=Relation(data.get("relation", Relation.REPLACE.value)), allowance=allowance), []


RELEASE_SCHEMA = "release.v1.schema.json"


def validated_release_documents(parsed: Iterable[tuple[Document | None, list[LedgerError]]]
                                ) -> tuple[list[Document], list[LedgerError]]:
    """Read release documents checked against the schema, before any lock is taken. Every parsed document is
    returned, marked as checked: one that passed is not checked again by `build_releases`, one
    that failed carries its schema problems, which `build_releases` reports together with every
    other problem of the file (one pass). The errors returned: those of the files that could not
    be read or parsed, and the schema problems (the caller refuses before any lock when there are any)."""
    documents: list[Document] = []
    errors: list[LedgerError] = []
    for document, read_errors in parsed:
        errors.extend(read_errors)
        if document is None:
            continue
        problems = schema_problems(document, RELEASE_SCHEMA)
        errors.extend(error for _at, error in problems)
        documents.append(replace(document, release_schema_checked=True, release_schema_problems=tuple(problems)))
    return documents, errors


# A dataset's variable names as a set, by the dataset record (the same object while the ledger's
# configuration is unchanged: store.configuration), so recording release after release does not
# build a set of every variable each time: (dataset, names) by id, the object kept to check it.
_VARIABLE_SETS: dict[int, tuple[Dataset, frozenset[str]]] = {}


def _variable_set(dataset: Dataset) -> frozenset[str]:
    found = _VARIABLE_SETS.get(id(dataset))
    if found is None or found[0] is not dataset:
        if len(_VARIABLE_SETS) > 64:
            _VARIABLE_SETS.clear()
        found = _VARIABLE_SETS[id(dataset)] = (dataset, frozenset(dataset.variable_names))
    return found[1]


def build_releases(
    document: Document,
    snapshot: LedgerSnapshot,
    *,
    recorded_by: str,
    recorded_at: datetime,
) -> tuple[list[Release], list[Family], list[LedgerError]]:
    """A release document -> releases and families, checked against the snapshot.

    Cross-document checks (duplicate ids, derived-from cycles) are in
    `check_batch`, which sees every file of one `record` together.
    """
    problems = (list(document.release_schema_problems) if document.release_schema_checked
                else schema_problems(document, RELEASE_SCHEMA))
    out = _Collector(document)
    out.errors.extend(error for _at, error in problems)
    refused = _Taint(at for at, _error in problems)
    data = document.data
    if not isinstance(data, dict) or not isinstance(data.get("releases", []), list) \
            or not isinstance(data.get("families", []), list):
        return [], [], out.errors  # (the schema said so: nothing else can be read)
    dataset = None
    if isinstance(data.get("dataset"), str) and not refused.within(("dataset",)):
        dataset = snapshot.datasets.get(data["dataset"])
        if dataset is None:
            known = ", ".join(sorted(snapshot.datasets)) or "none recorded yet"
            out.add(("dataset",), f"unknown dataset {data['dataset']!r}"
                                  f"{_did_you_mean(data['dataset'], snapshot.datasets)} (known: {known})")
    # without a known dataset, the rest of the file is still checked (numbers, mechanisms, status),
    # all but its variable names
    known_variables = _variable_set(dataset) if dataset is not None else None

    def check_variables(names: Iterable[str], at: Path_) -> frozenset[str]:
        names = list(names)
        for index, name in enumerate(names):
            if not isinstance(name, str) or refused.within(at + (index,)):
                continue  # (the schema's error names it: not a name to look up)
            if known_variables is not None and name not in known_variables:
                out.add(at + (index,), f"unknown variable {name!r} in dataset {dataset.name!r}"
                                       + _did_you_mean(name, known_variables))
        return frozenset(n for n in names if isinstance(n, str))

    families: list[Family] = []
    for index, entry in enumerate(data.get("families", [])):
        if refused.within(("families", index)) or dataset is None:
            continue
        partition = entry["partition"]
        keys = None if partition == "random" else check_variables(partition, ("families", index, "partition"))
        family = Family(entry["id"], dataset.name, keys, entry.get("description", ""),
                        source=document.source(("families", index)))
        existing = snapshot.families.get(family.id)
        if existing is not None and existing != family:
            out.add(("families", index, "id"), f"family {family.id!r} is already recorded with a different "
                                               f"dataset or partition ({existing.dataset}, {_partition_text(existing)})")
        families.append(family)
    family_by_id = {**snapshot.families, **{family.id: family for family in families}}

    releases = []
    for index, entry in enumerate(data.get("releases", [])):
        at: Path_ = ("releases", index)
        if not isinstance(entry, dict):
            continue  # (the schema said so)
        before = len(out.errors)
        raw_reads = entry.get("reads")
        reads_known = isinstance(raw_reads, list) and not refused.within(at + ("reads",))
        reads = check_variables(raw_reads if isinstance(raw_reads, list) else [], at + ("reads",))
        mechanism = _build_mechanism(entry, reads, out, at, refused)
        # the guarantees checked only on what could be read: reads and mechanism whole
        guarantees = (_build_guarantees(entry, mechanism, reads, out, at, check_variables, refused)
                      if reads_known and not refused.within(at + ("mechanism",)) else ())
        family = entry.get("family")
        if dataset is not None and not refused.within(at + ("family",)) and reads_known:
            _family_membership(family, dataset.name, reads, family_by_id, out, at)
        part = entry.get("part")
        if not refused.within(at + ("part",)) and not refused.within(at + ("family",)):
            _part_named(family, part, out, at)
        status, published_at = _lifecycle_fields(entry, out, at, recorded_at, refused)
        # a release stated approved is its recorder's own approval, allowed only where the dataset
        # waives separation of duties (operations/people.check_recorded)
        approved_by, approved_at = (recorded_by, recorded_at) if status is Status.APPROVED else (None, None)
        if len(out.errors) > before or mechanism is None or dataset is None or refused.within(at):
            continue
        releases.append(
            Release(
                id=entry["id"],
                dataset=dataset.name,
                reads=reads,
                mechanism=mechanism,
                guarantees=guarantees,
                title=entry.get("title", ""),
                derived_from=tuple(entry.get("derived_from", ())),
                family=family,
                part=part,
                status=status,
                recorded_by=recorded_by,
                recorded_at=recorded_at,
                approved_by=approved_by,
                approved_at=approved_at,
                published_at=published_at,
                source=document.source(at),
                source_field=field_name(at),
                guarantees_derived="guarantees" not in entry,
            )
        )
    return releases, families, out.errors


# The moments a ledger keeps, in UTC: a day short of either end of Python's calendar, so that
# converting a moment to UTC and the as-of arithmetic (a day before a --since, a microsecond
# before an --as-of) never leave it.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)


class MomentOutOfRange(ValueError):
    """A date-time outside EARLIEST .. LATEST; the message says so, quoting it."""


def parse_moment(text: str) -> datetime | None:
    """An ISO 8601 date or date-time as an aware UTC moment (a date is its midnight; no
    zone means UTC); None when it is not one, or lies outside EARLIEST .. LATEST."""
    try:
        return utc_moment(text)
    except MomentOutOfRange:
        return None


def utc_moment(text: str) -> datetime | None:
    """`parse_moment`, raising MomentOutOfRange for a moment outside EARLIEST .. LATEST."""
    try:
        moment = datetime.fromisoformat(str(text).strip())
    except ValueError:
        return None
    try:
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 lies in year 0, in UTC
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise MomentOutOfRange(f"{str(text).strip()[:EXCERPT_CHARS]!r} is outside the moments a ledger keeps: "
                               f"{EARLIEST.date().isoformat()} to {LATEST.date().isoformat()}, UTC")
    return moment


APPROVAL_FIELDS = ("approved_by", "approved_at")  # refused in a release file (`_lifecycle_fields`)


def _lifecycle_fields(entry: dict, out: _Collector, at: Path_, recorded_at: datetime | None,
                      refused: _Taint | None = None):
    """A release file's status and when it was published: no status is planned; published
    carries published_at, never in the future. A file never carries an approval
    (APPROVAL_FIELDS): approving is a step by another person, `approve` (four eyes; a file
    stating approved or published is its recorder's own approval, which only a dataset that
    waives separation of duties allows: operations/people.check_recorded). `refused`: the
    values the schema refused (an unknown status: its rules are not checked; the moments are)."""
    refused = refused or _Taint()
    if refused.within(at + ("status",)):
        status = None  # (an unknown status, reported by the schema: the rules of none apply)
    else:
        status = Status(entry.get("status", Status.PLANNED.value))
    moments = {}
    for key in ("published_at",):
        if key in entry and not refused.within(at + (key,)):
            try:
                moment = utc_moment(entry[key])
            except MomentOutOfRange as exc:
                out.add(at + (key,), str(exc))
                continue
            if moment is None:
                out.add(at + (key,), f"not an ISO date-time: {entry[key]!r}")
            elif recorded_at is not None and moment > _utc(recorded_at):
                out.add(at + (key,), f"{entry[key]!r} is in the future (now: {_utc(recorded_at).isoformat()})")
            else:
                moments[key] = moment
    for key in APPROVAL_FIELDS:
        if key in entry:
            out.add(at + (key,), "an approval is never stated with a release (four eyes: approving is a "
                                 "step by a person other than the recorder); record it without "
                                 f"{' and '.join(APPROVAL_FIELDS)} and approve it with `privacy-ledger approve ID` "
                                 "as another person")
    if status is Status.PLANNED and "published_at" in entry:
        out.add(at + ("published_at",), "a planned release has no published_at; give status: published")
    if status is Status.APPROVED and "published_at" in entry:
        out.add(at + ("published_at",), "an approved release is not published yet; give status: published")
    if status is Status.PUBLISHED and "published_at" not in entry:
        out.add(at + ("published_at",), "a release recorded as published needs published_at "
                                        "(when it was published)")
    return status, moments.get("published_at")


def _family_membership(family: str | None, dataset: str, reads: frozenset[str], known: Mapping[str, Family],
                       out, at: Path_) -> None:
    """A member names a declared family of its own dataset, and reads the family's key."""
    if family is None:
        return
    found = known.get(family)
    if found is None:
        out.add(at + ("family",), f"unknown family {family!r}; declare it under `families`")
    elif found.dataset != dataset:
        out.add(at + ("family",), f"family {family!r} belongs to dataset {found.dataset!r}, "
                                  f"but this release reads dataset {dataset!r}")
    elif found.partition is not None and not found.partition <= reads:
        # which records a part holds depends on the key: its output depends on them (docs/explanation/model.md#families)
        missing = ", ".join(sorted(found.partition - reads))
        out.add(at + ("reads",), f"release is in family {family!r}, partitioned by "
                                 f"{', '.join(sorted(found.partition))}; it must list {missing} in reads")


def _part_named(family: str | None, part: str | None, out, at: Path_) -> None:
    """A family member names the part of the records it is computed on; a release outside any
    family names none (docs/explanation/model.md#families: a family's members are charged in parallel, as on disjoint
    parts, which the ledger can check only if each says which part it covers)."""
    if family is not None and part is None:
        out.add(at + ("part",), f"release is in family {family!r} but names no part: give `part`, the part of "
                                "the records it is computed on (a short name, such as degree=PhD or stratum 3). "
                                "The members of a family are charged in parallel, as releases on disjoint parts; "
                                "two on one part compose sequentially, and the ledger can refuse a part named twice "
                                "only if each member names its own")
    elif family is None and part is not None:
        out.add(at + ("part",), f"part {part!r} given, but the release is in no family: a part is the share of "
                                "the records a family member is computed on; give `family` too, or leave `part` out")


class _ReleaseCollector:
    """Errors of a `Release` handed over whole, each named by the release and its field."""

    def __init__(self, release: Release):
        self.where = f"release {release.id}"
        self.errors: list[LedgerError] = []

    def add(self, at: Path_, message: str) -> None:
        self.errors.append(LedgerError(self.where, field_name(at), message))


RECORDABLE_STATUSES = (Status.PLANNED, Status.APPROVED, Status.PUBLISHED)  # as the release schema's enum


def check_release_record(release: Release, recorded_at: datetime, families: Mapping[str, Family]) -> list[LedgerError]:
    """A `Release` handed over whole (the Python API, an adapter) meets the rules a release file
    meets: a recorded family of its dataset whose key it reads (docs/explanation/model.md#families); a status a file may
    state, with its lifecycle fields (`_lifecycle_fields`: no moment in the future, no approval
    carried); parameters that do not contradict each other; no guarantee
    stronger than its parameters imply (`overclaims`, docs/explanation/model.md#composition). The
    recording moment and person are the ledger's own (`operations.source_builder`), never the
    record's: the audit trail and the as-of views read it, and another recorder would waive
    separation of duties."""
    out = _ReleaseCollector(release)
    _family_membership(release.family, release.dataset, release.reads, families, out, ())
    _part_named(release.family, release.part, out, ())
    if release.status not in RECORDABLE_STATUSES:
        out.add(("status",), f"a release is recorded planned, approved or published; found {release.status.value}")
    else:
        entry: dict[str, Any] = {"status": release.status.value}
        for key in ("approved_by", "approved_at", "published_at"):
            value = getattr(release, key)
            if value is None and key == "published_at" and release.status is Status.PUBLISHED:
                value = recorded_at  # (an adapter's output, published when recorded: source_builder)
            if value is not None:
                entry[key] = value if key == "approved_by" else _utc(value).isoformat()
        _lifecycle_fields(entry, out, (), recorded_at)
    derived, problems = derive_guarantees(release.mechanism, release.reads)
    for problem in unknown_parameters(release.mechanism.name, dict(release.mechanism.params)) + problems:
        if not problem.missing:
            out.add(("mechanism", problem.field), problem.message)
    if tuple(release.guarantees) != tuple(derived):  # explicit guarantees, as a file's `guarantees`
        for index, field_, message in overclaims(release.mechanism, release.reads, tuple(release.guarantees)):
            out.add(("guarantees", index, field_), message)
    return out.errors


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    from ..core.errors import did_you_mean

    return did_you_mean(name, known)


def _partition_text(family: Family) -> str:
    return "random split" if family.partition is None else "partition " + ", ".join(sorted(family.partition))


SCALE_MECHANISMS = ("laplace", "geometric")  # epsilon, or scale and sensitivity (catalogue._scale_mechanism)


def _build_mechanism(entry: dict, reads: frozenset[str], out: _Collector, at: Path_,
                     refused: _Taint | None = None) -> Mechanism | None:
    """The release's mechanism, or None with its problems added: every parameter that is not a
    valid number, and an unknown mechanism name, are all reported (one pass); a value the schema
    refused (`refused`) is reported by the schema alone."""
    refused = refused or _Taint()
    spec = entry.get("mechanism")
    if spec is None:
        if refused.at(at):
            return None  # (the release has a field the schema refused: a misspelt `mechansim` is that problem)
        if reads and not refused.within(at + ("reads",)):
            out.add(at + ("mechanism",), "a release that reads data needs a mechanism "
                                         "(use {name: exact} for a release without noise)")
            return None
        spec = {"name": "post-processing"}
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) \
            or refused.within(at + ("mechanism", "name")):
        return None  # (the schema said so)
    params: dict[str, Any] = {}
    whole = True
    for problem in unknown_parameters(spec["name"], spec):
        # a field of the release written among the parameters is told where it goes; a parameter
        # of another mechanism, which mechanisms take it (a guarantee is no place for a scale)
        key = problem.field
        parameter = any(key in accepted.names for accepted in PARAMETERS.values())
        where = [] if parameter else _nearest(_places(RELEASE_SCHEMA).get(key, ()), at + ("mechanism",))
        out.add(at + ("mechanism", key), f"{spec['name']} takes no parameter {key!r}: it belongs {_under(where)}"
                if where else problem.message)
        whole = False
    for key, value in spec.items():
        if key == "name":
            continue
        if refused.within(at + ("mechanism", key)):
            whole = False
        elif key in NUMERIC_PARAMS:
            number = out.number(value, at + ("mechanism", key), below_one=key == "delta",
                                positive=key in ("scale", "sigma"))
            if number is None:
                whole = False
            else:
                params[key] = number
        elif isinstance(value, list):
            params[key] = tuple(value)
        else:
            params[key] = value
    if whole and spec["name"] in SCALE_MECHANISMS and "scale" in params and "sensitivity" not in params \
            and not _stray_parameters(entry, spec["name"]):
        # epsilon = sensitivity / scale: a scale alone says nothing, and beside an epsilon it was ignored
        # (with a sensitivity, a contradiction is refused: catalogue._scale_mechanism)
        out.add(at + ("mechanism", "scale"), f"a {spec['name']} scale is read with its sensitivity (epsilon = "
                                             "sensitivity / scale): give sensitivity too, or leave scale out")
        whole = False
    if not whole:  # the guarantees cannot be derived; the name is still checked
        if spec["name"] not in CATALOGUE:
            for problem in derive_guarantees(Mechanism(spec["name"], ()), reads)[1]:
                out.add(at + ("mechanism", problem.field), problem.message)
        return None
    return Mechanism(spec["name"], tuple(sorted(params.items())))


def _stray_parameters(entry: dict, name: str) -> bool:
    """A parameter of the mechanism written beside it, in the release: the schema says where it goes,
    and what the mechanism then lacks is that parameter, not another problem to report."""
    accepted = PARAMETERS.get(name)
    return accepted is not None and any(key in accepted.names for key in entry)


def _build_guarantees(entry, mechanism, reads, out: _Collector, at: Path_, check_variables,
                      refused: _Taint | None = None) -> tuple[Guarantee, ...]:
    refused = refused or _Taint()
    if mechanism is None:
        return ()
    if "protects" in dict(mechanism.params):
        check_variables(mechanism.param("protects"), at + ("mechanism", "protects"))
    derived, problems = derive_guarantees(mechanism, reads)
    explicit_specs = entry.get("guarantees")
    if explicit_specs is not None and not isinstance(explicit_specs, list):
        return ()  # (the schema said so)
    if explicit_specs is None:
        for problem in problems:
            if not (problem.missing and _stray_parameters(entry, mechanism.name)):
                out.add(at + ("mechanism", problem.field), problem.message)
        return derived
    # explicit guarantees replace derived ones; the mechanism must still be known, and its
    # parameters, where given, consistent (a claim is checked against them: overclaims)
    for problem in problems:
        if not problem.missing:
            out.add(at + ("mechanism", problem.field), problem.message)
    if mechanism.name in ("exact", "post-processing") and explicit_specs:
        out.add(at + ("guarantees",), f"a {mechanism.name} release cannot carry guarantees")
    guarantees = []
    for index, spec in enumerate(explicit_specs):
        g_at = at + ("guarantees", index)
        if refused.within(g_at):
            continue  # (the schema said what is wrong with it)
        protects = check_variables(spec["protects"], g_at + ("protects",)) if "protects" in spec else reads
        relation = Relation(spec.get("relation", Relation.REPLACE.value))
        if "rho" in spec:
            if "epsilon" in spec or "delta" in spec:
                out.add(g_at, "a guarantee is either rho (zCDP) or epsilon (with optional delta), not both")
                continue
            rho = out.number(spec["rho"], g_at + ("rho",))
            if rho is not None:
                guarantees.append(Guarantee(protects, Notion.ZCDP, rho=rho, relation=relation))
            continue
        epsilon = out.number(spec["epsilon"], g_at + ("epsilon",))
        delta = out.number(spec["delta"], g_at + ("delta",), below_one=True) if "delta" in spec else Fraction(0)
        if epsilon is None or delta is None:
            continue
        if delta:
            guarantees.append(Guarantee(protects, Notion.APPROX, epsilon=epsilon, delta=delta, relation=relation))
        else:
            guarantees.append(Guarantee(protects, Notion.PURE, epsilon=epsilon, relation=relation))
    if len(guarantees) == len(explicit_specs):  # no claim stronger than the parameters imply (docs/explanation/model.md#composition)
        for index, field_, message in overclaims(mechanism, reads, tuple(guarantees)):
            out.add(at + ("guarantees", index, field_), message)
    return tuple(guarantees)


def check_batch(releases: Sequence[Release], families: Sequence[Family], snapshot: LedgerSnapshot) -> list[LedgerError]:
    """Checks across every file of one `record`: ids, lineage, families."""
    errors: list[LedgerError] = []
    seen: dict[str, Release] = {}
    for release in releases:
        if release.id in snapshot.releases:
            # a retry: the same release again is a no-op (the caller drops
            # it, see `already_recorded`); another release under a recorded id is refused
            recorded = snapshot.releases[release.id]
            differing = differences(recorded, release)
            if differing:
                errors.append(LedgerError(release.source, _at(release, "id"),
                                          f"release id {release.id!r} is already recorded with different content "
                                          f"(fields that differ: {', '.join(differing)})"))
            elif recorded.status is Status.CANCELLED:
                # a retry is a no-op because the release is charged once already; a cancelled one
                # is charged nothing, and exit 0 would tell a pipeline its budget is reserved
                errors.append(LedgerError(release.source, _at(release, "id"),
                                          f"release id {release.id!r} was cancelled: it reserves no budget, and "
                                          "a release is never recorded twice; record it under a new id"))
        elif release.id in seen:
            errors.append(LedgerError(release.source, _at(release, "id"), f"duplicate release id {release.id!r}: "
                                                                          f"also at {seen[release.id].source}"))
        seen[release.id] = release
    declared: dict[str, Family] = {}
    for family in families:
        other = declared.get(family.id)
        if other is not None and other != family:
            errors.append(LedgerError(family.source, "families", f"family {family.id!r} declared twice, differently "
                                                                 f"(also at {other.source})"))
        declared[family.id] = family

    errors.extend(_distinct_parts(seen, snapshot))

    # Recorded releases only name parents recorded before them, so a cycle can only
    # run through the new releases: the graph of the batch is enough.
    for release in seen.values():
        for parent in release.derived_from:
            if parent not in snapshot.releases and parent not in seen:
                errors.append(LedgerError(release.source, _at(release, "derived_from"),
                                          f"unknown parent release {parent!r}"))
    for release in seen.values():  # the lineage rule (docs/explanation/model.md#post-processing-and-lineage): published only after its parents
        if release.status in PUBLISHED_STATUSES and release.derived_from:
            known = _BatchAndLedger(seen, snapshot.releases)
            blockers = [p for p in publish_blockers(release, known) if p in known]
            if blockers:
                errors.append(LedgerError(release.source, _at(release, "status"),
                                          f"release {release.id!r} is {release.status.value} but it derives from "
                                          f"releases not published by then: {describe(blockers, known)}; publish "
                                          "them first (or date this one no earlier), or record it as planned"))
    cycle = None
    if any(parent in seen for release in seen.values() for parent in release.derived_from):
        import networkx as nx  # only for a batch whose releases derive from each other

        try:
            cycle = nx.find_cycle(lineage_graph(seen.values()))
        except nx.NetworkXNoCycle:
            pass
    if cycle:
        ids = [edge[0] for edge in cycle] + [cycle[0][0]]
        first = seen[cycle[0][0]]
        errors.append(LedgerError(first.source, _at(first, "derived_from"),
                                  "derived_from forms a cycle: " + " -> ".join(ids)))
    return errors


def _distinct_parts(batch: Mapping[str, Release], snapshot: LedgerSnapshot) -> list[LedgerError]:
    """The charged members of a family hold distinct parts (docs/explanation/model.md#families): a new member's (family,
    part) is held neither by a charged recorded member (any status but cancelled: a retracted
    release was published and still counts) nor by another release of the batch. The family's
    cost is its worst member's, which is valid only for members on disjoint parts: two releases
    on one part compose sequentially (their losses add), so charged in parallel they would be
    under-reported. A release already recorded (a retry: `check_batch` compares it) is skipped."""
    errors: list[LedgerError] = []
    new = [release for release in batch.values() if release.family is not None and release.part is not None
           and release.status in CHARGED_STATUSES and release.id not in snapshot.releases]
    if not new:
        return errors
    wanted = {(release.family, release.part) for release in new}
    held = dict(snapshot.parts_held(wanted)) if snapshot.parts_held is not None else {
        (r.family, r.part): r.id for r in snapshot.releases.values()
        if (r.family, r.part) in wanted and r.status in CHARGED_STATUSES}
    taken: dict[tuple[str, str], Release] = {}
    for release in new:
        key = (release.family, release.part)
        if key in held:
            holder = f"release {held[key]!r}, recorded and charged"
        elif key in taken:
            holder = f"release {taken[key].id!r} of this record (at {taken[key].source})"
        else:
            taken[key] = release
            continue
        errors.append(LedgerError(release.source, _at(release, "part"),
                                  f"part {release.part!r} of family {release.family!r} is already held by {holder}: "
                                  "the members of a family are charged in parallel, as releases on disjoint parts, and "
                                  "two releases on one part compose sequentially (their losses add). Record this "
                                  "one outside the family (no family, no part), or name the part it is computed "
                                  "on if it is another"))
    return errors


class _BatchAndLedger(Mapping):
    """The releases of a batch, then the recorded ones, by id."""

    def __init__(self, batch: Mapping[str, Release], recorded: Mapping[str, Release]):
        self.batch, self.recorded = batch, recorded

    def __getitem__(self, key: str) -> Release:
        return self.batch[key] if key in self.batch else self.recorded[key]

    def __contains__(self, key: object) -> bool:
        return key in self.batch or key in self.recorded

    def __iter__(self):
        return iter(self.batch)

    def __len__(self) -> int:
        return len(self.batch)


# what a release file states about a release, compared when its id is already recorded
CONTENT_FIELDS = ("dataset", "title", "reads", "mechanism", "guarantees", "derived_from", "family", "part", "pufferfish",
                  "output_digest", "output")
STATED_LIFECYCLE = ("published_at",)  # (an approval is never stated: APPROVAL_FIELDS)


def differences(recorded: Release, given: Release) -> list[str]:
    """The fields in which `given` differs from the recorded release of the same id.

    What the file says is compared, not what is derived from it: a file stating no guarantees
    says "what the mechanism implies" (its name and parameters are compared), and the
    catalogue may since derive more from the same parameters (schema 11: a Gaussian declared
    by (epsilon, delta) gained the zCDP bound of its implied multiplier), so the recorded
    guarantees need only be among those the mechanism now implies. Stated guarantees are
    compared as stated. A release given as planned (a file without status) matches whatever
    lifecycle the recorded one has reached since; one given as approved or published must
    state the same status and publication moment (a retracted release was published)."""
    fields = [name for name in CONTENT_FIELDS if _content_differs(recorded, given, name)]
    if given.status is not Status.PLANNED:
        status = Status.PUBLISHED if recorded.status is Status.RETRACTED else recorded.status
        if status is not given.status:
            fields.append("status")
        fields += [name for name in STATED_LIFECYCLE
                   if getattr(given, name) is not None and _same_time(getattr(recorded, name), getattr(given, name))
                   is False]
    return fields


def _content_differs(recorded: Release, given: Release, name: str) -> bool:
    if name == "guarantees" and given.guarantees_derived:  # (none stated, `guarantees: []`, is no derivation)
        derivation = bool(recorded.guarantees) or not given.guarantees
        return not (derivation and set(recorded.guarantees) <= set(given.guarantees))
    return getattr(recorded, name) != getattr(given, name)


def _same_time(a, b) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):
        return _utc(a) == _utc(b)
    return a == b


def already_recorded(releases: Sequence[Release], snapshot: LedgerSnapshot) -> list[Release]:
    """The releases of a batch recorded before (identical, once `check_batch` passed)."""
    return [release for release in releases if release.id in snapshot.releases]


def _at(release: Release, name: str) -> str:
    return f"{release.source_field}.{name}" if release.source_field else name


def lineage_graph(releases: Iterable[Release]) -> nx.DiGraph:
    """derived-from edges, parent -> child."""
    import networkx as nx

    graph = nx.DiGraph()
    for release in releases:
        graph.add_node(release.id)
        for parent in release.derived_from:
            graph.add_edge(parent, release.id)
    return graph


def load_releases(
    paths: Sequence[str | Path | Document],
    snapshot: LedgerSnapshot,
    *,
    recorded_by: str,
    recorded_at: datetime,
) -> tuple[list[Release], list[Family], list[LedgerError]]:
    """Every release file of one `record`: all or nothing (a path is read here; a
    Document, read earlier, is used as it is)."""
    releases: list[Release] = []
    families: list[Family] = []
    errors: list[LedgerError] = []
    for path in paths:
        document, read_errors = (path, []) if isinstance(path, Document) else read_document(path)
        errors.extend(read_errors)
        if document is None:
            continue
        more_releases, more_families, more_errors = build_releases(
            document, snapshot, recorded_by=recorded_by, recorded_at=recorded_at
        )
        releases.extend(more_releases)
        families.extend(more_families)
        errors.extend(more_errors)
    return finish_batch(releases, families, errors, snapshot)


def finish_batch(releases: list[Release], families: list[Family], errors: list[LedgerError],
                 snapshot: LedgerSnapshot) -> tuple[list[Release], list[Family], list[LedgerError]]:
    """A batch built whole (one `record`, from files or from the API's objects): its releases; the
    families it defines that the ledger does not hold yet, each once; its errors with those of the
    checks across the batch and the ledger (check_batch)."""
    # each release as charged in its dataset's neighbour relation (docs/explanation/model.md#variables-subsets-and-neighbours; relation.in_dataset)
    releases = [in_dataset(r, snapshot.datasets[r.dataset]) if r.dataset in snapshot.datasets else r
                for r in releases]
    errors = [*errors, *check_batch(releases, families, snapshot)]
    new_families = list({family.id: family for family in families if family.id not in snapshot.families}.values())
    return releases, new_families, errors


def load_dataset(path: str | Path) -> tuple[Dataset | None, list[LedgerError]]:
    document, errors = read_document(path)
    if document is None:
        return None, errors
    return build_dataset(document)



def dataset_and_caps(document: Document | None, errors: list[LedgerError]) -> tuple[Dataset, list[Cap]]:
    """A read dataset document's dataset and caps (the CLI's `dataset add` and the API's
    `add_dataset`); every problem, reading included, raised together as InputErrors."""
    dataset = None
    if document is not None:
        dataset, errors = build_dataset(document)
    if errors:
        raise InputErrors(errors)
    caps, errors = build_caps(document, dataset)
    if errors:
        raise InputErrors(errors)
    return dataset, caps


def build_caps(document: Document, dataset: Dataset, key: str = "caps",
               refused: _Taint | None = None) -> tuple[list[Cap], list[LedgerError]]:
    """The `caps` of a dataset document (or of a cap file) -> Cap records. `refused`: the values the
    schema refused (those entries are skipped: the schema reported them)."""
    out = _Collector(document)
    caps: list[Cap] = []
    for index, entry in enumerate(document.data.get(key, []) or []):
        if refused is not None and refused.within((key, index)):
            continue
        cap = cap_from_entry(entry, dataset, lambda at, message, i=index: out.add((key, i) + at, message))
        if cap is not None:
            if any(existing.name == cap.name for existing in caps):
                out.add((key, index, "name"), f"two caps named {cap.name!r}; give one a `name`")
            caps.append(cap)
    return caps, out.errors


def cap_from_entry(entry: dict, dataset: Dataset, report) -> Cap | None:
    """One cap entry ({subset | name, epsilon [, delta] | rho}) -> Cap; problems go to `report(at, message)`."""
    before = []

    def problem(at, message):
        before.append(message)
        report(at, message)

    subset_spec = entry.get("subset")
    name = entry.get("name")
    whole = subset_spec == "all"
    if whole:
        subset = frozenset(dataset.variable_names)
        name = name or "all"
    elif subset_spec == "protected":  # every variable not classified public (docs/explanation/model.md#public-and-protected-variables)
        subset = frozenset(dataset.protected_names)
        name = name or "protected"
        if not subset:
            problem(("subset",), f"dataset {dataset.name!r} has no protected variable: every one is public")
            return None
    elif subset_spec is not None:
        for index, variable in enumerate(subset_spec):
            if variable in dataset.variable_names:
                continue
            if dataset.group(variable) is not None:  # the group's cap is written by its name alone
                problem(("subset", index), f"{variable!r} is a group, not a variable: a cap on a group is written "
                        f"{{name: {variable}, ...}} without `subset`, or list its variables")
            else:
                problem(("subset", index), f"unknown variable {variable!r} in dataset {dataset.name!r}"
                        + _did_you_mean(variable, dataset.variable_names))
        subset = frozenset(subset_spec)
        name = name or ",".join(sorted(subset))
    else:
        group = dataset.group(name)
        if group is None:
            known = ", ".join(name for name, _ in dataset.groups) or "none declared"
            problem(("name",), f"unknown group {name!r} in dataset {dataset.name!r} (groups: {known})")
            return None
        subset = group

    def number(key, **kwargs):
        try:
            value = to_fraction(entry[key])
        except NumberError as exc:
            problem((key,), str(exc))
            return None
        if value < 0:
            problem((key,), f"must be non-negative. Found {entry[key]}.")
            return None
        if kwargs.get("below_one") and not 0 < value < 1:
            problem((key,), f"must be in (0, 1). Found {entry[key]}.")
            return None
        return value

    epsilon = number("epsilon") if "epsilon" in entry else None
    rho = number("rho") if "rho" in entry else None
    delta = number("delta", below_one=True) if "delta" in entry else None
    if "rho" in entry and "epsilon" in entry:
        problem(("rho",), "a cap is in epsilon or in rho, not both")
    if "delta" in entry and "epsilon" not in entry:
        problem(("delta",), "delta goes with an epsilon cap")
    if "rho" not in entry and "epsilon" not in entry:
        problem(("epsilon",), "a cap needs epsilon or rho")
    chosen_filter = entry.get("filter")
    if chosen_filter is not None and (delta is None or rho is not None):
        problem(("filter",), "a filter goes with an epsilon cap at a delta (a pure cap sums epsilon, a rho cap rho)")
    if before:
        return None
    return Cap(dataset.name, name, subset, epsilon=epsilon, delta=delta, rho=rho, whole_dataset=whole,
               filter=chosen_filter, order=dataset.variable_names, allowance=dataset.allowance)
