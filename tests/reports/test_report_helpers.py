"""Ledgers for the report tests, written here in the release-file format and
recorded through the real command line, with the store's clock set by the test so that
recording times (and so the audit chain) are the same on every run.

No tests here: the report test modules import these helpers.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

from sqlmodel import Session
from support import Run, cli_main

from ledger.accounting.spend import DEFAULT_DELTA
from ledger.store import decoded_history, engines, schema_migrations, session_state
from ledger.reporting.report import build_report
from ledger.operations.report_inputs import gather
from ledger.reporting.write import render
from ledger.api import Ledger, front_end
from ledger.cli.demo import run_demo

GENERATED = datetime(2024, 6, 3, 14, 30, tzinfo=UTC)  # "generated at" of every rendered report
DEMO_TIME = datetime(2024, 5, 2, 9, 15, tzinfo=UTC)  # when the demo ledger is recorded
CHROMIUM = "/usr/bin/chromium"

# Tan (2023), Table 1, with the whole-dataset column (Prop 3.1): release -> cells by variable.
# the whole-dataset column is labelled as ordinary DP
TAN_HEADER = ["{age}", "{sex}", "{residential region}", "{race}", "{other variable}", "whole dataset ordinary DP"]
TAN_TABLE_1 = {
    "Table A": ["1", "1", "0", "0", "0", "1"],
    "Table B": ["0", "0", "1", "1", "0", "1"],
    "Table C": ["1", "0", "1", "0", "0", "1"],
    "All releases (composed)": ["2", "1", "2", "1", "0", "3"],
}


def run_main(url: str, *args: str) -> Run:
    """`privacy-ledger --db URL ARGS` in this process, through the console entry point."""
    return cli_main(url, *args)


@contextmanager
def clock(at: datetime, step: timedelta = timedelta(0)):
    """The store's clock reads `at` (moving on by `step` at every reading)."""
    moment = [at - step]

    def now():
        moment[0] += step
        return moment[0]

    with mock.patch.object(session_state, "now", now):
        yield


def demo_ledger(directory: Path) -> str:
    """Tan's Example 3.6 recorded by `ledger.cli.demo.run_demo` in a new SQLite file."""
    url = f"sqlite:///{directory / 'demo.db'}"
    engine = engines.make_engine(url)
    schema_migrations.ensure_schema(engine)
    with clock(DEMO_TIME):
        run_demo(Ledger(url, engine, person=front_end("steward", "test")), directory / "ledger-demo.html")
    engine.dispose()
    return url


def record(url: str, directory: Path, name: str, text: str, at: datetime, *args: str, command: str = "record") -> None:
    """Write `text` to a file and record it (or add it as a dataset) at time `at`."""
    path = directory / name
    path.write_text(text, encoding="utf-8")
    with clock(at):
        result = run_main(url, *(["dataset", "add"] if command == "dataset" else [command]), str(path), *args)
    assert result.code == 0, result.err


def step(url: str, at: datetime, *args: str) -> None:
    """A lifecycle step (approve / publish / retract / cancel ...) at time `at`."""
    with clock(at):
        result = run_main(url, *args)
    assert result.code == 0, result.err


def context_of(url: str, dataset: str, *, since: datetime | None = None, charts: bool = True, delta=None,
               as_of: datetime | None = None):
    """The report context of a ledger, generated at GENERATED (as it stood at `as_of`, if given)."""
    engine = engines.make_engine(url)
    try:
        with Session(engine) as session:
            chosen = decoded_history.snapshot(session, dataset).datasets[dataset]
            chosen_delta = delta if delta is not None else (chosen.delta or DEFAULT_DELTA)
            inputs = gather(session, chosen, chosen_delta, since, generated_at=GENERATED)
    finally:
        engine.dispose()
    if as_of is not None:
        inputs = replace(inputs, as_of=as_of)
    return build_report(inputs, charts=charts)


def rendered(url: str, dataset: str, fmt: str, **options) -> bytes:
    context = context_of(url, dataset, charts=fmt in ("html", "pdf"), **options)
    return render(context, fmt, chromium=CHROMIUM)


HASH = re.compile(r"\b[0-9a-f]{64}\b")


def normalise(text: str) -> str:
    """Stable text for snapshots: SHA-256 hashes (the audit chain, which changes whenever the
    record format does) become <sha256>; inline SVG charts keep only their text (the figures
    and labels), not matplotlib's drawing commands."""
    text = HASH.sub("<sha256>", text)

    def chart(match: re.Match) -> str:
        texts = [" ".join(t.split()) for t in re.findall(r"<text[^>]*>(.*?)</text>", match.group(0), flags=re.S)]
        return f'<svg id="{match.group(1)}">{" | ".join(t for t in texts if t)}</svg>'

    return re.sub(r'<svg id="([\w-]+)".*?</svg>', chart, text, flags=re.S)


def _answers_late(seconds, channel):
    import time

    time.sleep(seconds)
    channel.send(("done", "late"))
    channel.close()


def _dies(channel):
    import os

    os._exit(9)


def test_a_helper_still_at_work_is_waited_for_and_one_that_died_is_given_up_at_once(monkeypatch):
    """A forked helper's answer is awaited while it works (a full verification at a million events
    takes minutes: giving it up part way and verifying again took longer than either); one that
    ended without an answer is given up at once, its work then done in the report's process."""
    import time

    import pytest

    from ledger.cli import forked_helpers

    probe = forked_helpers.Helper(_answers_late, 0)
    if probe.process is None:
        pytest.skip("no fork here: the work is always done in the report's process")
    probe.stop()
    monkeypatch.setattr(forked_helpers, "HELPER_POLL_S", 0.05)
    monkeypatch.setattr(forked_helpers, "HELPER_TIMEOUT_S", 30)
    assert forked_helpers.Helper(_answers_late, 1.0).reply() == ("done", "late")  # 20 polls of silence
    start = time.monotonic()
    assert forked_helpers.Helper(_dies).reply() is None
    assert time.monotonic() - start < 10  # not the timeout
    monkeypatch.setattr(forked_helpers, "HELPER_TIMEOUT_S", 0.5)
    assert forked_helpers.Helper(_answers_late, 5).reply() is None  # at work past the limit: given up
