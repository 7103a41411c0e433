"""Issue 13, section 2: the resident process (ledger/cli/resident.py).

A call handed to the resident process must be indistinguishable from a fresh process:
the same standard output, standard error and exit code for every kind of outcome (an
answer, a refusal, bad input, help), the caller's working directory and environment, each
call's own ledger, a record written exactly once, an interrupt ending both as the signal
ends a fresh process. Each figure here is the fresh process's own answer
(LEDGER_RESIDENT=0), run beside it; the server's call count shows the call went through it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.cli import resident

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PLAN = """\
dataset: graduates
releases:
  - {id: planned-income, reads: [income], mechanism: {name: laplace, epsilon: 100}}
"""


class Calls:
    """`python -m ledger ARGS` in `cwd`, fresh (LEDGER_RESIDENT=0) or through the server."""

    def __init__(self, directory: Path, runtime: Path):
        self.cwd = directory
        self.env = {**os.environ, resident.DIR_ENV: str(runtime), "LEDGER_LOG_DIR": str(directory / "logs")}
        self.env.pop(resident.ENABLE_ENV, None)

    def __call__(self, *args, fresh: bool = False, cwd: Path | None = None, **env) -> subprocess.CompletedProcess:
        environment = {**self.env, **env}
        if fresh:
            environment[resident.ENABLE_ENV] = "0"
        return subprocess.run([sys.executable, "-m", "ledger", *map(str, args)], cwd=cwd or self.cwd,
                              env=environment, capture_output=True, text=True, timeout=120)

    def status(self) -> dict | None:
        """The server's answer (the one socket in the directory), or None."""
        runtime = Path(self.env[resident.DIR_ENV])
        sockets = list(runtime.glob("*.sock")) if runtime.exists() else []
        assert len(sockets) <= 1
        return resident.control("status", str(sockets[0])) if sockets else None


@pytest.fixture
def calls(tmp_path):
    runtime = tmp_path / "run"
    work = tmp_path / "work"
    work.mkdir()
    calls = Calls(work, runtime)
    for args in (("dataset", "add", EXAMPLES / "graduates.dataset.yaml"),
                 ("record", EXAMPLES / "graduates.releases.yaml")):
        assert calls(*args, fresh=True).returncode == 0
    (work / "plan.yaml").write_text(PLAN)
    started = calls("resident", "start")
    assert started.returncode == 0, started.stderr
    yield calls
    calls("resident", "stop")


