"""Benchmark: budget-checked recording and the pre-release check.

Prints, each beside a baseline measured in the same run:
  (a) recording 10,000 releases one by one into a SQLite file, each checked
      against 20 caps (running totals) -- total time and median per record;
      baseline: the same checks re-summing the full history for every record;
  (b) the median latency of `check` for one planned release against a ledger
      holding 100,000 releases; baseline: re-summing the full history.
Targets (2-core machine): 10,000 checked records < 10 s; one check < 20 ms.

Run: .venv/bin/python benchmarks/bench_budget.py [--records 10000] [--history 100000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from sqlmodel import Session

from ledger.accounting import cap_measure
from ledger.operations import transactions as operations
from ledger.store import audit_verify, cap_writes, configuration, dataset_writes, decoded_history, engines, release_writes, schema_migrations, session_state, sessions
from ledger.accounting.cost_rule import ledger_cost
from ledger.input.batch import check_batch
from ledger.input.datasets import build_caps, build_dataset
from ledger.input.documents import parse_document
from ledger.input.releases import build_releases
from ledger.input.snapshot import LedgerSnapshot

VARIABLES = [f"v{k:02d}" for k in range(100)]
EPSILONS = ["0.001", "0.002", "0.0005"]


def dataset_yaml(rng: random.Random) -> str:
    lines = ["dataset: bench", "variables:"] + [f"  - {{name: {v}}}" for v in VARIABLES] + ["caps:"]
    lines.append("  - {subset: all, epsilon: 100000, delta: 1e-9}")
    for k in range(19):  # half in rho, half in epsilon at a delta; large enough never to refuse
        members = rng.sample(VARIABLES, rng.randint(1, 4))
        bound = "rho: 100000" if k % 2 else "epsilon: 100000, delta: 1e-9"
        lines.append(f"  - {{name: cap{k:02d}, subset: [{', '.join(members)}], {bound}}}")
    return "\n".join(lines) + "\n"


def release_yaml(rng: random.Random, release_id: str) -> str:
    reads = rng.sample(VARIABLES, rng.randint(1, 6))
    mechanism = rng.choice([
        f"{{name: geometric, epsilon: {rng.choice(EPSILONS)}}}",
        f"{{name: laplace, epsilon: {rng.choice(EPSILONS)}}}",
        "{name: gaussian, sigma: 40, sensitivity: 1}",
    ])
    return f"dataset: bench\nreleases:\n  - {{id: {release_id}, reads: [{', '.join(reads)}], mechanism: {mechanism}}}\n"


def api_builder(text: str):
    """Records built in code, as a mechanism builds its own (no file to parse)."""
    document, errors = parse_document("bench.yaml", text)
    assert not errors, errors
    releases, families, errors = build_releases(document, LedgerSnapshot(datasets=DATASETS),
                                                recorded_by="bench", recorded_at=session_state.now())
    assert not errors, errors

    def build(snapshot):
        return releases, families, check_batch(releases, families, snapshot)

    return build


def builder(text: str):
    """What `privacy-ledger record FILE` does with the file's text: parse, validate, build."""

    def build(snapshot):
        document, errors = parse_document("bench.yaml", text)
        assert not errors, errors
        return build_releases(document, snapshot, recorded_by="bench", recorded_at=session_state.now())

    return build


DATASETS: dict = {}


def fresh_ledger(path: Path, rng: random.Random):
    engine = engines.make_engine(f"sqlite:///{path}")
    schema_migrations.ensure_schema(engine)
    document, _ = parse_document("bench-dataset.yaml", dataset_yaml(rng))
    dataset, errors = build_dataset(document)
    caps, cap_errors = build_caps(document, dataset)
    assert not errors and not cap_errors
    DATASETS[dataset.name] = dataset
    with sessions.write_session(engine) as session:
        dataset_writes.add_dataset(session, dataset, "bench")
        for cap in caps:
            cap_writes.set_cap(session, cap, "bench")
    return engine, caps


def resum_check(engine, caps, plan_text: str) -> list:
    """Baseline: what a peer tool does, re-summing the whole history for every check."""
    with Session(engine) as session:
        history = decoded_history.snapshot(session, "bench")
        snapshot = configuration.write_context(session)
        plan, _, errors = builder(plan_text)(snapshot)
        assert not errors
        everything = [*history.releases.values(), *plan]
        return [cap_measure.measure(cap, ledger_cost(everything, history.families.values(), cap.subset)) for cap in caps]


