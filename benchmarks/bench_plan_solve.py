"""Benchmark: solving a plan (`Ledger.solve`, operations/solve.py) beside `check` of the same plan.

1,000 planned releases (Laplace, geometric, Gaussian, discrete Gaussian, by weight) reading 1-3
of 100 variables, against 20 caps: the whole dataset in rho, 13 rho caps, 3 running-figure
caps and 3 Rényi caps at a delta, over a ledger already holding 200 releases. Prints the time
of the solve (which ends with one `check` of its own file) and of one `check` of the solved
file, in one run. Target (2-core machine): the solve under 2 s.

Run: .venv/bin/python benchmarks/bench_plan_solve.py [--releases 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import importlib
import random
import time

import ledger

VARIABLES = [f"v{k:02d}" for k in range(100)]
FAMILIES = ["laplace", "geometric", "gaussian", "discrete-gaussian"]


def dataset(rng: random.Random) -> dict:
    caps = [{"name": "everything", "subset": "all", "rho": 50}]
    for k in range(19):
        bound = {"rho": rng.choice([1, 2, 5])} if k < 13 else {"epsilon": rng.choice([5, 10]), "delta": "1e-9",
                                                                 "filter": "running" if k < 16 else "renyi"}
        caps.append({"name": f"cap{k:02d}", "subset": sorted(rng.sample(VARIABLES, rng.randint(1, 4))), **bound})
    return {"dataset": "bench", "delta": "1e-9", "variables": [{"name": v} for v in VARIABLES], "caps": caps}


def history(rng: random.Random, count: int) -> dict:
    return {"dataset": "bench", "releases": [
        {"id": f"old{k}", "reads": rng.sample(VARIABLES, rng.randint(1, 3)),
         "mechanism": {"name": "laplace", "epsilon": "0.001"}} for k in range(count)]}


def plan(rng: random.Random, count: int) -> dict:
    return {"dataset": "bench", "releases": [
        {"id": f"r{k:04d}", "reads": rng.sample(VARIABLES, rng.randint(1, 3)), "mechanism": rng.choice(FAMILIES),
         "sensitivity": rng.choice([1, 2, 10]), "weight": rng.randint(1, 10)} for k in range(count)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for module in ("pandas", "ledger.operations.solve"):  # imported before the clock: the solve is measured
        importlib.import_module(module)
    book = ledger.open("sqlite://")
    book.add_dataset(dataset(rng))
    book.record(history(rng, 200))
    planned = plan(rng, args.releases)

    started = time.perf_counter()
    frame = book.solve(planned)
    solved = time.perf_counter() - started
    started = time.perf_counter()
    checked = book.check(frame.attrs["release_file"])
    check_time = time.perf_counter() - started

    binding = frame["binding_cap"].value_counts()
    print(f"plan: {args.releases} releases over {len(VARIABLES)} variables, 20 caps, 200 releases recorded")
    print(f"solve: {solved:.2f} s (target < 2 s; includes one check of the solved file)")
    print(f"check of the solved file: {check_time:.2f} s, every cap holds: {checked.ok}")
    print(f"binding caps: {len(binding)} ({', '.join(f'{name} {n}' for name, n in binding.head(5).items())}, ...)")


if __name__ == "__main__":
    main()
