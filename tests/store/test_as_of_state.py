"""Every --as-of view shows the dataset and the caps as they stood at T (history.state_as_of).

A question asked at T of a ledger must get the answer the ledger gave at T: the variables
then, each with its classification then (docs/explanation/model.md#public-and-protected-variables: public ones leave the protected
headline), the groups then, the caps set by then with the limits they had. Each test builds
one ledger with its whole history (changes after T included) and asks every command at T;
an independent ledger built from the same steps truncated at T (same clock, same people) is
asked the same question now, with no --as-of (no replay at all), and the answers must be
equal, field for field: `subset` (a group, the protected subset), `table`, `pairs`,
`cap list`, `headroom`, and `report` (the full and the summarised path).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import acting_as, cli_main

from ledger.accounting.history import StateChange, state_as_of
from ledger.core.records import Cap, Dataset, Variable
from ledger.store import session_state

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
STEP = timedelta(minutes=1)
CLOCK = [START]

DATASET = """\
dataset: d
self_approval: true  # (history recorded as published by its recorder)
delta: 1e-6
variables:
  - {name: x, classification: sensitive}
  - {name: y, classification: sensitive}
  - {name: z, classification: public}
groups:
  g: [x]
caps:
  - {name: c0, subset: [x, y], epsilon: 5}
"""


def release(rid: str, reads, epsilon: str, at: datetime) -> str:
    return (f"dataset: d\nreleases:\n  - {{id: {rid}, reads: [{', '.join(reads)}], status: published, "
            f"published_at: \"{at.isoformat()}\", mechanism: {{name: laplace, epsilon: \"{epsilon}\"}}}}\n")


class Ledger:
    """A ledger on a SQLite file whose clock (session_state.now) the test moves: each step one minute on."""

    def __init__(self, directory: Path, monkeypatch, url: str | None = None):
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.url = directory, url or f"sqlite:///{directory / 'ledger.db'}"
        self.now, self.files = START, 0
        monkeypatch.setattr(session_state, "now", lambda: CLOCK[0])  # (one clock, whichever ledger moves it)

    def run(self, *args):
        CLOCK[0] = self.now
        found = cli_main(self.url, *map(str, args))
        assert found.code == 0, (args, found.out, found.err)
        return found

    def file(self, text: str) -> Path:
        self.files += 1
        path = self.directory / f"f{self.files}.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    def apply(self, step) -> None:
        """One step: (minute, command, arguments); a release or dataset text is written to a file."""
        minute, command, args = step
        self.now = START + minute * STEP
        if command == "record":
            rid, reads, epsilon = args
            self.run("record", self.file(release(rid, reads, epsilon, self.now)))
        elif command == "plan":  # a planned release: charged from now, until it is cancelled
            rid, reads, epsilon = args
            self.run("record", self.file(release(rid, reads, epsilon, self.now)
                                         .replace(f'status: published, published_at: "{self.now.isoformat()}", ', "")))
        elif command == "amend":
            self.run("dataset", "amend", self.file(args))
        elif command == "add":
            self.run("dataset", "add", self.file(DATASET))
        else:
            self.run(*command.split(), *args)

    def ask(self, *args, at: datetime | None = None) -> str:
        CLOCK[0] = self.now
        found = cli_main(self.url, *map(str, args), *(("--as-of", at.isoformat()) if at else ()))
        assert found.code == 0, (args, found.out, found.err)
        return found.out


QUESTIONS = (("subset", "protected", "--json"), ("subset", "x", "y", "--json"), ("table", "--json"),
             ("pairs", "--json"), ("cap", "list", "--json"), ("headroom", "y", "--json"), ("cap", "list"),
             ("table",))


def report_sections(text: str) -> dict[str, str]:
    """The parts of a Markdown report that state figures: the headline rows of the
    certificate, Table 1's total row, the caps and the pairs sections."""
    rows = {label: line for line in text.splitlines()
            for label in ("Protected subset epsilon", "Worst protected variable", "Worst protected pair",
                          "Public variables", "Whole dataset, ordinary DP", "Whole dataset, rho",
                          "Caps over / warn / ok", "Releases |") if line.startswith(f"| {label}")
            or line.startswith(f"| **{label}")}
    rows["total row"] = next((line for line in text.splitlines() if line.startswith("| **All releases")), "")
    for heading in ("## Caps", "## Every pair of variables"):
        start = text.index(heading)
        rows[heading] = text[start:text.index("\n## ", start + 1)]
    return rows


