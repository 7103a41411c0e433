"""Benchmark: a small ledger answers like a small ledger.

    .venv/bin/python benchmarks/bench_small.py [--runs 9]

The demo ledger (`privacy-ledger demo` in an empty directory: Tan's Example 3.6, three
releases) is asked every read question in a fresh process: `table`, `subset`, `pairs`,
`cap list`, `releases`, `headroom`, and `report --format html|md`. Each command runs --runs
times, interleaved with its baseline, `check` of one planned release on the same ledger, so
every figure is measured under the same load. Printed per command: the median wall and CPU
seconds (user + system), each beside check's from the same run, the ratio (target <= 1.5x),
and, from one `python -X importtime` run of it, the largest single import on its path and
any module loaded that the demo's releases do not need (its releases are pure Laplace: no
PLD accountant, no scipy).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
TARGET = 1.5
# Modules the demo's releases (pure epsilon) never need: the PLD accountant and what it imports.
UNNEEDED = ("dp_accounting", "scipy", "matplotlib", "pandas")

PLAN = """dataset: census
releases:
  - {id: Table D, reads: [age, sex], mechanism: {name: laplace, epsilon: 0.5}}
"""

COMMANDS = {
    "check plan.yaml (baseline)": ["check", "plan.yaml"],
    "table": ["table"],
    "subset age sex": ["subset", "age", "sex"],
    "pairs": ["pairs"],
    "cap list": ["cap", "list"],
    "releases": ["releases"],
    "headroom age sex": ["headroom", "age", "sex"],
    "report --format html": ["report", "--format", "html", "-o", "report.html"],
    "report --format md": ["report", "--format", "md", "-o", "report.md"],
}


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv[3:])}: exit {code}: {process.stderr.read().decode()[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime


def imports(argv: list[str], cwd: Path) -> tuple[list[tuple[int, str]], set[str]]:
    """(the packages imported, as (cumulative µs, name), largest first, the ledger's own modules
    left out; every top-level package loaded) of one `python -X importtime` run."""
    run = subprocess.run([PYTHON, "-X", "importtime", *argv], capture_output=True, text=True, cwd=cwd)
    top, packages = [], set()
    for line in run.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
        if found:
            cumulative, indent, name = found.groups()
            packages.add(name.split(".")[0])
            if "." not in name and name != "ledger":
                top.append((int(cumulative), name))
    return sorted(top, reverse=True), packages


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(ROOT / "ledger", quiet=1)  # (as an installed package has its bytecode)
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        cli = [PYTHON, "-m", "ledger", "--db", f"sqlite:///{work / 'ledger.db'}"]
        subprocess.run([*cli, "demo"], check=True, capture_output=True, cwd=work)
        (work / "plan.yaml").write_text(PLAN)
        before = load()
        walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
        cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(args.runs):
            for name, argv in COMMANDS.items():
                wall, cpu = timed([*cli, *argv], work)
                walls[name].append(wall)
                cpus[name].append(cpu)
        after = load()
        base = "check plan.yaml (baseline)"
        base_wall, base_cpu = statistics.median(walls[base]), statistics.median(cpus[base])
        print(f"the demo ledger (3 releases), {args.runs} fresh processes each, interleaved with check; "
              f"load average {before} before, {after} after (1, 5, 15 min) on {os.cpu_count()} cores")
        print(f"  {'command':24} {'wall s':>7} {'check':>7} {'ratio':>6} {'CPU s':>7} {'check':>7} {'ratio':>6}"
              f"  target <= {TARGET}x  largest import (cumulative ms); unneeded modules loaded")
        for name, argv in COMMANDS.items():
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            top, packages = imports(["-m", "ledger", "--db", f"sqlite:///{work / 'ledger.db'}", *argv], work)
            largest = f"{top[0][1]} {top[0][0] / 1000:.0f}" if top else "-"
            unneeded = sorted(p for p in packages if p in UNNEEDED) or ["none"]
            verdict = "met" if max(wall / base_wall, cpu / base_cpu) <= TARGET else "MISSED"
            print(f"  {name:24} {wall:7.3f} {base_wall:7.3f} {wall / base_wall:5.2f}x {cpu:7.3f} {base_cpu:7.3f} "
                  f"{cpu / base_cpu:5.2f}x  {verdict:15} {largest}; {', '.join(unneeded)}")
        print(f"  load average at the end: {load()}")


if __name__ == "__main__":
    main()
