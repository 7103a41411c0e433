"""`privacy-ledger serve` through Starlette's TestClient: every figure a page shows is the façade's
(`Ledger.subset / table / pairs / caps`) and, on Tan's Example 3.6, the closed form; every decision
goes through the façade as the person the server knows, and every refusal writes nothing; the
safeguards (CSRF, proxy address, upload bound, escaping, error pages) refuse what they must."""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support import acting_as, as_person as as_person_book, cli_main, cli_ok
from web_support import DAYS, LINEAGE, census_ledger, csrf_of, dated_census_ledger, logins, parse

from ledger.core.errors import InputErrors
from ledger.core.numbers import format_number
from ledger.reporting import write_report
from ledger.web.app import create_app
from ledger.web.guard import MAX_BODY
from ledger.web.people import Auth
from ledger.web.server import auth_from_options

PROXY = Auth("proxy-header", "X-Forwarded-User", "127.0.0.1")


def same(text: str, value) -> bool:
    """The page's data-value is the façade's value exactly (a float's repr, or a Fraction's text)."""
    return float(text) == value if isinstance(value, float) else Fraction(text) == value


@pytest.fixture
def url(ledger_url):
    """A new ledger: a SQLite file, and a PostgreSQL database when LEDGER_TEST_POSTGRES_URL is set."""
    return ledger_url


@pytest.fixture
def book(url):
    return census_ledger(url, gaussian=True)


def local_client(url: str, **options) -> TestClient:
    """The app in local mode as a browser on this machine sees it, acting as bob (an approver who
    recorded nothing)."""
    return TestClient(create_app(url, local_person="bob"), base_url="http://127.0.0.1:8080", **options)


@pytest.fixture
def local(book, url):
    return local_client(url)


def as_person(url: str, name: str | None, client=("127.0.0.1", 40000)) -> TestClient:
    """A browser behind the proxy (or not, with another client address) that names `name`."""
    headers = {"X-Forwarded-User": name} if name else {}
    return TestClient(create_app(url, PROXY), client=client, headers=headers)


def decide(client: TestClient, release: str, action: str, reason: str | None = None, token: str | None = "page"):
    """POST the release page's decision form (`token` "page": the token the page carries)."""
    page = client.get(f"/release?id={release}")
    data = {"id": release, "action": action}
    if token == "page":
        data["csrf"] = csrf_of(page.text)
    elif token is not None:
        data["csrf"] = token
    if reason is not None:
        data["reason"] = reason
    return client.post("/decide", data=data)


# -- figures ----------------------------------------------------------------------------------


def test_dashboard_headline_and_caps_are_the_facades_figures(book, local):
    page = parse(local.get("/dashboard?dataset=census").text)
    protected = book.subset(book.dataset().protected_names)
    assert float(page.find(id="protected").find(data_value=True).attrs["data-value"]) == protected.epsilon
    assert " ".join(page.find(id="risk").text.split()) == "In words: " + " ".join(protected.statement.split())
    frame = book.table()
    worst = frame.loc["All releases"].astype(float).idxmax()
    cell = page.find(id="worst-variable")
    assert worst in cell.text and float(cell.find(data_value=True).attrs["data-value"]) == frame.loc["All releases", worst]
    pairs = book.pairs()
    top = pairs.loc[pairs["epsilon"].idxmax()]
    cell = page.find(id="worst-pair")
    assert f"{top.variable_1} and {top.variable_2}" in cell.text
    assert float(cell.find(data_value=True).attrs["data-value"]) == top.epsilon
    caps = {c.cap.name: c for c in book.caps()}
    rows = page.find_all(data_cap=True)
    assert {row.attrs["data-cap"] for row in rows} == set(caps)
    for row in rows:
        spent, headroom = row.find_all(data_value=True)
        check = caps[row.attrs["data-cap"]]
        assert same(spent.attrs["data-value"], check.after) and spent.text.strip() == format_number(check.after)
        assert same(headroom.attrs["data-value"], check.headroom)
        assert check.status in row.text