def meeting_section(text: str) -> str:
    """A Markdown report's "Changes since" section, without the cap moves' header (its last
    column is headed "At T" at --as-of, "Now" without)."""
    start = text.index("## Changes since")
    section = text[start:text.index("\n## ", start + 1)]
    return "\n".join(line for line in section.splitlines() if not line.startswith("| Cap | Subset |"))


AS_OF_FIELDS = ("as_of", "dataset_added_at", "dataset_existed")  # where --as-of states the moment it used


def _without_moment(document):
    """A --json answer without the fields that state the --as-of moment (the history up to then has none)."""
    if isinstance(document, list):
        return [_without_moment(item) for item in document]
    if isinstance(document, dict):
        return {k: v for k, v in document.items() if k not in AS_OF_FIELDS}
    return document


def _text_without_moment(text: str, at: datetime) -> str:
    """A text answer without its --as-of statement (the first lines, and headroom's last words)."""
    from ledger.operations.moments import moment_text

    lines = [line for line in text.splitlines(keepends=True)
             if not line.startswith("as of ") and not line.startswith("note: dataset ")]
    return "".join(lines).replace(f"; the ledger as of {moment_text(at)}", "")


def answers(ledger: Ledger, at: datetime | None, monkeypatch) -> dict:
    found = {" ".join(q): ledger.ask(*q, at=at) for q in QUESTIONS}
    found = {q: (_without_moment(json.loads(a)) if q.endswith("--json") else _text_without_moment(a, at)
                 if at else a) for q, a in found.items()}
    for summarised in ("1000000", "1"):
        monkeypatch.setenv("LEDGER_REPORT_SUMMARY_FROM", summarised)
        out = ledger.directory / f"report-{summarised}.md"
        ledger.ask("report", "--out", out, at=at)
        found[f"report {summarised}"] = report_sections(out.read_text(encoding="utf-8"))
        # the meeting pack since just after the dataset was added: what changed (the dataset's changes too), how each cap moved
        ledger.ask("report", "--out", out, "--since", (START + STEP / 4).isoformat(), at=at)
        found[f"meeting pack {summarised}"] = meeting_section(out.read_text(encoding="utf-8"))
    monkeypatch.delenv("LEDGER_REPORT_SUMMARY_FROM")
    return found


def compare(tmp_path, monkeypatch, steps, at: datetime, url: str | None = None) -> dict:
    """Every answer at `at` of the whole history (on `url`: SQLite by default) equals the answer
    now of the history up to `at` (on SQLite), both written by one person (whom the audit trail
    names: the same on either backend)."""
    with acting_as("steward"):
        return _compare(tmp_path, monkeypatch, steps, at, url)


def _compare(tmp_path, monkeypatch, steps, at: datetime, url: str | None = None) -> dict:
    whole = Ledger(tmp_path / "whole", monkeypatch, url)
    for step in steps:
        whole.apply(step)
    whole.now = max(whole.now, at)  # (--as-of is never in the future)
    truncated = Ledger(tmp_path / "truncated", monkeypatch)
    for step in steps:
        if START + step[0] * STEP <= at:
            truncated.apply(step)
    truncated.now = at
    then, now = answers(whole, at, monkeypatch), answers(truncated, None, monkeypatch)
    for question in then:
        assert then[question] == now[question], question
    return then


# the example of the brief: after T, x is reclassified public, the group changes, a cap is set
# and another's limit changes (and a release is recorded, a variable added, a cap removed)
STORY = [
    (0, "add", ()),
    (1, "record", ("r1", ["x"], "1")),
    (2, "record", ("r2", ["x", "y"], "1/2")),
    (3, "cap set", ("y", "--epsilon", "4", "--name", "c9")),
    # T: minute 4
    (5, "dataset reclassify", ("x", "public", "--reason", "bands published")),
    (6, "group set", ("g", "x", "y")),
    (7, "cap set", ("y", "--epsilon", "2", "--name", "c1")),
    (8, "cap set", ("x", "y", "--epsilon", "3", "--name", "c0")),
    (9, "cap remove", ("c9", "--reason", "merged")),
    (10, "amend", DATASET.replace("groups:", "  - {name: w, classification: sensitive}\ngroups:")
     .replace("caps:\n  - {name: c0, subset: [x, y], epsilon: 5}\n", "")
     .replace("{name: x, classification: sensitive}", "{name: x, classification: public}")
     .replace("g: [x]", "g: [x, y]")),
    (11, "record", ("r3", ["y", "w"], "1")),
]