def same(calls: Calls, *args, code: int) -> subprocess.CompletedProcess:
    """The call through the server and as a fresh process: identical in every byte."""
    before = calls.status()["calls"]
    through = calls(*args)
    assert calls.status()["calls"] == before + 1  # it went through the server
    alone = calls(*args, fresh=True)
    assert (through.returncode, through.stdout, through.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert through.returncode == code
    return through


def test_every_kind_of_answer_is_the_fresh_process_answer(calls):
    assert "income" in same(calls, "table", "-d", "graduates", code=0).stdout
    same(calls, "subset", "income", "degree", "-d", "graduates", code=0)
    same(calls, "pairs", "-d", "graduates", code=0)
    same(calls, "headroom", "income", "-d", "graduates", code=0)
    assert "income" in same(calls, "subset", "incme", "-d", "graduates", code=2).stderr  # did you mean
    same(calls, "check", "missing.yaml", "--json", code=2)
    same(calls, "--help", code=0)
    same(calls, "subset", "--help", code=0)
    same(calls, "no-such-command", code=2)


def test_a_refused_check_and_a_refused_record_are_the_fresh_process_refusals(calls):
    done = calls("cap", "set", "income", "--epsilon", "10", "-d", "graduates", fresh=True)
    assert done.returncode == 0, done.stderr
    refusal = same(calls, "check", "plan.yaml", code=1)
    assert "REFUSED" in refusal.stdout
    same(calls, "record", "plan.yaml", code=1)  # refused: nothing written, so the second refusal is the same
    listed = calls("releases", "--json", fresh=True)
    assert "planned-income" not in listed.stdout


def test_a_record_through_the_server_is_written_once_and_verified(calls):
    (calls.cwd / "one.yaml").write_text(PLAN.replace("epsilon: 100", "epsilon: 1/4"))
    before = calls.status()["calls"]
    done = calls("record", "one.yaml")
    assert done.returncode == 0, done.stderr
    assert calls.status()["calls"] == before + 1
    assert done.stdout.startswith("recorded 1 release")
    releases = json.loads(calls("releases", "--json", fresh=True).stdout)
    assert [r["id"] for r in releases].count("planned-income") == 1
    assert "already recorded, identical: planned-income" in calls("record", "one.yaml").stdout
    assert calls("audit", "verify").returncode == 0
    with sqlite3.connect(calls.cwd / "ledger.db") as db:  # one release row, one record event
        assert db.execute("select count(*) from releases where id = 'planned-income'").fetchone()[0] == 1


def test_each_call_is_in_its_callers_directory_and_environment(calls, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    assert calls("dataset", "add", EXAMPLES / "survey.dataset.yaml", cwd=other, fresh=True).returncode == 0
    here = calls("table", "--json")  # ./ledger.db of each caller's directory
    there = calls("table", "--json", cwd=other)
    assert json.loads(here.stdout)["dataset"] == "graduates"
    assert json.loads(there.stdout)["dataset"] == "survey"
    by_env = calls("table", "--json", cwd=other, LEDGER_DATABASE_URL=f"sqlite:///{calls.cwd / 'ledger.db'}")
    assert json.loads(by_env.stdout)["dataset"] == "graduates"
    server = Path(f"/proc/{calls.status()['pid']}/environ").read_bytes().split(b"\0")
    assert not [v for v in server if v.startswith((b"LEDGER_DATABASE_URL=", b"LEDGER_LOG_DIR="))]
    # the umask of the caller: a file the command writes (the report) gets the caller's mode
    done = calls("report", "--format", "html", "--out", "r.html", cwd=calls.cwd)
    assert done.returncode == 0, done.stderr
    mode = stat.S_IMODE(os.stat(calls.cwd / "r.html").st_mode)
    assert mode == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_signal_ends_the_call_as_it_ends_a_fresh_process(calls):
    """A record waiting for the write lock, stopped (SIGTERM, as a pipeline's time-out sends):
    the caller forwards the signal, the child ends, nothing is written, and the caller ends
    by the same signal as a fresh process does. A caller killed outright takes its child with
    it (the record it was making is not made later behind its back)."""
    (calls.cwd / "one.yaml").write_text(PLAN.replace("epsilon: 100", "epsilon: 1/4"))
    holder = sqlite3.connect(calls.cwd / "ledger.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held
    try:
        ends = {}
        for fresh in (True, False):
            before = calls.status()["calls"]
            env = {**calls.env, "LEDGER_LOCK_TIMEOUT": "120"}
            if fresh:
                env[resident.ENABLE_ENV] = "0"
            process = subprocess.Popen([sys.executable, "-m", "ledger", "record", "one.yaml"], cwd=calls.cwd,
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while not fresh and calls.status()["calls"] == before:  # handed over
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(2)
            assert process.poll() is None  # waiting for the lock
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
            ends[fresh] = process.returncode
            assert calls.status()["running"] == 0  # the child ended too
        # a caller killed outright (SIGKILL: nothing can forward it): its child is killed too
        process = subprocess.Popen([sys.executable, "-m", "ledger", "record", "one.yaml"], cwd=calls.cwd,
                                   env={**calls.env, "LEDGER_LOCK_TIMEOUT": "120"}, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while calls.status()["running"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        process.kill()
        process.communicate(timeout=60)
        while calls.status()["running"]:
            assert time.monotonic() < deadline + 60, "the child of a killed caller still runs"
            time.sleep(0.1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ends[False] == ends[True] == -signal.SIGTERM
    releases = json.loads(calls("releases", "--json", fresh=True).stdout)
    assert "planned-income" not in [r["id"] for r in releases]


def test_a_changed_install_or_import_time_environment_is_another_server(calls, monkeypatch):
    monkeypatch.setenv(resident.DIR_ENV, calls.env[resident.DIR_ENV])
    first = resident.fingerprint()
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    assert resident.fingerprint() != first  # read at import time: a server started without it differs
    monkeypatch.delenv("PYTHONWARNINGS")
    assert resident.fingerprint() == first
    monkeypatch.setattr(sys, "path", [*sys.path, "/nowhere"])
    assert resident.fingerprint() != first


def test_no_server_no_hand_over_and_a_shared_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(resident.DIR_ENV, str(tmp_path / "run"))
    monkeypatch.delenv(resident.ENABLE_ENV, raising=False)
    assert resident.run(["table"]) is None  # no server: the caller runs the command itself
    assert not list((tmp_path / "run").glob("*.sock"))  # and starts none unless asked to
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv(resident.DIR_ENV, str(shared))
    with pytest.raises(PermissionError, match="not a private directory"):
        resident.socket_path()
    assert resident.run(["table"]) is None


def test_opting_in_starts_the_server_and_it_ends_when_idle(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    runtime = tmp_path / ("deep" * 25) / "run"  # longer than a socket's address may be: reached all the same
    assert len(str(runtime)) > 108
    calls = Calls(work, runtime)
    assert calls("dataset", "add", EXAMPLES / "graduates.dataset.yaml", fresh=True).returncode == 0
    first = calls("table", LEDGER_RESIDENT="1", LEDGER_RESIDENT_IDLE="2")  # runs here, starts the server
    assert first.returncode == 0
    deadline = time.monotonic() + 60
    while calls.status() is None:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)
    second = calls("table", LEDGER_RESIDENT="1")
    assert (second.returncode, second.stdout) == (first.returncode, first.stdout)
    assert calls.status()["calls"] == 1
    deadline = time.monotonic() + 60
    while calls.status() is not None:  # idle for 2 s: it ends, and its socket is gone
        assert time.monotonic() < deadline, "the server did not end when idle"
        time.sleep(0.5)
    assert not list(runtime.glob("*.sock"))


def test_the_server_imports_what_the_source_imports_inside_functions(tmp_path):
    """The libraries a command imports on first use (inside a function: `from scipy import fft` in
    the PLD accountant, `scipy.optimize.linprog` in sample_privacy) are read from the ledger's
    source, so the server's list cannot drift from the code."""
    module = tmp_path / "probe.py"
    module.write_text("def later():\n    from scipy import fft\n    import networkx.algorithms\n"
                      "    from ledger.core import numbers\n    import json\n")
    named, maybe = resident.imported_elsewhere(tmp_path)
    assert named == {"scipy", "networkx.algorithms"}
    assert maybe == {"scipy.fft"}
    script = ("import sys\nfrom ledger.cli import resident\nassert resident.preload() == []\n"
              "print(' '.join(sorted(m for m in ('scipy.fft', 'scipy.optimize', 'dp_accounting.pld', 'psycopg',"
              " 'matplotlib') if m in sys.modules)))\n")
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["dp_accounting.pld", "psycopg", "scipy.fft", "scipy.optimize"]