def test_dashboard_as_of_a_date_prints_the_clis_as_of_figures(url, monkeypatch):
    dated_census_ledger(url, monkeypatch)
    client = local_client(url)
    # Tan's releases charged by the end of each day (B cancelled on the last): the protected
    # subset (every variable) and the per-variable totals age, sex, region, race, other
    expected = {DAYS[0]: (1, [1, 1, 0, 0, 0], 1), DAYS[1]: (2, [1, 1, 1, 1, 0], 2), DAYS[2]: (2, [2, 1, 1, 0, 0], 3)}
    for day, (protected, totals, releases) in expected.items():
        page = parse(client.get(f"/dashboard?dataset=census&as_of={day}").text)
        table = cli_main(url, "table", "--as-of", day, "--json").json()
        subset = cli_main(url, "subset", "protected", "--as-of", day, "--json").json()
        caps = cli_main(url, "cap", "list", "--as-of", day, "--json").json()
        pairs = cli_main(url, "pairs", "--as-of", day, "--json").json()
        shown = float(page.find(id="protected").find(data_value=True).attrs["data-value"])
        assert shown == subset["epsilon"] == protected, day
        assert list(table["total"]["values"].values()) == totals, day
        worst = page.find(id="worst-variable")
        assert float(worst.find(data_value=True).attrs["data-value"]) == max(totals), day
        assert float(page.find(id="worst-pair").find(data_value=True).attrs["data-value"]) == max(
            p["epsilon"] for p in pairs), day
        assert int(page.find(id="releases").find(data_value=True).attrs["data-value"]) == releases, day
        by_cap = {c["cap"]: c for c in caps}
        rows = page.find_all(data_cap=True)
        assert {row.attrs["data-cap"] for row in rows} == set(by_cap), day
        for row in rows:
            spent, headroom = row.find_all(data_value=True)
            cli = by_cap[row.attrs["data-cap"]]
            assert Fraction(spent.attrs["data-value"]) == Fraction(cli["after_exact"]), day
            assert spent.text.strip() == format_number(Fraction(cli["after_exact"])), day
            assert cli["status"] in row.text, day
    assert client.get("/dashboard?dataset=census&as_of=2026-02-01").status_code == 400  # after today
    assert client.get("/dashboard?dataset=census&as_of=soon").status_code == 400


def test_dashboard_compares_two_dates_and_lists_the_releases_in_between(url, monkeypatch):
    dated_census_ledger(url, monkeypatch)
    page = parse(local_client(url).get(f"/dashboard?dataset=census&since={DAYS[0]}&as_of={DAYS[2]}").text)
    figures = {row.attrs["data-figure"]: (row.find(data_then=True).attrs["data-then"],
                                          row.find(data_now=True).attrs["data-now"])
               for row in page.find(id="comparison").find_all(data_figure=True)}
    # at the end of DAYS[0]: A only; at the end of DAYS[2]: A and C (B cancelled)
    assert figures["protected"] == ("1.0", "2.0")
    assert figures["variable:age"] == ("1.0", "2.0") and figures["variable:race"] == ("0.0", "0.0")
    assert figures["releases"] == ("1", "3")
    moves = {row.attrs["data-cap-move"]: (row.find(data_then=True).attrs["data-then"],
                                          row.find(data_now=True).attrs["data-now"])
             for row in page.find(id="cap-moves").find_all(data_cap_move=True)}
    assert moves == {"all": ("1", "2"), "person": ("1", "2")}  # person = {age, sex}: A, then A and C
    changed = [(row.attrs["data-change"], row.attrs["data-release"])
               for row in page.find(id="changes").find_all(data_change=True)]
    assert changed == [("recorded", "B"), ("recorded", "C"), ("cancelled", "B")]
    pack = [a.attrs["href"] for a in page.find_all() if a.tag == "a" and a.attrs.get("href", "").startswith("/download?")]
    report = local_client(url).get(pack[0]).text  # the report from the start of the next day, as of DAYS[2]
    assert "Changes since" in report and "2026-01-06" in report
    between = parse(local_client(url).get(f"/dashboard?dataset=census&since={DAYS[1]}&as_of={DAYS[1]}").text)
    assert between.find(id="changes").find_all(data_change=True) == []  # nothing after the end of a day in it


def test_table_page_is_tans_table_1_and_the_facades_table(tmp_path):
    url = f"sqlite:///{tmp_path / 'tan.db'}"
    book = census_ledger(url)
    page = parse(local_client(url).get("/table?dataset=census").text)
    frame = book.table()
    rows = {row.attrs["data-release"]: [float(c.attrs["data-value"]) for c in row.find_all(data_value=True)]
            for row in page.find_all(data_release=True)}
    assert rows["All releases"] == [2, 1, 2, 1, 0]  # Tan, Table 1
    assert rows["B"] == [0, 0, 1, 1, 0]
    assert set(rows) == set(frame.index)
    for release, values in rows.items():
        assert values == frame.loc[release].tolist()
    transposed = parse(local_client(url).get("/table?dataset=census&layout=variables").text)
    by_variable = {row.attrs["data-variable"]: [float(c.attrs["data-value"]) for c in row.find_all(data_value=True)]
                   for row in transposed.find_all(data_variable=True)}
    assert by_variable == {name: [frame.loc["All releases", name], *frame[name].drop("All releases")]
                           for name in frame.columns}


