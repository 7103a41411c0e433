"""Every file the ledger writes goes through one guard (ledger.store.files).

The writers: the report in each format and the register a summarised report writes beside
it, `export registry`, `demo`, `audit checkpoint`, `audit keygen`, `run`, `assess`, and the
Python API's `ledger.reporting.write_report` (the façade, `Ledger`, writes no file:
`Ledger.export_registry` returns a record). The list is checked against the command line (every
option of every command named --out, --output or -o) and against the API (every function of
`ledger.reporting` and method of `Ledger` taking a file to write), so a new writer must be added here.

Each writer is run against each path it must never write: the ledger's database, its
write-ahead log, shared-memory index and rollback journal, a FIFO, a device, a directory and a
symbolic link to a file elsewhere. Each is bad input (exit 2; `InputErrors` in the API), says
which option and why, and leaves the ledger as it was: the same bytes, the same audit events.
A file that may be written is written whole and keeps its permissions; a new one is made
with the umask's.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import cli_main

import ledger
from ledger.core.errors import InputErrors
from ledger.reporting import write_report


@dataclass(frozen=True)
class Book:
    directory: Path  # the ledger and what the writers read; the forbidden targets
    elsewhere: Path  # a directory the symbolic link points into

    @property
    def database(self) -> Path:
        return self.directory / "ledger.db"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.database}"


def _copy_ledger(source: Path, destination: Path) -> None:
    """A copy of the SQLite ledger at `source` (SQLite's backup: whatever its write-ahead log holds)."""
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(destination)) as dst:
        src.backup(dst)


def _settled(database: Path) -> None:
    """Every connection of the commands run so far closed, and the write-ahead log folded in."""
    gc.collect()
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Book:
    """Tan's Example 3.6 recorded by `demo`, a signing key, data for `run` and `assess`, and the
    special files."""
    directory = tmp_path_factory.mktemp("book")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    made = Book(directory, elsewhere)
    assert cli_main(made.url, "demo", "--out", directory / "demo.html").code == 0
    assert cli_main(made.url, "audit", "keygen", "--out", directory / "key").code == 0
    (directory / "ages.csv").write_text("age\n31\n45\n27\n", encoding="utf-8")
    (directory / "firms.csv").write_text("region,firm,turnover\nnorth,a,10\nnorth,b,20\nsouth,c,5\n", encoding="utf-8")
    os.mkfifo(directory / "pipe")
    (directory / "folder").mkdir()
    (elsewhere / "victim.txt").write_text("keep", encoding="utf-8")
    os.symlink(elsewhere / "victim.txt", directory / "victim.link")
    _settled(made.database)
    return made


def _has_chromium() -> bool:
    from ledger.reporting.write import find_chromium

    try:
        find_chromium()
    except InputErrors:
        return False
    return True


PDF = pytest.mark.skipif(not _has_chromium(), reason="PDF needs Chromium")

# (name, the command's words, its arguments writing `target` in `directory`)
Args = Callable[[Path, Path], list]
CLI_WRITERS: list[tuple[str, tuple[str, ...], Args]] = [
    *[(f"report {fmt}", ("report",), lambda target, d, fmt=fmt: ["report", "--format", fmt, "--out", target])
      for fmt in ("html", "md", "tex", "csv", "pdf")],
    ("export registry", ("export", "registry"), lambda target, d: ["export", "registry", "--out", target]),
    ("demo", ("demo",), lambda target, d: ["demo", "--out", target]),
    ("audit checkpoint", ("audit", "checkpoint"),
     lambda target, d: ["audit", "checkpoint", "--key", d / "key", "--out", target]),
    ("audit keygen", ("audit", "keygen"), lambda target, d: ["audit", "keygen", "--out", target]),
    *[(f"run{' --json' * as_json}", ("run",),
       lambda target, d, as_json=as_json: ["run", "laplace-sum", "--data", d / "ages.csv", "--id", f"r-{target.stem}",
                                           "-p", "column=age", "-p", "lower=0", "-p", "upper=100", "-p", "epsilon=1",
                                           "--seed", "1", *(["--json"] * as_json), "--out", target])
      for as_json in (False, True)],
    ("assess", ("assess",), lambda target, d: ["assess", "--data", d / "firms.csv", "--cells", "region",
                                               "--contributor", "firm", "--value", "turnover", "--out", target]),
    ("plan solve", ("plan", "solve"), lambda target, d: ["plan", "solve", _plan_file(d), "--out", target]),
]