def test_every_command_at_T_answers_as_the_ledger_built_up_to_T(tmp_path, monkeypatch, ledger_url):
    """The whole history on each backend (the state's events read by SQL on PostgreSQL too)."""
    at = START + 4 * STEP
    then = compare(tmp_path, monkeypatch, STORY, at, ledger_url)
    # and the figures are those of T, not today's: x protected, g = {x}, c0 at 5, c9 there, c1 not
    assert then["subset protected --json"]["subset"] == ["x", "y"]
    assert then["subset protected --json"]["epsilon"] == 1.5
    assert [c["cap"] for c in then["cap list --json"]] == ["c0", "c9"]
    assert then["cap list --json"][0]["limit"] == 5
    assert then["table --json"]["headline"]["protected"] == ["x", "y"]
    assert then["table --json"]["variables"] == ["x", "y", "z"]  # w, added after T, did not exist then
    # the same question, the same answer in every command at T: the protected subset's loss
    protected = then["subset protected --json"]
    assert then["table --json"]["headline"]["epsilon_exact"] == protected["epsilon_exact"] == "3/2"
    for path in ("report 1", "report 1000000"):
        assert "**1.5**" in then[path]["Protected subset epsilon"]
        assert "| c0 | {x, y} | epsilon | 5 | 1.5 | 3.5 | ok |" in then[path]["## Caps"]
    assert then["cap list --json"][0]["current"] == 1.5 and then["cap list --json"][0]["headroom"] == 3.5
    assert then["headroom y --json"]["epsilon"] == 3.5 and then["headroom y --json"]["epsilon_binding"] == "c0"
    for path in ("meeting pack 1", "meeting pack 1000000"):  # the changes after T are not changes by T
        assert "### Dataset changed (0)" in then[path] and "| c9 | {y} | epsilon | 4 | — |" in then[path]  # set since: no figure then (new)
    # today: x is public, so the protected subset is {y, w}
    whole = Ledger(tmp_path / "today", monkeypatch)
    for step in STORY:
        whole.apply(step)
    assert json.loads(whole.ask("subset", "protected", "--json"))["subset"] == ["y", "w"]
    assert json.loads(whole.ask("subset", "g", "--json", at=at))["subset"] == ["x"]


def test_a_release_published_before_T_and_recorded_after_it_keeps_its_variable_at_T(tmp_path, monkeypatch):
    """History recorded later, dated by its publication: the release counts at T; the variable
    it reads, added after T, exists at T in its first recorded state (state_as_of's rule), so
    the protected headline at T carries its cost (never under-reported)."""
    ledger = Ledger(tmp_path / "late", monkeypatch)
    ledger.apply((0, "add", ()))
    ledger.apply((5, "amend", DATASET.replace("groups:", "  - {name: w, classification: sensitive}\ngroups:")))
    ledger.now = START + 6 * STEP
    ledger.run("record", ledger.file(release("late", ["w"], "2", START + 1 * STEP)))
    at = START + 2 * STEP
    protected = json.loads(ledger.ask("subset", "protected", "--json", at=at))
    assert protected["subset"] == ["x", "y", "w"] and protected["epsilon"] == 2
    table = json.loads(ledger.ask("table", "--json", at=at))
    assert table["variables"] == ["x", "y", "z", "w"] and table["headline"]["epsilon"] == 2
    # before the release's publication, w did not exist yet (no release read it then)
    before = json.loads(ledger.ask("subset", "protected", "--json", at=START + STEP / 2))
    assert before["subset"] == ["x", "y"] and before["epsilon"] == 0