def test_table_sorts_by_a_column_and_filters_by_status(book, url, local):
    client = as_person(url, "bob")
    decide(client, "A", "approve")
    def order(query: str) -> list[str]:
        return [row.attrs["data-release"] for row in parse(local.get("/table?dataset=census&" + query).text)
                .find_all(data_release=True)]

    # age: A 1, B 0, C 1, G 0 (G reads race and other); ties keep the table's order; the total stays last
    assert order("sort=age&order=desc") == ["A", "C", "B", "G", "All releases"]
    assert order("sort=age&order=asc") == ["B", "G", "A", "C", "All releases"]
    assert order("sort=release&order=desc") == ["G", "C", "B", "A", "All releases"]
    page = parse(local.get("/table?dataset=census&status=approved").text)
    assert [row.attrs["data-release"] for row in page.find_all(data_release=True)] == ["A", "All releases"]
    page = parse(local.get("/table?dataset=census&sort=nonsense&status=<b>").text)  # unknown choices: ignored
    assert len(page.find_all(data_release=True)) == len(book.table().index)


def test_a_table_past_the_pages_bound_holds_the_largest_rows_and_the_whole_total(book, url, local, monkeypatch):
    """Past TABLE_CELLS cells the page holds the TABLE_LARGEST release rows with the largest loss
    on the whole dataset, says so, and keeps the total row over every release."""
    from ledger.web import pages

    every = book.table(whole_dataset=True)
    monkeypatch.setattr(pages, "TABLE_CELLS", 1)
    monkeypatch.setattr(pages, "TABLE_LARGEST", 2)
    page = parse(local_client(url).get("/table?dataset=census").text)
    rows = {row.attrs["data-release"]: [float(c.attrs["data-value"]) for c in row.find_all(data_value=True)]
            for row in page.find_all(data_release=True)}
    wide = every["whole dataset"].drop("All releases")
    largest = sorted(wide.index, key=lambda r: -wide[r])[:2]
    assert set(rows) == {*largest, "All releases"}
    assert rows["All releases"] == every.drop(columns="whole dataset").loc["All releases"].tolist()
    note = " ".join(page.find(id="largest").text.split())
    assert "The 2 release rows" in note and f"of {len(wide)} charged releases" in note
    monkeypatch.undo()
    assert not parse(local.get("/table?dataset=census").text).find_all(id="largest")


def test_a_long_table_is_paged_after_sorting(tmp_path):
    url = f"sqlite:///{tmp_path / 'long.db'}"
    book = census_ledger(url)
    with acting_as("ana"):
        book.record({"dataset": "census", "releases": [  # 150 more, each charging other 1/(2k)
            {"id": f"r{k:03d}", "reads": ["other"], "mechanism": {"name": "laplace", "epsilon": f"1/{2 * k}"}}
            for k in range(1, 151)]})
    client = local_client(url)

    def rows(query: str) -> list[str]:
        return [row.attrs["data-release"] for row in parse(client.get("/table?dataset=census&" + query).text)
                .find_all(data_release=True)]

    first, second = rows("sort=release"), rows("sort=release&page=2")
    assert len(first) == 101 and first[:3] == ["A", "B", "C"] and first[-1] == "All releases"
    assert second[:-1] == [f"r{k:03d}" for k in range(98, 151)] and second[-1] == "All releases"
    assert rows("sort=other&order=desc")[:3] == ["r001", "r002", "r003"]  # 1/2, 1/4, 1/6, ...
    assert rows("sort=other&order=desc&page=2")[-5:] == ["r150", "A", "B", "C", "All releases"]  # then the zeros
    assert rows("sort=release&page=99") == second  # beyond the last page: the last page


