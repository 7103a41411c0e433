"""Benchmark: the full audit at the speed of hashing.

    .venv/bin/python benchmarks/bench_verify.py [--sizes 10000,100000] [--runs 3] [--cache DIR]

On the cached ledgers of bench_scale.py (built there when missing), in one process and
alternately, so both meet the same load:

  (a) `audit_verify.verify`: the whole `audit verify` (the hash chain; every release, dataset and
      family row against its latest event; every accounting row and running total recomputed);
  (b) the floor: the same events read in seq order, a chunk at a time, and their canonical
      bytes hashed with hashlib, each link checked (`audit_verify.ChainWalk` alone);
  (c) the floor under the floor: hashlib over the same canonical bytes already in memory
      (timed apart from (b), a chunk of events at a time: memory bounded at any size).

Printed per size: the medians, the ratios (a)/(b) and (a)/(c) (target (a) within 5x of
hashing), and the peak resident memory of `privacy-ledger audit verify` run once as a process
of its own (the memory the command needs, not this benchmark's lists).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402  (the cached ledgers)

from sqlmodel import Session  # noqa: E402

from ledger.store import audit_verify, engines  # noqa: E402


def verify(engine) -> float:
    started = time.perf_counter()
    with Session(engine) as session:
        result = audit_verify.verify(session)
    assert result.ok, result.problems[:3]
    return time.perf_counter() - started


def walk(engine) -> tuple[float, float, int]:
    """(b) and (c) in one pass: the chain alone (read every event, check its hash and link), and
    hashlib over the canonical bytes of its events, CHUNK events at a time in memory, so memory
    stays bounded at any size. Returns (walk seconds, hashing seconds, events hashed)."""
    hashing, count, previous, texts = 0.0, 0, b"0" * 64, []
    started = time.perf_counter()
    with Session(engine) as session:
        problems: list[str] = []
        chain = audit_verify.ChainWalk(session.connection(), problems)
        for row, canonical in chain:
            if canonical:
                texts.append(canonical_bytes(row))
            if len(texts) >= CHUNK:
                seconds, previous = hash_in_memory(texts, previous)
                hashing, count, texts = hashing + seconds, count + len(texts), []
        seconds, previous = hash_in_memory(texts, previous)
        hashing, count = hashing + seconds, count + len(texts)
    assert not problems and count == chain.count, problems[:3]
    return time.perf_counter() - started - hashing, hashing, count


CHUNK = 10_000  # events whose bytes are held at once for (c)


def canonical_bytes(row) -> bytes:
    """The bytes the chain hashes for `row` (codec.event_hash's text after the previous hash)."""
    dump = json.dumps
    return (f'{{"actor":{dump(row.actor, ensure_ascii=False)},"at":{dump(row.at)},"kind":{dump(row.kind)},'
            f'"payload":'.encode() + row.payload +
            f',"seq":{row.seq},"subject":{dump(row.subject, ensure_ascii=False)}}}'.encode())


def hash_in_memory(texts: list[bytes], previous: bytes) -> tuple[float, bytes]:
    """(seconds, the last hash): the chain's hashes over `texts`, each over the previous one and the event's bytes."""
    started = time.perf_counter()
    for text in texts:
        previous = hashlib.sha256(previous + text).hexdigest().encode()
    return time.perf_counter() - started, previous


def command_peak_mb(path: Path) -> float:
    """The peak resident memory of `privacy-ledger audit verify` on `path`, a fresh process."""
    process = subprocess.Popen([sys.executable, "-m", "ledger", "--db", f"sqlite:///{path}", "audit", "verify"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", default=None, help="the directory of the ledgers (default: bench_scale's cache)")
    args = parser.parse_args()
    if args.cache:
        bench_scale.CACHE = Path(args.cache).resolve()
    sizes = [int(size) for size in args.sizes.split(",")]
    paths = bench_scale.build(sizes)
    print(f"`audit verify` beside hashing its events (load {os.getloadavg()[0]:.1f}, medians of {args.runs}):")
    for size in sizes:
        engine = engines.make_engine(f"sqlite:///{paths[size]}")
        full, chain, memory = [], [], []
        for _ in range(args.runs):
            full.append(verify(engine))
            walked, hashed, events = walk(engine)
            chain.append(walked)
            memory.append(hashed)
        peak = command_peak_mb(paths[size])
        a, b, c = (statistics.median(x) for x in (full, chain, memory))
        print(f"  {size:>9,} releases, {events:,} events: verify {a:6.2f} s | chain walk {b:6.2f} s "
              f"({a / b:4.1f}x) | hashlib in memory {c:5.2f} s ({a / c:5.1f}x; target 5x) | `audit verify` peak {peak:,.0f} MB "
              f"| {a / events * 1e6:.0f} us per event")
        engine.dispose()


if __name__ == "__main__":
    main()
