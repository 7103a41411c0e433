"""What the web tests share: a ledger with Tan's Example 3.6 and a Gaussian release, recorded by
one steward (ana, the first writer: every role) with a second approver (bob); and a small HTML
reader that finds elements by id and data attributes (the pages' own markup, no scraping library)."""

from __future__ import annotations

from html.parser import HTMLParser

from support import acting_as, cli_ok

from ledger import api

CENSUS = {
    "dataset": "census", "delta": "1e-9",
    "description": "Tan's Example 3.6",
    "variables": [{"name": n} for n in ("age", "sex", "region", "race", "other")],
    "groups": {"person": ["age", "sex"]},
    "caps": [{"name": "person", "epsilon": 6, "delta": "1e-9"}, {"subset": "all", "epsilon": 9, "delta": "1e-9"}],
}
TABLES = {"dataset": "census", "releases": [  # Tan, Example 3.6: Table 1's totals 2, 1, 2, 1, 0
    {"id": "A", "title": "Age by sex", "reads": ["age", "sex"], "mechanism": {"name": "geometric", "epsilon": 1}},
    {"id": "B", "reads": ["region", "race"], "mechanism": {"name": "geometric", "epsilon": 1}},
    {"id": "C", "reads": ["region", "age"], "mechanism": {"name": "geometric", "epsilon": 1}, "derived_from": ["A"]},
]}
GAUSSIAN = {"dataset": "census", "releases": [
    {"id": "G", "reads": ["race", "other"], "mechanism": {"name": "gaussian", "rho": "1/8"}}]}


def census_ledger(url: str, *, gaussian: bool = False) -> api.Ledger:
    if url.startswith("postgresql"):
        logins(url, ("ana", "bob"))  # a front end's person is a database role the server may SET ROLE to
    with acting_as("ana"):
        book = api.open(url)
        book.add_dataset(CENSUS)
        book.record(TABLES)
        if gaussian:
            book.record(GAUSSIAN)
        cli_ok(url, "role", "grant", "bob", "approver")
    return book


DAYS = ("2026-01-05", "2026-01-10", "2026-01-15")  # the days of `dated_census_ledger`'s steps


def dated_census_ledger(url: str, monkeypatch) -> api.Ledger:
    """Tan's releases recorded on different days (the ledger's clock set by `monkeypatch`): A on
    DAYS[0], B on DAYS[1], C (derived from A) on DAYS[2] and B cancelled that day; the clock is left
    at noon of DAYS[2]."""
    from datetime import UTC, datetime

    from ledger.store import session_state

    clock = {"now": datetime(2026, 1, 5, 10, tzinfo=UTC)}
    monkeypatch.setattr(session_state, "now", lambda: clock["now"])
    if url.startswith("postgresql"):
        logins(url, ("ana", "bob"))
    with acting_as("ana"):
        book = api.open(url)
        book.add_dataset(CENSUS)
        book.record({"dataset": "census", "releases": TABLES["releases"][:1]})
        clock["now"] = datetime(2026, 1, 10, 10, tzinfo=UTC)
        book.record({"dataset": "census", "releases": TABLES["releases"][1:2]})
        cli_ok(url, "role", "grant", "bob", "approver")
        clock["now"] = datetime(2026, 1, 15, 10, tzinfo=UTC)
        book.record({"dataset": "census", "releases": TABLES["releases"][2:]})
        book.cancel("B", reason="not needed")
    clock["now"] = datetime(2026, 1, 15, 12, tzinfo=UTC)
    return book


LINEAGE = {"dataset": "census",  # raw -> rounded -> (map, chart, east); chart also from A; east in a family (a random split)
           "families": [{"id": "by-region", "partition": "random"}],
           "releases": [
    {"id": "raw", "title": "Counts <b>by</b> age", "reads": ["age", "region"], "mechanism": {"name": "laplace", "epsilon": 1}},
    {"id": "rounded", "reads": [], "mechanism": {"name": "post-processing"}, "derived_from": ["raw"]},
    {"id": "map", "reads": [], "mechanism": {"name": "post-processing"}, "derived_from": ["rounded"]},
    {"id": "chart", "reads": [], "mechanism": {"name": "post-processing"}, "derived_from": ["rounded", "A"]},
    {"id": "north", "reads": ["age"], "family": "by-region", "part": "north", "mechanism": {"name": "laplace", "epsilon": 1}},
    {"id": "south", "reads": ["age"], "family": "by-region", "part": "south", "mechanism": {"name": "laplace", "epsilon": 1}},
    {"id": "east", "reads": ["age"], "family": "by-region", "part": "east", "mechanism": {"name": "laplace", "epsilon": 1},
     "derived_from": ["rounded"]},
]}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None):
        self.tag, self.attrs, self.parent, self.children, self.parts = tag, attrs, parent, [], []

    @property
    def text(self) -> str:
        return "".join(part if isinstance(part, str) else part.text for part in self.parts)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def find_all(self, **attrs) -> list[Node]:
        return [n for n in self.walk() if all(n.attrs.get(k.replace("_", "-")) == v if v is not True
                                              else k.replace("_", "-") in n.attrs for k, v in attrs.items())]

    def find(self, **attrs) -> Node:
        found = self.find_all(**attrs)
        assert found, f"no element with {attrs}"
        return found[0]


VOID = {"meta", "link", "input", "br", "img", "hr"}


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.at = Node("document", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.at)
        self.at.children.append(node)
        self.at.parts.append(node)
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag):
        node = self.at
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.at = node.parent

    def handle_data(self, data):
        self.at.parts.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    return builder.root


def csrf_of(html: str) -> str:
    return parse(html).find(name="csrf").attrs["value"]


def logins(url: str, names) -> None:
    """Make each of `names` a login role on the test server, once (PostgreSQL)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for name in names:
                if connection.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}).first() is None:
                    connection.execute(text(f'CREATE ROLE "{name}" LOGIN'))
    finally:
        engine.dispose()