def test_subset_page_gives_the_figure_its_sentence_and_releases(book, local):
    page = parse(local.get("/subset?dataset=census&v=age&v=sex").text)
    loss = book.subset(["age", "sex"])
    assert loss.exact == 2  # A and C each charge age once, A charges sex (Tan, Prop 3.4)
    assert float(page.find(id="subset-epsilon").attrs["data-value"]) == 2.0
    assert " ".join(page.find(id="statement").text.split()) == " ".join(loss.statement.split())
    linked = [a.text for a in page.find_all() if a.tag == "a" and a.attrs.get("href", "").startswith("/release?id=")]
    assert linked == ["A", "C"]
    room = book.headroom(["age", "sex"])
    shown = page.find(id="headroom").find_all(data_value=True)
    assert [Fraction(cell.attrs["data-value"]) for cell in shown] == [room.epsilon, room.rho]
    group = parse(local.get("/subset?dataset=census&v=person").text)
    assert float(group.find(id="subset-epsilon").attrs["data-value"]) == 2.0


def test_release_page_shows_mechanism_lineage_and_events(book, local):
    page = parse(local.get("/release?id=C").text)
    assert "geometric" in page.text and "epsilon 1" in page.text
    assert any(a.text == "A" for a in page.find_all() if a.tag == "a")  # derived from A
    events = page.find(id="events").find_all()
    assert [c.text for c in events if c.tag == "td"][2:4] == ["ana", "release.recorded"]
    assert local.get("/release?id=nope").status_code == 404


def test_release_lineage_is_drawn_from_its_derivation_graph(tmp_path):
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    book = census_ledger(url)
    with acting_as("ana"):
        book.record(LINEAGE)
    client = local_client(url)

    def drawn(release: str) -> tuple[dict[str, tuple[str, float]], set[tuple[str, str]]]:
        svg = parse(client.get("/release", params={"id": release}).text).find(id="lineage")
        nodes = {n.attrs["data-node"]: (n.attrs["data-role"], float(n.find_all()[2].attrs["y"]))
                 for n in svg.find_all(data_node=True)}
        return nodes, {(e.attrs["data-parent"], e.attrs["data-child"]) for e in svg.find_all(data_parent=True)}

    # rounded: raw above it; map, chart and east derived from it (chart also from A, not its lineage)
    nodes, edges = drawn("rounded")
    assert {n: role for n, (role, _) in nodes.items()} == {
        "raw": "ancestor", "rounded": "self", "map": "descendant", "chart": "descendant", "east": "descendant"}
    assert edges == {("raw", "rounded"), ("rounded", "map"), ("rounded", "chart"), ("rounded", "east")}
    assert nodes["raw"][1] < nodes["rounded"][1] < nodes["map"][1] == nodes["chart"][1] == nodes["east"][1]
    # east: two generations above it, and its family's other members (a random split) beside it
    nodes, edges = drawn("east")
    assert {n: role for n, (role, _) in nodes.items()} == {
        "raw": "ancestor", "rounded": "ancestor", "east": "self", "north": "family", "south": "family"}
    assert edges == {("raw", "rounded"), ("rounded", "east")}
    assert nodes["raw"][1] < nodes["rounded"][1] < nodes["east"][1] == nodes["north"][1] == nodes["south"][1]
    # a release with no relative draws nothing; the title is escaped in the tooltip
    assert 'id="lineage"' not in client.get("/release?id=B").text
    assert "Counts &lt;b&gt;by&lt;/b&gt; age" in client.get("/release?id=rounded").text


def test_a_lineage_read_by_sql_is_the_lineage_among_every_release(tmp_path):
    """The release page draws from the relatives the façade reads (Ledger.lineage), not from
    every release of the dataset; the drawing is the same."""
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    book = census_ledger(url)
    with acting_as("ana"):
        book.record(LINEAGE)
    from ledger.web.lineage import lineage

    every = book.releases("census")
    for release in every:
        relatives = book.lineage(release.id)
        assert len(relatives) < len(every) or release.family is not None
        assert lineage(relatives, release.id) == lineage(every, release.id), release.id


def test_a_large_lineage_draws_the_nearest_releases_and_counts_the_rest():
    from ledger.web.lineage import lineage

    class Release:  # (the fields the drawing reads)
        def __init__(self, rid, parents=(), family=None):
            self.id, self.derived_from, self.family, self.title = rid, tuple(parents), family, ""
            self.status = type("S", (), {"value": "planned"})()

    chain = [Release("r0")] + [Release(f"r{k}", [f"r{k - 1}"]) for k in range(1, 60)]
    drawn = lineage(chain, "r30", max_nodes=11)
    assert {n.id for n in drawn.nodes} == {f"r{k}" for k in range(25, 36)} and drawn.omitted == 59 - 10
    rows = {n.id: n.y for n in drawn.nodes}
    assert all(rows[f"r{k}"] < rows[f"r{k + 1}"] for k in range(25, 35))


