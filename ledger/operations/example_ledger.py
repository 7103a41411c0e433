"""An example recorded in an empty ledger (the command line's `demo`): the ledger must hold nothing
(roles aside), or exactly that example already, which is then left as it is.

Invariants: the example's person becomes the new ledger's admin (every role), as any first writer
does; a ledger holding anything else is refused (exit 2) and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import fail
from ..core.records import Dataset
from ..store import dataset_writes, decoded_history, release_writes, session_state, sessions
from . import people

NOT_EMPTY = ("this ledger already holds other data; the demo only runs in an empty ledger (choose another "
             "with --db or LEDGER_DATABASE_URL)")


def record_example(engine, actor: str, build: Callable, held: Callable) -> tuple[Dataset, bool]:
    """(the example's dataset, whether it was recorded now): `build(actor, now)` gives its
    (dataset, releases, families); `held(snapshot, dataset, releases)` says whether the ledger
    already holds the example (then nothing is written)."""
    with sessions.write_session(engine) as session:
        snapshot = decoded_history.snapshot(session)
        dataset, releases, families = build(actor, session_state.now())
        if not snapshot.datasets and not snapshot.releases:  # empty (roles aside)
            people.bootstrap(session, actor)  # the demo's user is the new ledger's admin
            dataset_writes.add_dataset(session, dataset, actor)
            if releases or families:
                release_writes.add_releases(session, releases, families, actor)
            return dataset, True
        if held(snapshot, dataset, releases):
            return dataset, False
        raise fail(str(engine.url), "--db", NOT_EMPTY)
