"""Layering (product brief): `ledger/` is in folders, one per layer, and no module imports
a layer above its own.

The layers, lowest first (the same map is in ledger/__init__.py's docstring):
  1. core: the vocabulary: exact numbers, frozen records, errors and failures as values, lazy imports
  2. mechanisms: the data mechanisms of the seed papers: pure computations on data
  3. accounting: every number: composition, the cost rule per subset, accountants, caps, lifecycle
  4. input: the steward's files: parsed, validated, built into records (errors name file and field)
  5. store: the database: tables, the audit chain, accounting rows, checkpoints
  6. operations: what the ledger does over the store: record, check, lifecycle, caps, roles, amendments,
     and every figure and reading a reader is shown (the table view, the accountants' figures, the report's inputs)
  7. api: the Python API (ledger/api/), the one façade: every interface formats what it returns
  8. interfaces: the command line (cli/), what is shown (reporting/: the report's presentation, charts,
     templates), the web app (web/), adapters from other libraries

Every import counts: top-level and function-level (`from ..store import sessions`), under
TYPE_CHECKING, and the lazy ones named in a string (`lazy_module("ledger.store.sessions")`,
`lazy_callable(f"{__package__}.views", ...)`, `sys.modules.get(...)`). Importing the root
package for `__version__` is allowed everywhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LEDGER = Path(__file__).resolve().parents[1] / "ledger"

LAYERS = [  # (layer, the packages and modules in it), lowest first
    ('core', ('ledger.core',)),  # the vocabulary: exact numbers, frozen records, errors and failures as values, lazy imports
    ('mechanisms', ('ledger.mechanisms',)),  # the data mechanisms of the seed papers: pure computations on data
    ('accounting', ('ledger.accounting',)),  # every number: composition, the cost rule per subset, accountants, caps, lifecycle
    ('input', ('ledger.input',)),  # the steward's files: parsed, validated, built into records (errors name file and field)
    ('store', ('ledger.store',)),  # the database: tables, the audit chain, accounting rows, checkpoints
    ('operations', ('ledger.operations',)),  # what the ledger does over the store, and every figure and reading a reader is shown
    ('api', ('ledger.api',)),  # the Python API, the one façade: every interface formats what it returns
    ('interfaces', ('ledger.cli', 'ledger.reporting', 'ledger.web', 'ledger.adapters', 'ledger.__main__', 'ledger')),  # the command line, what is shown (reporting/), the web app, adapters from other libraries
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LEDGER.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(LEDGER.rglob("*.py"))}


def layer_of(module: str) -> int | None:
    """The rank of the layer holding `module` (the longest matching package wins)."""
    best, rank = -1, None
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if (module == member or module.startswith(member + ".")) and len(member) > best:
                best, rank = len(member), index
    return rank


def resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level:
        base = base[:len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))
    return name or ""


def known(name: str) -> str | None:
    """The ledger module `name` is, or is an attribute of."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, ledger module, names taken from it) for every import of a ledger module."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                target = known(f"{base}.{alias.name}") or known(base)
                if target:
                    found.append((node.lineno, target, (alias.name,)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, known(a.name), ()) for a in node.names if known(a.name)]
        elif isinstance(node, ast.Call) and node.args:
            text = _string(node.args[0], module, is_package)  # a lazy import names its module
            if text and text.startswith("ledger.") and known(text) not in (None, "ledger"):
                found.append((node.lineno, known(text), ()))
    return found


def _string(node: ast.expr, module: str, is_package: bool) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (isinstance(node, ast.JoinedStr) and len(node.values) == 2
            and isinstance(node.values[0], ast.FormattedValue)
            and isinstance(node.values[0].value, ast.Name) and node.values[0].value.id == "__package__"
            and isinstance(node.values[1], ast.Constant)):
        package = module if is_package else module.rpartition(".")[0]
        return package + node.values[1].value
    return None


def test_every_module_is_in_a_layer():
    assert not [name for name in MODULES if layer_of(name) is None]
    loose = [name for name in MODULES if name.count(".") == 1 and not (LEDGER / name.split(".")[1]).is_dir()]
    assert sorted(loose) == ["ledger.__main__"], "a new module goes in a layer's folder"


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for name, path in MODULES.items():
        own = layer_of(name)
        for line, target, names in imports(path):
            if target == "ledger" and set(names) <= {"__version__"}:
                continue
            if layer_of(target) > own:
                upward.append(f"{path.relative_to(LEDGER.parent)}:{line} ({LAYERS[own][0]}) imports "
                              f"{target} ({LAYERS[layer_of(target)][0]})")
    assert not upward, "\n".join(upward)


def test_the_check_sees_lazy_imports():
    # the test itself must be able to fail: operations/audit_chain.py imports a store module lazily, by a string
    lazy = [target for _, target, _ in imports(LEDGER / "operations" / "audit_chain.py")]
    assert "ledger.store.checkpoint" in lazy and layer_of("ledger.store.checkpoint") < layer_of("ledger.operations")
    assert layer_of("ledger.reporting.report") > layer_of("ledger.accounting.ledger_index")