# -- decisions --------------------------------------------------------------------------------


def test_approve_and_publish_as_the_proxys_person(book, url):
    client = as_person(url, "bob")
    assert decide(client, "A", "approve").status_code == 200
    assert decide(client, "A", "publish").status_code == 200
    release = book.release("A")
    assert release.status.value == "published" and release.approved_by == "bob"
    assert [(e.actor, e.kind) for e in book.events("A")][-2:] == [("bob", "release.approved"), ("bob", "release.published")]


def test_a_decision_on_a_selection_is_taken_or_refused_release_by_release(book, url):
    bob = as_person(url, "bob")
    token = csrf_of(bob.get("/table?dataset=census").text)
    before = book.verify().events
    response = bob.post("/decide-selection", data={"csrf": token, "dataset": "census", "action": "approve",
                                                   "id": ["A", "B", "nope"]})
    outcomes = {li.attrs["data-release"]: li.attrs["data-ok"] for li in parse(response.text).find(id="outcomes").find_all(data_ok=True)}
    assert response.status_code == 409 and outcomes == {"A": "yes", "B": "yes", "nope": "no"}
    assert [book.release(r).approved_by for r in "AB"] == ["bob", "bob"] and book.verify().events == before + 2
    ana = as_person(url, "ana")  # she recorded C: her approval of it is refused
    token = csrf_of(ana.get("/table?dataset=census").text)
    response = ana.post("/decide-selection", data={"csrf": token, "dataset": "census", "action": "approve", "id": "C"})
    assert response.status_code == 409 and book.release("C").status.value == "planned"
    assert book.verify().events == before + 2
    assert bob.post("/decide-selection", data={"dataset": "census", "action": "approve", "id": "C"}).status_code == 403


def test_self_approval_through_the_browser_is_refused_and_writes_nothing(book, url):
    before = book.verify().events
    response = decide(as_person(url, "ana"), "A", "approve")  # ana recorded A
    assert response.status_code == 409
    assert "refused, nothing written" in response.text and "ana" in response.text
    assert book.release("A").status.value == "planned" and book.verify().events == before


def test_cancel_needs_a_reason_and_keeps_it_in_the_audit_trail(book, url):
    client = as_person(url, "ana")
    before = book.verify().events
    assert decide(client, "B", "cancel", reason="").status_code == 409
    assert book.verify().events == before
    assert decide(client, "B", "cancel", reason="superseded by the 2025 tables").status_code == 200
    assert book.release("B").status.value == "cancelled"
    assert book.events("B")[-1].reason == "superseded by the 2025 tables"
    assert "superseded by the 2025 tables" in client.get("/release?id=B").text


def test_a_viewer_sees_every_page_without_decisions_and_a_post_is_refused(book, url):
    if url.startswith("postgresql"):
        logins(url, ("carol", "dan"))
    with acting_as("ana"):  # carol: an auditor, who reads and verifies; dan: no role at all
        cli_ok(url, "role", "grant", "carol", "auditor")
    for name in ("carol", "dan"):
        viewer = as_person(url, name)
        for path in ("/dashboard?dataset=census", "/table?dataset=census", "/release?id=A", "/subset?dataset=census&v=age",
                     "/whatif?dataset=census", "/audit", "/downloads?dataset=census"):
            response = viewer.get(path)
            assert response.status_code == 200, (name, path)
            forms = [f.attrs.get("action") for f in parse(response.text).find_all() if f.tag == "form"]
            assert "/decide" not in forms and "/decide-selection" not in forms, (name, path)
            assert "checkbox" not in response.text or path.startswith("/subset"), (name, path)
        before = (book.verify().events, book.release("A").status.value)
        token = csrf_of(viewer.get("/audit").text)
        refused = viewer.post("/decide", data={"csrf": token, "id": "A", "action": "approve"})
        assert refused.status_code == 403 and f"{name} may not approve" in refused.text
        refused = viewer.post("/decide-selection", data={"csrf": token, "dataset": "census", "action": "cancel",
                                                         "id": ["A", "B"], "reason": "no"})
        assert refused.status_code == 403
        assert (book.verify().events, book.release("A").status.value) == before


