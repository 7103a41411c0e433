"""Benchmark of the accounting engine on a large ledger (a script, not a test).

    .venv/bin/python benchmarks/bench_engine.py [--releases 100000] [--variables 100]

A seeded ledger: 100 variables, 100,000 releases each reading 1 to 6 variables,
each with one pure-epsilon guarantee drawn from a few exact values; about one
release in five also reads one of ten public variables that it does not
protect (released exactly, so it costs ∞ on that variable). Subsets are drawn
from the 90 confidential variables, so their totals are finite and the
reference loop does all its work. It prints:

(a) the time to build the release-by-variable table (Tan, Table 1, with the
    whole-dataset column and the total row) with `LedgerIndex`: construction,
    `.table()`, and their sum; beside a baseline in the same run, a plain
    per-release Python loop calling `release_cost` for every release and every
    single variable plus the whole dataset, then composing the totals;
(b) the median time of the loss on a random 5-variable subset with
    `LedgerIndex.subset_cost`, beside `ledger_cost` (the reference loop) on the
    same subsets.

Both answers are checked to agree exactly before anything is reported.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.accounting.spend import compose  # noqa: E402
from ledger.accounting.cost_rule import ledger_cost, release_cost  # noqa: E402
from ledger.accounting.ledger_index import LedgerIndex  # noqa: E402
from ledger.core.records import Guarantee, Mechanism, Notion, Release  # noqa: E402

TABLE_TARGET_S = 2.0
SUBSET_TARGET_MS = 20.0
EPSILONS = (Fraction(1, 10), Fraction(1, 4), Fraction(1, 2), Fraction(1))
PARTIAL_SHARE = 0.2  # releases also reading a public variable they do not protect
PUBLIC_VARIABLES = 10


def make_ledger(n_variables: int, n_releases: int, seed: int) -> tuple[list[str], list[Release]]:
    rng = random.Random(seed)
    variables = [f"v{k:03d}" for k in range(n_variables)]
    mechanism = Mechanism("laplace")
    releases = []
    confidential, public = variables[:-PUBLIC_VARIABLES], variables[-PUBLIC_VARIABLES:]
    for i in range(n_releases):
        protects = frozenset(rng.sample(confidential, rng.randint(1, 5)))
        reads = protects
        if rng.random() < PARTIAL_SHARE:
            reads = protects | {rng.choice(public)}
        guarantee = Guarantee(protects, Notion.PURE, epsilon=rng.choice(EPSILONS))
        releases.append(Release(id=f"r{i:06d}", dataset="bench", reads=reads, mechanism=mechanism,
                                guarantees=(guarantee,)))
    return variables, releases


def baseline_table(variables, releases):
    """Release by release, variable by variable: the rules as written (cost_rule.release_cost)."""
    singletons = [frozenset({v}) for v in variables]
    everything = frozenset(variables)
    cells = [[release_cost(r, u) for u in singletons] for r in releases]
    whole = [release_cost(r, everything) for r in releases]
    totals = [compose(row[j] for row in cells) for j in range(len(variables))]
    return cells, whole, totals, compose(whole)


def fast_table(variables, releases):
    start = time.perf_counter()
    index = LedgerIndex(variables, releases)
    built = time.perf_counter()
    table = index.table("bench")
    done = time.perf_counter()
    return index, table, built - start, done - built


def line(label: str, value: str, note: str = "") -> None:
    print(f"{label:<70} {value:>10}   {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=100)
    parser.add_argument("--releases", type=int, default=100_000)
    parser.add_argument("--baseline-slice", type=int, default=10_000,
                        help="releases the per-release baseline table is timed on (scaled linearly)")
    parser.add_argument("--subsets", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="LedgerIndex table runs; the best is reported")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()

    variables, releases = make_ledger(args.variables, args.releases, args.seed)
    print(f"ledger: {args.variables} variables, {args.releases:,} releases reading 1-6 variables, "
          f"pure epsilon in {{{', '.join(map(str, EPSILONS))}}}, ~{PARTIAL_SHARE:.0%} also reading a public variable they do not protect; "
          f"seed {args.seed}; {os.cpu_count()} CPU(s), load average "
          f"{os.getloadavg()[0]:.1f} at start")
    print()

    # (a) the release-by-variable table ------------------------------------
    runs = [fast_table(variables, releases) for _ in range(args.repeat)]
    index, table, t_build, t_table = min(runs, key=lambda run: run[2] + run[3])
    t_fast = t_build + t_table
    print(f"(a) release-by-variable table (Tan Table 1: cells, whole-dataset column, total row); "
          f"LedgerIndex: best of {args.repeat} runs")
    line("  LedgerIndex construction", f"{t_build:.3f} s")
    line("  LedgerIndex.table()", f"{t_table:.3f} s")
    line(f"  LedgerIndex construction + table, {args.releases:,} releases", f"{t_fast:.3f} s",
         f"target < {TABLE_TARGET_S:g} s: {'OK' if t_fast < TABLE_TARGET_S else 'MISSED'}")

    n_slice = min(args.baseline_slice, args.releases)
    part = releases[:n_slice]
    start = time.perf_counter()
    cells, whole, totals, total_whole = baseline_table(variables, part)
    t_base = time.perf_counter() - start
    scaled = t_base * args.releases / n_slice
    if n_slice < args.releases:
        line(f"  baseline loop (release_cost), MEASURED on {n_slice:,}-release slice", f"{t_base:.3f} s")
        line(f"  baseline loop, SCALED linearly to {args.releases:,} releases", f"~{scaled:.1f} s",
             f"LedgerIndex is ~{scaled / t_fast:.0f}x faster")
    else:
        line(f"  baseline loop (release_cost), {args.releases:,} releases", f"{t_base:.3f} s",
             f"LedgerIndex is ~{t_base / t_fast:.0f}x faster")

    # the two answers agree: every cell and total of the slice, and totals of the whole ledger
    _, slice_table, _, _ = fast_table(variables, part)
    for i in range(n_slice):
        assert [slice_table.cell(i, j) for j in range(len(variables))] == cells[i], part[i].id
        assert slice_table.row_dataset_wide(i) == whole[i], part[i].id
    assert list(slice_table.total) == totals
    assert slice_table.total_dataset_wide == total_whole
    check_columns = random.Random(args.seed + 1).sample(range(len(variables)), 3)
    for j in check_columns:
        assert table.total[j] == ledger_cost(releases, [], {variables[j]}), variables[j]
    assert table.total_dataset_wide == ledger_cost(releases, [], variables)
    print(f"  check: slice table equal cell by cell and in totals; full-ledger totals of "
          f"{', '.join(variables[j] for j in check_columns)} and the whole dataset equal ledger_cost")
    print()

    # (b) the loss on a random 5-variable subset ----------------------------
    rng = random.Random(args.seed + 2)
    subsets = [frozenset(rng.sample(variables[:-PUBLIC_VARIABLES], 5)) for _ in range(args.subsets)]
    fast_times, reference_times = [], []
    for subset in subsets:
        start = time.perf_counter()
        fast = index.subset_cost(subset).spend
        fast_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        reference = ledger_cost(releases, [], subset)
        reference_times.append(time.perf_counter() - start)
        assert fast == reference, sorted(subset)
        assert not fast.unbounded, sorted(subset)
    fast_ms = statistics.median(fast_times) * 1000
    reference_ms = statistics.median(reference_times) * 1000
    print(f"(b) loss on a random 5-variable subset, median of {args.subsets} subsets")
    line("  LedgerIndex.subset_cost", f"{fast_ms:.2f} ms",
         f"target < {SUBSET_TARGET_MS:g} ms: {'OK' if fast_ms < SUBSET_TARGET_MS else 'MISSED'}")
    line("  ledger_cost (reference loop)", f"{reference_ms:.1f} ms",
         f"LedgerIndex is ~{reference_ms / fast_ms:.0f}x faster")
    print(f"  check: all {args.subsets} subsets equal")


if __name__ == "__main__":
    main()
