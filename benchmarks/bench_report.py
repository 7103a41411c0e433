"""Benchmark: rendering the compliance report.

    .venv/bin/python benchmarks/bench_report.py [--variables 200] [--releases 10000]

Builds a seeded ledger in a SQLite file through the real pipeline (loader,
store, lifecycle, caps), spread over two years of recording: 200 variables,
10,000 releases reading 1 to 5 variables each -- pure epsilon (geometric,
Laplace), zCDP (Gaussian), Tan's consistent counts with an exact margin,
members of ten families (random and keyed splits), post-processed releases --
with planned, approved, published, retracted and cancelled ones, and 20 caps.
Then prints, each beside its target (2-core machine):

(a) `privacy-ledger report --format html`, end to end in a fresh process (the
    median of three runs), beside the baseline: the same steps one after another
    in one process (verify the chain, read the ledger, build the context with its
    charts, render the template): target < 5 s;
(b) `privacy-ledger report --format pdf`, end to end, and the Chromium print
    alone: target < 20 s;
(c) the loss on every pair of variables (19,900 pairs) with
    `LedgerIndex.pair_matrix`, beside the baseline measured in the same run: the
    subset query per pair (`LedgerIndex.pairs`) on the first 1,000 pairs, scaled.
Both ways of computing the pairs are checked to agree on the pairs timed.

`--scale`: the ledger is kept under benchmarks/.cache/ (built once),
and the commands are measured beside the old path, main's code (`--baseline`,
default `main`: its `ledger` package extracted under the cache and run on the same
ledger file), each a fresh process, interleaved, as wall seconds, CPU seconds
(user + system, the forked helpers included) and peak memory (the largest
resident set of the process tree, by wait4), with the load average beside them; both
packages run from compiled bytecode, as installed copies do (`--no-bytecode`: as the
environment says, e.g. PYTHONDONTWRITEBYTECODE=1, which costs each process ~0.5 s of compiling):
(d) `report --format html` at 10k releases x 200 variables: target < 3 s; on the ledger as built
    (no verified head: the report verifies the whole chain) and on a copy where `audit verify`
    kept a verified head (the report verifies what was appended since it);
(d') with `--phases`: where the report's CPU goes, each step timed in one process
    (benchmarks/report_phases.py: imports, the full and the incremental verification, reading,
    the pairs panel, the table's accountants, the timeline, the register, the template), beside
    the old path; `--cache DIR` keeps (d)'s ledger and the old path's package in DIR instead of
    benchmarks/.cache (a shared cache another engineer's checkout points to);
(e) `audit verify` at 10k, 100k and 1M releases (the ledgers of bench_scale.py,
    copied read-only from `--scale-from`), and `report --format html` on them (a
    summarised page and its register past 20,000 releases): verify < 2 GB at any
    size, the report < 60 s and < 2 GB at 1M. The old path is skipped past
    `--baseline-max` releases (it needs ~6 GB for verify at 1M).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from itertools import combinations, islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from baseline import baseline_package  # noqa: E402
from sqlmodel import Session  # noqa: E402

from ledger.operations import transactions as operations, people  # noqa: E402
from ledger.store import audit_verify, dataset_writes, decoded_history, engines, role_grants, schema_migrations, session_state, sessions
from ledger.reporting.report import build_report  # noqa: E402
from ledger.reporting.write import find_chromium  # noqa: E402
from ledger.operations.report_inputs import gather  # noqa: E402
from ledger.operations.report_inputs import chain_status  # noqa: E402
from ledger.reporting.write import pdf_from_html, render_text  # noqa: E402
from ledger.accounting.charge_choice import at_delta  # noqa: E402
from ledger.accounting.ledger_index import LedgerIndex  # noqa: E402
from ledger.input.datasets import build_dataset  # noqa: E402
from ledger.input.documents import parse_document
from ledger.input.releases import build_releases
from ledger.core.records import CHARGED_STATUSES  # noqa: E402

HTML_TARGET_S = 5.0
PDF_TARGET_S = 20.0
EPSILONS = ("1/100", "1/50", "0.005", "1/30", "0.002")
BATCH = 25  # releases recorded together (one recording time)
START = datetime(2024, 1, 8, 9, 0, tzinfo=UTC)


@contextmanager
def clock(start: datetime, step: timedelta):
    """The store's clock, moved on by `step` at every reading: a ledger recorded over time."""
    moment = [start]
    original = session_state.now

    def now():
        moment[0] += step
        return moment[0]

    session_state.now = now
    try:
        yield
    finally:
        session_state.now = original