def test_each_person_is_offered_the_decisions_their_role_allows(book, url):
    if url.startswith("postgresql"):
        logins(url, ("sam",))
    with acting_as("ana"):
        cli_ok(url, "role", "grant", "sam", "steward")  # may cancel, may not approve
    assert as_person_book(book, "ana").may("approve") and not as_person_book(book, "sam").may("approve")
    assert as_person_book(book, "sam").may("cancel") and as_person_book(book, "bob").may("approve")

    def buttons(name: str) -> list[str]:
        page = parse(as_person(url, name).get("/release?id=A").text)
        return [b.text.split(" as ")[0] for b in page.find_all() if b.tag == "button" and " as " in b.text]

    assert buttons("bob") == ["Approve"] and buttons("sam") == ["Cancel"] and buttons("ana") == ["Approve", "Cancel"]
    options = [o.attrs["value"] for o in parse(as_person(url, "sam").get("/table?dataset=census").text).find_all()
               if o.tag == "option"]
    assert options == ["cancel"]
    assert decide(as_person(url, "sam"), "A", "approve").status_code == 403
    assert decide(as_person(url, "sam"), "B", "cancel", reason="not needed").status_code == 200
    assert book.release("B").status.value == "cancelled" and book.release("A").status.value == "planned"


def test_whatif_shows_each_caps_verdict_and_records_nothing(book, local):
    token = csrf_of(local.get("/whatif?dataset=census").text)
    plan = ("dataset: census\nreleases:\n  - id: big\n    reads: [age, sex]\n"
            "    mechanism: {name: laplace, epsilon: 5}\n")
    before = len(book.releases())
    response = local.post("/whatif", data={"csrf": token, "dataset": "census", "plan": plan})
    page = parse(response.text)
    expected = book.check({"dataset": "census", "releases": [
        {"id": "big", "reads": ["age", "sex"], "mechanism": {"name": "laplace", "epsilon": 5}}]})
    assert not expected.ok and page.find(id="verdict").text == "refused"
    shown = {row.attrs["data-cap"]: row.text for row in page.find(id="checks").find_all(data_cap=True)}
    assert set(shown) == {c.cap.name for c in expected.checks}
    for check in expected.checks:
        assert check.status in shown[check.cap.name]
    assert len(book.releases()) == before
    uploaded = local.post("/whatif", data={"csrf": token, "dataset": "census"},
                          files={"file": ("small.yaml", plan.replace("epsilon: 5", "epsilon: 1/10"), "text/yaml")})
    assert parse(uploaded.text).find(id="verdict").text == "within every cap"
    bad = local.post("/whatif", data={"csrf": token, "dataset": "census", "plan": "dataset: census\nreleases: 3\n"})
    assert bad.status_code == 400 and "plan.yaml" in bad.text and "/tmp" not in bad.text


# -- safeguards -------------------------------------------------------------------------------


def test_forged_post_without_or_with_a_wrong_csrf_token_is_refused(book, url):
    client = as_person(url, "bob")
    before = book.verify().events
    assert decide(client, "A", "approve", token=None).status_code == 403
    assert decide(client, "A", "approve", token="forged").status_code == 403
    cross_site = as_person(url, "bob")  # a browser that never loaded a page: no cookie to match
    assert cross_site.post("/decide", data={"id": "A", "action": "approve", "csrf": "x"}).status_code == 403
    assert book.release("A").status.value == "planned" and book.verify().events == before


def test_cookie_is_samesite_strict_and_every_page_has_the_policy(local):
    response = local.get("/dashboard?dataset=census")
    cookie = response.headers["set-cookie"].lower()
    assert "samesite=strict" in cookie and "httponly" in cookie
    for path in ("/dashboard?dataset=census", "/release?id=nope", "/static/web.css"):
        assert local.get(path).headers["content-security-policy"].startswith("default-src 'self'")
    assert "<script" not in response.text and "style=" not in response.text


def test_spoofed_proxy_header_from_an_untrusted_address_is_refused(book, url):
    outsider = as_person(url, "bob", client=("10.1.2.3", 40000))
    before = book.verify().events
    assert outsider.get("/dashboard?dataset=census").status_code == 403
    assert outsider.post("/decide", data={"id": "A", "action": "approve"}).status_code == 403
    assert as_person(url, None).get("/dashboard?dataset=census").status_code == 403  # the proxy named no one
    assert book.release("A").status.value == "planned" and book.verify().events == before
    assert "acting as <strong>bob</strong>" in as_person(url, "bob").get("/dashboard?dataset=census").text


