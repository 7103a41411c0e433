"""Budget caps through the command line: `cap set` / `cap list`, the pre-release
`check`, `headroom`, the release lifecycle, refusals, and bad input.

Every test runs on a SQLite file and on a fresh PostgreSQL database (`ledger_url`,
conftest.py; the PostgreSQL runs are skipped, with the reason shown, when
LEDGER_TEST_POSTGRES_URL is not set). Commands run in this process through the console
entry point `ledger.cli.app:main`, so exit codes are the installed command's.

Expected figures are computed here by hand from the files' parameters: pure epsilons
add exactly; a rho cap counts a pure release as epsilon^2 / 2 (Bun and Steinke 2016,
Prop 3.3) and a Gaussian as sensitivity^2 / (2 sigma^2) (Prop 1.6); an
epsilon-at-delta cap converts with the tests' own Canonne-Kamath-Steinke (2020)
implementation (`reference_cks`, conftest.py). "Nothing written" is checked by
comparing every table, row by row, before and after.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from ledger.store import identity
from support import acting_as, Run, cli_main, dump_tables

F = Fraction

# self_approval: these tests are about caps and the lifecycle, and often approve a release
# as the person who recorded it; separation of duties is tested in test_people.py
CLINIC = """\
dataset: clinic
delta: 1e-9
self_approval: true
variables:
  - {name: income}
  - {name: diagnosis}
  - {name: medication}
  - {name: age}
  - {name: sex}
groups:
  demographics: [age, sex]
caps:
  - {subset: [income], epsilon: 1}
  - {name: health, subset: [diagnosis, medication], rho: "1/2"}
  - {subset: all, epsilon: 10, delta: 1e-9}
  - {name: demographics, epsilon: 2}
"""

# Recorded before most checks: income 0.5 (pure); diagnosis rho 1/8 (Gaussian sigma 2,
# sensitivity 1) and a pure 1/2 (Laplace scale 2, sensitivity 1), so health holds
# rho 1/8 + (1/2)^2 / 2 = 1/4.
HISTORY = """\
dataset: clinic
releases:
  - {id: a, reads: [income], mechanism: {name: laplace, epsilon: 0.5}}
  - {id: b, reads: [diagnosis], mechanism: {name: gaussian, sigma: 2, sensitivity: 1}}
  - {id: c, reads: [diagnosis], mechanism: {name: laplace, scale: 2, sensitivity: 1}}
"""


@dataclass
class Ledger:
    """One ledger database and a directory for the files written in a test."""

    url: str
    directory: Path

    def __call__(self, *args) -> Run:
        """`privacy-ledger --db URL ARGS`, through the console entry point."""
        return cli_main(self.url, *args)

    def file(self, name: str, content: str) -> Path:
        path = self.directory / name
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    def record(self, content: str, *options: str) -> Run:
        result = self("record", self.file("releases.yaml", content), *options)
        assert result.code == 0, result.err
        return result

    def query(self, sql: str) -> list[tuple]:
        engine = create_engine(self.url)
        try:
            with engine.connect() as connection:
                return [tuple(row) for row in connection.execute(text(sql))]
        finally:
            engine.dispose()

    def dump(self) -> dict[str, list[str]]:
        """Every table, row by row (order-independent)."""
        return dump_tables(self.url)

    def caps(self) -> dict[str, dict]:
        result = self("cap", "list", "--json")
        assert result.code == 0, result.err
        return {cap["cap"]: cap for cap in result.json()}

    def events(self) -> list[tuple[str, str, str]]:
        return self.query("SELECT kind, subject, actor FROM audit_events ORDER BY seq")

    def verified(self) -> bool:
        result = self("audit", "verify")
        assert result.code in (0, 1), result.err
        return result.code == 0

    def release(self, release_id: str) -> dict:
        return {r["id"]: r for r in self("releases", "--json").json()}[release_id]


def releases(*entries: str) -> str:
    return "dataset: clinic\nreleases:\n" + "".join(f"  - {entry}\n" for entry in entries)


def _stated(status: str) -> str:
    """A status and the moment it needs (approved or published: the recorder's own approval, which
    the clinic's self_approval allows)."""
    return status + {"published": ", published_at: \"2024-01-01T00:00:00Z\""}.get(status, "")


def laplace(release_id: str, reads: str, epsilon, status: str = "published") -> str:
    return (f"{{id: {release_id}, reads: [{reads}], status: {_stated(status)}, "
            f"mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}}}")


def gaussian(release_id: str, reads: str, rho, status: str = "published") -> str:
    return (f"{{id: {release_id}, reads: [{reads}], status: {_stated(status)}, "
            f"mechanism: {{name: gaussian, rho: \"{rho}\"}}}}")


def errors(result: Run, directory: Path) -> str:
    """The error lines, with the test directory cut from file names."""
    lines = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert lines, result.err
    return "\n".join(lines).replace(str(directory) + "/", "")


# Most tests run on both backends; those that only exercise parsing and formatting run
# on SQLite alone, to keep the suite fast.
SQLITE_ONLY = pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)


