"""The command line as a new user meets it: dates on the command line, a dry run, every problem
of a file at once, -h and --as, errors that quote only a short excerpt, and the smaller edges.
"""

from __future__ import annotations

import json
import re
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import cli_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LONG = "v" * 3000


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", EXAMPLES / "graduates.dataset.yaml").code == 0
    assert cli_main(url, "record", EXAMPLES / "graduates.releases.yaml").code == 0
    assert cli_main(url, "cap", "set", "income", "--epsilon", "10", "-d", "graduates").code == 0
    return url


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------
# A date alone is the whole day; every --as-of output states its moment
# --------------------------------------------------------------------------


def test_as_of_today_includes_today(url):
    """`--as-of TODAY` is the end of today, not its midnight (an empty ledger of zeros, "has no
    caps"), so no one needs tomorrow's date, which is refused as in the future."""
    now = cli_main(url, "subset", "income", "-d", "graduates", "--json").json()
    then = cli_main(url, "subset", "income", "-d", "graduates", "--as-of", today(), "--json").json()
    assert then["epsilon_exact"] == now["epsilon_exact"] and then["epsilon"] == now["epsilon"] > 0
    assert then["as_of"] == f"{today()}T23:59:59.999999+00:00"
    caps = cli_main(url, "cap", "list", "-d", "graduates", "--as-of", today())
    assert caps.code == 0 and "has no caps" not in caps.out and "cap income" in caps.out
    for command in (["table"], ["subset", "income"], ["pairs"], ["cap", "list"], ["headroom", "income"]):
        run = cli_main(url, *command, "-d", "graduates", "--as-of", today())
        assert run.code == 0, run.err
        assert f"as of the end of {today()} UTC" in run.out, (command, run.out)
    table = cli_main(url, "table", "-d", "graduates", "--as-of", today())
    assert table.out.splitlines()[0].startswith(f"as of the end of {today()} UTC")
    moment = cli_main(url, "table", "-d", "graduates", "--as-of", f"{today()}T00:00:01")
    assert f"as of {today()} 00:00:01 UTC" in moment.out  # a moment is stated as given


def test_as_of_after_today_is_refused_naming_today(url):
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    run = cli_main(url, "table", "-d", "graduates", "--as-of", tomorrow)
    assert run.code == 2 and f"{tomorrow} is in the future" in run.err and f"today is {today()}" in run.err


def test_since_a_date_is_its_start(url, tmp_path):
    """--since and --as-of the same day: from its start to its end (before: both midnight)."""
    out = tmp_path / "pack.md"
    run = cli_main(url, "report", "-d", "graduates", "--since", today(), "--as-of", today(), "--out", out)
    assert run.code == 0, run.err
    text = out.read_text(encoding="utf-8")
    assert f"{today()} 23:59:59 UTC" in text and "income-by-degree" in text


# --------------------------------------------------------------------------
# --as-of before the dataset existed says so; the report's header reads
# --------------------------------------------------------------------------


def test_as_of_before_the_dataset_existed_says_so(url, tmp_path):
    """A date before the ledger existed says so, in the table and the report, instead of a table of
    zeros and a report "computed from ledger head: event 0, hash <today's head>"."""
    run = cli_main(url, "table", "-d", "graduates", "--as-of", "2000-01-01")
    assert run.code == 0
    assert "as of the end of 2000-01-01 UTC" in run.out
    assert "dataset graduates was added to this ledger at" in run.out and "did not exist then" in run.out
    document = cli_main(url, "table", "-d", "graduates", "--as-of", "2000-01-01", "--json").json()
    assert document["dataset_existed"] is False and document["as_of"].startswith("2000-01-01T23:59:59")
    assert "did not exist" not in cli_main(url, "table", "-d", "graduates", "--as-of", today()).out
    out = tmp_path / "then.md"
    report = cli_main(url, "report", "-d", "graduates", "--as-of", "2000-01-01", "--out", out)
    assert report.code == 0 and "did not exist then" in report.err
    text = out.read_text(encoding="utf-8")
    assert "event 0" not in text and "no audit event is dated by 2000-01-01 23:59:59 UTC" in text
    assert "Dataset graduates was added to the ledger at" in text
    later = tmp_path / "now.md"
    assert cli_main(url, "report", "-d", "graduates", "--as-of", today(), "--out", later).code == 0
    assert f"the audit events up to {today()} 23:59:59 UTC, the last of them event" in later.read_text("utf-8")


# --------------------------------------------------------------------------
# A dry run lists a reclassification without a reason
# --------------------------------------------------------------------------


