"""The documentation site builds strictly, says what the code does, and cites only the repository.

- `mkdocs build --strict` passes (a dead link, a page left out of the nav, a reference page whose
  generator fails), and the generated reference pages hold every command, every mechanism and the
  JSON each command prints.
- Every function or module the docs name (`ledger.accounting.cost_rule.release_cost`) exists.
- The environment reference lists exactly the `LEDGER_` variables the code reads.
- Every `>>>` example on a docs page runs (the README and the tutorial: tests/docs/test_readme.py).
- No page, schema description or API docstring cites an issue number or a file outside the
  repository, and no example types a person's name to act as them.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
READ_BY_PEOPLE = [ROOT / "README.md", ROOT / "mkdocs.yml", *PAGES]


def test_docs_site_builds_strictly_with_every_command_and_mechanism(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]

    import typer

    from ledger.accounting.catalogue import PARAMETERS
    from ledger.cli.app import app

    commands_page = (site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    names = [" ".join(path) for path in _command_paths(root, ["privacy-ledger"])]
    assert len(names) >= 40
    missing = [name for name in names if f"<code>{name}</code>" not in commands_page]
    assert not missing, f"commands missing from the generated reference: {missing}"
    mechanisms_page = (site / "reference" / "mechanisms" / "index.html").read_text(encoding="utf-8")
    assert all(f"<code>{name}</code>" in mechanisms_page for name in PARAMETERS)
    json_page = (site / "reference" / "json-output" / "index.html").read_text(encoding="utf-8")
    assert json_page.count("(exit 0)") >= 8 and "(exit 2)" in json_page  # each command run at build time
    api_page = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    assert "add_dataset" in api_page and "SubsetLoss" in api_page


def _command_paths(command, path):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, [*path, name])


def test_every_function_the_docs_name_exists():
    named = sorted({name for page in [ROOT / "README.md", *PAGES]
                    for name in re.findall(r"`(ledger(?:\.\w+){2,})`", page.read_text(encoding="utf-8"))})
    assert len(named) >= 20
    missing = [name for name in named if not _resolves(name)]
    assert not missing, f"the docs name what the code does not have: {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


# Not a setting: who does a step is who authenticated, never an environment variable.
NOT_SETTINGS = {"LEDGER_USER"}


def test_environment_reference_lists_exactly_the_variables_the_code_reads():
    read = {found.group(1) for path in (ROOT / "ledger").rglob("*.py")
            for found in re.finditer(r"[\"'$](LEDGER_[A-Z_]+)", path.read_text(encoding="utf-8"))}
    page = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(LEDGER_[A-Z_]+)`", page, re.M))
    assert len(read) >= 6
    assert read - NOT_SETTINGS == listed - NOT_SETTINGS


@pytest.mark.parametrize("page", [page for page in PAGES if ">>> " in page.read_text(encoding="utf-8")],
                         ids=lambda page: str(page.relative_to(DOCS)))
def test_docs_python_examples_run(page, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(page), module_relative=False, encoding="utf-8",
                              optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted >= 3
    assert result.failed == 0


CITATIONS = re.compile(r"\bissues?\s*#?\d+|\bPR\s*#?\d+|\.\./shared|DESIGN(?:\.md|\s+\d)", re.I)


def _citations(text: str) -> list[str]:
    return [found.group(0) for found in CITATIONS.finditer(text)]


def test_no_page_cites_an_issue_or_a_file_outside_the_repository():
    cited = {str(path.relative_to(ROOT)): _citations(path.read_text(encoding="utf-8")) for path in READ_BY_PEOPLE}
    for schema in (ROOT / "schemas").glob("*.json"):
        descriptions = re.findall(r'"description":\s*"((?:[^"\\]|\\.)*)"', schema.read_text(encoding="utf-8"))
        cited[str(schema.relative_to(ROOT))] = _citations(" ".join(descriptions))
    assert not {where: found for where, found in cited.items() if found}


def test_no_api_docstring_on_the_site_cites_an_issue_or_a_file_outside_the_repository():
    import importlib
    import pkgutil

    import ledger.api as api

    docstrings = {"ledger.api": api.__doc__ or ""}
    for info in pkgutil.iter_modules(api.__path__):
        module = importlib.import_module(f"ledger.api.{info.name}")
        docstrings[module.__name__] = module.__doc__ or ""
        for name, member in vars(module).items():
            if getattr(member, "__module__", None) == module.__name__ and (
                    inspect.isclass(member) or inspect.isfunction(member)):
                docstrings[name] = member.__doc__ or ""
                for method_name, method in vars(member).items() if inspect.isclass(member) else ():
                    docstrings[f"{name}.{method_name}"] = getattr(method, "__doc__", None) or ""
    cited = {name: _citations(text) for name, text in docstrings.items()}
    assert not {name: found for name, found in cited.items() if found}


def test_no_example_types_a_name_to_act_as_someone():
    """A person is who authenticated (the OS user on SQLite, the database login on PostgreSQL)."""
    typed = re.compile(r"--as\b(?!-)|--by\b|LEDGER_USER|\bby=\"|actor=")
    found = {str(path.relative_to(ROOT)): typed.findall(path.read_text(encoding="utf-8")) for path in READ_BY_PEOPLE}
    assert not {where: hits for where, hits in found.items() if hits}


def test_the_test_command_builds_the_site_before_the_tests():
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert script.index("mkdocs build --strict") < script.index("-m pytest")
    extras = _extras()
    assert {"mkdocs", "mkdocs-material", "mkdocstrings"} <= {re.split(r"[\[<>=]", r)[0] for r in extras["docs"]}
    assert "privacy-ledger[docs]" in extras["test"]


def _extras() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
