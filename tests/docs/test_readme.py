"""Every example of the README and of the tutorial runs, as a new user pastes it into a fresh shell.

README: the Python block as a doctest, the shell lines one by one in a scratch directory holding a
copy of examples/, in the README's order. Two lines are not run as written: the install line
(`python3 -m venv ... && .venv/bin/pip install ... && .venv/bin/privacy-ledger demo`), of which only
the demo runs, with the privacy-ledger under test; and `bash scripts/test`, the command that runs
these tests.

Tutorial (docs/tutorial/first-ledger.md), in document order: a `yaml` block with a title is
written to that file; every line of an `sh` block is run; a `text` block marked
`<!-- test: output -->` must match the output of the command before it (a line `...` stands for
any lines); an `sh` block marked
`<!-- test: exit N -->` must exit N. A block marked `<!-- test: another person NAME -->` is a step
someone else does (on SQLite, another OS user): it runs through the Python API as NAME with the
`acting_as` test seam (tests/support.py), which makes NAME the operating-system user.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import acting_as

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TUTORIAL = ROOT / "docs" / "tutorial" / "first-ledger.md"
FENCE = re.compile(r"(?:^<!-- test: (?P<marker>[^>]*?) -->\n)?^```(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    language: str
    title: str | None
    marker: str | None
    body: str


def fenced_blocks(path: Path) -> list[Block]:
    found = []
    for match in FENCE.finditer(path.read_text(encoding="utf-8")):
        info = match.group("info").strip()
        title = re.search(r'title="([^"]+)"', info)
        found.append(Block(info.split()[0] if info else "", title.group(1) if title else None,
                           match.group("marker"), match.group("body")))
    return found


def shell_lines(body: str) -> list[str]:
    return [line.strip() for line in body.replace("\\\n", " ").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def cli_environment(home: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100"}
    env.pop("LEDGER_DATABASE_URL", None)
    return env


def run_line(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def needs_cli() -> None:
    if not (Path(sys.executable).parent / "privacy-ledger").exists():
        pytest.skip(f"no privacy-ledger script beside {sys.executable}")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- README -----------------------------------------------------------------------------------


def test_readme_is_at_most_150_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_readme_python_example(scratch):
    result = doctest.testfile(str(README), module_relative=False, encoding="utf-8",
                              optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted >= 6
    assert result.failed == 0


def test_readme_shell_commands(scratch):
    needs_cli()
    env = cli_environment(scratch)
    ran = 0
    activated = False
    for block in fenced_blocks(README):
        if block.language != "sh":
            continue
        for line in shell_lines(block.body):
            if line == "bash scripts/test":
                continue  # the command running this test
            if line.startswith("source .venv/bin/activate"):
                activated = True  # (the privacy-ledger under test is on PATH already)
                continue
            # as a new user pastes them: a bare privacy-ledger only once the venv is activated
            assert activated or not line.startswith("privacy-ledger"), \
                f"README calls privacy-ledger before saying how it gets on PATH: {line}"
            if line.startswith("python3 -m venv"):
                line = line.rsplit("&&", 1)[1].strip().replace(".venv/bin/", "")
            done = run_line(line, scratch, env)
            assert done.returncode == 0, \
                f"README line failed (exit {done.returncode}): {line}\n{done.stdout}\n{done.stderr}"
            ran += 1
    assert ran >= 10
    assert "<html" in (scratch / "graduates.html").read_text(encoding="utf-8")[:500].lower()


def test_readme_and_tutorial_input_files_exist():
    """Every file a README command reads is in examples/; every file a tutorial command reads is
    written by the tutorial before it: following either needs no file of one's own."""
    reading = re.compile(r"privacy-ledger (?:dataset add|dataset amend|record|check) ((?:[\w./-]+\.ya?ml ?)+)")
    named = [name for block in fenced_blocks(README) if block.language == "sh"
             for found in reading.finditer(block.body) for name in found.group(1).split()]
    assert len(named) >= 3
    missing = [name for name in named if not name.startswith("examples/") or not (ROOT / name).is_file()]
    assert not missing, f"README commands read files not in examples/: {missing}"
    written: set[str] = set()
    for block in fenced_blocks(TUTORIAL):
        if block.title:
            written.add(block.title)
        for found in reading.finditer(block.body if block.language == "sh" else ""):
            unwritten = [name for name in found.group(1).split() if name not in written]
            assert not unwritten, f"the tutorial reads {unwritten} before showing them"