def test_dry_run_lists_a_reclassification_without_a_reason(url):
    """`dataset amend FILE --dry-run` needs no reason: it writes nothing."""
    v2 = EXAMPLES / "graduates-v2.dataset.yaml"
    dry = cli_main(url, "dataset", "amend", v2, "--dry-run")
    assert dry.code == 0, dry.err
    assert "variable sex: identifying -> public (needs a reason to be applied" in dry.out
    assert "dry run: nothing written" in dry.out
    assert cli_main(url, "dataset", "amend", v2).code == 2  # applied, it still needs one
    applied = cli_main(url, "dataset", "amend", v2, "--reason", "published by the university")
    assert applied.code == 0 and "(reason: published by the university)" in applied.out


# --------------------------------------------------------------------------
# Every problem of a file in one pass
# --------------------------------------------------------------------------


def test_an_unknown_status_does_not_hide_the_other_problems(url, tmp_path):
    """The schema's refusal of `status: publish` is printed beside every other problem of the file."""
    bad = write(tmp_path, "bad.yaml", """\
        dataset: graduates
        releases:
          - id: r1
            reads: [incme]
            mechanism: {name: laplace, epsilon: -1}
            status: publish
          - id: r2
            reads: [income]
            mechanism: {name: gaussian, sigma: 1}
        """)
    for command in ("check", "record"):
        run = cli_main(url, command, bad)
        assert run.code == 2
        fields = sorted(line.removeprefix(f"error: {bad}:").split(": ")[1] for line in run.errors)
        assert fields == ["releases[0].mechanism.epsilon", "releases[0].reads[0]", "releases[0].status",
                          "releases[1].mechanism.sigma"], run.err
        assert "bad.yaml:6" in run.err and "bad.yaml:4" in run.err  # each with its line
    document = cli_main(url, "check", bad, "--json").json()
    assert len(document["errors"]) == 4 and {e["line"] for e in document["errors"]} == {4, 5, 6, 9}
    assert "r1" not in cli_main(url, "releases").out  # nothing written


def test_an_unknown_mechanism_and_a_bad_parameter_are_both_reported(url, tmp_path):
    """`name: laplce, epsilon: -1` is answered about both the name and the epsilon."""
    bad = write(tmp_path, "bad.yaml", """\
        dataset: graduates
        releases:
          - id: m1
            reads: [income]
            mechanism: {name: laplce, epsilon: -1}
        """)
    run = cli_main(url, "check", bad)
    assert run.code == 2 and len(run.errors) == 2
    assert "releases[0].mechanism.epsilon: must be non-negative" in run.err
    assert "releases[0].mechanism.name: unknown mechanism 'laplce' (did you mean 'laplace'?)" in run.err


@pytest.mark.parametrize("reads", ["[[income]]", "[{a: 1}]", "[income, [sex]]"])
def test_a_variable_that_is_not_a_name_is_refused_cleanly(url, tmp_path, reads):
    """Once the schema no longer stopped the file, a list where a variable name belongs reached the
    lookup of known names and crashed (exit 4, "unhashable type: 'list'"; the load battery's
    mutated files found it): it is the schema's error alone, exit 2, nothing written."""
    bad = write(tmp_path, "bad.yaml", f"""\
        dataset: graduates
        releases:
          - id: m1
            reads: {reads}
            mechanism: {{name: laplace, epsilon: 1}}
        """)
    for command in ("check", "record"):
        run = cli_main(url, command, bad)
        assert run.code == 2, run.err
        assert "releases[0].reads" in run.err and "unexpected failure" not in run.err
    assert "m1" not in cli_main(url, "releases").out


def test_loader_collects_schema_and_ledger_problems_together(tmp_path):
    """The loader itself (the API's path too): schema problems and the rest, each with file, line, field."""
    from ledger.core.records import Dataset, Variable
    from ledger.input.releases import load_releases
    from ledger.input.snapshot import LedgerSnapshot

    snapshot = LedgerSnapshot(datasets={"d": Dataset("d", (Variable("a", "sensitive"),))})
    bad = write(tmp_path, "r.yaml", """\
        dataset: d
        releases:
          - id: x
            reads: [b]
            mechanism: {name: geometric, epsilon: 1, scale: [1]}
            status: done
        """)
    _, _, errors = load_releases([bad], snapshot, recorded_by="t", recorded_at=datetime.now(UTC))
    found = {(e.source, e.field) for e in errors}
    assert found == {(f"{bad}:4", "releases[0].reads[0]"), (f"{bad}:5", "releases[0].mechanism.scale"),
                     (f"{bad}:6", "releases[0].status")}, errors