@pytest.fixture
def ledger(ledger_url, tmp_path) -> Ledger:
    return Ledger(ledger_url, tmp_path)


@pytest.fixture
def clinic(ledger) -> Ledger:
    """A ledger holding the clinic dataset and its four caps, nothing recorded."""
    with acting_as("steward"):
        result = ledger("dataset", "add", ledger.file("clinic.dataset.yaml", CLINIC))
    assert result.code == 0, result.err
    assert "4 caps" in result.out
    # the people of these tests (docs/explanation/model.md#people-duties-and-the-book-of-record): steward, the first user, is the admin; a step run
    # without acting_as is the authenticated person's (the operating-system user, or the database login)
    engine = create_engine(ledger.url)
    try:
        authenticated = identity.authenticated(engine).name
    finally:
        engine.dispose()
    for person, roles in {"ana": ["steward"], "carol": ["steward", "approver"], "dan": ["approver"],
                          "erin": ["approver"], "dora": ["admin"],
                          authenticated: ["admin", "steward", "approver"]}.items():
        for role in roles:
            with acting_as("steward"):
                assert ledger("role", "grant", person, role).code == 0
    return ledger


@pytest.fixture
def spent(clinic) -> Ledger:
    """The clinic ledger with HISTORY recorded."""
    with acting_as("ana"):
        clinic.record(HISTORY)
    return clinic


# --------------------------------------------------------------------------
# 1. Caps: from the dataset file, and with `cap set` / `cap list`
# --------------------------------------------------------------------------


def test_caps_from_the_dataset_file(clinic):
    caps = clinic.caps()
    assert set(caps) == {"income", "health", "all", "demographics"}
    summary = {name: (cap["subset"], cap["unit"], cap["limit"], cap["delta"]) for name, cap in caps.items()}
    assert summary == {
        "income": (["income"], "epsilon", 1, None),
        "health": (["diagnosis", "medication"], "rho", 0.5, None),
        "all": (["income", "diagnosis", "medication", "age", "sex"], "epsilon at delta", 10, 1e-9),
        "demographics": (["age", "sex"], "epsilon", 2, None),  # a group cap, by the group's name alone
    }
    for cap in caps.values():
        assert (cap["current"], cap["headroom"], cap["status"], cap["drivers"]) == (0, cap["limit"], "ok", [])

    assert [e for e in clinic.events() if not e[0].startswith("role.")] == [("dataset.added", "clinic", "steward")] + [
        ("cap.set", f"clinic/{name}", "steward") for name in ("income", "health", "all", "demographics")]
    assert clinic.verified()


@SQLITE_ONLY
def test_cap_list_text(spent):
    result = spent("cap", "list")
    assert result.code == 0
    assert "[ok] cap income (epsilon) on {income}: spent 0.5, cap 1, headroom 0.5" in result.out
    assert "[ok] cap health (rho) on {diagnosis, medication}: spent 0.25, cap 0.5, headroom 0.25" in result.out
    assert "driven by: a (0.5)" in result.out


def test_cap_set_adds_and_replaces_caps(clinic):
    commands = [
        (["income", "--epsilon", "1/2"], "cap income on {income}: epsilon 0.5"),
        (["age", "sex", "--name", "people", "--epsilon", "3"], "cap people on {age, sex}: epsilon 3"),
        (["demographics", "--rho", "1/10"], "cap demographics on {age, sex}: rho 0.1"),
        (["all", "--epsilon", "5", "--delta", "1e-6"], "cap all on {income, diagnosis, medication, age, sex}: "
                                                        "epsilon 5 at delta 1 × 10⁻⁶"),
        (["diagnosis", "medication", "--name", "health", "--rho", "0.3"], "cap health on {diagnosis, medication}"),
        (["sex", "--epsilon", "0"], "cap sex on {sex}: epsilon 0"),
    ]
    for args, said in commands:
        with acting_as("dora"):
            result = clinic("cap", "set", *args)
        assert result.code == 0, result.err
        assert said in result.out
    caps = clinic.caps()
    summary = {name: (cap["subset"], cap["unit"], cap["limit"], cap["delta"]) for name, cap in caps.items()}
    assert summary == {
        "income": (["income"], "epsilon", 0.5, None),
        "people": (["age", "sex"], "epsilon", 3, None),
        "demographics": (["age", "sex"], "rho", 0.1, None),
        "all": (["income", "diagnosis", "medication", "age", "sex"], "epsilon at delta", 5, 1e-6),
        "health": (["diagnosis", "medication"], "rho", 0.3, None),
        "sex": (["sex"], "epsilon", 0, None),
    }
    assert [e for e in clinic.events() if e[2] == "dora"] == [
        ("cap.set", f"clinic/{name}", "dora") for name in ("income", "people", "demographics", "all", "health", "sex")]
    assert clinic.verified()


