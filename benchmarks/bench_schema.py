"""Benchmark: the input files' schema check, jsonschema-rs alone beside its baselines.

    .venv/bin/python benchmarks/bench_schema.py [--runs 7] [--baseline REF]

Validation (one process, the variants interleaved run by run, the median of --runs runs; the
validators built before the first run) of `schema_problems` on
  (a) the demo's input files (`privacy-ledger demo`: its dataset and its release file),
  (b) a valid release file of 20,000 releases,
  (c) refused documents: the demo's release file with three mistakes, and the 20,000 releases
      with the same mistakes in one release;
each by
  - rs alone: this checkout's ledger.input.schema_check;
  - pair: REF's schema_check (default main), loaded beside it: jsonschema-rs says whether a
    document is valid, the Python `jsonschema` gives a refused one's messages;
  - jsonschema alone: REF's schema_check with its jsonschema-rs check skipped.
The pair and jsonschema alone need a REF whose check has both validators, and `jsonschema`
installed (`pip install jsonschema`); without them only the first column is printed.

Import (fresh processes, interleaved, the median of --runs wall seconds, beside `python -c pass`):
each library imported and the release schema's validator built, then the same and the demo's
release file validated (a command's first check).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
RELEASES = "release.v1.schema.json"
DATASET = "dataset.v1.schema.json"
# three mistakes: a misspelt field, a list written as text, a number as a word
MISTAKES = ("title:", "titel:"), ("reads: [age, sex]", "reads: age, sex"), ("epsilon: 1}", "epsilon: one}")


def batch_text(count: int, mistaken: int | None = None) -> str:
    """A release file of `count` releases (Laplace, geometric and Gaussian, some with a stated
    guarantee); release `mistaken` with the MISTAKES."""
    lines = ["dataset: census", "releases:"]
    for k in range(count):
        reads = ["age", "sex", "race", "residential region"][: 1 + k % 4]
        if k % 10 == 9:
            mechanism = "{name: gaussian, sigma: 40, sensitivity: 1}"
            extra = ", guarantees: [{protects: [age], rho: 1/3200}]"
        else:
            mechanism = f"{{name: {'laplace' if k % 2 else 'geometric'}, epsilon: 0.001}}"
            extra = ""
        line = f"  - {{id: r{k}, title: Table {k}, reads: [{', '.join(reads)}], mechanism: {mechanism}{extra}}}"
        if k == mistaken:
            line = f"  - {{id: r{k}, titel: Table {k}, reads: 'age, sex', mechanism: {{name: laplace, epsilon: one}}}}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def documents() -> dict[str, tuple]:
    from ledger.cli.demo import DATASET_YAML, RELEASES_YAML
    from ledger.input.documents import parse_document

    def parsed(name: str, text: str):
        document, errors = parse_document(name, text)
        assert not errors, errors
        return document

    mistaken = RELEASES_YAML
    for old, new in MISTAKES:
        mistaken = mistaken.replace(old, new, 1)
    return {  # label -> ((document, schema), ...), repeats per run
        "(a) demo: dataset + release file": (((parsed("dataset.yaml", DATASET_YAML), DATASET),
                                             (parsed("releases.yaml", RELEASES_YAML), RELEASES)), 200),
        "(b) valid, 20,000 releases": (((parsed("batch.yaml", batch_text(20_000)), RELEASES),), 1),
        "(c) refused: demo release file": (((parsed("bad.yaml", mistaken), RELEASES),), 50),
        "(c) refused: 20,000 releases, one bad": (((parsed("bad-batch.yaml", batch_text(20_000, 10_000)),
                                                    RELEASES),), 1),
    }


def baseline_checks(ref: str) -> dict:
    """REF's schema_check, twice (as it is, and with its jsonschema-rs check skipped), or {}."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        print("  (no `jsonschema` installed: pip install jsonschema for the pair and jsonschema alone)")
        return {}
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:ledger/input/schema_check.py"],
                            capture_output=True, text=True, check=True).stdout
    if "_fast_validator" not in source:
        print(f"  ({ref}'s check does not pair the two validators: only rs alone)")
        return {}
    checks = {}
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "schema_check_baseline.py"
        path.write_text(source, encoding="utf-8")
        for label in ("pair", "jsonschema alone"):
            name = "ledger.input._baseline_" + label.replace(" ", "_")
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # (relative imports: this checkout's ledger.input package)
            spec.loader.exec_module(module)
            if label == "jsonschema alone":
                module._fast_validator = lambda _name: _NeverValid()
            checks[label] = module.schema_problems
    return checks


