"""Benchmark: Tan's Table 1 through its one computation, beside a baseline in the same run.

    .venv/bin/python benchmarks/bench_table.py [--runs 5] [--sizes 10000] [--cache DIR] [--baseline REF]
                                               [--ledger PATH ...]

Every reader of Table 1: `table` (the text, `--all`, `--json`), the API's `Ledger.table()` and
`report --format md`, on the demo ledger (`privacy-ledger demo`: three releases), on
bench_scale's ledgers of `--sizes` releases (built once, cached in --cache) and on each
--ledger (such as bench_report's, with families), each run --runs times in fresh processes,
interleaved with REF's code (default: the merge base with main) on a copy of the same ledger as
REF reads it, so both are measured under the same load. Printed per reader and ledger: the
median wall seconds now and REF's, and their ratio (target: at most 1, within noise).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402  (the ledgers, fresh-process runs and REF's copies)
from baseline import baseline_package  # noqa: E402

PYTHON = sys.executable
API = "import sys, ledger; ledger.open(sys.argv[1]).table()"


def readers(url: str, out: Path) -> dict[str, list[str]]:
    cli = [PYTHON, "-m", "ledger", "--db", url]
    return {"table": [*cli, "table"], "table --all": [*cli, "table", "--all"], "table --json": [*cli, "table", "--json"],
            "Ledger.table()": [PYTHON, "-c", API, url], "report md": [*cli, "report", "--format", "md", "--out", str(out)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="10000", help="bench_scale ledgers (comma-separated; empty: demo only)")
    parser.add_argument("--cache", default=None, help="the directory of bench_scale's ledgers")
    parser.add_argument("--baseline", default=None, help="git ref of the old code (default: merge base with main)")
    parser.add_argument("--ledger", action="append", default=[], help="another ledger file to read (repeatable)")
    args = parser.parse_args()
    if args.cache:
        bench_scale.CACHE = Path(args.cache).resolve()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    ref = args.baseline or subprocess.run(["git", "-C", str(bench_scale.ROOT), "merge-base", "HEAD", "main"],
                                          check=True, capture_output=True, text=True).stdout.strip()
    ref_root = baseline_package(ref, bench_scale.CACHE)
    work = Path(tempfile.mkdtemp(prefix="bench-table-"))
    subprocess.run([PYTHON, "-m", "ledger", "demo"], cwd=work, check=True, capture_output=True)
    ledgers = {"demo": work / "ledger.db", **{f"{size:,}": path for size, path in bench_scale.build(sizes).items()},
               **{Path(path).stem[:8]: Path(path) for path in args.ledger}}
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="")
    old_env = dict(env, PYTHONPATH=str(ref_root))
    for root in (bench_scale.ROOT, ref_root):
        subprocess.run([PYTHON, "-m", "compileall", "-q", str(root / "ledger")], capture_output=True)
    jobs = []
    for name, path in ledgers.items():
        old_path = bench_scale.baseline_copy(path, ref_root)
        new, old = readers(f"sqlite:///{path}", work / "now.md"), readers(f"sqlite:///{old_path}", work / "ref.md")
        jobs += [(name, reader, new[reader], old[reader]) for reader in new]
    walls: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(args.runs):  # interleaved: each run of each reader now, then REF's, then the next
        for name, reader, new_argv, old_argv in jobs:
            for side, argv, side_env in (("now", new_argv, env), ("ref", old_argv, old_env)):
                wall, _, code = bench_scale.run(argv, env=side_env, cwd=work)
                if code != 0:
                    raise SystemExit(f"{side} {reader} on {name}: exit {code}")
                walls.setdefault((name, reader, side), []).append(wall)
    load = os.getloadavg()
    print(f"REF {ref[:12]}; {args.runs} fresh-process runs each, interleaved; load average {load[0]:.1f}, "
          f"{load[1]:.1f}, {load[2]:.1f}")
    print(f"{'ledger':>8}  {'reader':<16} {'now: s':>8} {'REF: s':>8} {'ratio':>6}")
    for name, reader, _, _ in jobs:
        now, then = (statistics.median(walls[name, reader, side]) for side in ("now", "ref"))
        print(f"{name:>8}  {reader:<16} {now:8.3f} {then:8.3f} {now / then:6.2f}")


if __name__ == "__main__":
    main()
