"""Benchmark: the web app's pages on a large ledger.

    .venv/bin/python benchmarks/bench_web.py [--releases 10000] [--variables 200] [--repeat 5]
                                             [--profile PAGE] [--after-write [--baseline main]
                                             [--prebuild-every 1] [--settle 8]]

On bench_report.py's seeded ledger (built once under benchmarks/.cache/: 200 variables, releases
of every status, families, post-processing, 20 caps), each page is requested through Starlette's
TestClient (the whole app: routing, the façade, the templates) once (the first request, after the
pages before it) and then `--repeat` times, its median wall time printed beside the baseline
measured in the same run: the façade calls the command line makes for the same figures (`table`,
`subset`, `pairs`, `cap list`), in this process, each time on a newly opened ledger (a command is a
process of its own, its read cache empty), also a median. Targets: a page in under 0.3 s at 10k
releases and under 2 s at 1M. `--profile PAGE` (a path, e.g. "/dashboard?dataset=survey") prints where one request's time goes (cProfile).

`--after-write`: the first dashboard and table a viewer opens after a write from another process
(the command line's `record` of one release), `--settle` seconds after it returned, on a copy of
the ledger, served by: this code with its watcher (prebuilding every `--prebuild-every` seconds),
this code without it, and `--baseline`'s code (benchmarks/baseline.py); each server a process of
its own that opens both pages first (they are built), then sees the write; the three interleaved,
`--repeat` times, medians printed.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

warnings.filterwarnings("ignore", category=DeprecationWarning)  # (TestClient's httpx notice)

TARGET_S = {10_000: 0.3, 1_000_000: 2.0}
PICKED = ("v001", "v002", "v017")


def pages(book, dataset: str = "survey", picked: tuple[str, ...] = PICKED, as_of: bool = True
          ) -> list[tuple[str, str, object]]:
    """(page, its path, the façade calls of the commands that print its figures, on a ledger given:
    a fresh one each time, as each command is a process of its own; `table`'s is the call the
    command makes, `Ledger.table_figures` within its own bound on printed cells)."""
    from ledger.cli.figure_commands import TABLE_CELL_LIMIT, TABLE_LARGEST

    def table(book, **options):
        return book.table_figures(dataset, rows=TABLE_LARGEST, cells=TABLE_CELL_LIMIT, **options)

    subset = "&".join(f"v={v}" for v in picked)
    first = table(book).view.rows[0].release
    found = [
        ("dashboard", f"/dashboard?dataset={dataset}",
         lambda book: (book.subset(["protected"], dataset=dataset), table(book), book.pairs(dataset),
                       book.caps(dataset))),
        ("table", f"/table?dataset={dataset}", table),
        ("table sorted", f"/table?dataset={dataset}&sort={picked[0]}&order=desc", table),
        ("table by variable", f"/table?dataset={dataset}&layout=variables", table),
        ("subset", f"/subset?dataset={dataset}&{subset}",
         lambda book: (book.subset(picked, dataset=dataset), book.headroom(picked, dataset=dataset))),
        ("release", f"/release?id={first}", lambda book: (book.release(first), book.events(first))),
    ]
    if as_of:
        found.append(("dashboard as of", f"/dashboard?dataset={dataset}&as_of=2025-01-01",
                      lambda book: (book.subset(["protected"], dataset=dataset, as_of="2025-01-01"),
                                    table(book, as_of="2025-01-01"), book.pairs(dataset, as_of="2025-01-01"),
                                    book.caps(dataset, as_of="2025-01-01"))))
    return found


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


DASHBOARD, TABLE = "/dashboard?dataset=survey", "/table?dataset=survey"


def viewer(args) -> None:
    """(A server process of --after-write.) The app of the code under `args.code` over `args.url`,
    its lifespan run (the watcher, where the code has one): both pages opened, then one release
    recorded by the command line in a process of its own, then, `args.settle` s later, the seconds
    of the first dashboard and the first table, printed as JSON."""
    sys.path.insert(0, args.code)
    from starlette.testclient import TestClient

    from ledger.web.app import create_app

    assert Path(sys.modules["ledger"].__file__).is_relative_to(args.code), sys.modules["ledger"].__file__
    options = {}
    if "prebuild_every" in inspect.signature(create_app).parameters:
        options["prebuild_every"] = args.prebuild_every or None
    app = create_app(args.url, local_person="board", **options)
    with TestClient(app, base_url="http://127.0.0.1:8080") as client:
        for path in (DASHBOARD, TABLE):
            assert client.get(path).status_code == 200, path
        record_one(args.url)
        time.sleep(args.settle)
        seconds = []
        for path in (DASHBOARD, TABLE):
            start = time.perf_counter()
            assert client.get(path).status_code == 200, path
            seconds.append(time.perf_counter() - start)
    print(json.dumps(seconds))


def record_one(url: str) -> None:
    """`privacy-ledger record` of one release (a post-processing one: the ledger's caps admit no
    new charge on a variable), this checkout's command line in a process of its own."""
    name = f"web-{os.getpid()}-{time.time_ns()}"
    with tempfile.TemporaryDirectory() as directory:
        plan = Path(directory) / "one.yaml"
        plan.write_text(json.dumps({"dataset": "survey", "releases": [
            {"id": name, "reads": [], "mechanism": {"name": "post-processing"}, "derived_from": ["r00001"]}]}))
        run = subprocess.run([sys.executable, "-m", "ledger", "--db", url, "record", str(plan)],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode == 0, run.stdout + run.stderr


def writable_copy(path: Path, directory: Path) -> str:
    """A copy of the cached ledger whose steward is also this machine's user (who records)."""
    import sqlite3

    from ledger.store import identity, role_grants, sessions
    from ledger.store.engines import make_engine

    copy = directory / "ledger.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as original, sqlite3.connect(copy) as target:
        original.backup(target)
    url = f"sqlite:///{copy}"
    engine = make_engine(url)
    with sessions.write_session(engine) as session:
        role_grants.set_role(session, identity.os_user().name, "steward", True, "ada")
    engine.dispose()
    return url


def after_write(args, path: Path) -> None:
    from baseline import baseline_package
    from bench_report import load_average

    codes = {f"watcher every {args.prebuild_every:g} s": (str(ROOT), args.prebuild_every),
             "no watcher": (str(ROOT), 0.0),
             f"baseline {args.baseline}": (str(baseline_package(args.baseline)), 0.0)}
    print(f"{args.releases:,} releases x {args.variables} variables; first pages {args.settle:g} s after a "
          f"`record` from another process; median of {args.repeat}; {load_average()}", flush=True)
    found: dict[str, list[list[float]]] = {name: [] for name in codes}
    with tempfile.TemporaryDirectory() as directory:
        url = writable_copy(path, Path(directory))
        for _ in range(args.repeat):
            for name, (code, every) in codes.items():
                run = subprocess.run([sys.executable, __file__, "--viewer", code, "--url", url, "--settle",
                                      str(args.settle), "--prebuild-every", str(every)],
                                     capture_output=True, text=True)
                if run.returncode:
                    raise SystemExit(f"{name}: the server process failed\n{run.stderr}")
                found[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"{'server':24s} {'dashboard s':>12s} {'table s':>8s}  each run (dashboard, table)")
    for name, runs in found.items():
        dashboard, table = (statistics.median(run[k] for run in runs) for k in (0, 1))
        each = " ".join(f"({d:.2f}, {t:.2f})" for d, t in runs)
        print(f"{name:24s} {dashboard:12.3f} {table:8.3f}  {each}")
    print(f"end: {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", type=int, default=10_000)
    parser.add_argument("--variables", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--after-write", action="store_true")
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--prebuild-every", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--viewer", default=None, help=argparse.SUPPRESS)  # (a server process of --after-write)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ledger", type=Path, default=None,
                        help="a SQLite ledger file to read instead (e.g. bench_scale's 1M): its only dataset, "
                             "its first three variables; no as-of page")
    args = parser.parse_args()
    if args.viewer:
        args.code = args.viewer
        viewer(args)
        return

    from bench_report import cached_report_ledger, load_average
    from starlette.testclient import TestClient

    from ledger import api
    from ledger.web.app import create_app

    if args.after_write:
        after_write(args, cached_report_ledger(args.variables, args.releases))
        return
    url = f"sqlite:///{args.ledger or cached_report_ledger(args.variables, args.releases)}"
    app = create_app(url, local_person="board", prebuild_every=None)
    if args.profile:
        profile(app, args.profile)
        return
    client = TestClient(app, base_url="http://127.0.0.1:8080")
    book = api.open(url)
    chosen = book.dataset()
    if args.ledger:
        args.releases, args.variables = book.release_count(chosen.name), len(chosen.variable_names)
    target = TARGET_S.get(args.releases)
    print(f"{args.releases:,} releases x {args.variables} variables; median of {args.repeat}; {load_average()}")
    print(f"{'page':20s} {'first s':>8s} {'page s':>8s} {'baseline s':>11s} {'KB':>6s}  target")
    shown = pages(book, chosen.name, tuple(chosen.variable_names[:3]), as_of=not args.ledger) if args.ledger \
        else pages(book)
    for name, path, baseline in shown:
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