def test_a_laplace_scale_without_sensitivity_is_refused(url, tmp_path):
    """`{name: laplace, epsilon: 1, scale: 3}` is refused, never recorded as epsilon 1 with the scale
    ignored (with a sensitivity, the same contradiction is refused too)."""
    bad = write(tmp_path, "bad.yaml", """\
        dataset: graduates
        releases:
          - id: m1
            reads: [income]
            mechanism: {name: laplace, epsilon: 1, scale: 3}
        """)
    run = cli_main(url, "check", bad)
    assert run.code == 2 and "releases[0].mechanism.scale: a laplace scale is read with its sensitivity" in run.err


# --------------------------------------------------------------------------
# -h lists what a command takes; --as wherever --by
# --------------------------------------------------------------------------


def _options(url, *command) -> str:
    run = cli_main(url, *command, "-h")
    assert run.code == 0
    return run.out


def test_lifecycle_help_lists_only_the_options_each_takes(url):
    """approve, publish, retract and cancel list only the options they accept (--reason, --at)."""
    assert "--reason" not in _options(url, "approve") and "--at" not in _options(url, "approve")
    assert "--at" in _options(url, "publish") and "--reason" not in _options(url, "publish")
    for action in ("retract", "cancel"):
        assert "--reason" in _options(url, action) and "--at" not in _options(url, action)
    assert cli_main(url, "approve", "mean-income", "--reason", "x").code == 2  # (click: no such option)


ACTING = [("record",), ("init",), ("dataset", "add"), ("dataset", "amend"), ("dataset", "add-variable"),
          ("dataset", "add-categories"), ("dataset", "describe"), ("dataset", "reclassify"), ("group", "set"),
          ("group", "remove"), ("cap", "set"), ("cap", "remove"), ("approve",), ("publish",), ("retract",),
          ("cancel",), ("role", "grant"), ("role", "revoke"), ("audit", "retotal"), ("run",)]


@pytest.mark.parametrize("command", ACTING, ids=" ".join)
def test_no_command_that_acts_takes_a_typed_person(url, command):
    """Who acts is authenticated (the operating-system user, the database login), never an option."""
    text = _options(url, *command)
    assert re.search(r"--(as|by)(?![-\w])", text) is None, text


def test_the_operating_system_user_changes_a_dataset(url):
    # the ledger's first writer (the user running the tests) is its admin, and a dataset is an admin's to amend
    run = cli_main(url, "dataset", "describe", "income", "yearly income band", "-d", "graduates")
    assert run.code == 0, run.err


# --------------------------------------------------------------------------
# Errors in the steward's words, quoting a short excerpt
# --------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["subset", LONG, "-d", "graduates"], ["table", "-d", LONG],
                                     ["cap", "set", LONG, "--epsilon", "1", "-d", "graduates"],
                                     ["approve", LONG], ["group", "set", "g", LONG, "-d", "graduates"]],
                         ids=["subset", "dataset", "cap", "release", "group"])
def test_an_error_quotes_at_most_80_characters_of_a_value(url, command):
    """An error quotes a short excerpt of a 3000-character name, never hundreds of its characters."""
    run = cli_main(url, *command)
    assert run.code == 2 and run.errors
    for line in run.errors:
        assert "v" * 81 not in line and "more characters" in line, line
    document = cli_main(url, *command, "--json").json()
    for error in document["errors"]:
        assert "v" * 81 not in json.dumps(error)


def test_a_name_given_on_the_command_line_meets_the_file_limits(url):
    """`dataset add-variable` refuses a 3000-character variable name."""
    run = cli_main(url, "dataset", "add-variable", LONG, "-d", "graduates")
    assert run.code == 2 and "3000 characters; a name has at most 200" in run.err
    assert "v" * 200 not in cli_main(url, "table", "-d", "graduates").out


def test_assess_names_the_option_and_the_nearest_column(url):
    """A misspelt cell key is named by the option the user typed (--cells), with the nearest column."""
    run = cli_main(url, "assess", "--data", EXAMPLES / "firms.csv", "--cells", "region,industri",
                   "--contributor", "firm", "--value", "turnover")
    assert run.code == 2
    (line,) = run.errors
    assert ": --cells: variable 'industri' is not a column of the data (did you mean 'industry'?)" in line
    assert "cell_keys" not in line and "[" not in line


def test_run_names_a_misspelt_parameter(url, tmp_path):
    """`-p epslon=1` is answered about the unknown parameter, not only "missing epsilon"."""
    assert cli_main(url, "dataset", "add", EXAMPLES / "survey.dataset.yaml").code == 0
    run = cli_main(url, "run", "crosstab", "--data", EXAMPLES / "survey.csv", "-d", "survey", "--id", "x",
                   "-p", "columns=region,sex", "-p", "epslon=1")
    assert run.code == 2
    assert "-p epslon" in run.err and "takes no parameter 'epslon' (did you mean 'epsilon'?)" in run.err
    assert "missing epsilon" in run.err


