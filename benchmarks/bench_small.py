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

    .venv/bin/python benchmarks/bench_small.py --growth [--runs 7]

instead: `table` on bench_scale's ledgers of 10k and 100k releases (built once, cached), each
run --runs times, interleaved; the 10k figure beside the 100k one (target: at most 1.2x). The
10k table prints every release row (a million cells, within app.TABLE_CELL_LIMIT); the 100k
one the largest 25, its rows read from sealed chunks.
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


def growth(runs: int) -> None:
    """--growth: `table` at 10k beside `table` at 100k, interleaved."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_scale

    ledgers = bench_scale.build([10_000, 100_000])
    subprocess.run([PYTHON, "-m", "ledger", "--db", f"sqlite:///{ledgers[100_000]}", "cap", "list"],
                   capture_output=True, cwd=ROOT)  # (a first open's upgrade, if any, not timed)
    before = load()
    walls: dict[int, list[float]] = {size: [] for size in ledgers}
    cpus: dict[int, list[float]] = {size: [] for size in ledgers}
    for _ in range(runs):
        for size, path in ledgers.items():
            wall, cpu = timed([PYTHON, "-m", "ledger", "--db", f"sqlite:///{path}", "table"], ROOT)
            walls[size].append(wall)
            cpus[size].append(cpu)
    print(f"`table`, {runs} fresh processes each, interleaved; load average {before} before, {load()} after")
    for size in ledgers:
        print(f"  {size:>7,} releases: wall {statistics.median(walls[size]):.3f} s (min {min(walls[size]):.3f}), "
              f"CPU {statistics.median(cpus[size]):.3f} s")
    wall = statistics.median(walls[10_000]) / statistics.median(walls[100_000])
    cpu = statistics.median(cpus[10_000]) / statistics.median(cpus[100_000])
    print(f"  10k / 100k: {wall:.2f}x wall, {cpu:.2f}x CPU  [target <= 1.2x: "
          f"{'met' if max(wall, cpu) <= 1.2 else 'MISSED'}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--growth", action="store_true", help="table at 10k beside table at 100k instead")
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(ROOT / "ledger", quiet=1)  # (as an installed package has its bytecode)
    if args.growth:
        growth(args.runs)
        return
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
        print(f"  {'command':24} {'wall s':>7} {'check':>7} {'ratio':>6} {'min s':>6} {'check':>6} {'ratio':>6} "
              f"{'CPU s':>7} {'check':>7} {'ratio':>6}  target <= {TARGET}x (min wall and CPU)  "
              "largest import (cumulative ms); unneeded modules loaded")
        base_min = min(walls[base])
        for name, argv in COMMANDS.items():
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            top, packages = imports(["-m", "ledger", "--db", f"sqlite:///{work / 'ledger.db'}", *argv], work)
            largest = f"{top[0][1]} {top[0][0] / 1000:.0f}" if top else "-"
            unneeded = sorted(p for p in packages if p in UNNEEDED) or ["none"]
            least = min(walls[name])
            # (the median wall of a loaded machine is mostly the other processes': the minimum and
            # the CPU seconds are this command's own)
            verdict = "met" if max(least / base_min, cpu / base_cpu) <= TARGET else "MISSED"
            print(f"  {name:24} {wall:7.3f} {base_wall:7.3f} {wall / base_wall:5.2f}x {least:6.3f} {base_min:6.3f} "
                  f"{least / base_min:5.2f}x {cpu:7.3f} {base_cpu:7.3f} {cpu / base_cpu:5.2f}x  {verdict:15} "
                  f"{largest}; {', '.join(unneeded)}")
        print(f"  load average at the end: {load()}")


if __name__ == "__main__":
    main()
