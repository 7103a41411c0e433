"""Another revision's code beside this one, for a benchmark's baseline in the same run:
`baseline_package(REF)` extracts REF's `ledger` package (with its templates and schemas,
where an installed copy finds them) once under benchmarks/.cache/ (git-ignored)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache"


def baseline_package(ref: str, cache: Path | None = None) -> Path:
    """REF's `ledger` package, extracted once under the cache (or `cache`); the directory to put on sys.path."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], check=True, capture_output=True,
                         text=True).stdout.strip()
    target = (CACHE if cache is None else cache) / f"baseline-{sha[:12]}"
    if not (target / "ledger").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "ledger", "reports", "schemas"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
        shutil.copytree(target / "reports", target / "ledger" / "reports", dirs_exist_ok=True)
        shutil.copytree(target / "schemas", target / "ledger" / "schemas", dirs_exist_ok=True)
    return target
