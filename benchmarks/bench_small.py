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

    .venv/bin/python benchmarks/bench_small.py --growth [--runs 5] [--sizes 10000,100000,1000000]
                                               [--only table,subset] [--cache DIR]

instead: every read command (`table`, `subset` of one and of two variables, `pairs`, `cap list`,
`headroom`, `check` of one planned release, `releases`, `audit verify --since-checkpoint`) on
bench_scale's ledgers of those sizes (built once, cached; --cache DIR: bench_scale's ledgers
in DIR), each run --runs times in fresh processes, interleaved across sizes. Printed per
command: the median wall and CPU seconds at each size, the 10k figure beside the 100k one
(target: at most 1.2x) and the largest beside the 10k one (`subset` and `check`: flat, at
most 1.5x). The 10k table prints every release row (a million cells, within
app.TABLE_CELL_LIMIT); the larger ones the largest 25, their rows read from sealed chunks.
A ledger with no verified head is not asked `audit verify --since-checkpoint` (that would be
the full verification, and it writes the head).
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
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


GROWTH_COMMANDS = {
    "table": ["table"],
    "subset v03": ["subset", "v03"],
    "subset v03 v17": ["subset", "v03", "v17"],
    "pairs": ["pairs"],
    "cap list": ["cap", "list"],
    "headroom v03 v17": ["headroom", "v03", "v17"],
    "check plan.yaml": ["check", "plan.yaml"],
    "releases": ["releases"],
    "audit verify --since-checkpoint": ["audit", "verify", "--since-checkpoint"],
}
FLAT = ("subset", "check")  # their answer does not depend on the history's length
GROWTH_PLAN = """dataset: bench
releases:
  - {id: plan-growth, reads: [v03, v17], mechanism: {name: laplace, epsilon: 0.001}}
"""


def verified(path: Path) -> bool:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        return connection.execute("SELECT 1 FROM ledger_meta WHERE key = 'verified_head'").fetchone() is not None


def growth(runs: int, sizes: list[int], only: set[str] | None, cache: str | None) -> None:
    """--growth: every read command at each size, interleaved across sizes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_scale

    if cache:
        bench_scale.CACHE = Path(cache).resolve()
    ledgers = bench_scale.build(sizes)
    chosen = {name: argv for name, argv in GROWTH_COMMANDS.items() if not only or name.split()[0] in only
              or name in only}
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        (work / "plan.yaml").write_text(GROWTH_PLAN)
        for path in ledgers.values():
            subprocess.run([PYTHON, "-m", "ledger", "--db", f"sqlite:///{path}", "cap", "list"],
                           capture_output=True, cwd=work)  # (a first open's upgrade, if any, not timed)
        before = load()
        walls = {name: {size: [] for size in ledgers} for name in chosen}
        cpus = {name: {size: [] for size in ledgers} for name in chosen}
        for _ in range(runs):
            for name, argv in chosen.items():
                for size, path in ledgers.items():
                    if "--since-checkpoint" in argv and not verified(path):
                        continue
                    wall, cpu = timed([PYTHON, "-m", "ledger", "--db", f"sqlite:///{path}", *argv], work)
                    walls[name][size].append(wall)
                    cpus[name][size].append(cpu)
                    print(f"    {name} at {size:,}: {wall:.3f} s wall, {cpu:.3f} s CPU", file=sys.stderr, flush=True)
    print(f"{runs} fresh processes per command and size, interleaved; load average {before} before, "
          f"{load()} after (1, 5, 15 min) on {os.cpu_count()} cores")
    print(f"  {'command':32} " + " ".join(f"{f'{size:,} wall/CPU s':>22}" for size in ledgers)
          + "   10k/100k   1M/10k  targets")
    for name in chosen:
        wall = {size: statistics.median(found) for size, found in walls[name].items() if found}
        cpu = {size: statistics.median(found) for size, found in cpus[name].items() if found}
        cells = " ".join(f"{f'{wall[size]:.3f} / {cpu[size]:.3f}':>22}" if size in wall else f"{'-':>22}"
                         for size in ledgers)
        small = wall[10_000] / wall[100_000] if {10_000, 100_000} <= wall.keys() else None
        large = wall[1_000_000] / wall[10_000] if {10_000, 1_000_000} <= wall.keys() else None
        verdicts = []
        if small is not None:
            verdicts.append(f"10k<=1.2x 100k {'met' if small <= 1.2 else 'MISSED'}")
        if large is not None and name.startswith(FLAT):
            verdicts.append(f"flat to 1M (<=1.5x) {'met' if large <= 1.5 else 'MISSED'}")
        ratio = (f"{small:9.2f}x" if small is not None else f"{'-':>10}") + \
            (f" {large:8.2f}x" if large is not None else f" {'-':>9}")
        print(f"  {name:32} {cells} {ratio}  {'; '.join(verdicts)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--growth", action="store_true", help="every read command at 10k, 100k and 1M instead")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="--growth: the ledgers' sizes")
    parser.add_argument("--only", default=None, help="--growth: comma-separated commands (`subset`: both)")
    parser.add_argument("--cache", default=None, help="--growth: the directory of bench_scale's ledgers")
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(ROOT / "ledger", quiet=1)  # (as an installed package has its bytecode)
    if args.growth:
        growth(args.runs, [int(size) for size in args.sizes.split(",")],
               set(args.only.split(",")) if args.only else None, args.cache)
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
