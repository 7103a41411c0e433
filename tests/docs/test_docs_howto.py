"""Every shell command of the how-to guides runs, page by page, as a reader pastes it.

Each page runs in its own scratch directory holding a copy of examples/, with a fresh ledger.
What a page assumes is already done (a dataset added, releases recorded) is stated once at its top
in a `<!-- test: setup CMD && CMD -->` comment and run first. Every line of an `sh` block must exit
0, or N under `<!-- test: exit N -->`; `console` and `text` blocks are shown, not run. Installing
packages (`.venv/bin/pip install ...`) is left to the environment under test.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from test_readme import cli_environment, fenced_blocks, needs_cli, run_line, shell_lines

ROOT = Path(__file__).resolve().parents[2]
HOW_TO = ROOT / "docs" / "how-to"
SETUP = re.compile(r"^<!-- test: setup (.+?) -->$", re.M)
INSTALL = ".venv/bin/pip install"


def runnable(page: Path) -> list[str]:
    return [line for block in fenced_blocks(page) if block.language == "sh"
            for line in shell_lines(block.body) if not line.startswith(INSTALL)]


PAGES = [page for page in sorted(HOW_TO.glob("*.md")) if runnable(page)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_how_to_commands_run(page, tmp_path):
    needs_cli()
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    ran = run_page(page, tmp_path, cli_environment(tmp_path))
    assert ran == len(runnable(page))


def run_page(page: Path, tmp_path: Path, env: dict[str, str]) -> int:
    text = page.read_text(encoding="utf-8")
    setup = [command.strip() for found in SETUP.findall(text) for command in found.split("&&")]
    ran = 0
    for line in setup:
        done = run_line(line, tmp_path, env)
        assert done.returncode == 0, f"{page.name} setup failed: {line}\n{done.stdout}\n{done.stderr}"
    for block in fenced_blocks(page):
        if block.language != "sh":
            continue
        expected = int(block.marker.split()[1]) if block.marker and block.marker.startswith("exit ") else 0
        for line in shell_lines(block.body):
            if line.startswith(INSTALL):
                continue
            done = run_line(line, tmp_path, env)
            assert done.returncode == expected, \
                f"{page.name}: exited {done.returncode}, not {expected}: {line}\n{done.stdout}\n{done.stderr}"
            ran += 1
    return ran