# -- tutorial ---------------------------------------------------------------------------------


@dataclass
class TutorialRun:
    commands: int = 0
    outputs_compared: int = 0
    by_another_person: list[str] = field(default_factory=list)
    directory: Path | None = None


def shows(expected: str, printed: str) -> bool:
    """The printed output holds the expected text in order; a line `...` stands for any lines."""
    segments = [segment.strip("\n") for segment in re.split(r"^\.\.\.$", expected.strip(), flags=re.M)]
    at = 0
    for segment in segments:
        found = printed.find(segment, at)
        if found < 0:
            return False
        at = found + len(segment)
    return True


def as_another_person(name: str, line: str, cwd: Path, run: TutorialRun) -> None:
    """`privacy-ledger approve|publish|retract ID`, done by `name` through the Python API."""
    words = shlex.split(line)
    assert words[0] == "privacy-ledger" and words[1] in ("approve", "publish", "retract"), line
    import ledger

    with acting_as(name):
        book = ledger.open(f"sqlite:///{cwd / 'ledger.db'}")
        getattr(book, words[1])(words[2])
    run.by_another_person.append(line)


@pytest.fixture(scope="module")
def tutorial_run(tmp_path_factory) -> TutorialRun:
    needs_cli()
    home = tmp_path_factory.mktemp("tutorial")
    env = cli_environment(home)
    cwd = home
    run = TutorialRun()
    last_output = None
    for block in fenced_blocks(TUTORIAL):
        marker = block.marker or ""
        if block.language == "yaml" and block.title:
            (cwd / block.title).write_text(block.body, encoding="utf-8")
        elif block.language == "text" and marker == "output":
            assert last_output is not None, "an output block before any command"
            assert shows(block.body, last_output), f"tutorial output differs:\n{block.body}\nprinted:\n{last_output}"
            run.outputs_compared += 1
        elif block.language == "sh":
            for line in shell_lines(block.body):
                entering = re.fullmatch(r"mkdir -p (\S+) && cd \1", line)
                if entering:
                    cwd = cwd / entering.group(1)
                    cwd.mkdir(parents=True, exist_ok=True)
                    continue
                if marker.startswith("another person "):
                    as_another_person(marker.split()[-1], line, cwd, run)
                    continue
                expected = int(marker.split()[1]) if marker.startswith("exit ") else 0
                done = run_line(line, cwd, env)
                assert done.returncode == expected, \
                    f"tutorial line exited {done.returncode}, not {expected}: {line}\n{done.stdout}\n{done.stderr}"
                last_output = done.stdout
                run.commands += 1
    run.directory = cwd
    return run


def test_tutorial_commands_run_and_print_what_it_shows(tutorial_run):
    assert tutorial_run.commands >= 12
    assert tutorial_run.outputs_compared >= 2
    assert "<html" in (tutorial_run.directory / "board.html").read_text(encoding="utf-8")[:500].lower()


def test_tutorial_refused_plan_wrote_nothing(tutorial_run):
    """The refused plan of step 2 left no release behind: exactly the three of the fixed plan."""
    import ledger

    book = ledger.open(f"sqlite:///{tutorial_run.directory / 'ledger.db'}")
    assert sorted(release.id for release in book.releases("households")) == \
        ["health-by-region", "income-by-age", "income-by-region"]
    assert book.subset(["income"], dataset="households").exact == 1  # 0.5 + 0.5, at its cap


def test_tutorial_approval_by_another_person(tutorial_run):
    import ledger

    book = ledger.open(f"sqlite:///{tutorial_run.directory / 'ledger.db'}")
    assert tutorial_run.by_another_person == ["privacy-ledger approve income-by-region",
                                              "privacy-ledger publish income-by-region"]
    assert book.release("income-by-region").status.value == "published"
