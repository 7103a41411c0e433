"""A parsed input file (YAML or JSON) and the errors located in it.

`read_document` is the only I/O of the input layer: a file is refused before it is parsed
when it is too large, not a regular file, or looks like CSV data; YAML is read as nodes and
refused for duplicate keys, alias bombs, nesting past MAX_DEPTH, and numbers not written as
plain decimals. Invariant: a `Document` returned holds only values `limits.check_values`
accepts, and every error names its file and line.
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import LedgerError
from ..core.lazy import lazy_module
from ..core.numbers import WRITE_A_NUMBER, NumberError, plain_decimal, to_fraction
from .limits import check_values, field_name, refuse_duplicate_json_keys

# read when a file is (not by `--help` or `--version`)
yaml = lazy_module("yaml")


Path_ = tuple[Any, ...]


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


class Collector:
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
