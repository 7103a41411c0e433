"""`releases` decodes a page of releases at a time (decoded_history.release_pages), never
the whole ledger at once (decoded_history.snapshot: gigabytes at a million releases).

Its output must be the one the command printed from the snapshot, byte for byte: the table
(its columns as wide as the widest cell of any page), the retractions and cancellations
under it, and the JSON array with each release's steps. Here the pages are seven releases
long and decoded_history.snapshot is forbidden; the expected text is made the way the command made it
before, from the snapshot.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_report import build_ledger  # noqa: E402

from ledger.cli import releases_command as cli_releases  # noqa: E402
from ledger.operations.release_steps import release_steps  # noqa: E402
from ledger.reporting.views import release_json, releases_text  # noqa: E402
from ledger.store import decoded_history, engines, sessions
from ledger.store.codec import release_to_dict  # noqa: E402
from support import cli_main  # noqa: E402


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    return build_ledger(tmp_path_factory.mktemp("releases") / "ledger.db", 12, 60, seed=9)


def printed_before(url: str, dataset: str | None) -> tuple[str, str]:
    """(the text, the JSON) as `releases` printed them from the snapshot."""
    engine = engines.make_engine(url)
    with sessions.read_session(engine) as session:
        snapshot = decoded_history.snapshot(session, dataset)
        steps = release_steps(session, list(snapshot.releases))
    engine.dispose()
    rows = list(snapshot.releases.values())
    from ledger.reporting.views import release_charge_json

    # each release with the charge its text row shows (release_charge_json), then its steps
    as_json = json.dumps([{**release_json(release_to_dict(r)), **release_charge_json(r, snapshot.datasets.get(r.dataset)),
                           "steps": steps.get(r.id, [])} for r in rows], indent=2, ensure_ascii=False) + "\n"
    if not rows:
        return "no releases" + (f" in dataset {dataset}" if dataset else "") + "\n", as_json
    lines = [releases_text(rows, snapshot.datasets)]
    for release in rows:
        ended = next((s for s in reversed(steps.get(release.id, [])) if s.get("reason") is not None), None)
        if ended:
            lines.append(f"{release.id}: {ended['step']} by {ended['by']} at {ended['at']}: {ended['reason']}")
    return "\n".join(lines) + "\n", as_json


@pytest.mark.parametrize("dataset", [None, "survey", "nowhere"])
def test_releases_a_page_at_a_time_print_what_the_snapshot_printed(url, dataset, monkeypatch):
    text, as_json = printed_before(url, dataset)
    assert "cancelled by" in text or dataset == "nowhere"  # (a cancellation, with its reason, under the table)
    monkeypatch.setattr(decoded_history, "RELEASE_PAGE", 7)  # several pages, the last one not full
    monkeypatch.setattr(decoded_history, "snapshot", lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
    chosen = () if dataset is None else ("--dataset", dataset)
    assert cli_main(url, "releases", *chosen).out == text
    assert cli_main(url, "releases", *chosen, "--json").out == as_json


@pytest.mark.parametrize("separator", ["\x1f", ",", "e"])
def test_the_text_kept_compressed_a_page_at_a_time_prints_what_the_snapshot_printed(url, separator, monkeypatch):
    """The text table keeps each page's cells as one compressed text until the widths are known
    (at a million releases the rows as texts held 422 MB); a page where some cell holds the
    separator (here made a character the cells hold: `,` in the reads, `e` in ids and statuses)
    keeps its cells as they are. Either way the same bytes."""
    text, _ = printed_before(url, None)
    monkeypatch.setattr(decoded_history, "RELEASE_PAGE", 7)
    monkeypatch.setattr(cli_releases, "_SEPARATOR", separator)
    assert cli_main(url, "releases").out == text