def _plan_file(directory: Path) -> Path:
    """A plan of one fixed release of the demo's dataset (which has no cap): solved as it is."""
    path = directory / "plan.yaml"
    path.write_text("dataset: census\nreleases:\n  - {id: planned-age, reads: [age], mechanism: laplace, "
                    "epsilon: 1}\n", encoding="utf-8")
    return path

API_WRITERS = {"write_report": "out"}  # ledger.reporting function: its parameter naming the file written
API_FORMATS = ("html", "md", "tex", "csv", "pdf")

# (what the target is, where it is, what the refusal says)
FORBIDDEN: list[tuple[str, Callable[[Book], Path], str]] = [
    ("the database", lambda b: b.database, "the ledger's own database"),
    ("its write-ahead log", lambda b: Path(f"{b.database}-wal"), "the ledger's write-ahead log"),
    ("its shared-memory index", lambda b: Path(f"{b.database}-shm"), "the ledger's shared-memory index"),
    ("its rollback journal", lambda b: Path(f"{b.database}-journal"), "the ledger's rollback journal"),
    ("the database by another spelling", lambda b: b.directory / "folder" / ".." / "ledger.db",
     "the ledger's own database"),
    ("a FIFO", lambda b: b.directory / "pipe", "a FIFO"),
    ("a device", lambda b: Path("/dev/null"), "a device"),
    ("a directory", lambda b: b.directory / "folder", "is a directory"),
    ("a symbolic link elsewhere", lambda b: b.directory / "victim.link", "symbolic link"),
]


def _writer_params():
    return [pytest.param(args, id=name, marks=[PDF] if name.endswith("pdf") else [])
            for name, _, args in CLI_WRITERS]


def _option_names(command) -> set[str]:
    return {name for parameter in command.params for name in getattr(parameter, "opts", ())}


def _commands(group, words=()):
    """(words, click command) of every command of the application."""
    for name, command in getattr(group, "commands", {}).items():
        if getattr(command, "commands", None) is not None:
            yield from _commands(command, (*words, name))
        else:
            yield (*words, name), command


def test_every_command_with_an_output_option_is_a_listed_writer():
    from ledger.cli import app as cli

    writing = {words for words, command in _commands(cli.command())
               if _option_names(command) & {"--out", "--output", "-o"}}
    assert writing == {words for _, words, _ in CLI_WRITERS}
    assert len(writing) >= 7  # (the walk sees the groups' commands: export registry, audit checkpoint)


FILE_PARAMETERS = ("out", "output", "path", "file", "to", "target", "destination")


def test_every_api_function_that_takes_a_file_to_write_is_a_listed_writer():
    import ledger.reporting

    taking = {name: parameter for name, method in inspect.getmembers(ledger.Ledger, inspect.isfunction)
              if not name.startswith("_")
              for parameter in inspect.signature(method).parameters if parameter in FILE_PARAMETERS}
    assert taking == {}  # the façade returns values; the interfaces write them
    writers = {name: parameter for name in ledger.reporting.__all__
               for parameter in inspect.signature(getattr(ledger.reporting, name)).parameters
               if parameter in FILE_PARAMETERS}
    assert writers == API_WRITERS


def _state(book: Book) -> tuple[bytes, int]:
    with contextlib.closing(sqlite3.connect(book.database)) as connection:
        events = connection.execute("SELECT count(*) FROM audit_events").fetchone()[0]
    return book.database.read_bytes(), events


def _untouched_specials(book: Book) -> None:
    assert stat.S_ISFIFO(os.lstat(book.directory / "pipe").st_mode)
    assert (book.directory / "folder").is_dir() and not any((book.directory / "folder").iterdir())
    assert (book.directory / "victim.link").is_symlink()
    assert (book.elsewhere / "victim.txt").read_text(encoding="utf-8") == "keep"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not Path(f"{book.database}-journal").exists()