@SQLITE_ONLY
def test_cap_set_on_a_group_under_another_name(clinic):
    """`cap set GROUP --name NAME`: a cap named NAME on the group's variables."""
    result = clinic("cap", "set", "demographics", "--name", "people", "--epsilon", "1")
    assert result.code == 0, result.err
    assert clinic.caps()["people"]["subset"] == ["age", "sex"]


def test_a_cap_below_the_spend_is_accepted_and_over_at_once(spent):
    result = spent("cap", "set", "income", "--epsilon", "0.4")
    assert result.code == 0, result.err
    income = spent.caps()["income"]
    assert (income["limit"], income["current"], income["status"]) == (0.4, 0.5, "over")
    assert income["headroom"] == pytest.approx(-0.1)
    assert income["drivers"] == [{"release": "a", "family": None, "value": 0.5, "value_exact": "1/2", "reason": None}]
    assert "[over] cap income (epsilon) on {income}: spent 0.5, cap 0.4" in spent("cap", "list").out
    # and every plan touching it is refused
    assert spent("check", spent.file("p.yaml", releases(laplace("p", "income", "0.01")))).code == 1
    assert spent.verified()


@SQLITE_ONLY
def test_cap_set_says_at_once_that_the_new_cap_is_over(spent):
    """A cap below what is already spent is accepted and reported as
    over at once, by the command that sets it."""
    result = spent("cap", "set", "income", "--epsilon", "0.4")
    assert result.code == 0, result.err
    assert "over" in result.out + result.err, result.out


# --------------------------------------------------------------------------
# 2. check PLAN... [--json]
# --------------------------------------------------------------------------

PLAN = releases("{id: p, reads: [income, diagnosis], mechanism: {name: laplace, epsilon: 0.3}}")