def bench_recording(records: int, baseline_records: int, workdir: Path) -> None:
    print(f"(a) record {records:,} releases one by one, each checked against 20 caps, into a SQLite file:")
    for label, make in (("records built in code (API) ", api_builder), ("release files (YAML, schema)", builder)):
        rng = random.Random(7)
        engine, caps = fresh_ledger(workdir / f"record-{make.__name__}.db", rng)
        builds = [make(release_yaml(rng, f"r{k}")) for k in range(records)]
        times = []
        start = time.perf_counter()
        for build in builds:
            t0 = time.perf_counter()
            operations.record(engine, build, "bench")
            times.append(time.perf_counter() - t0)
        total = time.perf_counter() - start
        print(f"    running totals, {label}: total {total:7.2f} s, median "
              f"{statistics.median(times) * 1000:5.2f} ms per record   [target < 10 s]")
    with Session(engine) as session:
        verification = audit_verify.verify(session)
    assert verification.ok, verification.problems[:3]

    # Baseline: the same records, each preceded by a check that re-sums the history.
    rng = random.Random(7)
    base_engine, base_caps = fresh_ledger(workdir / "baseline.db", rng)
    base_texts = [release_yaml(rng, f"r{k}") for k in range(baseline_records)]
    base_times = []
    start = time.perf_counter()
    for text in base_texts:
        t0 = time.perf_counter()
        resum_check(base_engine, base_caps, text)
        with sessions.write_session(base_engine) as session:
            releases, families, errors = builder(text)(configuration.write_context(session))
            release_writes.add_releases(session, releases, families, "bench")
        base_times.append(time.perf_counter() - t0)
    base_total = time.perf_counter() - start
    # history grows linearly, so the per-record cost grows linearly: the total is quadratic
    scaled = base_total * (records / baseline_records) ** 2
    print(f"    baseline re-sum, measured on the first {baseline_records:,} records: {base_total:7.2f} s (median "
          f"{statistics.median(base_times) * 1000:.2f} ms, last {base_times[-1] * 1000:.2f} ms); "
          f"scaled (quadratic) to {records:,}: ~{scaled:,.0f} s")
    print(f"    audit verify of the file-path ledger (recomputes every running total): ok, "
          f"{verification.events} events")


def bench_check(history: int, workdir: Path) -> None:
    rng = random.Random(11)
    engine, caps = fresh_ledger(workdir / "check.db", rng)
    chunk = 10_000
    for start in range(0, history, chunk):
        text = "dataset: bench\nreleases:\n" + "".join(
            release_yaml(rng, f"h{k}").split("releases:\n", 1)[1] for k in range(start, min(start + chunk, history))
        )
        operations.record(engine, builder(text), "bench")
    plans = [release_yaml(rng, f"plan{k}") for k in range(50)]
    fast = []
    for text in plans:
        t0 = time.perf_counter()
        checks = operations.check(engine, builder(text))
        fast.append(time.perf_counter() - t0)
    slow = []
    for text in plans[:5]:
        t0 = time.perf_counter()
        resum_check(engine, caps, text)
        slow.append(time.perf_counter() - t0)
    # the two agree on the figures they both compute
    text = plans[0]
    by_name = {c.cap.name: c.after for c in operations.check(engine, builder(text))}
    resummed = dict(zip((cap.name for cap in caps), resum_check(engine, caps, text)))
    for name, after in by_name.items():
        assert abs(float(after) - float(resummed[name])) < 1e-9, (name, after, resummed[name])
    del checks
    print(f"(b) check one planned release against {history:,} recorded releases:")
    print(f"    running totals : median {statistics.median(fast) * 1000:7.2f} ms over {len(fast)} plans"
          f"   [target < 20 ms]")
    print(f"    baseline re-sum: median {statistics.median(slow) * 1000:7.2f} ms over {len(slow)} plans")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--baseline-records", type=int, default=300)
    parser.add_argument("--history", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        bench_recording(args.records, args.baseline_records, workdir)
        bench_check(args.history, workdir)


if __name__ == "__main__":
    assert Fraction("0.001") * 3 == Fraction(3, 1000)
    main()