def _refusal(result, why: str) -> tuple[str, bool]:
    """The option a refusal names, and whether it says `why` and that nothing was written (with
    --json, the error is the JSON document on standard output)."""
    if result.out.startswith("{"):
        (error,) = json.loads(result.out)["errors"]
        return error["field"], why in error["message"]
    (line,) = result.errors
    return line.split(": ")[2], why in line and "nothing was written" in result.err


@pytest.mark.parametrize(("what", "where", "why"), FORBIDDEN, ids=[what for what, _, _ in FORBIDDEN])
@pytest.mark.parametrize("args", _writer_params())
def test_no_command_writes_onto_the_ledger_or_a_special_file(book, args, what, where, why):
    _settled(book.database)
    before = _state(book)
    # a reader holds the ledger open: its -wal and -shm files exist (found as the same files)
    with contextlib.closing(sqlite3.connect(book.database)) as reader:
        reader.execute("SELECT count(*) FROM audit_events").fetchone()
        assert Path(f"{book.database}-wal").exists() and Path(f"{book.database}-shm").exists()
        result = cli_main(book.url, *args(where(book), book.directory))
    assert result.code == 2, result.out + result.err
    assert _refusal(result, why) == ("--out", True), result.out + result.err
    _settled(book.database)
    assert _state(book) == before
    _untouched_specials(book)


@pytest.mark.parametrize(("what", "where", "why"), FORBIDDEN, ids=[what for what, _, _ in FORBIDDEN])
@pytest.mark.parametrize("fmt", API_FORMATS)
def test_the_api_report_never_writes_onto_the_ledger_or_a_special_file(book, fmt, what, where, why):
    _settled(book.database)
    before = _state(book)
    opened = ledger.open(book.url)
    try:
        with pytest.raises(InputErrors) as refused:
            write_report(opened, where(book), format=fmt)
    finally:
        opened.engine.dispose()
    (error,) = refused.value.errors
    assert error.field == "out" and why in error.message, str(error)
    _settled(book.database)
    assert _state(book) == before
    _untouched_specials(book)


# the register a summarised report writes beside it: `<out>.register.csv`
REGISTER_FORBIDDEN = [
    ("a FIFO", lambda d: os.mkfifo(d / "r.md.register.csv"), "a FIFO"),
    ("a directory", lambda d: (d / "r.md.register.csv").mkdir(), "is a directory"),
    ("a symbolic link elsewhere", lambda d: os.symlink(d.parent / "victim.csv", d / "r.md.register.csv"),
     "symbolic link"),
    ("the ledger's database", None, "the ledger's own database"),
]


@pytest.mark.parametrize(("what", "make", "why"), REGISTER_FORBIDDEN, ids=[what for what, _, _ in REGISTER_FORBIDDEN])
def test_the_register_beside_a_summarised_report_is_guarded_too(book, tmp_path, monkeypatch, what, make, why):
    monkeypatch.setenv("LEDGER_REPORT_SUMMARY_FROM", "0")  # three releases: summarised, with a register
    directory = tmp_path / "out"
    directory.mkdir()
    (tmp_path / "victim.csv").write_text("keep", encoding="utf-8")
    # the ledger itself named as the register would be, when that is the case
    database = directory / ("r.md.register.csv" if make is None else "ledger.db")
    _copy_ledger(book.database, database)
    if make is not None:
        make(directory)
    url = f"sqlite:///{database}"
    before = database.read_bytes()
    result = cli_main(url, "report", "--out", directory / "r.md")
    assert result.code == 2, result.out + result.err
    assert "--out" in result.err and "r.md.register.csv" in result.err and why in result.err, result.err
    gc.collect()
    assert database.read_bytes() == before
    assert not (directory / "r.md").exists()
    assert (tmp_path / "victim.csv").read_text(encoding="utf-8") == "keep"