def test_local_mode_answers_loopback_host_names_only(local):
    """A site whose name is made to resolve to 127.0.0.1 (DNS rebinding) is not this app's origin."""
    assert local.get("/audit", headers={"host": "evil.example:8080"}).status_code == 421
    assert local.get("/audit", headers={"host": "[::1]:8080"}).status_code == 200
    assert local.get("/audit", headers={"host": "localhost"}).status_code == 200


def test_upload_larger_than_the_bound_is_refused(book, local):
    token = csrf_of(local.get("/whatif?dataset=census").text)
    before = len(book.releases())
    response = local.post("/whatif", data={"csrf": token, "dataset": "census"},
                          files={"file": ("plan.yaml", b"#" * (MAX_BODY + 1), "text/yaml")})
    assert response.status_code == 413 and len(book.releases()) == before


def test_descriptions_titles_reasons_and_plans_are_escaped(tmp_path):
    """Names are restricted at input (schemas/); free text is not: each is shown as text."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    payload = "<script>alert(1)</script><img src=x onerror=alert(1)>"
    book = census_ledger(url)
    with acting_as("ana"):
        book.add_dataset({"dataset": "xss", "description": payload, "variables": [{"name": "v1"}]})
        book.record({"dataset": "xss", "releases": [
            {"id": "r 1/2", "title": payload, "reads": ["v1"], "mechanism": {"name": "laplace", "epsilon": 1}}]})
        book.cancel("r 1/2", reason=payload)
    client = local_client(url)
    pages = {path: client.get(path).text for path in (
        "/", "/dashboard?dataset=xss", "/table?dataset=xss", "/release?id=r+1%2F2", "/subset?dataset=xss&v=v1")}
    token = csrf_of(client.get("/audit").text)
    pages["whatif"] = client.post("/whatif", data={"csrf": token, "dataset": "xss",
                                                   "plan": "</textarea>" + payload}).text
    for path, text in pages.items():
        assert "<script>" not in text and "<img src=x" not in text and "</textarea><" not in text, path
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert pages["/release?id=r+1%2F2"].count(escaped) == 2  # the title and the reason
    assert escaped in pages["/dashboard?dataset=xss"] and escaped in pages["whatif"]


def test_download_names_are_a_fixed_list(book, local):
    assert local.get("/download?dataset=census&what=../../etc/passwd").status_code == 404
    markdown = local.get("/download?dataset=census&what=report.md")
    assert markdown.status_code == 200 and "census" in markdown.text
    assert markdown.headers["content-disposition"] == 'attachment; filename="report.md"'
    pack = local.get("/download?dataset=census&what=report.md&since=2000-01-01")
    assert "## Changes since 2000-01-01" in pack.text
    assert local.get("/download?dataset=census&what=report.md&since=yesterday-ish").status_code == 400
    register = local.get("/download?dataset=census&what=register.csv")
    assert register.status_code == 200 and "A" in register.text.splitlines()[1:][0]


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="the PDF is printed by Chromium")
def test_the_report_downloads_as_the_pdf_report_writes_it(book, local, tmp_path):
    pdfplumber = pytest.importorskip("pdfplumber")
    for traversal in ("../report.pdf", "report.pdf/../../etc/passwd", "/tmp/report.pdf", "report.pdf%00"):
        assert local.get("/download", params={"dataset": "census", "what": traversal}).status_code == 404
    response = local.get("/download?dataset=census&what=report.pdf")
    assert response.status_code == 200 and response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"] == 'attachment; filename="report.pdf"'
    written = write_report(book, tmp_path / "cli.pdf", format="pdf")  # what `report --format pdf` writes

    def text(pdf: bytes) -> str:
        path = tmp_path / "read.pdf"
        path.write_bytes(pdf)
        with pdfplumber.open(path) as document:
            words = " ".join(" ".join((p.extract_text() or "") for p in document.pages).split())
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "", words)  # (when each was written)

    downloaded = text(response.content)
    assert downloaded == text(written.read_bytes())
    assert "Dataset census" in downloaded and "Age by sex" in downloaded


def test_an_error_is_a_page_without_a_traceback(book, url, monkeypatch):
    import ledger.api

    def broken(self, *args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(ledger.api.Ledger, "caps", broken)
    client = local_client(url, raise_server_exceptions=False)
    response = client.get("/dashboard?dataset=census")
    assert response.status_code == 500
    assert "secret internal detail" not in response.text and "Traceback" not in response.text


def test_audit_verifies_on_demand(book, local):
    token = csrf_of(local.get("/audit").text)
    page = parse(local.post("/audit", data={"csrf": token}).text)
    assert "intact" in page.find(id="verification").text
    assert str(book.verify().events) in page.find(id="verification").text


# -- starting ---------------------------------------------------------------------------------


def test_serve_refuses_a_non_loopback_host_without_an_auth_mode(url, book):
    with pytest.raises(InputErrors, match="beyond loopback"):
        auth_from_options("0.0.0.0", None, None, None)
    assert auth_from_options("::1", None, None, None).mode == "local"
    with pytest.raises(InputErrors, match="trusted-proxy"):
        auth_from_options("0.0.0.0", "proxy-header", "X-Forwarded-User", None)
    assert auth_from_options("0.0.0.0", "proxy-header", "X-Forwarded-User", "10.0.0.1").trusted_proxy == "10.0.0.1"
    result = cli_main(url, "serve", "--host", "0.0.0.0", "--port", "1")
    assert result.code == 2 and "beyond loopback" in result.err


def test_web_modules_import_only_the_facade_and_core():
    """The web app takes everything from the façade (and core's errors and numbers); its report
    downloads are written as the Python API writes them, by reporting.write_report over the façade."""
    web = Path(__file__).resolve().parents[2] / "ledger" / "web"
    for path in web.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                target = "." * node.level + (node.module or "")
                names = [alias.name for alias in node.names]
                assert node.level == 1 or target in ("..", "..core.errors", "..core.numbers", "..reporting"), \
                    (path.name, target)
                assert target != ".." or names == ["api"], (path.name, names)
                assert target != "..reporting" or names == ["write_report"], (path.name, names)


def test_table_and_subset_as_of_a_date_print_the_clis_as_of_figures(url, monkeypatch):
    dated_census_ledger(url, monkeypatch)
    client = local_client(url)
    for day in DAYS:
        table = cli_main(url, "table", "--as-of", day, "--json").json()
        page = parse(client.get(f"/table?dataset=census&as_of={day}").text)
        rows = {row.attrs["data-release"]: [float(c.attrs["data-value"]) for c in row.find_all(data_value=True)]
                for row in page.find_all(data_release=True)}
        assert rows.pop("All releases") == list(table["total_shown"]["values"].values()), day
        assert rows == {row["release"]: list(row["values"].values()) for row in table["rows"]}, day
        statuses = {row.attrs["data-release"]: next(n.text for n in row.walk() if n.tag == "span"
                                                    and n.attrs.get("class", "").startswith("status "))
                    for row in page.find_all(data_release=True)[:-1]}
        assert statuses == {row["release"]: row["status"] for row in table["rows"]}, day
        assert page.find_all(name="id") == []  # (no decision on the past)
        subset = cli_main(url, "subset", "age", "region", "--as-of", day, "--json").json()
        page = parse(client.get(f"/subset?dataset=census&v=age&v=region&as_of={day}").text)
        assert float(page.find(id="subset-epsilon").attrs["data-value"]) == subset["epsilon"], day
        assert page.find_all(id="headroom") == []  # (a headroom is a figure of now)
        linked = [a.text for a in page.find_all() if a.tag == "a" and a.attrs.get("href", "").startswith("/release?id=")]
        assert linked == subset["releases"], day
    # the date picker offers the ledger's days: from its first event to its clock's today
    for path in ("/table?dataset=census", "/subset?dataset=census&v=age", "/dashboard?dataset=census"):
        picker = parse(client.get(path).text).find(name="as_of")
        assert (picker.attrs["min"], picker.attrs["max"]) == (DAYS[0], DAYS[2]), path
    assert client.get("/table?dataset=census&as_of=2026-01-16").status_code == 400  # after the ledger's today
    assert client.get("/subset?dataset=census&v=age&as_of=soon").status_code == 400


def test_a_decision_builds_the_dashboards_figures_for_the_next_viewer(book, url):
    """After the decision's page is sent, the dashboard's figures of the new state are built: the
    next viewer's dashboard builds none (its headline comes from the read cache), and shows them."""
    from unittest import mock

    from ledger.accounting import worst_pair

    client = as_person(url, "bob")
    assert decide(client, "A", "approve").status_code == 200
    with mock.patch.object(worst_pair, "pair_bounds", wraps=worst_pair.pair_bounds) as bounds:
        page = client.get("/dashboard?dataset=census")
    assert page.status_code == 200 and bounds.call_count == 0
