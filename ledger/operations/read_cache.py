"""What reads build, kept per ledger state: a board's viewers ask the same questions of an
unchanged ledger again and again, and the answer is a function of the state alone.

The state is the audit chain's last event, (seq, hash) (audit_chain.last_event): every write appends
an event, so a write through any Ledger, process or server changes the key, and a read finding
a new head rebuilds. An answer is kept only when the head read after building it is the head
read before (no write committed meanwhile), so a kept answer is exactly that state's. Bounded:
the `states` most recently used heads, each with at most `answers` answers (least recently used
dropped first). One cache per database engine, shared by every Ledger over it; thread-safe
(a lock around the bookkeeping, answers built outside it), and a question missed by several
threads at once is built once: the first builds, the others wait for its answer (a page's first
viewers after a write would otherwise each pay the same build). Only answers that depend on the
state alone belong here: nothing that reads the clock (headroom's "now")."""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import datetime
from fractions import Fraction
from typing import Any, TypeVar

from ..store import audit_chain
from ..store.sessions import Engine, Session

T = TypeVar("T")

STATES = 2  # (the newest state, and the one before for a reader still in it)
ANSWERS = 64  # per state: every page's questions at a few dates and deltas


class ReadCache:
    """Answers by (head, question), bounded to `states` heads of at most `answers` answers."""

    def __init__(self, states: int = STATES, answers: int = ANSWERS):
        self.states, self.answers = states, answers
        self._kept: OrderedDict[tuple[int, str], OrderedDict[Hashable, Any]] = OrderedDict()
        self._building: dict[tuple[tuple[int, str], Hashable], _Building] = {}  # (head, question) being built
        self._lock = threading.Lock()
        self.hits = 0  # questions answered from a kept answer, or by waiting for another thread's build
        self.builds = 0  # questions built (kept or not)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(answers) for answers in self._kept.values())

    def heads(self) -> list[tuple[int, str]]:
        with self._lock:
            return list(self._kept)

    def answer(self, engine: Engine, question: Hashable, build: Callable[[], T]) -> T:
        """The answer to `question` in the ledger's current state: kept, else `build()` (kept
        when no write committed while it ran), built once when several threads ask at once."""
        head = _head(engine)
        with self._lock:
            answers = self._kept.get(head)
            if answers is not None and question in answers:
                self._kept.move_to_end(head)
                answers.move_to_end(question)
                self.hits += 1
                return answers[question]
            pending = self._building.get((head, question))
            if pending is None or pending.builder == threading.get_ident():  # (a build asking itself: builds)
                pending, mine = None, _Building()
                self._building[head, question] = mine
                self.builds += 1
            else:
                self.hits += 1
        if pending is not None:
            return pending.result()  # (the builder's answer, or its exception)
        try:
            built = build()
        except BaseException as error:
            with self._lock:
                self._building.pop((head, question), None)
            mine.set_exception(error)
            raise
        unchanged = _head(engine) == head
        with self._lock:
            if unchanged:
                self._keep(head, question, built)
            self._building.pop((head, question), None)
        mine.set_result(built)
        return built

    def _keep(self, head: tuple[int, str], question: Hashable, built: Any) -> None:
        """(Under the lock.)"""
        answers = self._kept.setdefault(head, OrderedDict())
        self._kept.move_to_end(head)
        answers[question] = built
        answers.move_to_end(question)
        while len(answers) > self.answers:
            answers.popitem(last=False)
        while len(self._kept) > self.states:
            self._kept.popitem(last=False)


class _Building(Future):
    """An answer being built, and the thread building it."""

    def __init__(self) -> None:
        super().__init__()
        self.builder = threading.get_ident()


def _head(engine: Engine) -> tuple[int, str]:
    with Session(engine) as session:
        return audit_chain.last_event(session)


_CACHES: weakref.WeakKeyDictionary[Engine, ReadCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def read_cache(engine: Engine) -> ReadCache:
    """The cache of the database `engine` reads (a person's acting engine shares its base's)."""
    base = getattr(engine, "_proxied", engine)  # (an engine with execution options wraps its base)
    with _CACHES_LOCK:
        found = _CACHES.get(base)
        if found is None:
            found = _CACHES[base] = ReadCache()
        return found


_PLAIN = (str, int, float, Fraction, bool, datetime, type(None))


def question_of(name: str, args: tuple, kwargs: dict) -> Hashable | None:
    """A read's question as a key: its name and arguments (lists as tuples, sets as frozensets);
    None when an argument is of another kind (a generator, an object), a read not kept."""
    def frozen(value: Any) -> Hashable:
        if isinstance(value, _PLAIN):
            return value
        if isinstance(value, (list, tuple)):
            return tuple(frozen(v) for v in value)
        if isinstance(value, (set, frozenset)):
            return frozenset(frozen(v) for v in value)
        raise TypeError(value)

    try:
        return name, frozen(args), frozen(sorted(kwargs.items()))
    except TypeError:
        return None


def kept(method: Callable[..., T]) -> Callable[..., T]:
    """A Ledger read answered from its database's cache: the same arguments in the same state
    are the same answer. Each caller gets its own copy of a mutable answer (a DataFrame, a list),
    so no caller can change another's."""
    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> T:
        question = question_of(method.__qualname__, args, kwargs)
        if question is None:
            return method(self, *args, **kwargs)
        found = read_cache(self.engine).answer(self.engine, question, lambda: method(self, *args, **kwargs))
        copy = getattr(found, "copy", None)
        return copy() if callable(copy) else found

    return read
