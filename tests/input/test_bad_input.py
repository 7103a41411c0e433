"""Bad input is refused cleanly: exit 2, one line naming the file, option or variable and
the field, and nothing written (README, "Input limits"; docs/explanation/model.md#people-duties-and-the-book-of-record for people).

A survey ledger (ana its admin, bob a steward, carol an approver) is given what a
careless or hostile steward might write: a JSON text with half a character in it, a
date at the edge of the calendar, an environment variable set to nonsense, a number
YAML reads as something else than it shows, a name that looks like another person's.
Every refusal is checked for its exit code, the field it names, and that every table of
the ledger is as it was (the stored rows compared before and after).
"""

from __future__ import annotations

import json
import re
import textwrap
import unicodedata
from pathlib import Path

import pytest
from support import acting_as, Run, cli_main, dump_tables

DATASET = """\
dataset: survey
variables:
  - {name: income}
  - {name: region}
caps:
  - {subset: [income], epsilon: 2}
"""

PLAN = """\
dataset: survey
releases:
  - {id: r1, title: Mean income, reads: [income], mechanism: {name: laplace, epsilon: 0.5}}
"""

WRITE_A_NUMBER = 'write a decimal such as 0.5 or a fraction such as "1/2"'


class Ledger:
    def __init__(self, url: str, directory: Path):
        self.url, self.directory = url, directory

    def __call__(self, *args) -> Run:
        return cli_main(self.url, *args)

    def ok(self, *args) -> Run:
        result = self(*args)
        assert result.code == 0, result.err
        return result

    def file(self, name: str, content: str) -> Path:
        path = self.directory / name
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    def refused(self, *args, naming: str, saying: str = "") -> Run:
        """The command exits 2 with one line naming `naming` (and saying `saying`), and writes nothing."""
        before = dump_tables(self.url)
        result = self(*args)
        assert result.code == 2, (result.out, result.err)
        line = next((line for line in result.errors if naming in line), None)
        assert line is not None, result.err
        assert saying in line, line
        assert "nothing was written" in result.err
        assert dump_tables(self.url) == before
        return result


@pytest.fixture
def ledger(ledger_url, tmp_path, monkeypatch) -> Ledger:
    ledger = Ledger(ledger_url, tmp_path)
    with acting_as("ana"):
        ledger.ok("init")
        ledger.ok("dataset", "add", ledger.file("survey.yaml", DATASET))
        ledger.ok("role", "grant", "bob", "steward")
        ledger.ok("role", "grant", "carol", "approver")
    return ledger


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


JOSE = unicodedata.normalize("NFC", "Jos\u00e9")  # é as one character
assert nfd(JOSE) != JOSE and len(nfd(JOSE)) == len(JOSE) + 1  # e followed by U+0301, the combining acute


# --------------------------------------------------------------------------
# Half a character: a lone surrogate in JSON
# --------------------------------------------------------------------------


def _json_release(**changes) -> str:
    release = {"id": "r1", "title": "Mean income", "reads": ["income"],
               "mechanism": {"name": "laplace", "epsilon": 0.5}}
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = release
        for parent in parents:
            target = target[parent]
        target[last] = value
    # json.dumps writes a lone surrogate as the escape \ud800, as a hostile file would
    return json.dumps({"dataset": "survey", "releases": [release]})


@pytest.mark.parametrize("where, field", [
    ({"title": "Mean \ud800income"}, "releases[0].title"),
    ({"mechanism__query": "SELECT \udfff"}, "releases[0].mechanism.query"),
])
@pytest.mark.parametrize("command", ["check", "record"])
def test_a_lone_surrogate_in_a_json_release_file_is_refused(ledger, where, field, command):
    path = ledger.file("plan.json", _json_release(**where))
    with acting_as("bob"):
        ledger.refused(command, path, naming=field, saying="lone surrogate")


def test_a_lone_surrogate_in_a_json_dataset_description_is_refused(ledger):
    path = ledger.file("clinic.json", json.dumps({"dataset": "clinic", "description": "visits \ud800",
                                                  "variables": [{"name": "age"}]}))
    with acting_as("ana"):
        ledger.refused("dataset", "add", path, naming="description", saying="lone surrogate")


def test_yaml_cannot_write_a_lone_surrogate_and_says_where(ledger):
    path = ledger.file("plan.yaml", PLAN.replace("title: Mean income", 'title: "Mean \\ud800"'))
    with acting_as("bob"):
        ledger.refused("record", path, naming="plan.yaml:3", saying="malformed YAML")