def test_the_package_docstring_lists_the_layers_in_order():
    import ledger

    firsts = [line.split()[0] for line in ledger.__doc__.splitlines() if line.startswith("  ") and line.split()]
    folders = [first for first in firsts if "/" in first or first.endswith(".py")]
    order = [layer for layer, _ in LAYERS]
    assert [f.rstrip("/,").removesuffix(".py") for f in folders] == [f for f in order if f != "interfaces"] + ["cli"]


# Carried over from tests/test_layering.py

def imported_modules(relative_path: str) -> set[str]:
    """The modules of its own folder a file imports (`from .x import ...`, `from . import x`)."""
    tree = ast.parse((LEDGER / relative_path).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.add(node.module or "")
            if node.module is None:
                found |= {alias.name for alias in node.names}
    return found


def test_report_and_charts_do_not_import_each_other():
    # one direction only: report.draw_here calls charts; charts reads chart_data, never report
    assert "report" not in imported_modules("reporting/charts.py")
    assert "chart_data" in imported_modules("reporting/charts.py")
    assert "chart_data" in imported_modules("reporting/report.py")


def test_cli_run_and_report_use_the_shared_choices():
    for name in ("run", "report"):
        source = (LEDGER / "cli" / f"{name}.py").read_text(encoding="utf-8")
        assert "_pick_dataset, " not in source.replace("as _pick_dataset", "")
        for app in ("cli", "app"):
            assert f"{app}._pick_dataset" not in source and f"{app}._delta" not in source


@pytest.mark.parametrize("path", sorted((LEDGER / "cli").glob("*.py")), ids=lambda p: p.name)
def test_no_cli_module_reaches_into_another_cli_modules_private_helpers(path):
    """The CLI modules take the ledger from cli/context.py (which ledger, how it is opened, the light
    read, who acts), never from cli/app.py's private helpers; context.py imports no CLI module."""
    source = path.read_text(encoding="utf-8")
    for app in ("cli", "app"):
        assert f"{app}._" not in source.replace("json_output._", ""), path.name
        assert f"from .{app} import _" not in source, path.name
    assert not imported_modules("cli/context.py")


def private_uses_across_layers(path: Path) -> list[tuple[str, str]]:
    """(the module, the private name) for every private name (`_x`, not `__x__`) of a ledger module
    of another layer that `path` takes: `from m import _x`, or `m._x` where `m` names that module
    (imported, or bound to a lazy import: `m = lazy_module("ledger...")`)."""
    return private_uses(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def private_uses(source: str, module: str, is_package: bool = False) -> list[tuple[str, str]]:
    """`private_uses_across_layers` of `source` read as the ledger module `module`."""
    own = layer_of(module)
    tree = ast.parse(source)
    bound, found = {}, []

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif private(alias.name) and known(base) and layer_of(known(base)) != own:
                    found.append((known(base), alias.name))
        elif isinstance(node, ast.Import):
            bound.update({alias.asname: alias.name for alias in node.names if alias.asname and alias.name in MODULES})
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, ast.Call) and node.value.args):
            text = _string(node.value.args[0], module, is_package)  # name = lazy_module("ledger.x.y")
            if text in MODULES:
                bound[node.targets[0].id] = text
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and private(node.attr) and layer_of(bound[node.value.id]) != own):
            found.append((bound[node.value.id], node.attr))
    return found


def test_no_module_takes_another_layers_private_names():
    """A lower layer's private helper is its own to change; what another layer needs of it has a
    public name (cap_accounting took budget._largest, _round_down and _difference: now
    budget.largest_basic_charge, round_down and difference; the store took budget._finish and _top,
    accountants' event and stamp helpers and engine._rows_of, the CLI the store's _ROWS, _raw_iter,
    _rows_view and as_of._moment and the report's _aware, _note and _guarantee_text: each now has a
    public name in the layer that owns it)."""
    found = {name: sorted(set(private_uses_across_layers(path))) for name, path in MODULES.items()}
    assert not {name: uses for name, uses in found.items() if uses}


# the forms the check must see, as a module of the store would write them
_SYNTHETIC_STORE_MODULE = """
from ..accounting.budget import _top
from ..accounting import renyi_curves as acc
from . import accounting_rows
from .accounting_rows import _ROWS
import ledger.accounting.index_chunks as engine
report = lazy_module("ledger.reporting.report")

orders = acc._grids()["ORDERS"]
part = engine._rows_of(index, 0, 1, 0, 1)
moment = report._aware(None)
rows = accounting_rows._ROWS, _ROWS, acc.__name__, acc.ORDERS
"""