def dataset_yaml(variables: list[str]) -> str:
    # (self_approval: its history is recorded approved or published by its recorders)
    lines = ["dataset: survey", "description: A synthetic survey for the report benchmark", "delta: 1e-9",
             "self_approval: true", "variables:"]
    lines += [f"  - {{name: {v}, classification: {'public' if k % 10 == 0 else 'sensitive'}}}"
              for k, v in enumerate(variables)]
    return "\n".join(lines) + "\n"


STATED = {"planned": "", "published": f", published_at: \"{START.isoformat()}\"", "approved": ""}


def release_entries(rng: random.Random, variables: list[str], start: int, count: int, families: dict) -> list[str]:
    entries = []
    confidential = variables[:-1]  # the last variable is only ever read exactly (a margin)
    for k in range(start, start + count):
        rid = f"r{k:05d}"
        draw = rng.random()
        status = rng.choices(["published", "planned", "approved"], [0.94, 0.03, 0.03])[0]
        status += STATED[status]  # published says when; approved: its recorder's own approval
        reads = rng.sample(confidential, rng.randint(1, 5))
        if draw < 0.80:
            mechanism = f"{{name: {rng.choice(['geometric', 'laplace'])}, epsilon: \"{rng.choice(EPSILONS)}\"}}"
            entries.append(f"  - {{id: {rid}, title: Table {k}, reads: [{', '.join(reads)}], "
                           f"mechanism: {mechanism}, status: {status}}}")
        elif draw < 0.90:
            entries.append(f"  - {{id: {rid}, title: Mean {k}, reads: [{', '.join(reads)}], "
                           f"mechanism: {{name: gaussian, sigma: 40, sensitivity: 1}}, status: {status}}}")
        elif draw < 0.92:
            margin = variables[-1]
            entries.append(f"  - {{id: {rid}, title: Consistent counts {k}, reads: [{', '.join(reads)}, {margin}], "
                           f"mechanism: {{name: tan-consistent-counts, epsilon: 1/20}}, "
                           f"guarantees: [{{protects: [{', '.join(reads)}], epsilon: 1/20}}]}}")
        elif draw < 0.98:
            fid = rng.choice(sorted(families))
            key = families[fid]
            member_reads = sorted(set(reads[:2]) | ({key} if key else set()))
            entries.append(f"  - {{id: {rid}, title: Part {k} of {fid}, reads: [{', '.join(member_reads)}], "
                           f"family: {fid}, part: part {k}, "
                           f"mechanism: {{name: laplace, epsilon: \"{rng.choice(EPSILONS)}\"}}}}")
        else:
            source = f"r{rng.randrange(max(start, 1)):05d}"
            entries.append(f"  - {{id: {rid}, title: Rounded {source}, reads: [], derived_from: [{source}]}}")
    return entries


