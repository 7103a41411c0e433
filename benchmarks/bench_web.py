"""Benchmark: the web app's pages on a large ledger.

    .venv/bin/python benchmarks/bench_web.py [--releases 10000] [--variables 200] [--repeat 5]
                                             [--profile PAGE]

On bench_report.py's seeded ledger (built once under benchmarks/.cache/: 200 variables, releases
of every status, families, post-processing, 20 caps), each page is requested through Starlette's
TestClient (the whole app: routing, the façade, the templates) once (the first request, after the
pages before it) and then `--repeat` times, its median wall time printed beside the baseline
measured in the same run: the façade calls the command line makes for the same figures (`table`,
`subset`, `pairs`, `cap list`), in this process, each time on a newly opened ledger (a command is a
process of its own, its read cache empty), also a median. Targets: a page in under 0.3 s at 10k
releases and under 2 s at 1M. `--profile PAGE` (a path, e.g. "/dashboard?dataset=survey") prints where one request's time goes (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import cached_report_ledger, load_average  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)  # (TestClient's httpx notice)

TARGET_S = {10_000: 0.3, 1_000_000: 2.0}
PICKED = ("v001", "v002", "v017")


def pages(book) -> list[tuple[str, str, object]]:
    """(page, its path, the façade calls of the commands that print its figures, on a ledger given:
    a fresh one each time, as each command is a process of its own)."""
    subset = "&".join(f"v={v}" for v in PICKED)
    first = book.table("survey").index[0]
    return [
        ("dashboard", "/dashboard?dataset=survey",
         lambda book: (book.subset(["protected"], dataset="survey"), book.table("survey"),
                       book.pairs("survey"), book.caps("survey"))),
        ("table", "/table?dataset=survey", lambda book: book.table("survey")),
        ("table sorted", "/table?dataset=survey&sort=v001&order=desc", lambda book: book.table("survey")),
        ("table by variable", "/table?dataset=survey&layout=variables", lambda book: book.table("survey")),
        ("subset", f"/subset?dataset=survey&{subset}",
         lambda book: (book.subset(PICKED, dataset="survey"), book.headroom(PICKED, dataset="survey"))),
        ("release", f"/release?id={first}", lambda book: (book.release(first), book.events(first))),
        ("dashboard as of", "/dashboard?dataset=survey&as_of=2025-01-01",
         lambda book: (book.subset(["protected"], dataset="survey", as_of="2025-01-01"),
                       book.table("survey", as_of="2025-01-01"), book.pairs("survey", as_of="2025-01-01"),
                       book.caps("survey", as_of="2025-01-01"))),
    ]


def median_seconds(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def profile(app, path: str) -> None:
    """Where one request for `path` spends its time (cProfile, in the thread that serves it)."""
    from starlette.testclient import TestClient

    profiler = cProfile.Profile()

    async def profiled(scope, receive, send):
        profiler.enable()
        try:
            await app(scope, receive, send)
        finally:
            profiler.disable()

    client = TestClient(profiled, base_url="http://127.0.0.1:8080")
    client.get(path)  # (warm: templates compiled, modules imported)
    profiler.clear() if hasattr(profiler, "clear") else None
    profiler = cProfile.Profile()
    client.get(path)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", type=int, default=10_000)
    parser.add_argument("--variables", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args()

    from starlette.testclient import TestClient

    from ledger import api
    from ledger.web.app import create_app

    url = f"sqlite:///{cached_report_ledger(args.variables, args.releases)}"
    app = create_app(url, local_person="board")
    if args.profile:
        profile(app, args.profile)
        return
    client = TestClient(app, base_url="http://127.0.0.1:8080")
    book = api.open(url)
    target = TARGET_S.get(args.releases)
    print(f"{args.releases:,} releases x {args.variables} variables; median of {args.repeat}; {load_average()}")
    print(f"{'page':20s} {'first s':>8s} {'page s':>8s} {'baseline s':>11s} {'KB':>6s}  target")
    for name, path, baseline in pages(book):
        start = time.perf_counter()
        response = client.get(path)
        first = time.perf_counter() - start
        assert response.status_code == 200, (path, response.status_code)
        page = median_seconds(lambda path=path: client.get(path), args.repeat)
        base = median_seconds(lambda baseline=baseline: baseline(api.open(url)), args.repeat)
        verdict = "" if target is None else f"< {target} s: {'yes' if page < target else 'no'}"
        print(f"{name:20s} {first:8.3f} {page:8.3f} {base:11.3f} {len(response.content) // 1024:6d}  {verdict}",
              flush=True)


if __name__ == "__main__":
    main()
