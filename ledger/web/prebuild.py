"""Figures built before a viewer asks: the server watches the ledger's state and, when any write
changes it (a decision here, a `record` on the command line, another server), builds the
dashboard's and the table's figures of the new state into the read cache.

The state is the audit chain's head (`Ledger.head`, one indexed read), checked every `interval`
seconds in a thread of its own. A viewer who arrives during a build waits for it (the read cache
builds each question once and hands its answer to every thread that asked meanwhile); no viewer
is ever shown the figures of an earlier state, since every answer is kept under the head it was
built at. A write committed during a build leaves that build unkept, and the next check finds
the new head and builds again.

Bounded: the datasets viewed most recently, then the others by name, at most PREBUILT of them (a
dataset's figures are about eight of the read cache's answers to a state).
"""

from __future__ import annotations

import gc
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from .. import api

LOG = logging.getLogger(__name__)
INTERVAL = 1.0  # seconds between two checks of the ledger's head
PREBUILT = 4  # datasets built after a change, at most


class Watcher:
    """The thread that builds `warm(book, dataset)` of the chosen datasets whenever the ledger's
    head moves (and once at start); `stop()` ends it, waiting for a build under way."""

    def __init__(self, book: api.Ledger, warm: Callable[[api.Ledger, str], None], interval: float = INTERVAL):
        if not interval > 0:
            raise ValueError(f"`interval` must be positive. Found {interval!r}.")
        self.book, self.warm, self.interval = book, warm, interval
        self.built: tuple[int, str] | None = None  # the head whose figures the last build made
        self._viewed: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="ledger-prebuild", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def viewed(self, dataset: str) -> None:
        """A viewer opened `dataset`'s page: built first after the next change."""
        with self._lock:
            self._viewed[dataset] = None
            self._viewed.move_to_end(dataset, last=False)
            while len(self._viewed) > PREBUILT:
                self._viewed.popitem()

    def chosen(self) -> list[str]:
        """The datasets built after a change: the most recently viewed first, then by name."""
        with self._lock:
            viewed = list(self._viewed)
        names = set(self.book.datasets)
        return [*(n for n in viewed if n in names), *sorted(names.difference(viewed))][:PREBUILT]

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.check()
            self._stopping.wait(self.interval)

    def check(self) -> None:
        """One look at the head; the figures built when it moved. Never raises: a failure (the
        database out of reach) is logged once, until a check succeeds again."""
        try:
            head = self.book.head()
            if head != self.built:
                for name in self.chosen():
                    if self._stopping.is_set():
                        return
                    self.warm(self.book, name)  # (logs its own failure)
                self.built = head
                # the objects a build leaves make a full garbage collection due (a few tenths of a
                # second at 10k releases): run here, not in the next viewer's request
                gc.collect()
            self._failing = False
        except Exception:  # (any: the thread outlives a database that is briefly out of reach)
            if not self._failing:
                LOG.exception("the ledger's head could not be read; figures are built on request until it can")
            self._failing = True