def build_ledger(path: Path, n_variables: int, n_releases: int, seed: int = 7) -> str:
    """A ledger of `n_releases` releases on `n_variables` variables; returns its URL."""
    rng = random.Random(seed)
    variables = [f"v{k:03d}" for k in range(n_variables)]
    url = f"sqlite:///{path}"
    engine = engines.make_engine(url)
    schema_migrations.ensure_schema(engine)
    batches = max(1, n_releases // BATCH)
    step = timedelta(days=730) / (batches + 200)
    with clock(START, step / 10):
        document, _ = parse_document("bench-dataset.yaml", dataset_yaml(variables))
        dataset, errors = build_dataset(document)
        assert not errors, errors
        with sessions.write_session(engine) as session:
            people.bootstrap(session, "ada")  # the first user: admin, every role
            for person, roles in (("grace", ("steward", "approver")), ("edsger", ("steward", "approver")),
                                  ("board", ("approver",))):
                for role in roles:
                    role_grants.set_role(session, person, role, True, "ada")
            dataset_writes.add_dataset(session, dataset, "ada")
        families = {f"fam{k}": (variables[k] if k % 2 else None) for k in range(10)}
        family_lines = [f"  - {{id: {fid}, partition: {'[' + key + ']' if key else 'random'}}}"
                        for fid, key in families.items()]
        actors = ["ada", "grace", "edsger"]
        for batch, start in enumerate(range(0, n_releases, BATCH)):
            entries = release_entries(rng, variables, start, min(BATCH, n_releases - start), families)
            text = "dataset: survey\n" + ("families:\n" + "\n".join(family_lines) + "\n" if batch == 0 else "")
            text += "releases:\n" + "\n".join(entries) + "\n"
            document, errors = parse_document(f"batch{batch}.yaml", text)
            assert not errors, errors
            actor = actors[batch % 3]

            def build(snapshot, document=document, actor=actor):
                return build_releases(document, snapshot, recorded_by=actor, recorded_at=session_state.now())

            with clock(START + step * batch, step / (3 * BATCH)):
                operations.record(engine, build, actor)
        with clock(START + step * (batches + 50), step / 10):
            with Session(engine) as session:
                history = decoded_history.snapshot(session, "survey")
            sources = {source for release in history.releases.values() for source in release.derived_from}
            for release in history.releases.values():
                action = {"planned": "approve", "approved": "publish"}.get(release.status.value)
                if action and rng.random() < 0.5:  # the board approves: it recorded none of them
                    operations.change_status(engine, release.id, action, "board")
                elif release.status.value == "planned" and rng.random() < 0.5 and release.id not in sources:
                    # (a release others derive from cannot be cancelled, docs/explanation/model.md#post-processing-and-lineage)
                    operations.change_status(engine, release.id, "cancel", "grace", reason="not needed")
                elif release.status.value == "published" and rng.random() < 0.002:
                    operations.change_status(engine, release.id, "retract", "edsger", reason="an error found")
            caps = [{"subset": "all", "epsilon": "1000", "delta": "1e-9", "name": "all"}]
            for k in range(19):
                members = rng.sample(variables[:-1], rng.randint(1, 4))
                limit = rng.choice(["0.5", "1", "2", "50"])
                caps.append({"name": f"cap{k:02d}", "subset": members,
                             **({"rho": limit} if k % 3 == 0 else {"epsilon": limit, "delta": "1e-9"})})
            operations.add_caps(engine, "survey", caps, "ada", "benchmark")
    engine.dispose()  # the last connection closed: SQLite folds its write-ahead log into the file, which
    return url  # cached_report_ledger then renames (a log left beside the old name would be lost)


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def cli(url: str, directory: Path, *args: str, command: str = "report") -> float:
    env = {**os.environ, "LEDGER_DATABASE_URL": url}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ledger", command, *args], cwd=directory, env=env, check=True,
                   capture_output=True, text=True)
    return time.perf_counter() - start


CACHE = Path(__file__).resolve().parent / ".cache"
ROOT = Path(__file__).resolve().parents[1]
REPORT_10K_TARGET_S = 3.0


def measured(argv: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MB) of one fresh process and the helpers it forks and waits for."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        message = process.stderr.read().decode(errors="replace").strip()[-400:] if process.stderr else ""
        raise RuntimeError(f"{' '.join(argv[-5:])}: exit {code}: {message}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def ledger_command(code: Path | None, db: Path, *args: str, out_dir: Path) -> tuple[list[str], dict, Path]:
    """argv, environment and directory of `privacy-ledger --db DB ARGS` on this branch's code (code None)
    or on the extracted package at `code` (python -m finds the package in its working directory)."""
    env = {**os.environ}
    if BYTECODE:  # as an installed package runs: from its compiled modules (see `compiled`)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    cwd = out_dir
    if code is not None:
        env["PYTHONPATH"] = str(code)
        cwd = code
    return [sys.executable, "-m", "ledger", "--db", f"sqlite:///{db}", *args], env, cwd


BYTECODE = True  # the measured processes use Python's bytecode cache (--no-bytecode: as the environment says)


def compiled(*packages: Path) -> None:
    """Each package's modules compiled to bytecode beforehand (compileall), as pip leaves an installed
    package: with PYTHONDONTWRITEBYTECODE set (as some shells and CI set it) every fresh process would
    compile the ledger's ~40,000 lines again, ~0.5 s of CPU that no installed copy pays."""
    for package in packages:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, capture_output=True)