# a variable removed after T: u, read by no release, is removed at minute 7; v, read by a release
# planned at 3 and cancelled at 5, and w, read by a published one, cannot be removed
REMOVED = DATASET.replace("groups:", "  - {name: u, classification: sensitive}\n  - {name: v, classification: sensitive}\n"
                          "  - {name: w, classification: sensitive}\ngroups:")
REMOVED_STORY = [
    (0, "add", ()),
    (1, "amend", REMOVED),
    (2, "record", ("r1", ["x", "w"], "1")),
    (3, "plan", ("r2", ["v"], "1/2")),
    # T: minute 4 (r2 is charged then: planned, not yet cancelled)
    (5, "cancel", ("r2", "--reason", "not needed")),
    (7, "amend", REMOVED.replace("  - {name: u, classification: sensitive}\n", "")),
]


def test_a_variable_removed_after_T_was_read_by_no_release_charged_at_T(tmp_path, monkeypatch, ledger_url):
    """A variable in the dataset at T and removed since shows at T as a column of zeros, and that is
    the answer: no release charged at T (or ever) read it. `dataset amend` refuses to remove a
    variable any recorded release reads, whatever its status: a cancelled one counted while it was
    planned, a retracted one from its publication (history.status_at), so the ledger keeps every
    variable a release charged at some T reads. The ledger built up to T answers the same."""
    at = START + 4 * STEP
    then = compare(tmp_path, monkeypatch, REMOVED_STORY, at, ledger_url)
    table = then["table --json"]
    assert table["variables"] == ["x", "y", "z", "u", "v", "w"]  # u existed at T
    column = {name: table["total"]["values"][name] for name in table["variables"]}
    assert column == {"x": 1, "y": 0, "z": 0, "u": 0, "v": 0.5, "w": 1}  # v: r2, planned at T
    assert then["subset protected --json"]["subset"] == ["x", "y", "u", "v", "w"]
    assert then["subset protected --json"]["epsilon_exact"] == "3/2"
    # today u is gone; v (read only by the cancelled r2) and w could not be removed
    whole = Ledger(tmp_path / "refused", monkeypatch)
    for step in REMOVED_STORY:
        whole.apply(step)
    assert json.loads(whole.ask("table", "--json"))["variables"] == ["x", "y", "z", "v", "w"]
    for name, reader in (("v", "r2"), ("w", "r1")):
        refused = cli_main(whole.url, "dataset", "amend", whole.file(
            REMOVED.replace("  - {name: u, classification: sensitive}\n", "")
            .replace(f"  - {{name: {name}, classification: sensitive}}\n", "")))
        assert refused.code == 2 and f"cannot remove variable {name!r}: it is read by recorded release {reader}" \
            in refused.err


# --------------------------------------------------------------------------
# The rule itself, on records (history.state_as_of)
# --------------------------------------------------------------------------


def _dataset(classes: dict[str, str], groups: dict[str, set] | None = None) -> Dataset:
    return Dataset("d", tuple(Variable(n, c) for n, c in classes.items()),
                   groups=tuple((g, frozenset(m)) for g, m in (groups or {}).items()))


def test_state_as_of_replays_each_change_by_T_and_no_later():
    first = _dataset({"x": "sensitive", "y": "sensitive"}, {"g": {"x"}})
    later = _dataset({"x": "public", "y": "sensitive", "w": "sensitive"}, {"g": {"x", "y"}})
    c0, c0_later, c1 = (Cap("d", "c0", frozenset({"x"}), epsilon=e) for e in (5, 3, 2))
    c1 = Cap("d", "c1", frozenset({"y"}), epsilon=2)
    t = [START + k * STEP for k in range(6)]
    changes = [StateChange(t[0], "dataset.added", dataset=first), StateChange(t[0], "cap.set", cap=("c0", c0)),
               StateChange(t[2], "variable.reclassified", dataset=later), StateChange(t[2], "cap.set", cap=("c0", c0_later)),
               StateChange(t[3], "cap.set", cap=("c1", c1)), StateChange(t[4], "cap.removed", cap=("c0", None))]
    now_caps = [c1]
    at = {k: state_as_of(later, now_caps, changes, t[k]) for k in range(6)}
    assert at[1].dataset == first and at[1].caps == (c0,)
    assert at[2].dataset == later and at[2].caps == (c0_later,)  # a change at T is in force at T
    assert at[3].caps == (c0_later, c1) and at[4].caps == (c1,) and at[5].caps == (c1,)
    # before the dataset was recorded: its first recorded state; no cap yet
    early = state_as_of(later, now_caps, changes, t[0] - STEP)
    assert early.dataset == first and early.caps == ()
    # a variable added later but read by a release charged then: in its first recorded state
    assert state_as_of(later, now_caps, changes, t[1], read={"w"}).dataset.variables[-1] == Variable("w", "sensitive")
    # no change recorded at all (a dataset older than its events): today's state
    assert state_as_of(later, now_caps, [], t[0]).caps == (c1,)
    assert state_as_of(later, now_caps, [], t[0]).dataset == later