def test_the_private_names_check_sees_every_form():
    found = private_uses(_SYNTHETIC_STORE_MODULE, "ledger.store.audit_verify")
    assert sorted(found) == [("ledger.accounting.budget", "_top"), ("ledger.accounting.index_chunks", "_rows_of"),
                             ("ledger.accounting.renyi_curves", "_grids"), ("ledger.reporting.report", "_aware")]
    # a layer's own private names, dunder names and public ones are not taken across layers
    assert private_uses("from . import accounting_rows\nx = accounting_rows._ROWS\n", "ledger.store.as_of") == []


def import_cycles(prefix: str = "ledger") -> list[list[str]]:
    """Every cycle of the import graph of the modules under `prefix`, function-level and lazy
    imports included (each as the sorted modules of one strongly connected component)."""
    import networkx as nx

    graph = nx.DiGraph()
    for name, path in MODULES.items():
        for _line, target, _names in imports(path):
            if target not in (name, "ledger") and name.startswith(prefix):
                graph.add_edge(name, target)
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


@pytest.mark.parametrize("layer", [layer for layer, _ in LAYERS if layer not in ("store", "interfaces")]
                         + ["cli", "reporting", "web"])
def test_no_import_cycle_within_a_layer_even_inside_functions(layer):
    prefix = {"api": "ledger.api"}.get(layer, f"ledger.{layer}")
    assert import_cycles(prefix) == []


def test_no_import_cycle_in_the_store_even_inside_functions():
    assert import_cycles("ledger.store") == []


STORE_LIBRARIES = ("ledger.store", "sqlalchemy", "sqlmodel")
DATABASE_LIBRARIES = ("sqlalchemy", "sqlmodel")
# the one module outside the store that imports the database library: core/failures.py hides a URL's
# password where the library's own URL parser finds it (make_url), in the failure line of any command
DATABASE_LIBRARY_OUTSIDE_THE_STORE = {"ledger.core.failures": ["sqlalchemy.engine", "sqlalchemy.engine.make_url"]}


def store_imports(source: str, module: str, is_package: bool = False,
                  libraries: tuple[str, ...] = STORE_LIBRARIES) -> list[str]:
    """Every import of the store or its libraries in `source` (read as the ledger module `module`):
    top-level, in a function, and lazy ones named in a string (`lazy_module("ledger.store.database")`,
    `lazy_callable("sqlmodel", "Session")`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package, node.level, node.module)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            text = _string(node.args[0], module, is_package)
            names = [text] if text else []
        found += [name for name in names if any(name == lib or name.startswith(lib + ".") for lib in libraries)]
    return found


def test_the_command_line_reaches_the_store_only_through_the_facade():
    """No module of ledger/cli imports ledger.store, sqlalchemy or sqlmodel, not even inside a
    function or lazily: every command goes through ledger.api.Ledger."""
    opening = {path.name for path in (LEDGER / "cli").glob("*.py")
               if store_imports(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")}
    assert opening == set()


@pytest.mark.parametrize("interface", ["reporting", "web", "adapters"])
def test_the_reports_the_web_app_and_the_adapters_reach_the_store_only_through_the_facade(interface):
    """As the command line: no module of the other interfaces imports ledger.store, sqlalchemy or
    sqlmodel, not even inside a function or lazily."""
    opening = {path.name for path in (LEDGER / interface).rglob("*.py")
               if store_imports(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")}
    assert opening == set()


def test_no_module_outside_the_store_imports_the_database_library():
    """SQL, sessions and engines stay in ledger/store: no other module imports sqlalchemy or sqlmodel,
    not even inside a function or lazily (the types a layer above names, Session and Engine, it
    takes from store/sessions.py), but the one documented exception."""
    found = {name: store_imports(path.read_text(encoding="utf-8"), name, path.name == "__init__.py",
                                 DATABASE_LIBRARIES)
             for name, path in MODULES.items() if layer_of(name) != layer_of("ledger.store")}
    assert {name: names for name, names in found.items() if names} == DATABASE_LIBRARY_OUTSIDE_THE_STORE


def test_the_database_library_check_sees_every_form():
    source = ("import sqlalchemy.exc\ndef f():\n    from sqlmodel import Session\n"
              "select = lazy_callable('sqlalchemy', 'select')\nfrom ..store.sessions import Session\n")
    assert sorted(store_imports(source, "ledger.operations.opening", libraries=DATABASE_LIBRARIES)) == [
        "sqlalchemy", "sqlalchemy.exc", "sqlmodel", "sqlmodel.Session"]


def test_the_store_imports_check_sees_every_form():
    source = ("from ..store import files\nimport sqlalchemy.exc\ndef f():\n    from sqlmodel import Session\n"
              "x = lazy_module('ledger.store.database')\nfrom ..operations import choices\n")
    assert sorted(set(store_imports(source, "ledger.cli.app"))) == [
        "ledger.store", "ledger.store.database", "ledger.store.files", "sqlalchemy.exc", "sqlmodel",
        "sqlmodel.Session"]