# --------------------------------------------------------------------------
# The smaller edges
# --------------------------------------------------------------------------


def test_since_checkpoint_names_the_last_verified_head(url):
    assert cli_main(url, "audit", "verify").code == 0
    assert cli_main(url, "cap", "set", "sex", "--epsilon", "5", "-d", "graduates").code == 0
    run = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert run.code == 0 and "since the last verified head, event" in run.out and "checkpoint" not in run.out


def test_role_list_json_keeps_the_text_order(url):
    assert cli_main(url, "role", "grant", "bob", "steward").code == 0
    assert cli_main(url, "role", "grant", "bob", "approver").code == 0
    text = dict(line.split("\t") for line in cli_main(url, "role", "list").out.splitlines())
    assert cli_main(url, "role", "list", "--json").json()["bob"] == text["bob"].split(", ") == ["steward", "approver"]


def test_releases_json_has_the_charge_the_table_shows(url):
    rows = {r["id"]: r for r in cli_main(url, "releases", "--json").json()}
    assert rows["income-by-degree"]["charge"] == 1 and rows["income-by-degree"]["charge_exact"] == "1"
    assert rows["income-by-degree"]["charge_text"] == "ε 1"
    mean = rows["mean-income"]  # rho 1/200, at the dataset's delta
    assert mean["charge_delta_exact"] == "1/1000000000" and mean["charge_exact"] is None
    assert mean["charge_text"] in cli_main(url, "releases").out
    assert rows["income-by-degree-rounded"]["charge_exact"] == "0"


def test_the_api_records_a_list_of_releases(tmp_path):
    """`book.record([r1, r2])` takes a list, as the adapters return, never a pathlib TypeError."""
    import dp_accounting

    import ledger
    from ledger.adapters import dp_accounting as from_dp_accounting

    book = ledger.open(f"sqlite:///{tmp_path / 'api.db'}")
    book.add_dataset(EXAMPLES / "graduates.dataset.yaml")
    event = dp_accounting.GaussianDpEvent(noise_multiplier=10.0)
    made = from_dp_accounting.releases(event, id="g", dataset="graduates", reads=["income"])
    other = from_dp_accounting.releases(event, id="h", dataset="graduates", reads=["sex"])
    assert book.record(made + other).ids == ("g", "h")
    assert made[0].status.value == "planned"  # an adapter's release is planned by default


def test_the_pdf_error_names_the_option_given(url, tmp_path, monkeypatch):
    """`--out x.pdf` without Chromium is answered about Chromium, not about `--format`."""
    monkeypatch.setenv("LEDGER_CHROMIUM", str(tmp_path / "no-chromium"))
    run = cli_main(url, "report", "-d", "graduates", "--out", tmp_path / "x.pdf")
    assert run.code == 2 and ": --out: PDF needs Chromium" in run.err
    run = cli_main(url, "report", "-d", "graduates", "--format", "pdf", "--out", tmp_path / "y.out")
    assert run.code == 2 and ": --format: PDF needs Chromium" in run.err


def test_a_dataset_file_reports_every_problem_at_once(tmp_path):
    """A schema problem (an unknown field) hides none of the others: the duplicate variable, the
    near-miss of public, the delta, the group's unknown member and every cap's problem."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    bad = write(tmp_path, "d.yaml", """\
        dataset: d13
        delta: 2
        variables:
          - {name: a, classification: sensitive, colour: red}
          - {name: a, classification: Public}
          - {name: b}
        groups:
          g: [a, zz]
        caps:
          - {subset: [a, q], epsilon: -1}
          - {subset: [b], rho: x1}
        """)
    run = cli_main(url, "dataset", "add", bad)
    assert run.code == 2
    fields = {line.removeprefix(f"error: {bad}:").split(": ")[1] for line in run.errors}
    assert fields == {"variables[0]", "variables[1].name", "variables[1].classification", "delta", "groups.g[1]",
                      "caps[0].subset[1]", "caps[0].epsilon", "caps[1].rho"}, run.err
    assert not (tmp_path / "ledger.db").exists() or cli_main(url, "releases").code != 0  # nothing written


def test_releases_that_are_not_a_list_are_refused_cleanly(url, tmp_path):
    """`releases: 3` crashed `record` before the schema spoke (transactions.declared_ids iterated it)."""
    bad = write(tmp_path, "bad.yaml", "dataset: graduates\nreleases: 3\n")
    for command in ("check", "record"):
        run = cli_main(url, command, bad)
        assert run.code == 2 and "releases" in run.err and "unexpected failure" not in run.err, run.err