def test_a_summarised_report_and_its_register_keep_their_modes(book, tmp_path, monkeypatch, umask):
    monkeypatch.setenv("LEDGER_REPORT_SUMMARY_FROM", "0")
    _copy_ledger(book.database, tmp_path / "ledger.db")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    report, register = tmp_path / "r.md", tmp_path / "r.md.register.csv"
    assert cli_main(url, "report", "--out", report).code == 0
    assert stat.S_IMODE(register.stat().st_mode) == 0o666 & ~umask
    register.chmod(0o600)
    register.write_text("old", encoding="utf-8")
    assert cli_main(url, "report", "--out", report).code == 0
    assert stat.S_IMODE(register.stat().st_mode) == 0o600
    assert register.read_text(encoding="utf-8").startswith("release,")


@pytest.fixture
def umask():
    """A umask unlike the usual 022, so that a new file's mode shows it was applied."""
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


@pytest.fixture
def own_copy(book, tmp_path) -> Book:
    """A copy of the book a writer may change (`run` records a release)."""
    copy = Book(tmp_path, book.elsewhere)
    _copy_ledger(book.database, copy.database)
    for name in ("key", "key.pub", "ages.csv", "firms.csv"):
        shutil.copy(book.directory / name, tmp_path / name)
    return copy


@pytest.mark.parametrize("args", [param for param in _writer_params() if "keygen" not in param.id])
def test_a_new_file_has_the_umasks_mode_and_a_rewritten_file_keeps_its_own(own_copy, umask, args):
    new, kept = own_copy.directory / "new.out", own_copy.directory / "kept.out"
    result = cli_main(own_copy.url, *args(new, own_copy.directory))
    assert result.code == 0, result.err
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask and new.stat().st_size > 0
    kept.write_bytes(b"old")
    kept.chmod(0o600)
    result = cli_main(own_copy.url, *args(kept, own_copy.directory))
    assert result.code == 0, result.err
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert kept.read_bytes() not in (b"old", b"")
    assert not [p.name for p in own_copy.directory.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_keygen_writes_a_private_key_for_its_owner_only_and_never_over_a_file(own_copy, umask):
    key = own_copy.directory / "board"
    assert cli_main(own_copy.url, "audit", "keygen", "--out", key).code == 0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(f"{key}.pub").stat().st_mode) == 0o666 & ~umask
    key.chmod(0o640)
    before = key.read_bytes()
    result = cli_main(own_copy.url, "audit", "keygen", "--out", key)
    assert result.code == 2 and "--out" in result.err and "never overwritten" in result.err
    assert key.read_bytes() == before and stat.S_IMODE(key.stat().st_mode) == 0o640


@pytest.mark.parametrize("fmt", [pytest.param(f, marks=[PDF] if f == "pdf" else []) for f in API_FORMATS])
def test_the_api_report_keeps_a_files_mode(own_copy, umask, fmt):
    opened = ledger.open(own_copy.url)
    try:
        new, kept = own_copy.directory / f"new.{fmt}", own_copy.directory / f"kept.{fmt}"
        assert write_report(opened, new) == new
        assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask
        kept.write_bytes(b"old")
        kept.chmod(0o600)
        write_report(opened, kept)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.read_bytes() not in (b"old", b"")
    finally:
        opened.engine.dispose()


def test_a_link_to_a_file_in_its_own_directory_is_written_through(own_copy):
    directory = own_copy.directory
    (directory / "march.md").write_text("old", encoding="utf-8")
    (directory / "march.md").chmod(0o600)
    os.symlink("march.md", directory / "latest.md")
    result = cli_main(own_copy.url, "report", "--out", directory / "latest.md")
    assert result.code == 0, result.err
    assert os.readlink(directory / "latest.md") == "march.md"
    assert (directory / "march.md").read_text(encoding="utf-8").startswith("#")
    assert stat.S_IMODE((directory / "march.md").stat().st_mode) == 0o600


def test_a_link_to_the_ledger_in_the_same_directory_is_refused(own_copy):
    os.symlink("ledger.db", own_copy.directory / "book.md")
    before = own_copy.database.read_bytes()
    result = cli_main(own_copy.url, "report", "--out", own_copy.directory / "book.md")
    assert result.code == 2 and "--out" in result.err and "the ledger's own database" in result.err
    gc.collect()
    assert own_copy.database.read_bytes() == before