# --------------------------------------------------------------------------
# Random histories, random T
# --------------------------------------------------------------------------


@st.composite
def histories(draw):
    """A dataset's history: releases, reclassifications, groups set and removed, caps set,
    changed and removed, a variable added, removed (when nothing reads or names it) and added
    again, in a random order, one minute apart."""
    classes = {"x": "sensitive", "y": "sensitive", "z": "public"}
    groups = {"g": ["x"]}
    caps = {"c0"}
    subsets = {"c0": ["x", "y"]}  # each cap's variables, and the variables some release reads:
    read: set[str] = set()  # a variable in neither (nor in a group) can be removed
    steps = [(0, "add", ())]

    def amend() -> str:
        variables = "".join(f"  - {{name: {n}, classification: {c}}}\n" for n, c in classes.items())
        group_text = "".join(f"  {g}: [{', '.join(m)}]\n" for g, m in groups.items())
        return f"dataset: d\nself_approval: true\ndelta: 1e-6\nvariables:\n{variables}groups:\n{group_text}"

    for minute in range(1, draw(st.integers(3, 8)) + 1):
        kind = draw(st.sampled_from(["record", "record", "reclassify", "group", "cap", "cap remove", "variable",
                                     "remove variable"]))
        names = list(classes)
        if kind == "record":
            reads = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
            read |= set(reads)
            steps.append((minute, "record", (f"r{minute}", reads, draw(st.sampled_from(["1/4", "1/2"])))))
        elif kind == "reclassify":
            name = draw(st.sampled_from(names))
            classes[name] = "sensitive" if classes[name] == "public" else "public"
            steps.append((minute, "dataset reclassify", (name, classes[name], "--reason", "review")))
        elif kind == "group":
            members = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
            name = draw(st.sampled_from(["g", "h"]))
            if name in groups and draw(st.booleans()) and name != "g":
                del groups[name]
                steps.append((minute, "group remove", (name,)))
            else:
                groups[name] = members
                steps.append((minute, "group set", (name, *members)))
        elif kind == "cap":
            name = draw(st.sampled_from(["c0", "c1", "c2"]))
            subset = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
            limit = draw(st.sampled_from(["4", "6", "50"]))  # (never broken: at most 8 releases of 1/2)
            extra = ("--delta", "1e-6") if draw(st.booleans()) else ()
            caps.add(name)
            subsets[name] = subset
            steps.append((minute, "cap set", (*subset, "--epsilon", limit, *extra, "--name", name)))
        elif kind == "cap remove" and caps - {"c0"}:
            name = draw(st.sampled_from(sorted(caps - {"c0"})))
            caps.discard(name)
            subsets.pop(name)
            steps.append((minute, "cap remove", (name, "--reason", "review")))
        elif kind == "variable" and "w" not in classes:
            classes["w"] = draw(st.sampled_from(["sensitive", "public"]))
            steps.append((minute, "amend", amend()))
        elif kind == "remove variable" and "w" in classes and "w" not in read \
                and not any("w" in m for m in [*groups.values(), *subsets.values()]):
            del classes["w"]
            steps.append((minute, "amend", amend()))
    at_minute = draw(st.integers(0, steps[-1][0]))
    return steps, START + at_minute * STEP + timedelta(seconds=30)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(histories())
def test_random_histories_at_a_random_T_answer_as_the_ledger_built_up_to_T(tmp_path_factory, monkeypatch, history):
    steps, at = history
    directory = tmp_path_factory.mktemp("history")
    with monkeypatch.context() as patch:
        compare(directory, patch, steps, at)
