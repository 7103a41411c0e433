"""Every reader's output of this checkout beside another revision's, on the same ledgers.

    .venv/bin/python scripts/compare_outputs.py [--base main] [--ledger PATH ...]

A change that moves code (a module split, one read path instead of two) must leave every printed
figure and every written byte as it was. On the demo ledger (made fresh) and on each `--ledger`
file, each read command (`table`, `subset`, `pairs`, `cap list`, `headroom`, `releases`, each in
text and JSON; the report in Markdown, HTML and CSV; the registry export) runs once with the base
revision's `ledger` package (benchmarks/baseline.py) and once with this checkout's, each on its
own copy of the ledger file (opening a ledger may write to it). Outputs are compared byte for byte
after one substitution: a timestamp within the run (a report's "generated at") reads as `<now>`.
Prints one line per command and output; exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from baseline import baseline_package  # noqa: E402

STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:\+00:00|Z| UTC)?")


def commands(variables: list[str]) -> list[tuple[str, list[str], str | None]]:
    """(name, arguments, the file it writes or None: its standard output is compared)."""
    pick = variables[:2]
    return [
        ("table", ["table"], None),
        ("table --json", ["table", "--json"], None),
        ("subset", ["subset", *pick], None),
        ("subset --json", ["subset", *pick, "--json"], None),
        ("pairs", ["pairs"], None),
        ("pairs --json", ["pairs", "--json"], None),
        ("cap list", ["cap", "list"], None),
        ("cap list --json", ["cap", "list", "--json"], None),
        ("headroom", ["headroom", *pick], None),
        ("releases", ["releases"], None),
        ("releases --json", ["releases", "--json"], None),
        ("report md", ["report", "--format", "md", "--out", "{out}/report.md"], "report.md"),
        ("report html", ["report", "--format", "html", "--out", "{out}/report.html"], "report.html"),
        ("report csv", ["report", "--format", "csv", "--out", "{out}/report.csv"], "report.csv"),
        ("export registry", ["export", "registry", "--out", "-"], None),
    ]


def run(code: Path | None, ledger: Path, arguments: list[str], out: Path, env: dict) -> tuple[int, bytes]:
    """(exit code, standard output) of `python -m ledger` with `code` first on the path (None: this checkout)."""
    environment = {**env, "PYTHONPATH": str(code) if code else str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "ledger", "--db", f"sqlite:///{ledger}",
                           *[a.format(out=out) for a in arguments]],
                          capture_output=True, env=environment, cwd=out)
    return done.returncode, done.stdout


def masked(data: bytes, start: datetime) -> bytes:
    """`data` with every timestamp within the run read as <now>."""
    def now_or_kept(match: re.Match) -> str:
        text = match.group(0)
        try:
            moment = datetime.fromisoformat(text.replace(" UTC", "+00:00").replace("Z", "+00:00").replace(" ", "T"))
        except ValueError:
            return text
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return "<now>" if start - timedelta(seconds=5) <= moment <= datetime.now(UTC) + timedelta(seconds=5) else text

    return STAMP.sub(now_or_kept, data.decode("utf-8", "replace")).encode()


def compare(ledger: Path, base: Path, work: Path, env: dict) -> list[str]:
    """The commands whose outputs differ on `ledger` between the base and this checkout."""
    copies = {}
    for side in ("base", "this"):
        folder = work / ledger.stem / side
        folder.mkdir(parents=True)
        copies[side] = folder / ledger.name
        shutil.copy2(ledger, copies[side])
    _, table = run(None, copies["this"], ["table", "--json"], copies["this"].parent, env)
    variables = json.loads(table)["variables"]
    start = datetime.now(UTC)
    differ = []
    for name, arguments, written in commands(variables):
        found = {}
        for side, code in (("base", base), ("this", None)):
            folder = copies[side].parent
            code_, stdout = run(code, copies[side], arguments, folder, env)
            data = (folder / written).read_bytes() if written and (folder / written).exists() else stdout
            found[side] = (code_, masked(data, start))
        same = found["base"] == found["this"]
        print(f"  {'same' if same else 'DIFFERS'}  {ledger.name}: {name} (exit {found['this'][0]}, "
              f"{len(found['this'][1]):,} bytes)", flush=True)
        if not same:
            differ.append(name)
            (work / f"{ledger.stem}-{name.replace(' ', '_')}.base").write_bytes(found["base"][1])
            (work / f"{ledger.stem}-{name.replace(' ', '_')}.this").write_bytes(found["this"][1])
    return differ


def demo_ledger(folder: Path, env: dict) -> Path:
    """Tan's Example 3.6, recorded by this checkout's `demo` in an empty folder."""
    folder.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "ledger", "demo"], cwd=folder, env={**env, "PYTHONPATH": str(ROOT)},
                   check=True, capture_output=True)
    return folder / "ledger.db"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the revision to compare with (default: main)")
    parser.add_argument("--ledger", action="append", default=[], type=Path, help="a SQLite ledger file")
    args = parser.parse_args()
    base = baseline_package(args.base)
    env = dict(os.environ)
    work = Path(tempfile.mkdtemp(prefix="compare-outputs-"))
    ledgers = [demo_ledger(work / "demo-source", env), *args.ledger]
    print(f"this checkout against {args.base}; differing outputs kept in {work}")
    differ = [name for ledger in ledgers for name in compare(ledger, base, work, env)]
    print(f"{len(differ)} output(s) differ" if differ else "every output is the same")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