# --------------------------------------------------------------------------
# Dates at the edge of the calendar
# --------------------------------------------------------------------------

# In UTC, 9999-12-31T23:59:59-12:00 is in the year 10000 and 0001-01-01T00:00:00+01:00 in the
# year 0: neither is a date Python's calendar (or the store's) holds.
PAST_THE_END = "9999-12-31T23:59:59-12:00"
BEFORE_THE_START = "0001-01-01T00:00:00+01:00"
RANGE = "0001-01-02 to 9999-12-30"


@pytest.mark.parametrize("moment", [PAST_THE_END, BEFORE_THE_START, "9999-12-31", "0001-01-01"])
def test_a_release_file_dated_off_the_calendar_is_refused(ledger, moment):
    path = ledger.file("published.yaml", PLAN.replace("epsilon: 0.5}", f"epsilon: 0.5}}, status: published, "
                                                                       f"published_at: {moment}"))
    with acting_as("ana"):
        ledger.refused("record", path, naming="releases[0].published_at", saying=RANGE)  # (every role)


def test_publish_at_a_moment_before_the_calendar_is_refused(ledger):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    with acting_as("carol"):
        ledger.ok("approve", "r1")
        ledger.refused("publish", "r1", "--at", BEFORE_THE_START, naming="--at", saying=RANGE)


DATE_OPTIONS = [
    (["table"], "--as-of"),
    (["subset", "income"], "--as-of"),
    (["headroom", "income"], "--as-of"),
    (["pairs"], "--as-of"),
    (["cap", "list"], "--as-of"),
    (["report", "--format", "md", "--out", "-"], "--as-of"),
    (["report", "--format", "md", "--out", "-"], "--since"),
]


@pytest.mark.parametrize("moment", [PAST_THE_END, BEFORE_THE_START, "0001-01-01", "9999-12-31"])
@pytest.mark.parametrize("command, option", DATE_OPTIONS)
def test_a_date_option_off_the_calendar_is_refused(ledger, command, option, moment):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    ledger.refused(*command, option, moment, naming=option, saying=RANGE)


@pytest.mark.parametrize("moment", ["0001-01-02", "9999-12-30"])
def test_the_first_and_last_days_kept_are_accepted_by_since(ledger, moment):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    ledger.ok("report", "--format", "md", "--out", "-", "--since", moment)


# --------------------------------------------------------------------------
# Environment variables
# --------------------------------------------------------------------------


@pytest.mark.parametrize("variable, value, allowed", [
    ("LEDGER_SQLITE_SYNCHRONOUS", "bogus", "FULL, EXTRA or NORMAL"),
    ("LEDGER_LOCK_TIMEOUT", "nan", "from 0 to 3600"),
    ("LEDGER_LOCK_TIMEOUT", "abc", "from 0 to 3600"),
    ("LEDGER_LOCK_TIMEOUT", "-1", "from 0 to 3600"),
    ("LEDGER_LOCK_TIMEOUT", "inf", "from 0 to 3600"),
    ("LEDGER_LOCK_TIMEOUT", "86400", "from 0 to 3600"),
])
def test_a_bad_store_setting_in_the_environment_is_refused_before_recording(ledger, monkeypatch, variable, value,
                                                                           allowed):
    if variable == "LEDGER_SQLITE_SYNCHRONOUS" and not ledger.url.startswith("sqlite"):
        pytest.skip("a SQLite setting: PostgreSQL does not read it")
    plan = ledger.file("plan.yaml", PLAN)
    monkeypatch.setenv(variable, value)
    with acting_as("bob"):
        ledger.refused("record", plan, naming=f"environment: {variable}", saying=allowed)


@pytest.mark.parametrize("variable, value", [("LEDGER_SQLITE_SYNCHRONOUS", "normal"), ("LEDGER_LOCK_TIMEOUT", "2.5"),
                                             ("LEDGER_LOCK_TIMEOUT", "")])
