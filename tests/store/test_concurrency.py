"""Atomic enforcement under concurrent stewards.

Twenty processes each record a release of epsilon 0.1 reading `income`, capped at
epsilon 1: exactly ten fit, whatever the interleaving, so exactly ten must succeed
(exit 0) and ten be refused (exit 1), on a SQLite file and on PostgreSQL. Each process
is the real command, `python -m ledger --db URL record FILE`, started at once with
Popen. Afterwards the spend is exactly 1 (an exact fraction, not 0.9999...) and the
audit chain verifies. (Setting up and reading back run in this process, through the
console entry point, to keep the test quick.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from support import cli_main

STEWARDS = 20

DATASET = """\
dataset: payroll
variables:
  - {name: income}
  - {name: region}
caps:
  - {subset: [income], epsilon: 1}
"""


def ledger(url: str, *args: str) -> tuple[int, str, str]:
    """`privacy-ledger --db URL ARGS` in this process: (exit code, stdout, stderr)."""
    run = cli_main(url, *args)
    return run.code, run.out, run.err


def test_twenty_stewards_recording_at_once_never_exceed_a_cap(ledger_url, tmp_path):
    (tmp_path / "payroll.yaml").write_text(DATASET, encoding="utf-8")
    code, _, err = ledger(ledger_url, "dataset", "add", tmp_path / "payroll.yaml")
    assert code == 0, err
    files = []
    for k in range(STEWARDS):
        path = tmp_path / f"file_{k}.yaml"
        path.write_text(textwrap.dedent(f"""\
            dataset: payroll
            releases:
              - {{id: steward-{k}, reads: [income], mechanism: {{name: laplace, epsilon: 0.1}}}}
            """), encoding="utf-8")
        files.append(path)

    processes = [
        subprocess.Popen([sys.executable, "-m", "ledger", "--db", ledger_url, "record", str(path)], cwd=tmp_path,
                         env=os.environ.copy(),  # (the pipelines of one steward: the ledger's first user)
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k, path in enumerate(files)
    ]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=180)
        results.append((process.returncode, out, err))

    codes = sorted(code for code, _, _ in results)
    assert codes == [0] * 10 + [1] * 10, [(code, err) for code, _, err in results if code not in (0, 1)]
    for code, out, err in results:
        if code == 1:
            assert "cap payroll/income: epsilon would be 1.1 against a cap of 1, over by 0.1" in err, err
            assert "nothing was written" in err
        else:
            assert "recorded 1 release" in out

    spend = json.loads(ledger(ledger_url, "subset", "income", "--json")[1])
    assert spend["epsilon"] == 1 and type(spend["epsilon"]) is int  # exactly, not 0.9999999999999999
    assert len(spend["releases"]) == 10
    recorded = json.loads(ledger(ledger_url, "releases", "--json")[1])
    winners = {f"steward-{k}" for k, (code, _, _) in enumerate(results) if code == 0}
    assert {r["id"] for r in recorded} == winners
    caps = json.loads(ledger(ledger_url, "cap", "list", "--json")[1])
    assert [(c["cap"], c["current"], c["status"]) for c in caps] == [("income", 1, "warn")]
    code, out, err = ledger(ledger_url, "audit", "verify")
    assert code == 0, err
    # the first user's 4 roles, the dataset, its cap, and the ten releases that fit
    assert f"{4 + 12} events" in out


def _another_spelling(url: str) -> str:
    """The same database under a URL spelled differently: a process of its own, as far as
    the per-URL caches of `ledger.store.process_caches` and `ledger.store.configuration` can tell."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        parent, name = path.rsplit("/", 1)
        return f"sqlite:///{parent}/./{name}"
    return url + ("&" if "?" in url else "?") + "application_name=second-steward"


def test_two_stewards_taking_turns_see_each_others_spend(ledger_url, tmp_path):
    """Each writer keeps running totals cached between its own writes; a write by another
    must make it read them again, or it would check against a stale total and overspend."""
    (tmp_path / "payroll.yaml").write_text(DATASET, encoding="utf-8")
    assert ledger(ledger_url, "dataset", "add", tmp_path / "payroll.yaml")[0] == 0
    urls = [ledger_url, _another_spelling(ledger_url)]
    codes = []
    for k in range(14):
        path = tmp_path / f"turn_{k}.yaml"
        status = ", status: planned" if k == 0 else ""  # planned: it reserves budget, and can be cancelled
        path.write_text(f"dataset: payroll\nreleases:\n  - {{id: turn-{k}, reads: [income]{status}, "
                        f"mechanism: {{name: laplace, epsilon: 0.1}}}}\n", encoding="utf-8")
        code, _, err = ledger(urls[k % 2], "record", path)
        codes.append(code)
    assert codes == [0] * 10 + [1] * 4
    # a cancellation by one frees room for the other
    assert ledger(urls[1], "cancel", "turn-0", "--reason", "made room")[0] == 0
    code, _, err = ledger(urls[0], "record", tmp_path / "turn_11.yaml")
    assert code == 0, err
    for url in urls:
        caps = json.loads(ledger(url, "cap", "list", "--json")[1])
        assert [(c["cap"], c["current"]) for c in caps] == [("income", 1)]
    assert ledger(ledger_url, "audit", "verify")[0] == 0