def median_of(runs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    ordered = sorted(runs)
    return ordered[len(ordered) // 2]


def load_average() -> str:
    return "load average " + " ".join(open("/proc/loadavg").read().split()[:3])


def cached_report_ledger(variables: int, releases: int, cache: Path | None = None) -> Path:
    """The report benchmark's ledger, built once under the cache (`cache`: another directory,
    e.g. one's own, where the shared cache must not be written)."""
    cache = CACHE if cache is None else cache
    path = cache / f"report-{variables}x{releases}.db"
    if not path.exists():
        cache.mkdir(exist_ok=True)
        print(f"building a ledger of {releases:,} releases on {variables} variables (once) ...", flush=True)
        partial = path.with_suffix(".building")
        partial.unlink(missing_ok=True)
        _, seconds = timed(build_ledger, partial, variables, releases)
        partial.rename(path)
        print(f"    built in {seconds:.1f} s")
    return path


def scale_ledger(size: int, source: Path | None) -> Path | None:
    """bench_scale.py's ledger of `size` releases: ours under the cache, or a read-only copy of one
    from `source` (another checkout's cache: read, never written)."""
    import sqlite3

    path = CACHE / f"scale-{size}.db"
    if path.exists():
        return path
    found = None if source is None else source / f"ledger-{size}.db"
    if found is None or not found.exists():
        return None
    with sqlite3.connect(f"file:{found}?mode=ro", uri=True) as original, sqlite3.connect(path) as copy:
        original.backup(copy)
    return path


def scale_main(args) -> None:
    global BYTECODE
    code_old = baseline_package(args.baseline, args.cache)
    BYTECODE = args.bytecode
    if BYTECODE:
        compiled(ROOT / "ledger", code_old / "ledger")
    print(f"old path: {args.baseline} ({code_old.name}); {load_average()}; "
          f"{'from compiled bytecode' if BYTECODE else 'PYTHONDONTWRITEBYTECODE as set: ' + os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    with tempfile.TemporaryDirectory() as name:
        out = Path(name)
        # (d) the report at 10k x 200: on a copy of the cached ledger with no verified head (the
        # report verifies the whole chain; (e)'s `audit verify` keeps one in the cached file), then
        # on a copy where `audit verify` kept one (the report verifies what was appended since:
        # nothing here; main's code verifies in full below 20,000 releases all the same)
        import sqlite3

        db = cached_report_ledger(args.variables, args.releases, args.cache)
        plain, headed = out / f"{db.stem}-no-head.db", out / f"{db.stem}-verified-head.db"
        shutil.copyfile(db, plain)
        with sqlite3.connect(plain) as connection:  # (a meta row, outside the chain: as never verified)
            connection.execute("DELETE FROM ledger_meta WHERE key = 'verified_head'")
        shutil.copyfile(plain, headed)
        argv, env, cwd = ledger_command(None, headed, "audit", "verify", out_dir=out)
        subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
        from bench_scale import baseline_copy

        for label, ledger in (("no verified head", plain), ("a verified head", headed)):
            new_runs, old_runs = [], []
            # the old code reads a copy at its own schema version (a newer one it refuses)
            old_ledger = baseline_copy(ledger, code_old)
            for _ in range(args.repeat):
                for code, runs, path in ((None, new_runs, ledger), (code_old, old_runs, old_ledger)):
                    argv, env, cwd = ledger_command(code, path, "report", "--format", "html", "--out",
                                                    str(out / "report.html"), out_dir=out)
                    runs.append(measured(argv, env, cwd))
            print(f"(d) `report --format html`, {args.releases:,} releases x {args.variables} variables, {label}, "
                  f"median of {args.repeat} (interleaved), {load_average()}:")
            for name, runs in (("this branch", new_runs), (f"old path ({args.baseline})", old_runs)):
                wall, cpu, peak = median_of(runs)
                print(f"    {name:>22}: {wall:6.2f} s wall, {cpu:6.2f} s CPU, {peak:7.0f} MB peak   "
                      f"(walls {', '.join(f'{r[0]:.2f}' for r in runs)}; CPU {', '.join(f'{r[1]:.2f}' for r in runs)})"
                      f"   [target < {REPORT_10K_TARGET_S:.0f} s]")
        if args.phases:
            phases(headed, code_old, args.repeat)
        for path in (plain, headed):
            path.with_name(path.stem + "-baseline.db").unlink(missing_ok=True)
            path.unlink()

        # (e) verify (and the report) by size
        print(f"(e) `audit verify` and `report --format html` by size ({load_average()}):")
        ledgers = [(args.releases, db)] + [(size, scale_ledger(size, args.scale_from)) for size in args.sizes]
        for size, path in ledgers:
            if path is None:
                print(f"    {size:>9,} releases: no ledger (build it with bench_scale.py --build-only)")
                continue
            for command in (("audit", "verify"), ("report", "--format", "html", "--out", str(out / "big.html"))):
                line = []
                for code, label in ((None, "this branch"), (code_old, "old path")):
                    if code is not None and size > args.baseline_max:
                        line.append(f"{label}: skipped (> --baseline-max)")
                        continue
                    argv, env, cwd = ledger_command(code, path if code is None else baseline_copy(path, code_old),
                                                    *command, out_dir=out)
                    wall, cpu, peak = measured(argv, env, cwd)
                    line.append(f"{label}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {peak:6.0f} MB")
                print(f"    {size:>9,} releases, {' '.join(command[:2]):>15}: {' | '.join(line)}   "
                      f"[{load_average()}]", flush=True)


def phases(ledger: Path, code_old: Path, repeat: int) -> None:
    """(d'): where the report's CPU goes, step by step in one process (benchmarks/report_phases.py),
    this branch beside the old path, medians of `repeat` interleaved runs."""
    import json

    from bench_scale import baseline_copy

    script = Path(__file__).resolve().parent / "report_phases.py"
    runs: dict[str, list[dict]] = {"this branch": [], "old path": []}
    for _ in range(repeat):
        old_ledger = baseline_copy(ledger, code_old)
        for label, code, path in (("this branch", ROOT, ledger), ("old path", code_old, old_ledger)):
            env = {**os.environ, "PYTHONPATH": str(code)}
            if BYTECODE:
                env.pop("PYTHONDONTWRITEBYTECODE", None)
            done = subprocess.run([sys.executable, str(script), str(path)], env=env, cwd=code, check=True,
                                  capture_output=True, text=True)
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"(d') the report's steps in one process (CPU s, medians of {repeat}; the helpers' work done here; "
          f"{load_average()}):")
    names = list(runs["this branch"][0])
    print(f"    {'step':>24}  {'this branch':>11}  {'old path':>8}")
    for name in names:
        cells = []
        for label in runs:
            values = sorted(run.get(name, 0.0) for run in runs[label])
            cells.append(values[len(values) // 2])
        print(f"    {name:>24}  {cells[0]:11.3f}  {cells[1]:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=200)
    parser.add_argument("--releases", type=int, default=10_000)
    parser.add_argument("--baseline-pairs", type=int, default=1_000)
    parser.add_argument("--scale", action="store_true", help="(d) and (e) only, on cached ledgers, "
                                                             "beside the old path")
    parser.add_argument("--baseline", default="main", help="git ref of the old path (default: main)")
    parser.add_argument("--baseline-max", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-bytecode", dest="bytecode", action="store_false",
                        help="--scale: keep the environment's PYTHONDONTWRITEBYTECODE (each process compiles the "
                             "ledger's modules again) instead of running from compiled bytecode as an install does")
    parser.add_argument("--sizes", type=lambda text: [int(x) for x in text.split(",") if x.strip()],
                        default=[100_000, 1_000_000], help="(e)'s sizes, comma-separated; \"\": (e) at 10k only")
    parser.add_argument("--phases", action="store_true",
                        help="--scale: also (d'), the report's steps timed in one process (report_phases.py)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="--scale: the directory of (d)'s ledger, report-VxR.db, built there if missing "
                             "(default: benchmarks/.cache)")
    parser.add_argument("--scale-from", type=Path, default=None,
                        help="a directory holding bench_scale.py's ledger-N.db files, copied read-only")
    args = parser.parse_args()
    if args.scale:
        scale_main(args)
        return
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        print(f"building a ledger of {args.releases:,} releases on {args.variables} variables ...", flush=True)
        url, seconds = timed(build_ledger, directory / "ledger.db", args.variables, args.releases)
        print(f"    built in {seconds:.1f} s (not part of the figures)")

        # (a) HTML: the command three times, each beside `table` on the same ledger (a shared machine's
        # load moves single runs; alternating puts both under the same load)
        html_runs, table_runs = [], []
        for _ in range(3):
            html_runs.append(cli(url, directory, "--format", "html", "--out", "report.html"))
            table_runs.append(cli(url, directory, "-d", "survey", command="table"))
        html_runs.sort()
        html_cli, table_cli = html_runs[1], sorted(table_runs)[1]
        engine = engines.make_engine(url)
        with Session(engine) as session:
            snapshot = decoded_history.snapshot(session, "survey")
            dataset = snapshot.datasets["survey"]
            delta = dataset.delta
            verification, verify_s = timed(audit_verify.verify, session)
            chain = chain_status(verification)
            inputs, read_s = timed(gather, session, dataset, delta, None, chain=lambda: chain)
        context, build_s = timed(build_report, inputs)
        html, render_s = timed(render_text, context, "html")
        size = len(html.encode("utf-8"))
        print(f"(a) HTML compliance report, {args.variables} variables x {args.releases:,} releases "
              f"({size / 1e6:.1f} MB, {context.risk.layout} risk table):")
        print(f"    end to end (`privacy-ledger report --format html`, fresh process): {html_cli:6.2f} s median of "
              f"3 ({', '.join(f'{t:.2f}' for t in html_runs)})   [target < {HTML_TARGET_S:.0f} s]")
        print(f"    baseline, the same steps one after another in one process (imports not counted): "
              f"{verify_s + read_s + build_s + render_s:5.2f} s = audit_verify.verify {verify_s:5.2f} s + read the ledger "
              f"{read_s:5.2f} s + context and charts {build_s:5.2f} s + template {render_s:5.2f} s")
        print(f"    baseline, `privacy-ledger table` on the same ledger (fresh process): {table_cli:6.2f} s median of 3; "
              f"the report is {html_cli / table_cli:4.1f}x of it   [target <= 3x]")

        # (b) PDF
        pdf_cli = cli(url, directory, "--format", "pdf", "--out", "report.pdf")
        pdf, print_s = timed(pdf_from_html, render_text(context, "pdf"), find_chromium())
        import pdfplumber

        with pdfplumber.open(directory / "report.pdf") as document:
            pages = len(document.pages)
        print(f"(b) PDF compliance report ({pages} pages, {len(pdf) / 1e6:.1f} MB):")
        print(f"    end to end (`privacy-ledger report --format pdf`, fresh process): {pdf_cli:6.2f} s   "
              f"[target < {PDF_TARGET_S:.0f} s]")
        print(f"    Chromium alone (start, load, print): {print_s:5.2f} s; the PDF is {pdf_cli / (html_cli + print_s):4.2f}x "
              f"of the HTML report plus Chromium   [target <= 1.5x]")

        # (c) pairs: vectorised against the subset query per pair
        charged = [r for r in snapshot.releases.values() if r.status in CHARGED_STATUSES]
        index = LedgerIndex(dataset.variable_names, charged, snapshot.families.values())
        objective = at_delta(delta)
        grid, fast_s = timed(index.pair_matrix, objective)
        pairs = list(islice(combinations(range(len(index.variables)), 2), args.baseline_pairs))
        start = time.perf_counter()
        slow = [index.subset_cost((index.variables[i], index.variables[j]), objective).spend for i, j in pairs]
        slow_s = time.perf_counter() - start
        assert all(grid.spend(i, j) == spend for (i, j), spend in zip(pairs, slow)), "pair figures disagree"
        total = len(index.variables) * (len(index.variables) - 1) // 2
        print(f"(c) every pair of variables ({total:,} pairs):")
        print(f"    LedgerIndex.pair_matrix: {fast_s:6.2f} s")
        print(f"    baseline, a subset query per pair: {slow_s:6.2f} s for the first {len(pairs):,} pairs, "
              f"scaled to {total:,}: ~{slow_s * total / len(pairs):,.0f} s (figures agree)")


if __name__ == "__main__":
    assert Fraction("0.005") == Fraction(1, 200)
    main()
