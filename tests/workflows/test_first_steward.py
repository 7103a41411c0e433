"""What a data steward new to the tool ran into, written as the steward wrote it: a labour
force survey with caps on wage alone and on a group of work variables, release files with
numbers as 1e-3, 0.1 and 1/10, a variable list given as a comma string, a release that
breaks two caps at once, and `--json` on the refusal."""

from __future__ import annotations

import textwrap

import pytest
from support import cli_main

DATASET = """\
dataset: lfs
delta: 1e-6
variables:
  - {name: age, classification: identifying}
  - {name: region, classification: public}
  - {name: wage, classification: sensitive}
  - {name: hours, classification: sensitive}
groups:
  work: [wage, hours]
caps:
  - {subset: [wage], epsilon: 2}
  - {name: work, rho: 1/2}
"""


@pytest.fixture
def ledger(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"

    def write(name: str, text: str):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    assert cli_main(url, "dataset", "add", write("lfs.yaml", DATASET)).code == 0
    return url, write


def test_a_refusal_in_json_names_each_broken_cap_with_its_own_figures(ledger):
    url, write = ledger
    history = write("history.yaml", """\
        dataset: lfs
        releases:
          - {id: wage-by-region, reads: [region, wage], mechanism: {name: laplace, epsilon: 0.5}}
          - {id: hours-2024, reads: [hours], mechanism: {name: laplace, epsilon: 1/10}}
        """)
    assert cli_main(url, "record", history).code == 0
    # Laplace scale 1, sensitivity 3/2: epsilon 3/2 on {wage, hours}, so rho 9/8.
    # wage cap: 1/2 + 3/2 = 2 fits exactly; add 1/10 more to break it too.
    too_much = write("too-much.yaml", """\
        dataset: lfs
        releases:
          - {id: wage-detail, reads: [wage, hours], mechanism: {name: laplace, scale: 1, sensitivity: 1.5}}
          - {id: wage-extra, reads: [wage], mechanism: {name: laplace, epsilon: 0.1}}
        """)
    text = cli_main(url, "record", too_much)
    run = cli_main(url, "record", too_much, "--json")
    assert text.code == run.code == 1
    errors = run.json()["errors"]
    assert [e["field"] for e in errors] == ["cap lfs/wage", "cap lfs/work"]
    wage, work = (e["message"] for e in errors)
    # each message is about its own cap: wage 1/2 + 3/2 + 1/10 = 21/10 against 2 (pure epsilon);
    # work 1/8 + 1/200 + 9/8 + 1/200 = 63/50 in rho (epsilon^2/2 each, Bun and Steinke 2016) against 1/2
    assert wage.startswith("cap lfs/wage: epsilon would be 2.1 against a cap of 2, over by 0.1")
    assert "release wage-detail charges 1.5" in wage and "release wage-extra charges 0.1" in wage
    assert work.startswith("cap lfs/work: rho would be 1.26 against a cap of 0.5, over by 0.76")
    assert "release wage-detail charges 1.125" in work and "Remark 4.4" in work
    # the same words as the text refusal, cap by cap
    for message in (wage, work):
        assert message.split("; ")[0] in text.err


def _release(body: str) -> str:
    return "dataset: lfs\nreleases:\n  - id: wage-by-region\n" + textwrap.indent(textwrap.dedent(body), "    ")


@pytest.mark.parametrize("body, line, field, said", [
    # a variable list given as a comma string: the list it meant, not "is not of type 'array'"
    ("reads: region, wage\nmechanism: {name: laplace, epsilon: 0.5}\n", 4, "releases[0].reads",
     "must be a list ([a, b]); found the text 'region, wage': write it as [region, wage]"),
    ("reads: [wage]\nmechanism: {name: laplace, epsilon: 1}\nguarantees: [{protects: wage, epsilon: 1}]\n", 6,
     "releases[0].guarantees[0].protects", "must be a list ([a, b]); found the text 'wage': write it as [wage]"),
    ("reads: [wage]\nmechansim: {name: laplace, epsilon: 1}\n", 3, "releases[0]",
     "unknown field 'mechansim' (did you mean 'mechanism'?)"),
    ("reads: [wage]\nstatus: done\nmechanism: {name: laplace, epsilon: 1}\n", 5, "releases[0].status",
     "must be one of planned, approved, published; found the text 'done'"),
    ("reads: [wage]\nmechanism: {name: laplace, epsilon: 1}\n"
     "guarantees: [{protects: [wage], epsilon: 1, relation: add_remove}]\n", 6, "releases[0].guarantees[0].relation",
     "must be one of replace, add-remove; found the text 'add_remove' (did you mean 'add-remove'?)"),
    ("reads: [wage]\nmechanism: {name: laplace, epsilon: one half}\n", 5, "releases[0].mechanism.epsilon",
     "must be a number; found the text 'one half': write a decimal such as 0.5 or a fraction such as \"1/2\""),
    ("reads: [wage]\nmechanism: {name: declared}\nguarantees: [{protects: [wage]}]\n", 6,
     "releases[0].guarantees[0]", "needs epsilon or rho"),
])
def test_a_malformed_release_file_is_answered_in_the_stewards_words(ledger, body, line, field, said):
    url, write = ledger
    path = write("plan.yaml", _release(body))
    for command in ("check", "record"):
        run = cli_main(url, command, path)
        assert run.code == 2 and run.errors == [f"error: {path}:{line}: {field}: {said}"]
        assert "is not of type" not in run.err and "[" + "'" not in run.err  # no validator's wording, no Python list
        (error,) = cli_main(url, command, path, "--json").json()["errors"]
        assert error == {"file": str(path), "line": line, "field": field, "message": said}
    assert cli_main(url, "releases", "--json").json() == []  # nothing was written


def test_an_empty_release_file_is_called_empty(ledger):
    url, write = ledger
    path = write("empty.yaml", "# nothing yet\n")
    run = cli_main(url, "record", path)
    assert run.code == 2 and run.errors == [f"error: {path}: (top level): the file is empty"]
    assert "None" not in run.err


def test_a_cap_naming_a_group_in_its_subset_says_how_a_group_cap_is_written(ledger, tmp_path):
    url, write = ledger
    amended = write("lfs-v2.yaml", DATASET.replace("{name: work, rho: 1/2}", "{subset: [work, age], rho: 1/2}"))
    run = cli_main(url, "dataset", "amend", amended, "--reason", "caps")
    assert run.code == 2
    assert run.errors == [f"error: {amended}:12: caps[1].subset[0]: 'work' is a group, not a variable: a cap on a "
                          "group is written {name: work, ...} without `subset`, or list its variables"]
    typo = write("lfs-v3.yaml", DATASET.replace("{subset: [wage], epsilon: 2}", "{subset: [wages], epsilon: 2}"))
    assert "unknown variable 'wages' in dataset 'lfs' (did you mean 'wage' or 'age'?)" in \
        cli_main(url, "dataset", "amend", typo, "--reason", "caps").err


def test_the_headline_in_json_gives_no_exact_value_for_a_zcdp_conversion(ledger):
    url, write = ledger
    plan = write("plan.yaml", """\
        dataset: lfs
        releases:
          - {id: hours-mean, reads: [hours], mechanism: {name: gaussian, sigma: 10, sensitivity: 1}}
          - {id: hours-by-age, reads: [age, hours], mechanism: {name: geometric, epsilon: 1/10}}
        """)
    assert cli_main(url, "record", plan).code == 0
    headline = cli_main(url, "table", "--json").json()["headline"]
    # rho on the protected subset {age, wage, hours}: 1/200 (Gaussian, sensitivity^2 / (2 sigma^2))
    # + 1/200 (pure 1/10 as epsilon^2/2; Bun and Steinke 2016, Prop 3.3) = 1/100, exact
    assert (headline["rho"], headline["rho_exact"]) == (0.01, "1/100")
    # its epsilon at delta 1e-6 is a conversion: a float rounded up, with no exact fraction
    # (it was the float's text, "0.4...", as if it were exact)
    assert isinstance(headline["epsilon"], float) and headline["epsilon_exact"] is None
    subset = cli_main(url, "subset", "protected", "--json").json()
    assert (subset["epsilon"], subset["epsilon_exact"]) == (headline["epsilon"], None)
    # every figure of the headline in the one shape (README, "JSON figures"): the worst variable,
    # hours, carries the Gaussian and the geometric (irrational); the worst pair the same
    assert headline["worst_variable"] == {"variable": "hours", "epsilon": headline["worst_variable"]["epsilon"],
                                          "epsilon_exact": None}
    assert headline["worst_pair"]["epsilon_exact"] is None
    assert headline["dataset_wide_ordinary_dp_exact"] is None


def test_publishing_a_planned_release_says_to_approve_it_first(ledger):
    url, write = ledger
    plan = write("plan.yaml", "dataset: lfs\nreleases:\n  - {id: q1, reads: [hours], mechanism: {name: laplace, "
                 "epsilon: 0.1}}\n")
    assert cli_main(url, "record", plan).code == 0
    run = cli_main(url, "publish", "q1")
    assert run.code == 2
    assert run.errors == ["error: release q1: status: cannot publish release 'q1': it is planned "
                          "(only an approved release can be published); approve it first"]


def test_run_names_the_data_file_and_the_parameter_as_typed(tmp_path):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", examples / "survey.dataset.yaml").code == 0
    data = examples / "survey.csv"
    common = ("run", "laplace-mean", "--data", data, "-d", "survey", "--id", "mean-age", "-p", "lower=0")
    typo = cli_main(url, *common, "-p", "column=agee", "-p", "upper=100", "-p", "epsilon=0.5")
    assert typo.code == 2
    assert typo.errors == [f"error: {data}: --data: variable 'agee' is not a column of the data (did you mean 'age' "
                           "or 'degree'?) (its columns: region, sex, age, degree, income_band)"]
    missing = cli_main(url, *common, "-p", "column=age", "-p", "epsilon=0.5")
    assert missing.errors == ["error: command line: -p upper: laplace-mean needs column, lower, upper, epsilon; "
                              "missing upper"]
    bad = cli_main(url, *common, "-p", "column=age", "-p", "upper=100", "-p", "epsilon=half", "--json")
    assert bad.code == 2 and bad.json()["errors"][0]["field"] == "-p epsilon"
    assert cli_main(url, "releases", "--json").json() == []  # nothing was written


def test_the_report_states_the_whole_dataset_as_table_does(tmp_path):
    """A public variable read under a guarantee is bounded: the report's total row must not call
    the whole dataset "∞ (public)", and its headline must print the figure `table` prints (the
    smallest valid one; it printed the basic sum)."""
    import re

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    dataset = tmp_path / "hh.yaml"
    dataset.write_text("dataset: hh\ndelta: 1e-5\nvariables:\n  - {name: income}\n  - {name: tenure}\n"
                       "  - {name: area, classification: public}\n", encoding="utf-8")
    plan = tmp_path / "plan.yaml"
    plan.write_text(textwrap.dedent("""\
        dataset: hh
        releases:
          - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 0.3}}
          - {id: b, reads: [income, tenure], mechanism: {name: gaussian, sigma: 3, sensitivity: 1}}
          - {id: c, reads: [tenure], mechanism: {name: gaussian, epsilon: 0.5, delta: 1e-7}}
          - {id: d, reads: [income, area], mechanism: {name: declared},
             guarantees: [{protects: [income, area], epsilon: 0.2, delta: 1e-8}]}
        """), encoding="utf-8")
    assert cli_main(url, "dataset", "add", dataset).code == 0 and cli_main(url, "record", plan).code == 0
    table = cli_main(url, "table", "--json").json()
    shown = table["total_shown"]["dataset_wide"]
    basic = table["total"]["dataset_wide"]
    assert shown < basic  # declared in advance: the PLD figure is the smallest valid one (docs/explanation/accounting.md)
    assert table["headline"]["dataset_wide_ordinary_dp"] == shown
    # the report prints the figure as `table` prints it (4 decimals, rounded up), not its own rounding
    total_line = next(line for line in cli_main(url, "table").out.splitlines() if line.startswith("| All releases"))
    two_places = total_line.split("|")[-2].strip()
    assert float(two_places) >= shown - 1e-12 and len(two_places.split(".")[1]) == 4
    markdown = cli_main(url, "report", "--format", "md", "--out", "-").out
    assert f"| Whole dataset, ordinary DP (U = V) | {two_places} |" in markdown
    assert re.search(rf"\| \*\*All releases \(composed\)\*\* \|.*\| \*\*{re.escape(two_places)}\*\* \|", markdown)
    page = tmp_path / "report.html"
    assert cli_main(url, "report", "--out", page).code == 0
    html = page.read_text(encoding="utf-8")
    assert "<td class=\"num public" not in html  # no cell is a public variable's ∞
    total_row = html[html.index('<tr class="total">'):].split("</tr>")[0]
    assert total_row.endswith(f'<td class="num wide">{two_places}</td>')
    headline = html[html.index('id="dataset-epsilon"'):].split("</div>")[0]
    assert f'<span class="value">{two_places}</span>' in headline


@pytest.mark.parametrize("args, field, said", [
    (["tabel"], None, "No such command 'tabel'. Did you mean 'table'?"),
    (["subset"], "subset", "Missing argument 'variables'."),
    (["role", "grant", "bob", "steward", "--jsn"], "role grant", "No such option: --jsn (Possible options: --json)"),
])
def test_with_json_a_mistyped_command_line_is_answered_in_json(ledger, args, field, said):
    """A pipeline that passes --json reads standard output as JSON, errors included (README):
    a usage error printed only as usage text left it nothing to parse."""
    url, _ = ledger
    run = cli_main(url, *args, "--json")
    assert run.code == 2
    assert run.json() == {"ok": False, "exit_code": 2, "errors": [
        {"file": "command line", "line": None, "field": field, "message": said}]}


def test_verifying_twice_and_a_checkpoint_say_what_happened(ledger, tmp_path):
    url, write = ledger
    plan = write("plan.yaml", "dataset: lfs\nreleases:\n  - {id: q1, reads: [hours], mechanism: {name: laplace, "
                 "epsilon: 0.1}}\n")
    assert cli_main(url, "record", plan).code == 0
    assert cli_main(url, "audit", "verify").code == 0
    again = cli_main(url, "audit", "verify", "--since-checkpoint")
    assert again.code == 0 and "(no event appended since the last verified head, event" in again.out
    assert "checked since" not in again.out  # it said "events 5-4 checked since the checkpoint"
    key = tmp_path / "board"
    assert cli_main(url, "audit", "keygen", "--out", key).code == 0
    head = tmp_path / "head.json"
    assert cli_main(url, "audit", "checkpoint", "--key", key, "--out", head).code == 0
    import json

    signed = json.loads(head.read_text(encoding="utf-8"))
    held = cli_main(url, "audit", "verify", "--checkpoint", head, "--public-key", f"{key}.pub")
    assert held.code == 0
    # the time shown is the head event's, not the signature's (made_at)
    assert f"(written {signed['head']['at']})" in held.out and "signed" not in held.out


def test_a_mistyped_mechanism_gets_the_nearest_names(ledger, tmp_path):
    url, write = ledger
    plan = write("plan.yaml", _release("reads: [wage]\nmechanism: {name: laplase, epsilon: 1}\n"))
    run = cli_main(url, "record", plan)
    assert run.code == 2 and run.errors[0].startswith(
        f"error: {plan}:5: releases[0].mechanism.name: unknown mechanism 'laplase' (did you mean 'laplace'?); known: ")
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "examples" / "survey.csv"
    mean = cli_main(url, "run", "laplace-maen", "--data", data, "--id", "m", "-p", "column=wage")
    assert mean.code == 2 and mean.errors[0].startswith(
        "error: command line: MECHANISM: unknown mechanism 'laplace-maen' (did you mean 'laplace-mean' or "
        "'laplace-sum'?); known: ")


def test_a_dataset_file_with_bare_variable_names_says_how_to_write_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    path = tmp_path / "x.yaml"
    path.write_text("dataset: x\nvariables:\n  - age\n  - sex\n", encoding="utf-8")
    run = cli_main(url, "dataset", "add", path)
    assert run.code == 2 and run.errors == [
        f"error: {path}:3: variables[0]: must be a mapping (key: value); found the text 'age': write it as {{name: age}}",
        f"error: {path}:4: variables[1]: must be a mapping (key: value); found the text 'sex': write it as {{name: sex}}"]
    path.write_text("dataset: x\nvariables:\n  - {name: age}\n", encoding="utf-8")
    assert cli_main(url, "dataset", "add", path).out == "added dataset x with 1 variable\n"


def test_run_refuses_a_parameter_the_mechanism_does_not_take(tmp_path):
    """`-p nonnegativ=true` was ignored without a word: the steward believed a non-negative
    table was released beside the noisy one."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", examples / "survey.dataset.yaml").code == 0
    common = ("run", "tan-consistent-counts", "--data", examples / "survey.csv", "-d", "survey", "--id", "table-3",
              "-p", "margin=degree", "-p", "protected=income_band", "-p", "epsilon=1", "--seed", "1")
    typo = cli_main(url, *common, "-p", "nonnegativ=true")
    assert typo.code == 2 and typo.errors == [
        "error: command line: -p nonnegativ: tan-consistent-counts takes no parameter 'nonnegativ' (did you mean "
        "'nonnegative'?) (it takes margin, protected, epsilon, nonnegative, categories)"]
    assert cli_main(url, "releases", "--json").json() == []  # nothing was written
    right = cli_main(url, *common, "-p", "nonnegative=true", "--json")
    assert right.code == 0 and len(right.json()["recorded"]) == 2  # the table and its non-negative version


def test_help_names_dates_as_dates_and_the_sampling_bound_recorded(ledger):
    url, _ = ledger
    for command in (("table",), ("subset",), ("cap", "list"), ("report",)):
        assert "--as-of DATE" in cli_main(url, *command, "-h").out, command
    assert "--at DATE" in cli_main(url, "publish", "-h").out
    sample = " ".join(cli_main(url, "run", "-h").out.split())
    assert "the tight amplified bound ln(1 + beta (e^eps - 1)) of Balle, Barthe and Gaboardi 2018" in sample


def test_amending_a_dataset_with_a_cap_on_all_says_why_the_cap_changes(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    first = tmp_path / "v1.yaml"
    first.write_text("dataset: x\nvariables: [{name: age}]\ncaps:\n  - {subset: all, epsilon: 10, delta: 1e-6}\n",
                     encoding="utf-8")
    assert cli_main(url, "dataset", "add", first).code == 0
    second = tmp_path / "v2.yaml"
    second.write_text(first.read_text(encoding="utf-8").replace("[{name: age}]", "[{name: age}, {name: tenure}]"),
                      encoding="utf-8")
    run = cli_main(url, "dataset", "amend", second, "--dry-run")
    assert run.code == 0
    # it printed "change cap all: ... at delta 0.000001 ... (was <the same words>)"
    assert ("change cap all: epsilon 10 at delta 1 × 10⁻⁶ on the whole dataset "
            "(its subset changed with the dataset)") in run.out


def test_the_two_halves_of_a_key_pair_handed_the_wrong_way_round(ledger, tmp_path):
    url, _ = ledger
    key = tmp_path / "board"
    assert cli_main(url, "audit", "keygen", "--out", key).code == 0
    public = f"{key}.pub"
    swapped = cli_main(url, "audit", "checkpoint", "--key", public, "--out", tmp_path / "head.json")
    assert swapped.code == 2 and swapped.errors == [
        f"error: {public}: key: this is a public key: --key takes the private key `audit keygen` wrote beside it "
        "(the file without .pub)"]
    assert not (tmp_path / "head.json").exists()
    assert cli_main(url, "audit", "checkpoint", "--key", key, "--out", tmp_path / "head.json").code == 0
    verify = cli_main(url, "audit", "verify", "--checkpoint", tmp_path / "head.json", "--public-key", key)
    assert verify.code == 2 and verify.errors == [
        f"error: {key}: key: this is a private key: --public-key takes the .pub file `audit keygen` wrote beside "
        "it (keep the private key with whoever signs checkpoints)"]


def test_a_cap_on_a_group_written_as_its_subset_says_how_to_write_it(tmp_path):
    """`subset: work`, where work is a group of the file: the schema refuses the text (a subset is
    all, protected or a list) and the message says how a cap on a group is written; nothing is
    written."""
    dataset = tmp_path / "d.yaml"
    dataset.write_text("dataset: lfs\nvariables: [{name: wage}, {name: hours}]\ngroups:\n  work: [wage, hours]\n"
                       "caps:\n  - {subset: work, epsilon: 2}\n")
    path = tmp_path / "l.db"
    run = cli_main(f"sqlite:///{path}", "dataset", "add", dataset)
    assert run.code == 2 and not path.exists()
    assert run.errors == [f"error: {dataset}:6: caps[0].subset: must be one of all, protected or a list ([a, b]); "
                          "found the text 'work': 'work' is a group; a cap on a group is written {name: work, ...} "
                          "without `subset`"]
    dataset.write_text(dataset.read_text().replace("{subset: work, epsilon: 2}", "{subset: wrk, epsilon: 2}"))
    assert "is a group" not in cli_main(f"sqlite:///{path}", "dataset", "add", dataset).err
