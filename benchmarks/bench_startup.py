"""Benchmark: start-up of the command line.

    .venv/bin/python benchmarks/bench_startup.py [--runs 7] [--size 10000] [--importtime] [--baseline-code DIR]

Each command is a fresh process, run --runs times, interleaved with its baselines
(`python -c pass`, `python -c "import sqlalchemy"`, and the import floor of `check` and
`record`: one process importing every module of an installed package that a `check` of the same
plan imports, found by `python -X importtime` at any depth (`sqlmodel` and `sqlalchemy.orm` are
imported by the ledger's own modules, not by `import sqlalchemy`), the packages named in the
output; beside it the packages' top-level imports alone, as `import typer, sqlalchemy, ...`
runs them) so every figure is measured under the same load. Both floors run with the BLAS
thread settings the command line sets for itself (ledger.cli.app.THREAD_DEFAULTS), and run
as `check` and `record` run (ledger.cli.entry: without the cyclic collector, every object
frozen before the teardown), so a floor is what importing costs in such a process;
prints the median and the minimum wall seconds, and the median CPU seconds (user + system, less
sensitive to a loaded machine than wall time):

- `--help`, `--version` (target < 0.2 s);
- `check` of one plan and `record` of one release into a ledger of --size releases
  with 20 caps (target: the floor plus 0.15 s of work), the ledger built once by bench_scale
  and copied; each `record` records a new release (the ledger grows by --runs).

--baseline-code DIR also runs each privacy-ledger command with the `ledger` package of
another checkout (e.g. /work/main: `python -m ledger` run from DIR imports DIR's
package), beside this one, on a copy of the same ledger.

--importtime also prints, for `check`, the modules whose import took longest
(`python -X importtime`, cumulative microseconds).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

PYTHON = sys.executable


FRESH = dict(os.environ)
# the floors run as `check` and `record` do (ledger.cli.entry): without the cyclic collector
# while importing, their objects frozen at the end (out of the teardown's collections)
UNCOLLECTED = "import gc\ngc.disable()\n"
FROZEN = "gc.freeze()"


def timed(argv: list[str], cwd: Path = ROOT, env: dict | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of one fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                               env=FRESH if env is None else env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        print(f"  ! {' '.join(argv[-3:])}: exit {code}: {process.stderr.read().decode()[-300:]}", file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, code


def steward_here(url: str) -> None:
    """The person running the benchmark made a steward of the ledger (its admin, the builder
    `bench`, grants it), so `record` records instead of being refused for want of a role."""
    import getpass

    import ledger
    from ledger.store.identity import front_end

    engine = ledger.Ledger.opened(url).engine
    ledger.Ledger(url, engine, person=front_end("bench", "benchmark")).change_role(getpass.getuser(), "steward", True)


def plan(directory: Path, name: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text("dataset: bench\nreleases:\n"
                    f"  - {{id: {name}, reads: [v03, v17], mechanism: {{name: laplace, epsilon: 0.001}}}}\n")
    return path


def importtime(argv: list[str], top: int = 25) -> None:
    run = subprocess.run([PYTHON, "-X", "importtime", *argv], capture_output=True, text=True, cwd=ROOT, env=FRESH)
    rows = []
    for line in run.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)", line)
        if found:
            self_us, cumulative, indent, name = found.groups()
            rows.append((int(cumulative), int(self_us), len(indent) // 2, name))
    print(f"  -X importtime of {' '.join(argv[-2:])}: the {top} largest (cumulative ms / self ms)")
    for cumulative, self_us, depth, name in sorted(rows, reverse=True)[:top]:
        print(f"    {cumulative / 1000:7.1f} {self_us / 1000:6.1f}  {'  ' * depth}{name}")


def packages_imported(argv: list[str]) -> tuple[list[str], list[str]]:
    """The installed packages (outside the standard library and this checkout) a process imports
    at its top level, and every module of an installed package it imports, at any depth, in the
    order their imports finished."""
    import importlib.util
    import sysconfig

    run = subprocess.run([PYTHON, "-X", "importtime", *argv], capture_output=True, text=True, cwd=ROOT, env=FRESH)
    site = (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])
    installed: dict[str, bool] = {}
    found, modules = [], []
    for line in run.stderr.splitlines():
        name = re.match(r"import time:\s+\d+ \|\s+\d+ \| ( *)(\S+)$", line)
        if name is None:
            continue
        indent, module = name.groups()
        package = module.split(".")[0]
        if package.startswith("_"):
            continue
        if package not in installed:
            spec = importlib.util.find_spec(package)
            installed[package] = bool(spec is not None and spec.origin and spec.origin.startswith(site))
        if not installed[package]:
            continue
        modules.append(module)
        if not indent and package not in found:  # (top level: no indent)
            found.append(package)
    return found, modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--baseline-code", type=Path, help="another checkout whose `ledger` package to time too")
    args = parser.parse_args()
    import bench_scale

    # An installed package has its bytecode (pip compiles it); a checkout run with
    # PYTHONDONTWRITEBYTECODE set would compile every module in every process instead.
    import compileall

    compileall.compile_dir(ROOT / "ledger", quiet=1)
    source = bench_scale.build([args.size])[args.size]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        ledger = work / "ledger.db"
        shutil.copyfile(source, ledger)
        url = f"sqlite:///{ledger}"
        cli = [PYTHON, "-m", "ledger"]
        subprocess.run([*cli, "--db", url, "cap", "list"], capture_output=True, cwd=ROOT)  # upgrade, if any
        steward_here(url)
        check_plan = plan(work, "checked")
        needed, modules = packages_imported(["-m", "ledger", "--db", url, "check", str(check_plan)])
        floor = f"the {len(modules)} modules of {', '.join(sorted({m.split('.')[0] for m in modules}))} (floor)"
        top_floor = f"import {', '.join(needed)} (their top-level imports alone)"
        commands: dict[str, object] = {
            "python -c pass (baseline)": [PYTHON, "-c", "pass"],
            'python -c "import sqlalchemy" (baseline)': [PYTHON, "-c", "import sqlalchemy"],
            floor: [PYTHON, "-c", (f"{UNCOLLECTED}import importlib\nfor name in {modules!r}:\n    try:\n"
                                 "        importlib.import_module(name)\n    except ImportError:\n"
                                 "        pass  # (an optional module the package tried: tried here too)\n" + FROZEN)],
            top_floor: [PYTHON, "-c", f"{UNCOLLECTED}import {', '.join(needed)}\n{FROZEN}"],
            "privacy-ledger --help": [*cli, "--help"],
            "privacy-ledger --version": [*cli, "--version"],
            f"check one plan ({args.size:,} releases, 20 caps)": [*cli, "--db", url, "check", str(check_plan)],
            f"record one release ({args.size:,} releases, 20 caps)":
                lambda k: [*cli, "--db", url, "record", str(plan(work, f"recorded{k}"))],
        }
        from ledger.cli.app import THREAD_DEFAULTS

        blas = {**FRESH, **THREAD_DEFAULTS}  # the floors' BLAS threads as the command line sets its own
        runs: dict[str, tuple[object, Path, dict | None]] = {
            name: (argv, ROOT, blas if name in (floor, top_floor) else None) for name, argv in commands.items()}
        if args.baseline_code is not None:
            other = work / "baseline.db"
            # the ledger as that code reads it: its schema version, the tables it does not know dropped
            # (a ledger of a newer schema is refused by older code, which would time a refusal)
            shutil.copyfile(bench_scale.baseline_copy(source, args.baseline_code.resolve()), other)
            other_url = f"sqlite:///{other}"
            subprocess.run([*cli, "--db", other_url, "cap", "list"], capture_output=True, cwd=args.baseline_code)
            steward_here(other_url)
            code = args.baseline_code
            runs.update({
                f"  the same, {code}'s code: --help": ([*cli, "--help"], code, None),
                f"  the same, {code}'s code: --version": ([*cli, "--version"], code, None),
                f"  the same, {code}'s code: check": ([*cli, "--db", other_url, "check", str(check_plan)], code, None),
                f"  the same, {code}'s code: record":
                    (lambda k: [*cli, "--db", other_url, "record", str(plan(work, f"base{k}"))], code,
                     None),
            })
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        for k in range(args.runs):
            for name, (argv, cwd, env) in runs.items():
                wall, cpu, _ = timed(argv(k) if callable(argv) else argv, cwd, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        print(f"start-up, {args.runs} runs each, interleaved; load average {os.getloadavg()[0]:.2f} "
              f"{os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min) on {os.cpu_count()} cores")
        print(f"  {'command':62} {'median s':>9} {'min s':>7} {'CPU s':>7}")
        for name in runs:
            print(f"  {name:62} {statistics.median(walls[name]):9.3f} {min(walls[name]):7.3f} "
                  f"{statistics.median(cpus[name]):7.3f}")
        print(f"  targets: over the floor (the {len(modules)} modules of installed packages a `check` imports), "
              "median wall / CPU; met when at most 0.15 s; [over the top-level imports alone]")
        for name in list(commands)[6:8]:  # check, record
            wall = statistics.median(walls[name]) - statistics.median(walls[floor])
            cpu = statistics.median(cpus[name]) - statistics.median(cpus[floor])
            top_wall = statistics.median(walls[name]) - statistics.median(walls[top_floor])
            top_cpu = statistics.median(cpus[name]) - statistics.median(cpus[top_floor])
            print(f"    {name:60} +{wall:.3f} s / +{cpu:.3f} s  {'met' if max(wall, cpu) <= 0.15 else 'MISSED'}  "
                  f"[+{top_wall:.3f} s / +{top_cpu:.3f} s]")
        help_wall, help_cpu = statistics.median(walls["privacy-ledger --help"]), statistics.median(
            cpus["privacy-ledger --help"])
        print(f"    {'--help':60} {help_wall:.3f} s / {help_cpu:.3f} s  "
              f"{'met' if max(help_wall, help_cpu) <= 0.2 else 'MISSED'} (target 0.2 s; min wall "
              f"{min(walls['privacy-ledger --help']):.3f} s)")
        if args.importtime:
            importtime(["-m", "ledger", "--db", url, "check", str(check_plan)])


if __name__ == "__main__":
    main()