def test_a_good_store_setting_in_the_environment_is_used(ledger, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    assert [r["id"] for r in json.loads(ledger.ok("releases", "--json").out)] == ["r1"]


def test_a_report_summary_threshold_that_is_not_a_whole_number_is_refused(ledger, monkeypatch):
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    monkeypatch.setenv("LEDGER_REPORT_SUMMARY_FROM", "many")
    out = ledger.directory / "report.md"
    ledger.refused("report", "--out", out, naming="environment: LEDGER_REPORT_SUMMARY_FROM",
                   saying="whole number")
    assert not out.exists()


# --------------------------------------------------------------------------
# YAML numbers: a plain decimal or a fraction, nothing YAML 1.1 reads otherwise
# --------------------------------------------------------------------------


@pytest.mark.parametrize("written, yaml_reads", [
    ("1:30", "90"),  # sexagesimal: 1 * 60 + 30
    ("0x10", "16"),  # hexadecimal
    ("017", "15"),  # octal: 1 * 8 + 7
    ("0b11", "3"),  # binary
    ("1_000", "1000"),  # digit groups
    (".inf", "inf"),
    ("-.inf", "-inf"),
    (".nan", "nan"),
])
def test_a_yaml_number_read_otherwise_than_written_is_refused(ledger, written, yaml_reads):
    path = ledger.file("plan.yaml", PLAN.replace("epsilon: 0.5", f"epsilon: {written}"))
    with acting_as("bob"):
        result = ledger.refused("record", path, naming="releases[0].mechanism.epsilon",
                                saying=WRITE_A_NUMBER)
    assert f"'{written}' is not a plain decimal (YAML reads it as {yaml_reads})" in result.err


@pytest.mark.parametrize("written", ["1e400", '"1_000"', "0o17", '"٣"'])
def test_a_number_text_that_is_not_a_decimal_or_a_fraction_is_refused(ledger, written):
    # 1e400 is past a float's range; Python's Fraction would read "1_000" and the Arabic-Indic
    # digit three, which no reader of the file takes for a number; 0o17 is text to YAML 1.1
    path = ledger.file("plan.yaml", PLAN.replace("epsilon: 0.5", f"epsilon: {written}"))
    with acting_as("bob"):
        ledger.refused("record", path, naming="releases[0].mechanism.epsilon", saying=WRITE_A_NUMBER)


def test_a_cap_written_as_a_time_of_day_is_refused(ledger):
    path = ledger.file("clinic.yaml", DATASET.replace("survey", "clinic").replace("epsilon: 2", "epsilon: 1:30"))
    with acting_as("ana"):
        ledger.refused("dataset", "add", path, naming="caps[0].epsilon", saying=WRITE_A_NUMBER)


def test_plain_decimals_and_fractions_are_charged_as_written(ledger):
    plan = PLAN.replace("r1, title: Mean income", "a, title: A").replace("epsilon: 0.5", "epsilon: 0.25") + \
        "  - {id: b, title: B, reads: [income], mechanism: {name: laplace, epsilon: \"1/4\"}}\n" + \
        "  - {id: c, title: C, reads: [income], mechanism: {name: laplace, epsilon: 2.5e-1}}\n"
    with acting_as("bob"):
        ledger.ok("record", ledger.file("plan.yaml", plan))
    (cap,) = json.loads(ledger.ok("cap", "list", "--json").out)
    assert cap["current_exact"] == "3/4"  # 1/4 + 1/4 + 1/4, the pure-epsilon sum


# --------------------------------------------------------------------------
# People: one name whatever its encoding; no look-alikes
# --------------------------------------------------------------------------


def test_a_person_typed_in_decomposed_form_is_the_same_person(ledger):
    with acting_as("ana"):
        ledger.ok("role", "grant", JOSE, "steward")
        ledger.ok("role", "grant", nfd(JOSE), "approver")
    assert json.loads(ledger.ok("role", "list", "--json").out)[JOSE] == ["steward", "approver"]
    assert nfd(JOSE) not in json.loads(ledger.ok("role", "list", "--json").out)


def test_the_recorder_cannot_approve_under_the_decomposed_spelling_of_their_name(ledger):
    with acting_as("ana"):
        ledger.ok("role", "grant", JOSE, "steward")
        ledger.ok("role", "grant", JOSE, "approver")
    with acting_as(JOSE):
        ledger.ok("record", ledger.file("plan.yaml", PLAN))
    with acting_as(nfd(JOSE)):
        ledger.refused("approve", "r1", naming="approver", saying="separation of duties")


LATIN_GRACE_WITH_CYRILLIC_A = "gr\u0430ce"  # а: CYRILLIC SMALL LETTER A


def test_a_name_mixing_latin_and_cyrillic_is_refused(ledger):
    with acting_as("ana"):
        ledger.refused("role", "grant", LATIN_GRACE_WITH_CYRILLIC_A, "approver", naming="PERSON",
                       saying="mixes Latin and Cyrillic")
    with acting_as(LATIN_GRACE_WITH_CYRILLIC_A):
        ledger.refused("record", ledger.file("plan.yaml", PLAN), naming="operating-system user",
                       saying="mixes Latin and Cyrillic")


def test_a_japanese_name_in_kanji_and_kana_is_one_writing_system(ledger):
    with acting_as("ana"):
        ledger.ok("role", "grant", "山田 たろう", "auditor")


@pytest.mark.parametrize("look_alike, existing", [
    ("Carol", "carol"),  # case alone
    ("\u0392\u039f\u0392", "bob"),  # Greek capitals beta, omicron, beta
    ("\u0430n\u0430", "ana"),  # (refused first as mixed scripts)
    ("\u0430\u0441\u0435", "ace"),  # all Cyrillic: a, es, ie
])
def test_a_new_name_that_looks_like_a_person_of_the_ledger_is_refused(ledger, look_alike, existing):
    if existing == "ace":
        with acting_as("ana"):
            ledger.ok("role", "grant", "ace", "auditor")
    with acting_as("ana"):
        ledger.refused("role", "grant", look_alike, "steward", naming="PERSON")


def test_an_approver_named_in_a_file_is_refused_whoever_it_names(ledger):
    path = ledger.file("approved.yaml", PLAN.replace(
        "epsilon: 0.5}", "epsilon: 0.5}, status: approved, approved_by: CAROL, approved_at: 2026-01-05"))
    with acting_as("bob"):
        ledger.refused("record", path, naming="releases[0].approved_by", saying="an approval is never stated")


# --------------------------------------------------------------------------
# Sizes, commands named in messages, roles
# --------------------------------------------------------------------------


def test_a_file_of_twenty_thousand_releases_is_within_the_limits():
    from ledger.input.documents import parse_document

    text = "dataset: survey\nreleases:\n" + "".join(
        f"  - {{id: r{k}, title: Mean income {k}, reads: [income], mechanism: {{name: laplace, epsilon: 1e-5}}}}\n"
        for k in range(20_000))
    document, errors = parse_document("plan.yaml", text)
    assert errors == []
    assert len(document.data["releases"]) == 20_000


def test_aliases_that_add_more_than_the_limit_are_refused_as_aliases(ledger):
    # a list of 120,000 values, used twice more: the aliases add 240,000 values
    text = "dataset: survey\nnotes: &n [" + ", ".join(["x"] * 120_000) + "]\nmore: *n\nagain: *n\nreleases: []\n"
    ledger.refused("check", ledger.file("aliases.yaml", text), naming="aliases.yaml", saying="aliases expand")


def test_every_command_a_message_names_is_a_command():
    from ledger.cli import app

    commands = app.command().commands  # the command line's commands and groups, by name
    sources = Path(app.__file__).resolve().parents[1].rglob("*.py")
    named = {found for path in sources
             for found in re.findall(r"`privacy-ledger ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", path.read_text("utf-8"))}
    assert ("audit", "verify") in named  # (the search finds what messages name)
    for first, second in named:
        assert first in commands, first
        group = getattr(commands[first], "commands", None)  # (a command's next word is an argument)
        if group is not None and second:
            assert second in group, (first, second)


@pytest.mark.parametrize("person", ["nobody", "bob"])
def test_retotal_needs_an_auditor_or_an_admin(ledger, person):
    with acting_as(person):
        ledger.refused("audit", "retotal", naming="role", saying="needs the auditor or admin role")


@pytest.mark.parametrize("role", ["auditor", "admin"])
def test_an_auditor_or_an_admin_recomputes_the_totals(ledger, role):
    with acting_as("ana"):
        ledger.ok("role", "grant", "dora", role)
    with acting_as("dora"):
        assert "running totals recomputed; 0 differed" in ledger.ok("audit", "retotal").out


def test_an_error_cuts_a_long_quoted_value_but_not_the_words_between_two_short_ones():
    from ledger.core.failures import short_quotes

    between = ("'root' recorded this release and cannot also approve it: separation of duties (another "
               "approver must approve it, or dataset 'graduates' must allow self_approval: true)")
    assert short_quotes(between) == between
    long_value = "'" + "x" * 200 + "'"
    assert short_quotes(f"unknown variable {long_value}") == f"unknown variable '{'x' * 80}…' (120 more characters)"
