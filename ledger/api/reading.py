"""Reading the ledger through the façade: its datasets, releases, their audit events and
people, now or as the ledger stood at a moment. Every reader (CLI, reports, web) takes these answers;
a read of an unchanged ledger is answered from the read cache (operations/read_cache.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import date, datetime
from typing import Any

from ..core.errors import did_you_mean, fail
from ..core.records import Dataset, Release
from ..input.snapshot import LedgerSnapshot
from ..operations import choices
from ..operations.read_cache import kept, read_cache
from ..store import audit_chain, configuration, decoded_history, identity, row_reads, session_state, sessions
from ..store.identity import Person
from ..store.sessions import Engine, Session

from .moments import as_of_moment
from .values import AuditEvent


RELEASE_EVENTS = ("release.recorded", "release.approved", "release.published", "release.retracted",
                  "release.cancelled")


def _reason(payload: Any) -> str | None:
    """The reason a retraction or cancellation gave (audit_chain.append_event keeps it beside the release)."""
    reason = payload.get("reason") if isinstance(payload, dict) else None
    return reason if isinstance(reason, str) else None


class Reading:
    """The ledger's engine, who acts, and its reads (the base of every part of `Ledger`)."""

    url: str
    engine: Engine
    _person: Person | None

    def _light(self) -> LedgerSnapshot:
        with Session(self.engine) as session:
            return configuration.write_context(session)

    def _full(self, dataset: str | None) -> LedgerSnapshot:
        def build() -> LedgerSnapshot:
            with Session(self.engine) as session:
                return decoded_history.snapshot(session, dataset)

        return read_cache(self.engine).answer(self.engine, ("snapshot", dataset), build)

    @contextmanager
    def _indexed(self, dataset: str | None, as_of: str | datetime | None, *, subset: bool = False):
        """(the dataset, the index of its charged releases, from the accounting rows): now, or as the
        ledger stood at `as_of` (choices.index_as_of, the CLI's `--as-of`; its session open inside the block, where the
        index reads release ids). `subset`: the index answers a subset's question (`subset --as-of`)."""
        when = as_of_moment(as_of)
        if when is None:
            def build() -> tuple[Dataset, Any]:
                # from the accounting rows, as the command line reads it: no release decoded but
                # those the exact path needs; the heads read now, as the index outlives the session
                with Session(self.engine) as session:
                    return choices.rows_index(session, dataset, titles=True, field="dataset")

            yield read_cache(self.engine).answer(self.engine, ("index", dataset), build)
            return
        with Session(self.engine) as session:
            light = configuration.write_context(session)
            chosen = choices.pick_dataset(light, dataset, field="dataset")
            yield choices.index_as_of(session, chosen, light.families, when,
                                      touching=set() if subset else None)

    @property
    def person(self) -> Person:
        """Who acts through this ledger: the person a front end named, else the database login
        (PostgreSQL) or the operating-system user (store/identity.py)."""
        if self._person is not None:
            return self._person
        person = identity.authenticated(self.engine)
        if self.engine.dialect.name == "postgresql":
            self._person = person  # (a login is the engine's for good; a process's user is read each time)
        return person

    def _by(self) -> str:
        return self.person.name

    def may(self, step: str) -> bool:
        """Whether the person acting holds the role `step` needs ("approve", "publish", "retract",
        "cancel", "record", ...: operations/people.py's DUTIES), as the step itself would decide;
        nothing is written. A front end shows only the steps its person may take."""
        from ..operations import people

        with Session(self.engine) as session:
            return people.may(session, self._by(), step)

    @property
    def datasets(self) -> dict[str, Dataset]:
        """The recorded datasets, by name."""
        return dict(self._light().datasets)

    def dataset(self, name: str | None = None, *, field: str = "dataset") -> Dataset:
        """The named dataset, or the only one; `field`: what an error names (a front end's own
        spelling of the choice, such as the command line's `--dataset`)."""
        return choices.pick_dataset(self._light(), name, field=field)

    @kept
    def releases(self, dataset: str | None = None, *, as_of: str | datetime | None = None) -> list[Release]:
        """Every recorded release (cancelled ones too: they are part of the record); `as_of`: those
        in the ledger then, each with the status it had then (as every `--as-of`)."""
        if dataset is not None:
            choices.pick_dataset(self._light(), dataset, field="dataset")
        found = [r for r in self._full(dataset).releases.values() if dataset is None or r.dataset == dataset]
        when = as_of_moment(as_of)
        if when is None:
            return found
        with Session(self.engine) as session:
            return choices.releases_then(session, found, when)

    def release_count(self, dataset: str, *, as_of: str | datetime | None = None) -> int:
        """How many releases `releases(dataset, as_of=as_of)` lists: now, one SQL count."""
        if as_of_moment(as_of) is not None:
            return len(self.releases(dataset, as_of=as_of))
        from ..store.report_queries import release_count

        choices.pick_dataset(self._light(), dataset, field="dataset")
        with sessions.read_session(self.engine) as session:
            return release_count(session, dataset)

    def head(self) -> tuple[int, str]:
        """The ledger's state: (seq, hash) of the audit chain's last event, one indexed read. Every
        write by any process or connection appends an event, so a new head says the ledger changed
        (what the read cache keys its answers on)."""
        with Session(self.engine) as session:
            return audit_chain.last_event(session)

    def dates(self) -> tuple[date | None, date]:
        """(the day of the ledger's first event, today): the days an `as_of` may name, by the
        ledger's own clock (UTC); the first is None in an empty ledger."""
        from ..operations.ledger_dates import date_span

        with Session(self.engine) as session:
            return date_span(session)

    def release(self, release_id: str) -> Release:
        with Session(self.engine) as session:
            lookup = row_reads.ReleaseLookup(session)
            if release_id not in lookup:
                from ..core.failures import QUOTED, excerpt

                raise fail(f"release {excerpt(release_id, QUOTED)}", "id", "no such release in this ledger"
                           + did_you_mean(release_id, list(lookup)))
            return lookup[release_id]

    def lineage(self, release_id: str) -> list[Release]:
        """The releases a release's lineage is drawn from: its dataset's releases derived from
        others, the parents they name and its family's members (store/lineage_rows.py), read by
        SQL rather than from every release."""
        from ..store.lineage_rows import lineage_releases

        found = self.release(release_id)
        with Session(self.engine) as session:
            return lineage_releases(session.connection(), found)

    def events(self, release_id: str) -> list[AuditEvent]:
        """The audit events about one release, in chain order (who did what, and why)."""
        import json

        self.release(release_id)  # (an unknown id: the same error as `release`)
        with Session(self.engine) as session:
            rows = audit_chain.lifecycle_events(session, RELEASE_EVENTS, [release_id])
        return [AuditEvent(seq, at, actor, kind, _reason(json.loads(payload)))
                for seq, kind, _, at, actor, payload in rows]

    def overview(self) -> LedgerSnapshot:
        """The datasets and families, without reading any release."""
        return self._light()

    def dataset_as_of(self, name: str | None, when: datetime | None, *, field: str = "dataset") -> Dataset:
        """The named dataset (or the only one), as it stood at `when` (its variables and groups then)."""
        with sessions.read_session(self.engine) as session:
            chosen = choices.pick_dataset(configuration.write_context(session), name, field=field)
            if when is None:
                return chosen
            from ..store.as_of import state_then

            return state_then(session, chosen, when)[0]

    def dataset_added_at(self, name: str) -> datetime | None:
        """When the dataset was added to the ledger (its first `dataset.added` event), or None."""
        from ..operations.opening import dataset_added_at

        return dataset_added_at(self.engine, name)

    def release_pages(self, dataset: str | None = None):
        """(the datasets and families, a page of releases in recording order, each one's steps after
        recording: who, when, why), one consistent read (operations/release_steps.py)."""
        from ..operations.release_steps import pages_with_steps

        yield from pages_with_steps(self.engine, dataset)

    @contextmanager
    def index_rows(self, dataset: str | None = None, *, titles: bool = False, variables: list[str] | None = None,
                   accounts: bool = True, as_of: datetime | None = None, field: str = "dataset"):
        """(the dataset, the index of its charged releases from the accounting rows), with the
        session open inside the block, where the index reads release titles (choices.rows_index)."""
        with Session(self.engine) as session:
            yield choices.rows_index(session, dataset, titles=titles, variables=variables, accounts=accounts,
                                     when=as_of, field=field)

    def roles(self) -> dict[str, frozenset[str]]:
        """Every person and the roles they hold."""
        from ..operations import people

        return people.roles(self.engine)

    def now(self) -> datetime:
        """The ledger's clock (UTC), as every step it records is dated."""
        return session_state.now()