class _NeverValid:
    def is_valid(self, _data) -> bool:
        return False


def validation(runs: int, ref: str) -> None:
    from ledger.input.schema_check import schema_problems

    checks = {"rs alone": schema_problems, **baseline_checks(ref)}
    for label, (pairs, repeats) in documents().items():
        answers = {name: [[str(e) for _at, e in check(d, s)] for d, s in pairs] for name, check in checks.items()}
        times: dict[str, list[float]] = {name: [] for name in checks}
        for _ in range(runs):
            for name, check in checks.items():
                start = time.perf_counter()
                for _ in range(repeats):
                    for document, schema in pairs:
                        check(document, schema)
                times[name].append((time.perf_counter() - start) / repeats)
        problems = {name: sum(map(len, found)) for name, found in answers.items()}
        base = statistics.median(times["rs alone"])
        row = "   ".join(f"{name} {statistics.median(found) * 1000:9.3f} ms"
                         + ("" if name == "rs alone" else f" (x{statistics.median(found) / base:,.0f})")
                         for name, found in times.items())
        print(f"  {label:40s} {row}   problems: {problems}")
        if label.startswith("(c) refused: demo"):
            for name, found in answers.items():
                print(f"      {name}:")
                for lines in found:
                    for line in lines:
                        print(f"        {line}")


def imports(runs: int) -> None:
    from ledger.cli.demo import RELEASES_YAML

    schema = f"json.loads(open({str(ROOT / 'schemas' / RELEASES)!r}).read())"
    document = f"yaml.safe_load({RELEASES_YAML!r})"
    rs = f"jsonschema_rs.Draft202012Validator({schema}, validate_formats=False)"
    py = f"jsonschema.Draft202012Validator({schema})"
    programs = {
        "python -c pass": "pass",
        "jsonschema_rs + validator": f"import json, jsonschema_rs; {rs}",
        "jsonschema + validator": f"import json, jsonschema; {py}",
        "both + validators": f"import json, jsonschema_rs, jsonschema; {rs}; {py}",
        "jsonschema_rs: first check": f"import json, yaml, jsonschema_rs; list({rs}.iter_errors({document}))",
        "jsonschema: first check": f"import json, yaml, jsonschema; list({py}.iter_errors({document}))",
    }
    available = {label: program for label, program in programs.items()
                 if subprocess.run([PYTHON, "-c", program], capture_output=True).returncode == 0}
    times: dict[str, list[float]] = {label: [] for label in available}
    for _ in range(runs):
        for label, program in available.items():
            start = time.perf_counter()
            subprocess.run([PYTHON, "-c", program], check=True)
            times[label].append(time.perf_counter() - start)
    floor = statistics.median(times["python -c pass"])
    for label, found in times.items():
        median = statistics.median(found)
        print(f"  {label:30s} {median * 1000:7.1f} ms   (+{(median - floor) * 1000:6.1f} ms over python -c pass; "
              f"min {min(found) * 1000:.1f} ms)")
    for label in set(programs) - set(available):
        print(f"  {label:30s} (not installed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", default="main", help="the revision whose check is the baseline")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs; baseline {args.baseline}")
    print("Validation, median per document set:")
    validation(args.runs, args.baseline)
    print(f"Import, fresh processes (load average {os.getloadavg()[0]:.2f}):")
    imports(args.runs)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
