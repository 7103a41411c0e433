"""The command line follows its users' habits: --version, -h, readable help,
--json everywhere with one error shape, "did you mean", postgres:// URLs, report formats
from --out, the releases table, short excerpts of user files, progress only on a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import ledger
from ledger.core.progress import progress
from support import acting_as, cli_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", EXAMPLES / "graduates.dataset.yaml").code == 0
    return url


def test_version_and_short_help(url):
    run = cli_main(url, "--version")
    assert run.code == 0 and run.out.strip() == f"privacy-ledger {ledger.__version__}"
    short, long = cli_main(url, "-h"), cli_main(url, "--help")
    assert short.code == long.code == 0 and short.out == long.out
    assert "thin adapters" not in long.out
    record_help = cli_main(url, "record", "-h").out
    assert "FILE..." in record_help and "list[" not in record_help and "<str>" not in record_help
    assert "<bool>" not in cli_main(url, "table", "-h").out


def test_json_errors_keep_the_exit_code(url, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: graduates\nreleases:\n  - id: x\n    reads: [income]\n"
                   "    mechanism: {name: laplace, epsilon: -1}\n", encoding="utf-8")
    run = cli_main(url, "record", bad, "--json")
    assert run.code == 2
    (error,) = run.json()["errors"]
    assert error == {"file": str(bad), "line": 5, "field": "releases[0].mechanism.epsilon",
                     "message": error["message"]} and "non-negative" in error["message"]


def test_json_on_record_lifecycle_and_refusal(url, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("dataset: graduates\nreleases:\n  - {id: p, reads: [sex], status: planned,"
                    " mechanism: {name: laplace, epsilon: 1}}\n", encoding="utf-8")
    run = cli_main(url, "record", plan, "--json")
    assert run.code == 0 and run.json()["recorded"] == ["p"]
    # separation of duties (docs/explanation/model.md#people-duties-and-the-book-of-record): another person approves
    assert cli_main(url, "role", "grant", "grace", "approver").code == 0
    with acting_as("grace"):
        assert cli_main(url, "approve", "p", "--json").json() == {
            "ok": True, "release": "p", "status": "approved"}
    assert cli_main(url, "cap", "set", "sex", "--epsilon", "1").code == 0
    more = tmp_path / "more.yaml"
    more.write_text("dataset: graduates\nreleases:\n  - {id: q, reads: [sex], mechanism: {name: laplace, "
                    "epsilon: \"1/2\"}}\n", encoding="utf-8")
    refused = cli_main(url, "record", more, "--json")
    assert refused.code == 1
    body = refused.json()
    assert body["exit_code"] == 1 and body["errors"][0]["field"] == "cap graduates/sex"
    assert [c["status"] for c in body["caps"]] == ["over"]


def test_did_you_mean(url):
    assert "did you mean 'income'" in cli_main(url, "subset", "incme").err
    assert "did you mean 'graduates'" in cli_main(url, "table", "-d", "graduate").err
    assert "did you mean 'table'" in cli_main(url, "tabel").err.lower()


def test_releases_table_and_empty(url):
    assert cli_main(url, "releases").out.strip() == "no releases"
    assert cli_main(url, "record", EXAMPLES / "graduates.releases.yaml").code == 0
    lines = cli_main(url, "releases").out.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["id", "dataset", "status", "reads", "family", "charge", "recorded", "published"]
    income = next(line for line in lines if line.startswith("income-by-degree "))
    assert "ε 1" in income  # geometric, epsilon 1 on what it reads


def test_csv_given_to_record_is_not_echoed(url, tmp_path):
    data = tmp_path / "microdata.csv"
    secret = "9" * 200
    data.write_text("name,income,notes\n" + "\n".join(f"person{k},{k * 1000},{secret}" for k in range(50)),
                    encoding="utf-8")
    copy = tmp_path / "microdata.yaml"  # the content, not the name, gives it away
    copy.write_text(data.read_text(encoding="utf-8"), encoding="utf-8")
    for path in (data, copy):
        run = cli_main(url, "record", path)
        assert run.code == 2
        assert "this looks like CSV data: did you mean `run --data" in run.err
        assert "person1," not in run.err and secret[:81] not in run.err


def test_long_values_are_cut_to_80_characters(url, tmp_path):
    long = tmp_path / "long.yaml"
    long.write_text("x" * 500 + "\n", encoding="utf-8")
    run = cli_main(url, "record", long)
    assert run.code == 2 and "x" * 80 in run.err and "x" * 81 not in run.err


def test_report_format_from_out(url, tmp_path):
    assert cli_main(url, "record", EXAMPLES / "graduates.releases.yaml").code == 0
    run = cli_main(url, "report", "--out", tmp_path / "t.md")
    assert run.code == 0 and (tmp_path / "t.md").read_text(encoding="utf-8").startswith("# ")
    clash = cli_main(url, "report", "--format", "pdf", "--out", tmp_path / "t.html")
    assert clash.code == 2 and "contradicts" in clash.err and not (tmp_path / "t.html").exists()
    csv = cli_main(url, "report", "--format", "csv", "--out", "-")
    assert csv.code == 0 and csv.out.splitlines()[0].startswith("release,")
    assert cli_main(url, "report", "--format", "pdf", "--out", "-").code == 2
    assert cli_main(url, "report", "--out", "-").code == 2  # no extension, no --format


def test_postgres_url_spelling(url):
    run = cli_main("postgres://nobody@127.0.0.1:1/none", "table")
    # a refused connection is an operational failure (exit 3), naming the ledger
    assert run.code == 3 and "postgresql+psycopg://nobody@127.0.0.1:1/none" in run.err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal():
    plain = io.StringIO()
    with progress("working", total=3, stream=plain) as advance:
        advance()
    assert plain.getvalue() == ""
    terminal = _Terminal()
    with progress("working", total=3, stream=terminal) as advance:
        advance()
    assert terminal.getvalue()  # rich drew on it


def test_did_you_mean_in_release_files(url, tmp_path):
    plan = tmp_path / "typo.yaml"
    plan.write_text("dataset: graduates\nreleases:\n  - {id: t, reads: [incom], mechanism: {name: laplace, "
                    "epsilon: 1}}\n", encoding="utf-8")
    run = cli_main(url, "record", plan)
    assert run.code == 2 and "did you mean 'income'" in run.err
    plan.write_text("dataset: graduate\nreleases:\n  - {id: t, reads: [income], mechanism: {name: laplace, "
                    "epsilon: 1}}\n", encoding="utf-8")
    assert "did you mean 'graduates'" in cli_main(url, "record", plan).err


@pytest.mark.parametrize("args", [("demo",), ("demo", "--example", "graduates"), ("dataset", "add", "DATASET")])
def test_a_refused_name_creates_no_ledger(tmp_path, monkeypatch, args):
    """An operating-system user whose name the ledger refuses (a control character) is bad input
    (exit 2, "nothing was written"): the commands that create a ledger refuse it before the
    ledger file exists."""
    dataset = tmp_path / "d.yaml"
    dataset.write_text("dataset: d\nvariables: [{name: a}]\n")
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "new.db"
    with acting_as("d\x1b[31man"):
        result = cli_main(f"sqlite:///{path}", *[str(dataset) if a == "DATASET" else a for a in args])
    assert result.code == 2 and "operating-system user" in result.err and "nothing was written" in result.err
    assert not path.exists() and not (tmp_path / "ledger-demo.html").exists()


def test_every_command_that_changes_the_ledger_answers_in_json(url, tmp_path):
    """README: every command takes --json, the stewardship commands too: each prints one JSON
    document with "ok": true and what it did, and writes what the text form writes."""
    def json_of(*args):
        run = cli_main(url, *args, "--json")
        assert run.code == 0, run.err
        body = json.loads(run.out)
        assert body["ok"] is True
        return body

    granted = json_of("role", "grant", "carol", "approver")
    assert (granted["person"], granted["role"], granted["granted"], granted["changed"]) == ("carol", "approver", True, True)
    assert json_of("role", "grant", "carol", "approver")["changed"] is False
    assert json_of("role", "revoke", "carol", "approver")["granted"] is False
    added = json_of("dataset", "add-variable", "tenure", "--classification", "sensitive")
    assert added["applied"] == 1 and added["dry_run"] is False and added["changes"][0]["kind"] == "variable.added"
    assert json_of("dataset", "describe", "tenure", "years in the job")["applied"] == 1
    assert json_of("dataset", "add-categories", "tenure", "short", "long")["applied"] == 1
    assert json_of("dataset", "reclassify", "tenure", "public", "--reason", "published by law")["applied"] == 1
    assert json_of("group", "set", "work", "tenure")["applied"] == 1
    assert json_of("group", "remove", "work")["applied"] == 1
    assert json_of("audit", "retotal")["differed"] == []
    keys = json_of("audit", "keygen", "--out", tmp_path / "board")
    assert keys["public_key"] == str(tmp_path / "board") + ".pub"
    head = json_of("audit", "checkpoint", "--key", tmp_path / "board", "--out", tmp_path / "cp.json")
    assert head["checkpoint"] == str(tmp_path / "cp.json") and head["seq"] == head["events"] > 0
    plan = json_of("dataset", "amend", EXAMPLES / "graduates.dataset.yaml", "--dry-run")
    assert plan["dry_run"] is True and plan["applied"] == 0 and plan["changes"]  # tenure would be removed
    assert cli_main(url, "cap", "set", "income", "--name", "income-cap", "--epsilon", "5").code == 0
    removed = json_of("cap", "remove", "income-cap", "--reason", "not needed")
    assert removed["applied"] >= 1 and removed["changes"][0]["kind"] == "cap.removed"