def test_check_reports_every_touched_cap_by_hand(spent, reference_cks, reference_filter):
    result = spent("check", spent.file("plan.yaml", PLAN), "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["ok"] is True
    caps = {cap["cap"]: cap for cap in report["caps"]}
    assert set(caps) == {"income", "health", "all"}  # demographics (age, sex) is not touched

    income = caps["income"]
    assert (income["current"], income["charge"], income["after"], income["limit"]) == (0.5, 0.3, 0.8, 1)
    assert income["headroom"] == pytest.approx(0.2)
    assert income["status"] == "warn"  # exactly 80% of the cap
    assert income["drivers"] == [{"release": "a", "family": None, "value": 0.5, "value_exact": "1/2", "reason": None}]

    health = caps["health"]  # rho: 1/8 + 1/2^2/2 = 1/4; the plan adds 0.3^2/2 = 0.045
    assert health["current"] == 0.25
    assert health["charge"] == pytest.approx(0.045)
    assert health["after"] == pytest.approx(0.295)
    assert health["headroom"] == pytest.approx(0.205)
    assert (health["limit"], health["status"]) == (0.5, "ok")
    assert health["drivers"] == [{"release": "b", "family": None, "value": 0.125, "value_exact": "1/8", "reason": None},
                                 {"release": "c", "family": None, "value": 0.125, "value_exact": "1/8", "reason": None}]

    every = caps["all"]  # pure 1 (zCDP 1/8 + 1/8) and rho 1/8; the plan: pure +0.3, zCDP +0.045
    before = reference_filter(pure=1, pure_rho=1 / 4, rho=1 / 8, delta=1e-9)
    after = reference_filter(pure=1.3, pure_rho=1 / 4 + 0.045, rho=1 / 8, delta=1e-9)
    if every["accountant"] == "basic":  # the basic accountant's figures, by hand
        assert every["current"] == pytest.approx(before, rel=1e-7)
        assert every["after"] == pytest.approx(after, rel=1e-7)
        assert every["charge"] == pytest.approx(after - before, rel=1e-6)
    else:  # a tighter valid filter decided: never above the basic figure
        assert every["current"] <= before * (1 + 1e-9) and every["after"] <= after * (1 + 1e-9)
        assert every["case"] == "adaptive" and every["theorem"]
    assert every["headroom"] == pytest.approx(10 - every["after"], rel=1e-7)
    assert (every["limit"], every["delta"], every["status"]) == (10, 1e-9, "ok")
    assert [d["release"] for d in every["drivers"]] == ["b", "a", "c"]
    # a release's own charge is the same statement as a total's (the fixed orders, 1/44 of the delta
    # each), not CKS at its best order and the whole delta
    assert every["drivers"][0]["value"] == pytest.approx(reference_filter(rho=1 / 8, delta=1e-9), rel=1e-7)
    assert every["drivers"][0]["value"] > reference_cks(1 / 8, 1e-9)


@SQLITE_ONLY
def test_check_text_keeps_spend_charge_and_cap_apart(spent):
    result = spent("check", spent.file("plan.yaml", PLAN))
    assert result.code == 0, result.err
    assert ("[warn] cap income (epsilon) on {income}: spent 0.5, this plan +0.3, after 0.8, cap 1, headroom 0.2"
            in result.out)
    assert ("[ok] cap health (rho) on {diagnosis, medication}: spent 0.25, this plan +0.045, after 0.295, "
            "cap 0.5, headroom 0.205" in result.out)
    assert "driven by: b (0.125), c (0.125)" in result.out
    assert "demographics" not in result.out
    assert result.out.rstrip().endswith("every cap holds")


@SQLITE_ONLY
@pytest.mark.parametrize("plan, cap, expected", [
    (laplace("p", "income", "0.3"), "income", "warn"),  # 0.5 + 0.3 = 80% of 1
    (laplace("p", "income", "0.299"), "income", "ok"),
    (laplace("p", "income", "0.5"), "income", "warn"),  # exactly the cap: it holds
    (gaussian("p", "medication", "3/20"), "health", "warn"),  # 1/4 + 3/20 = 2/5 = 80% of 1/2
    (gaussian("p", "medication", "149/1000"), "health", "ok"),
    (laplace("p", "age", "1.6"), "demographics", "warn"),  # 1.6 of 2
    (laplace("p", "age", "1.599"), "demographics", "ok"),
])
def test_check_warns_at_exactly_80_percent(spent, plan, cap, expected):
    result = spent("check", spent.file("plan.yaml", releases(plan)), "--json")
    assert result.code == 0, result.err
    assert {c["cap"]: c["status"] for c in result.json()["caps"]}[cap] == expected


def test_check_over_a_cap_exits_1_and_writes_nothing(spent):
    plan = spent.file("plan.yaml", releases(laplace("p", "income", "0.6")))
    before = spent.dump()
    result = spent("check", plan, "--json")
    assert result.code == 1
    report = result.json()
    assert report["ok"] is False
    income = {c["cap"]: c for c in report["caps"]}["income"]
    assert (income["current"], income["charge"], income["after"], income["status"]) == (0.5, 0.6, 1.1, "over")
    assert income["headroom"] == pytest.approx(-0.1)
    text_result = spent("check", plan)
    assert text_result.code == 1
    assert "[over] cap income" in text_result.out and "REFUSED" in text_result.out
    assert spent.dump() == before


@SQLITE_ONLY
def test_a_plan_that_reads_a_capped_variable_exactly_has_no_headroom(spent):
    """An exact release of income leaves no bound: the cap is over, its spend after is
    ∞, and its headroom is -∞, never +∞."""
    plan = spent.file("plan.yaml", releases("{id: p, reads: [income], mechanism: {name: exact}}"))
    result = spent("check", plan, "--json")
    assert result.code == 1
    income = {c["cap"]: c for c in result.json()["caps"]}["income"]
    assert (income["after"], income["status"]) == ("inf", "over")
    assert income["headroom"] != "inf", "an over cap reported with infinite headroom"
    assert income["headroom"] == "-inf" or income["headroom"] < 0


@SQLITE_ONLY
def test_a_plan_touching_no_cap(tmp_path, ledger):
    ledger("dataset", "add", ledger.file("d.yaml", "dataset: clinic\nvariables: [{name: income}]\n"))
    result = ledger("check", ledger.file("p.yaml", releases(laplace("p", "income", 5))))
    assert result.code == 0
    assert "no cap covers" in result.out


@SQLITE_ONLY
def test_check_counts_every_file_of_a_plan_together(spent):
    first = spent.file("one.yaml", releases(laplace("p1", "income", "0.3")))
    second = spent.file("two.yaml", releases(laplace("p2", "income", "0.3")))
    result = spent("check", first, second, "--json")
    assert result.code == 1
    income = {c["cap"]: c for c in result.json()["caps"]}["income"]
    assert (income["charge"], income["status"]) == (0.6, "over")


@SQLITE_ONLY
@pytest.mark.parametrize("plan, expected", [
    (releases(laplace("p", "income", 1)).replace("dataset: clinic", "dataset: census"),
     ["plan.yaml:1: dataset: ", "census"]),
    (releases("{id: p, reads: [income, salary], mechanism: {name: laplace, epsilon: 1}}"),
     ["plan.yaml:3: releases[0].reads[1]: ", "salary"]),
    (releases(laplace("a", "income", "0.1")), ["plan.yaml:3: releases[0].id: ", "'a'"]),  # already recorded
])
def test_check_bad_input_exits_2_names_file_and_field_and_writes_nothing(spent, plan, expected):
    path = spent.file("plan.yaml", plan)
    before = spent.dump()
    result = spent("check", path)
    assert result.code == 2, (result.out, result.err)
    found = errors(result, spent.directory)
    for fragment in expected:
        assert fragment in found, found
    assert "nothing was written" in result.err
    assert spent.dump() == before


# --------------------------------------------------------------------------
# 3. headroom VAR... [--json]
# --------------------------------------------------------------------------


HEADROOM_FIGURES = ("variables", "epsilon", "epsilon_exact", "epsilon_binding", "rho", "rho_exact", "rho_binding",
                    "epsilon_accountant", "rho_accountant")


def test_headroom_under_a_pure_cap_is_exact_and_recording_it_fits(spent):
    room = spent("headroom", "income", "--json").json()
    assert {key: room[key] for key in HEADROOM_FIGURES} == {
        "variables": ["income"], "epsilon": 0.5, "epsilon_exact": "1/2", "epsilon_binding": "income",
        "rho": 0, "rho_exact": "0", "rho_binding": "income",  # a rho release cannot fit under a pure cap
        "epsilon_accountant": "basic", "rho_accountant": "basic"}  # the pure sum decides
    assert room["mechanism"] == "any" and room["rho_epsilon"] == 0
    text_room = spent("headroom", "income").out
    assert "{income}: largest epsilon 0.5 (binding cap: income)" in text_room

    before = spent.dump()
    more = spent("record", spent.file("more.yaml", releases(laplace("more", "income", "0.500000001"))))
    assert more.code == 1
    assert spent.dump() == before
    spent.record(releases(laplace("exactly", "income", "0.5")))
    assert spent.caps()["income"]["current"] == 1
    assert spent("headroom", "income", "--json").json()["epsilon"] == 0


@pytest.mark.parametrize("kind", ["epsilon", "rho"])
def test_headroom_under_a_rho_cap_is_rounded_down_and_recording_it_fits(spent, kind):
    room = spent("headroom", "diagnosis", "medication", "--json").json()
    assert room["variables"] == ["diagnosis", "medication"]
    # rho spent on health: 1/4; a pure epsilon enters as epsilon^2 / 2
    largest = math.sqrt(2 * (0.5 - 0.25))
    assert largest - 1e-9 - 1e-15 <= room["epsilon"] <= largest
    assert room["epsilon_binding"] == "health"
    assert (room["rho"], room["rho_binding"]) == (0.25, "health")

    value = F(repr(room[kind]))
    record = laplace if kind == "epsilon" else gaussian
    before = spent.dump()
    refused = spent("record", spent.file("more.yaml", releases(record("more", "diagnosis, medication",
                                                                      value + F(1, 10**6)))))
    assert refused.code == 1, refused.err
    assert "health" in refused.err
    assert spent.dump() == before
    spent.record(releases(record("fits", "diagnosis, medication", value)))
    health = spent.caps()["health"]
    assert health["current"] <= 0.5 and health["status"] == "warn"
    if kind == "rho":
        assert health["current"] == 0.5


@SQLITE_ONLY
def test_headroom_of_a_group_and_of_unknown_names(spent):
    room = spent("headroom", "demographics", "--json").json()
    assert {key: room[key] for key in HEADROOM_FIGURES} == {
        "variables": ["age", "sex"], "epsilon": 2, "epsilon_exact": "2", "epsilon_binding": "demographics",
        "rho": 0, "rho_exact": "0", "rho_binding": "demographics", "epsilon_accountant": "basic",
        "rho_accountant": "basic"}
    bad = spent("headroom", "income", "salary")
    assert bad.code == 2
    assert "salary" in errors(bad, spent.directory)


# --------------------------------------------------------------------------
# 4. The release lifecycle
# --------------------------------------------------------------------------


def income_spent(ledger: Ledger):
    return ledger.caps()["income"]["current"]


def test_planned_approved_published_retracted(clinic):
    with acting_as("ana"):
        clinic.record(releases(laplace("p", "income", "0.4", status="planned")))
    plan = clinic.file("plan.yaml", releases(laplace("q", "income", "0.5")))

    def reserved():
        income = {c["cap"]: c for c in clinic("check", plan, "--json").json()["caps"]}["income"]
        return income["current"], [d["release"] for d in income["drivers"]], income["status"]

    assert reserved() == (0.4, ["p"], "warn")  # a planned release reserves its budget
    assert clinic.release("p")["status"] == "planned"
    assert income_spent(clinic) == 0.4
    assert clinic("headroom", "income", "--json").json()["epsilon"] == 0.6

    t0 = datetime.now(UTC) - timedelta(seconds=2)
    with acting_as("carol"):
        result = clinic("approve", "p")
    assert (result.code, result.out.strip()) == (0, "p: approved")
    approved = clinic.release("p")
    assert (approved["status"], approved["approved_by"]) == ("approved", "carol")
    assert t0 <= datetime.fromisoformat(approved["approved_at"]) <= datetime.now(UTC) + timedelta(seconds=2)
    assert reserved() == (0.4, ["p"], "warn")

    with acting_as("dan"):
        assert clinic("publish", "p").code == 0
    published = clinic.release("p")
    assert published["status"] == "published" and published["approved_by"] == "carol"
    assert t0 <= datetime.fromisoformat(published["published_at"]) <= datetime.now(UTC) + timedelta(seconds=2)
    assert reserved() == (0.4, ["p"], "warn")

    with acting_as("erin"):
        assert clinic("retract", "p", "--reason", "a wrong table").code == 0
    assert clinic.release("p")["status"] == "retracted"
    assert reserved() == (0.4, ["p"], "warn")  # what was published cannot be unpublished
    assert clinic("subset", "income", "--json").json()["epsilon"] == 0.4

    assert [e for e in clinic.events() if e[1] == "p"] == [
        ("release.recorded", "p", "ana"), ("release.approved", "p", "carol"),
        ("release.published", "p", "dan"), ("release.retracted", "p", "erin")]
    assert clinic.verified()


def test_cancelling_frees_the_reservation(clinic):
    clinic.record(releases(laplace("p", "income", "0.6", status="planned"),
                           laplace("q", "income", "0.3", status="approved"),
                           gaussian("g", "diagnosis", "1/10", status="planned")))
    assert income_spent(clinic) == 0.9
    assert clinic.caps()["health"]["current"] == 0.1
    refused = clinic("check", clinic.file("r.yaml", releases(laplace("r", "income", "0.5"))))
    assert refused.code == 1

    with acting_as("carol"):
        assert clinic("cancel", "p", "--reason", "not needed").out.strip() == "p: cancelled"
    assert income_spent(clinic) == 0.3
    assert clinic.caps()["income"]["drivers"] == [{"release": "q", "family": None, "value": 0.3, "value_exact": "3/10", "reason": None}]
    assert clinic("subset", "income", "--json").json()["epsilon"] == 0.3
    assert clinic("check", clinic.file("r.yaml", releases(laplace("r", "income", "0.5")))).code == 0

    assert clinic("cancel", "q", "--reason", "not needed").code == 0
    assert clinic("cancel", "g", "--reason", "not needed").code == 0
    caps = clinic.caps()
    assert (caps["income"]["current"], caps["health"]["current"]) == (0, 0)
    assert ("release.cancelled", "p", "carol") in clinic.events()
    assert clinic.verified()


@SQLITE_ONLY
@pytest.mark.parametrize("steps, action", [
    (["cancel"], "publish"),  # publishing a cancelled release
    (["approve", "publish"], "approve"),  # approving a published one
    ([], "retract"),  # retracting a planned one
    ([], "publish"),  # publishing without approval
    (["approve", "publish"], "cancel"),  # cancelling after publishing
    (["approve", "publish", "retract"], "publish"),
    (["cancel"], "cancel"),
])
def test_unknown_transitions_exit_2_naming_the_release_and_write_nothing(clinic, steps, action):
    clinic.record(releases(laplace("p-7", "income", "0.1", status="planned")))
    reason = {"cancel": ["--reason", "a test"], "retract": ["--reason", "a test"]}
    for step in steps:
        assert clinic(step, "p-7", *reason.get(step, [])).code == 0
    before = clinic.dump()
    result = clinic(action, "p-7", *reason.get(action, []))
    assert result.code == 2, (result.out, result.err)
    assert "release p-7" in errors(result, clinic.directory)
    assert "nothing was written" in result.err
    assert clinic.dump() == before


@SQLITE_ONLY
@pytest.mark.parametrize("action", ["approve", "publish", "retract", "cancel"])
def test_an_unknown_release_id_exits_2(spent, action):
    before = spent.dump()
    result = spent(action, "ghost")
    assert result.code == 2
    assert "ghost" in errors(result, spent.directory)
    assert spent.dump() == before


# --------------------------------------------------------------------------
# 5. Atomic enforcement: record, approve, publish
# --------------------------------------------------------------------------


def test_record_that_would_break_a_cap_is_refused_naming_the_cap_and_the_excess(spent):
    before = spent.dump()
    path = spent.file("r.yaml", releases(laplace("ok-one", "age", "0.1"), laplace("r", "income", "0.6")))
    result = spent("record", path)
    assert result.code == 1
    assert "cap clinic/income: epsilon would be 1.1 against a cap of 1, over by 0.1" in result.err
    assert "nothing was written" in result.err
    assert spent.dump() == before  # not even the release that fits


@SQLITE_ONLY
def test_record_breaking_two_caps_names_both(spent):
    before = spent.dump()
    result = spent("record", spent.file("r.yaml", releases(laplace("r", "income, diagnosis", "1"))))
    assert result.code == 1
    assert "2 caps" in result.err
    assert "cap clinic/income: epsilon would be 1.5 against a cap of 1, over by 0.5" in result.err
    # health: 1/4 + 1/2 = 3/4 against 1/2
    assert "cap clinic/health: rho would be 0.75 against a cap of 0.5, over by 0.25" in result.err
    assert spent.dump() == before


@SQLITE_ONLY
def test_record_of_an_unprotected_read_under_a_cap_is_refused(spent):
    result = spent("record", spent.file("r.yaml", releases("{id: x, reads: [sex], mechanism: {name: exact}}")))
    assert result.code == 1
    assert "cap clinic/demographics" in result.err and "no bound" in result.err


@pytest.mark.parametrize("action, steps", [("approve", []), ("publish", ["approve"])])
def test_approve_and_publish_refuse_when_a_cap_would_break(clinic, action, steps):
    clinic.record(releases(laplace("p", "income", "0.5", status="planned")))
    for step in steps:
        assert clinic(step, "p").code == 0
    assert clinic("cap", "set", "income", "--epsilon", "0.4").code == 0
    before = clinic.dump()
    result = clinic(action, "p")
    assert result.code == 1
    assert f"{action} p refused" in result.err
    assert "cap clinic/income: epsilon would be 0.5 against a cap of 0.4, over by 0.1" in result.err
    assert clinic.dump() == before
    # cancelling is always allowed, and frees the budget
    assert clinic("cancel", "p", "--reason", "over the cap").code == 0
    assert clinic.caps()["income"]["status"] == "ok"


# --------------------------------------------------------------------------
# 8. Bad caps: exit 2, file and field named, nothing written
# --------------------------------------------------------------------------

SURVEY = """\
dataset: survey
variables:
  - {name: income}
  - {name: age}
groups:
  people: [age]
caps:
  - {subset: [age], epsilon: 1}
  - %s
"""


@SQLITE_ONLY
@pytest.mark.parametrize("entry, expected", [
    ("{subset: [income, salary], epsilon: 1}", ["survey.yaml:9: caps[1].subset[1]: ", "'salary'"]),
    ("{name: wellbeing, epsilon: 1}", ["survey.yaml:9: caps[1].name: ", "'wellbeing'"]),
    ("{subset: [income], epsilon: -1}", ["survey.yaml:9: caps[1].epsilon: ", "-1"]),
    ("{subset: [income], rho: .nan}", ["survey.yaml:9: caps[1].rho: ", "nan"]),
    ("{subset: [income], epsilon: .inf}", ["survey.yaml:9: caps[1].epsilon: ", "inf"]),
    ("{subset: all, epsilon: 1, delta: 1}", ["survey.yaml:9: caps[1].delta: "]),
    ("{subset: [income], rho: 1, delta: 1e-9}", ["survey.yaml:9: caps[1].delta: "]),
    ("{subset: [income], epsilon: 1, rho: 1}", ["survey.yaml:9: caps[1]"]),
])
def test_a_bad_cap_in_a_dataset_file(clinic, entry, expected):
    path = clinic.file("survey.yaml", SURVEY % entry)
    before = clinic.dump()
    result = clinic("dataset", "add", path)
    assert result.code == 2, (result.out, result.err)
    found = errors(result, clinic.directory)
    for fragment in expected:
        assert fragment in found, found
    assert "nothing was written" in result.err
    assert clinic.dump() == before


@SQLITE_ONLY
@pytest.mark.parametrize("args, expected", [
    (["salary", "--epsilon", "1"], ["command line: SUBSET: ", "'salary'"]),
    (["income", "salary", "--epsilon", "1"], ["command line: SUBSET: ", "'salary'"]),
    (["wellbeing", "--epsilon", "1"], ["command line: SUBSET: ", "'wellbeing'"]),
    (["income", "--epsilon=-1"], ["command line: --epsilon: ", "-1"]),
    (["income", "--epsilon", "nan"], ["command line: --epsilon: ", "nan"]),
    (["income", "--rho", "inf"], ["command line: --rho: ", "inf"]),
    (["income", "--rho=-0.5"], ["command line: --rho: ", "-0.5"]),
    (["income", "--epsilon", "1", "--delta", "1"], ["command line: --delta: "]),
    (["income", "--rho", "1", "--delta", "1e-9"], ["command line: --delta: "]),
    (["income"], ["command line: --epsilon: "]),
    (["income", "--epsilon", "1", "--dataset", "census"], ["--dataset", "'census'"]),
])
def test_a_bad_cap_set(spent, args, expected):
    """Each problem names the option or argument as typed (`--epsilon`, `SUBSET`), not the
    cap file's field (`caps[0].epsilon`), which a steward at the command line never wrote."""
    before = spent.dump()
    result = spent("cap", "set", *args)
    assert result.code == 2, (result.out, result.err)
    found = errors(result, spent.directory)
    for fragment in expected:
        assert fragment in found, found
    assert spent.dump() == before


def test_a_caps_subset_is_printed_in_dataset_order_as_subset_prints_it(tmp_path):
    """A cap's subset is printed in one order, the dataset's, as `subset` prints it: in cap set,
    record, check, cap list (text and JSON), headroom and the report; a cap's name made from its variables stays as it was (it names the cap)."""
    url = f"sqlite:///{tmp_path / 'j.db'}"
    (tmp_path / "d.yaml").write_text("dataset: j\nvariables: [{name: region}, {name: income}, {name: sex}, "
                                     "{name: age}]\ncaps:\n  - {name: c, subset: [sex, income, region], epsilon: 5}\n")
    (tmp_path / "r.yaml").write_text("dataset: j\nreleases:\n"
                                     "  - {id: l, reads: [sex, region], mechanism: {name: laplace, epsilon: 1}}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    cap_set = cli_main(url, "cap", "set", "age", "sex", "--epsilon", "4").out
    assert "cap age,sex on {sex, age}" in cap_set
    assert "on {region, income, sex}" in cli_main(url, "check", tmp_path / "r.yaml").out
    assert "on {region, income, sex}" in cli_main(url, "record", tmp_path / "r.yaml").out
    assert cli_main(url, "subset", "sex", "income", "region").out.startswith("{region, income, sex}:")
    listed = cli_main(url, "cap", "list").out
    assert "cap c (epsilon) on {region, income, sex}" in listed and "on {sex, age}" in listed
    subsets = {c["cap"]: c["subset"] for c in cli_main(url, "cap", "list", "--json").json()}
    assert subsets == {"c": ["region", "income", "sex"], "age,sex": ["sex", "age"]}
    assert cli_main(url, "subset", "sex", "income", "region", "--json").json()["subset"] == subsets["c"]
    assert cli_main(url, "headroom", "sex", "region").out.startswith("{region, sex}:")
    report = cli_main(url, "report", "--format", "md", "--out", "-").out
    assert "| c | {region, income, sex} |" in report and "| age,sex | {sex, age} |" in report


@settings(max_examples=200, deadline=None)
@given(order=st.lists(st.sampled_from("abcdefgh"), unique=True), extra=st.sets(st.sampled_from("xyz")),
       data=st.data())
def test_one_dataset_order_for_a_caps_subset_and_headrooms_variables(order, extra, data):
    """`in_dataset_order`, the one order of Cap.ordered_subset and headroom's variables: the
    subset itself (never a variable dropped), in the dataset's order when it holds them all,
    else sorted."""
    from ledger.core.records import Cap, in_dataset_order

    subset = frozenset(data.draw(st.sets(st.sampled_from(order)))) if order else frozenset()
    assert in_dataset_order(tuple(order), subset) == tuple(name for name in order if name in subset)
    assert in_dataset_order(tuple(order), subset | extra) == (tuple(sorted(subset | extra)) if extra else
                                                            tuple(name for name in order if name in subset))
    cap = Cap("d", "c", subset, epsilon=Fraction(1), order=tuple(order))
    assert cap.ordered_subset == in_dataset_order(tuple(order), subset)
