"""Reads of an unchanged ledger come from its read cache (operations/read_cache.py): a write by
any Ledger or process is read next, a kept answer equals a fresh Ledger's, and the cache stays
within its bound.

Expected numbers are Tan's Table 1 (Example 3.6) and sums of the epsilons recorded here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import pandas as pd

import ledger
from ledger.operations.read_cache import ANSWERS, STATES, ReadCache, read_cache

CENSUS = {"dataset": "census", "variables": [{"name": n} for n in ("age", "sex", "region", "race", "other")]}
TABLES = {"dataset": "census", "releases": [
    {"id": "A", "reads": ["age", "sex"], "mechanism": {"name": "geometric", "epsilon": 1}},
    {"id": "B", "reads": ["region", "race"], "mechanism": {"name": "geometric", "epsilon": 1}},
    {"id": "C", "reads": ["region", "age"], "mechanism": {"name": "geometric", "epsilon": 1}},
]}
AGE_HALF = {"dataset": "census", "releases": [
    {"id": "D", "reads": ["age"], "mechanism": {"name": "laplace", "epsilon": "1/2"}}]}


def opened(url: str) -> ledger.Ledger:
    return ledger.open(url)


def census(url: str) -> ledger.Ledger:
    book = opened(url)
    book.add_dataset(CENSUS)
    book.record(TABLES)
    return book


def read_all(book: ledger.Ledger) -> tuple:
    """Every kept read of the census ledger, as plain values."""
    table = book.table(whole_dataset=True)
    return (table.to_dict(), table.attrs, book.pairs().to_dict(), book.subset(["age", "sex"]),
            book.caps(), book.releases())


def test_a_write_through_the_same_ledger_is_read_next(ledger_url):
    book = census(ledger_url)
    assert book.subset(["age"]).exact == 2  # Tan, Table 1: A and C read age, 1 each
    assert book.table().loc["All releases", "age"] == 2
    book.record(AGE_HALF)
    assert book.subset(["age"]).exact == Fraction(5, 2)
    assert book.table().loc["All releases", "age"] == 2.5
    assert "D" in book.table().index
    pairs = book.pairs().set_index(["variable_1", "variable_2"])["epsilon"]
    assert pairs[("age", "sex")] == 2.5  # A, C, D read age or sex: 1 + 1 + 1/2
    assert [r.id for r in book.releases()] == ["A", "B", "C", "D"]


def test_a_write_through_another_ledger_is_read_next(ledger_url):
    reader = census(ledger_url)
    writer = opened(ledger_url)
    assert read_cache(reader.engine) is not read_cache(writer.engine)  # (two engines: two caches)
    assert reader.subset(["race"]).exact == 1
    writer.record({"dataset": "census", "releases": [
        {"id": "E", "reads": ["race"], "mechanism": {"name": "laplace", "epsilon": "1/4"}}]})
    assert reader.subset(["race"]).exact == Fraction(5, 4)
    assert reader.table().loc["All releases", "race"] == 1.25
    writer.set_cap(["race"], epsilon=2, name="race cap")
    assert [c.cap.name for c in reader.caps()] == ["race cap"]


def test_a_write_by_another_process_is_read_next(ledger_url, tmp_path):
    reader = census(ledger_url)
    assert reader.subset(["sex"]).exact == 1
    plan = tmp_path / "f.json"
    plan.write_text(json.dumps({"dataset": "census", "releases": [
        {"id": "F", "reads": ["sex"], "mechanism": {"name": "laplace", "epsilon": "3/4"}}]}))
    run = subprocess.run([sys.executable, "-m", "ledger", "--db", ledger_url, "record", str(plan)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert reader.subset(["sex"]).exact == Fraction(7, 4)
    assert reader.table().loc["All releases", "sex"] == 1.75


def test_repeated_reads_are_a_fresh_ledgers_figures(ledger_url):
    book = census(ledger_url)
    book.set_cap(["age", "sex"], epsilon=5, name="people")
    first = read_all(book)
    again = read_all(book)
    fresh = read_all(opened(ledger_url))
    assert first == again == fresh
    assert len(read_cache(book.engine)) > 0


def test_a_caller_changing_its_answer_changes_no_other(ledger_url):
    book = census(ledger_url)
    frame = book.table()
    frame.loc["All releases", "age"] = 99.0
    frame.attrs["statuses"].clear()
    book.releases().clear()
    assert book.table().loc["All releases", "age"] == 2
    assert book.table().attrs["statuses"] == {"A": "planned", "B": "planned", "C": "planned"}
    assert len(book.releases()) == 3


def test_the_cache_keeps_at_most_its_states_and_answers(ledger_url):
    book = census(ledger_url)
    cache = ReadCache(states=2, answers=3)
    built = []
    for step in range(4):
        book.record({"dataset": "census", "releases": [
            {"id": f"G{step}", "reads": ["other"], "mechanism": {"name": "laplace", "epsilon": 1}}]})
        for question in range(5):
            cache.answer(book.engine, question, lambda q=question: built.append(q) or q)
            assert len(cache.heads()) <= 2 and len(cache) <= 2 * 3
    assert len(cache.heads()) == 2 and len(cache) == 2 * 3
    assert len(built) == 4 * 5  # (every state new: every question built once in each)
    assert cache.answer(book.engine, 4, lambda: "rebuilt") == 4  # (kept: the state's newest three)
    assert cache.answer(book.engine, 0, lambda: "rebuilt") == "rebuilt"
    for _ in range(3):
        read_all(book)
    assert len(read_cache(book.engine)) <= STATES * ANSWERS


def test_an_answer_built_while_a_write_commits_is_not_kept(ledger_url):
    book = census(ledger_url)
    cache = ReadCache()

    def build_during_a_write():
        opened(ledger_url).record({"dataset": "census", "releases": [
            {"id": "H", "reads": ["other"], "mechanism": {"name": "laplace", "epsilon": 1}}]})
        return "built before the write was read"

    assert cache.answer(book.engine, "q", build_during_a_write) == "built before the write was read"
    assert len(cache) == 0
    assert cache.answer(book.engine, "q", lambda: "now") == "now"


def test_a_ledger_over_the_same_engine_with_options_shares_its_cache(ledger_url):
    """(A person's Ledger acts through its base engine with options: store/identity.acting_engine.)"""
    base = census(ledger_url)
    acting = ledger.api.Ledger(base.url, base.engine.execution_options(logging_token="viewer"))
    assert read_cache(acting.engine) is read_cache(base.engine)
    base.table()
    kept = len(read_cache(base.engine))
    pd.testing.assert_frame_equal(acting.table(), base.table())
    assert len(read_cache(base.engine)) == kept


def test_two_threads_asking_the_same_question_build_it_once(ledger_url):
    """The second asks while the first builds: it waits for the first's answer, built once."""
    import threading
    import time

    book = census(ledger_url)
    cache = ReadCache()
    building, release = threading.Event(), threading.Event()
    builds: list[str] = []

    def build() -> list[str]:
        builds.append(threading.current_thread().name)
        building.set()
        assert release.wait(10)
        return ["the answer"]

    answers: dict[str, object] = {}

    def ask(name: str) -> None:
        answers[name] = cache.answer(book.engine, "question", build)

    first = threading.Thread(target=ask, args=("first",), name="first")
    first.start()
    assert building.wait(10)
    second = threading.Thread(target=ask, args=("second",), name="second")
    second.start()
    time.sleep(0.2)  # (the second is waiting for the first's build)
    release.set()
    first.join(10)
    second.join(10)
    assert builds == ["first"]
    assert answers["first"] is answers["second"] == ["the answer"]
    assert cache.answer(book.engine, "question", lambda: ["rebuilt"]) == ["the answer"]


def test_a_build_that_fails_fails_its_waiters_and_is_built_again_when_asked_again(ledger_url):
    import threading
    import time

    book = census(ledger_url)
    cache = ReadCache()
    building, release = threading.Event(), threading.Event()

    def failing() -> str:
        building.set()
        assert release.wait(10)
        raise LookupError("no such dataset")

    errors: list[BaseException] = []

    def ask() -> None:
        try:
            cache.answer(book.engine, "question", failing)
        except LookupError as error:
            errors.append(error)

    threads = [threading.Thread(target=ask)]
    threads[0].start()
    assert building.wait(10)
    threads.append(threading.Thread(target=ask))
    threads[1].start()
    time.sleep(0.2)
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(errors) == 2 and errors[0] is errors[1]
    assert cache.answer(book.engine, "question", lambda: "built again") == "built again"
