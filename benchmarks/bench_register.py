"""Benchmark: the complete register of a summarised report.

    .venv/bin/python benchmarks/bench_register.py [--sizes 100000,1000000] [--baseline main] [--runs 2]

Past the summary threshold `report` writes the complete register beside the page
(`cli/report_register.large_register_csv`, in a forked helper while the page is built); at a
million releases that writer set the command's wall time. This times the writer
alone, on the bench ledgers of bench_scale.py (benchmarks/.cache/ledger-N.db, used
read-only), this tree's code beside REF's (`--baseline`, default main: its `ledger`
package extracted under the cache), each in a fresh process, alternated: CPU and
wall seconds of the writer (the accounting rows it starts from are read first and
not counted), the peak resident memory of the process, and the SHA-256 of the CSV,
which must be the same for both (the register is byte-identical). The load average
is printed beside each pair. The cyclic garbage collector is off, as in the report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from baseline import baseline_package  # noqa: E402

CACHE = ROOT / "benchmarks" / ".cache"

CHILD = r"""
import gc, hashlib, json, resource, sys, time
gc.disable()
import ledger
assert ledger.__file__.startswith(sys.path[1]), (ledger.__file__, sys.path[:2])  # the code asked for
from ledger.operations import choices; from ledger.store import configuration, engines, sessions
from ledger.operations.report_inputs import ChainStatus
import ledger.api, ledger.cli.report as command
engine = engines.make_engine(sys.argv[1])
if hasattr(ledger.api.Ledger, "report_reading"):  # the choice and the page in one read (Ledger.report_reading)
    from ledger.api import Ledger
    from ledger.cli.report_register import large_register_csv
    source = Ledger("ledger", engine)
    gather = lambda dataset, delta, chain: command.gather_large(source, dataset, delta, chain=chain).reading
elif hasattr(ledger.api.Ledger, "large_report"):  # the report read through the façade (ledger.api.Ledger)
    from ledger.api import Ledger
    from ledger.cli.report_register import large_register_csv
    source = Ledger("ledger", engine)
    gather = lambda dataset, delta, chain: command.gather_large(source, dataset, delta, chain=chain)
else:  # a baseline whose command line read the store itself
    from ledger.cli.large_report import gather_large
    from ledger.cli.report_register import large_register_csv
    source = engine
    gather = lambda dataset, delta, chain: gather_large(session, dataset, delta, chain=chain)
with sessions.read_session(engine) as session:
    light = configuration.write_context(session)
    dataset = next(iter(light.datasets.values()))
    large = gather(dataset, choices.parse_delta(None, dataset), ChainStatus(True, 1, "head", ()))
digest = hashlib.sha256()
cpu, wall = time.process_time(), time.perf_counter()
for part in large_register_csv(source, large):
    digest.update(part.encode("utf-8"))
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "sha256": digest.hexdigest()}))
"""


def measure(code_root: Path, ledger: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code_root))
    # run from the code's own directory: `python -c` puts the working directory first on sys.path
    done = subprocess.run([sys.executable, "-c", CHILD, f"sqlite:///{ledger}"], env=env, check=True,
                          capture_output=True, text=True, cwd=code_root)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    old_root = baseline_package(args.baseline)
    print(f"{'size':>9}  {'load':>5}  {'now: cpu s':>10} {'wall s':>7} {'MB':>6}   "
          f"{'baseline: cpu s':>15} {'wall s':>7} {'MB':>6}  same CSV")
    for size in (int(s) for s in args.sizes.split(",")):
        ledger = CACHE / f"ledger-{size}.db"
        if not ledger.exists():
            print(f"{size:>9,}  (no {ledger.name}: copy it from the bench ledgers)")
            continue
        new, old = [], []
        for _ in range(args.runs):  # alternated, so both see the same load
            new.append(measure(ROOT, ledger))
            old.append(measure(old_root, ledger))
            load = os.getloadavg()[0]
            same = all(r["sha256"] == old[0]["sha256"] for r in new + old)
            print(f"{size:>9,}  {load:5.1f}  {new[-1]['cpu']:10.2f} {new[-1]['wall']:7.2f} {new[-1]['mb']:6.0f}   "
                  f"{old[-1]['cpu']:15.2f} {old[-1]['wall']:7.2f} {old[-1]['mb']:6.0f}  {'yes' if same else 'NO'}",
                  flush=True)
        med = statistics.median
        print(f"{size:>9,}  median  {med(r['cpu'] for r in new):10.2f} {med(r['wall'] for r in new):7.2f} "
              f"{'':6}   {med(r['cpu'] for r in old):15.2f} {med(r['wall'] for r in old):7.2f}")


if __name__ == "__main__":
    main()
