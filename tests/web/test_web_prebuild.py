"""The server builds the figures of a changed ledger before a viewer asks (ledger/web/prebuild.py):
after a write from another connection (the command line's `record`), the next viewer's dashboard
and table are answered from the read cache, with the new state's figures; the watcher ends with
the server."""

from __future__ import annotations

import json
import time

from starlette.applications import Starlette
from starlette.testclient import TestClient
from support import acting_as, cli_ok
from web_support import GAUSSIAN, census_ledger, parse

from ledger import api
from ledger.operations.read_cache import read_cache
from ledger.web import pages
from ledger.web.app import create_app
from ledger.web.prebuild import PREBUILT, Watcher


def served(app) -> Starlette:
    """The Starlette app inside create_app's safeguards (its state: the ledger, the watcher)."""
    while not isinstance(app, Starlette):
        app = app.app
    return app


def settled(watcher: Watcher, book: api.Ledger, seconds: float = 20) -> None:
    """Until the watcher has built the figures of the ledger's state now."""
    deadline = time.monotonic() + seconds
    while watcher.built != book.head():
        assert time.monotonic() < deadline, "the watcher built nothing for the ledger's new state"
        time.sleep(0.02)


def test_a_record_from_the_command_line_is_built_before_the_next_viewer_asks(ledger_url, tmp_path):
    census_ledger(ledger_url)
    app = create_app(ledger_url, local_person="bob", prebuild_every=0.05)
    state = served(app).state
    with TestClient(app, base_url="http://127.0.0.1:8080") as client:
        before = parse(client.get("/dashboard?dataset=census").text)
        assert before.find(id="releases").find(data_value=True).attrs["data-value"] == "3"
        plan = tmp_path / "gaussian.yaml"
        plan.write_text(json.dumps(GAUSSIAN))
        with acting_as("ana"):
            cli_ok(ledger_url, "record", plan)  # (its own engine: a connection the server does not share)
        settled(state.watcher, state.ledger)
        cache = read_cache(state.ledger.engine)
        builds = cache.builds
        dashboard = parse(client.get("/dashboard?dataset=census").text)
        table = parse(client.get("/table?dataset=census").text)
        assert cache.builds == builds  # (every figure of both pages was built before they were asked for)
        other = api.open(ledger_url)
        assert dashboard.find(id="releases").find(data_value=True).attrs["data-value"] == "4"
        assert float(dashboard.find(id="protected").find(data_value=True).attrs["data-value"]) == \
            other.subset(["protected"], dataset="census").epsilon
        assert [row.attrs["data-release"] for row in table.find_all(data_release=True)] == \
            [*other.table("census").index]
        assert state.watcher.running
    assert not state.watcher.running  # (stopped with the server)


def test_without_prebuilding_the_next_viewer_builds_the_figures(ledger_url, tmp_path):
    census_ledger(ledger_url)
    app = create_app(ledger_url, local_person="bob", prebuild_every=None)
    state = served(app).state
    with TestClient(app, base_url="http://127.0.0.1:8080") as client:
        client.get("/dashboard?dataset=census")
        plan = tmp_path / "gaussian.yaml"
        plan.write_text(json.dumps(GAUSSIAN))
        with acting_as("ana"):
            cli_ok(ledger_url, "record", plan)
        cache = read_cache(state.ledger.engine)
        builds = cache.builds
        client.get("/dashboard?dataset=census")
        assert cache.builds > builds and state.watcher is None


def test_the_watcher_builds_once_per_state_the_datasets_viewed_first(ledger_url):
    book = census_ledger(ledger_url)
    with acting_as("ana"):
        for k in range(PREBUILT):
            book.add_dataset({"dataset": f"other{k}", "variables": [{"name": "x"}]})
    built = []
    watcher = Watcher(book, lambda _, name: built.append(name), interval=60)
    watcher.viewed("other3")
    watcher.check()
    watcher.check()  # (the same head: nothing built again)
    assert built == ["other3", "census", "other0", "other1"]  # (the most recently viewed, then by name)
    with acting_as("ana"):
        book.record({"dataset": "census", "releases": [
            {"id": "D", "reads": ["age"], "mechanism": {"name": "geometric", "epsilon": 1}}]})
    watcher.check()
    assert built[4:] == ["other3", "census", "other0", "other1"] and watcher.built == book.head()


def test_a_failed_build_is_logged_and_the_watcher_goes_on(ledger_url, caplog):
    book = census_ledger(ledger_url)
    watcher = Watcher(book, lambda book, name: pages.warm(book, name + "-unknown"), interval=60)
    watcher.check()  # (pages.warm logs the unknown dataset's error; the check returns)
    assert "were not built ahead of a viewer" in caplog.text and watcher.built == book.head()
