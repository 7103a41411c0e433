"""Same figures on every page: random small ledgers (the strategy of test_engine_properties, recorded
through the command line as test_same_figure_everywhere records them) served by the web app, whose
dashboard, table, subset explorer and caps show exactly what `subset`, `table` and `cap list` print
(their --json), figure by figure, each parsed from the page's own markup."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from support import cli_main
from test_engine_properties import VARIABLES, ledgers
from test_same_figure_everywhere import WIDE, release_yaml
from web_support import parse

from ledger.web.app import create_app

CAPS = (("a", "b", "--name", "ab", "--delta", "1e-4"), ("c", "--name", "c", "--delta", "2e-4"),
        ("d", "--name", "pure-d"), ("a", "b", "c", "d", "--name", "every", "--rho", "50"))


def recorded(ledger, directory) -> str:
    """The random ledger recorded through the command line (every release published), with caps in
    epsilon at a delta, pure epsilon and rho; its URL."""
    url = f"sqlite:///{directory / 'ledger.db'}"
    (directory / "survey.yaml").write_text(WIDE)
    assert cli_main(url, "dataset", "add", directory / "survey.yaml").code == 0
    usable = [r for r in ledger.releases if r.reads and not (r.family and not r.guarantees)]
    usable = [r for r in usable if not any(f.id == r.family and f.partition and not f.partition <= r.reads
                                           for f in ledger.families)]
    families = "".join(f"  - {{id: {f.id}, partition: {'random' if f.partition is None else '[' + ', '.join(sorted(f.partition)) + ']'}}}\n"
                       for f in ledger.families)
    if usable:
        (directory / "r.yaml").write_text("dataset: survey\n" + (f"families:\n{families}" if families else "")
                                          + "releases:\n" + "\n".join(map(release_yaml, usable)) + "\n")
        assert cli_main(url, "record", directory / "r.yaml").code == 0
    for args in CAPS:
        limit = () if "--rho" in args else ("--epsilon", "100")
        assert cli_main(url, "cap", "set", *args, *limit).code == 0
    return url


def number(value) -> float:
    """A figure as a float: a page's data-value (a float's repr, or a Fraction's text) or what --json
    prints (a number, or "inf" when unbounded)."""
    return float(Fraction(value)) if isinstance(value, str) and "/" in value else float(value)


def values(node) -> list[float]:
    return [number(cell.attrs["data-value"]) for cell in node.find_all(data_value=True)]


def listed(figures: dict) -> list[float]:
    return [number(value) for value in figures.values()]


def printed(url: str, *args) -> dict:
    run = cli_main(url, *args, "--json")
    assert run.code == 0, run.err
    return run.json()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ledger=ledgers(max_releases=4), picked=st.lists(st.sampled_from(VARIABLES), min_size=1, max_size=3, unique=True))
def test_every_page_shows_what_subset_table_and_cap_list_print(ledger, picked, tmp_path_factory):
    url = recorded(ledger, tmp_path_factory.mktemp("pages"))
    client = TestClient(create_app(url, local_person="viewer"), base_url="http://127.0.0.1:8080")
    table = printed(url, "table")

    page = parse(client.get("/table?dataset=survey").text)
    rows = {row.attrs["data-release"]: values(row) for row in page.find_all(data_release=True)}
    assert rows.pop("All releases") == listed(table["total_shown"]["values"])
    assert rows == {row["release"]: listed(row["values"]) for row in table["rows"]}

    page = parse(client.get("/subset?dataset=survey&" + "&".join(f"v={v}" for v in picked)).text)
    subset = printed(url, "subset", *picked)
    assert number(page.find(id="subset-epsilon").attrs["data-value"]) == number(subset["epsilon"])
    drivers = [a.text for a in page.find_all() if a.tag == "a" and a.attrs.get("href", "").startswith("/release?id=")]
    assert drivers == subset["releases"]

    page = parse(client.get("/dashboard?dataset=survey").text)
    protected = printed(url, "subset", "protected")
    assert values(page.find(id="protected")) == [number(protected["epsilon"])]
    assert values(page.find(id="worst-variable")) == [max(listed(table["total_shown"]["values"]))]
    pairs = printed(url, "pairs")
    assert len(pairs) == len(list(combinations(VARIABLES, 2)))
    assert values(page.find(id="worst-pair")) == [max(number(p["epsilon"]) for p in pairs)]
    assert values(page.find(id="releases")) == [len(table["rows"])]
    caps = {c["cap"]: c for c in printed(url, "cap", "list")}
    shown = {row.attrs["data-cap"]: row for row in page.find_all(data_cap=True)}
    assert set(shown) == set(caps)
    for name, row in shown.items():
        spent, headroom = [cell.attrs["data-value"] for cell in row.find_all(data_value=True)]
        cap = caps[name]
        # an exact figure is shown exactly (its fraction), a float as the float --json prints
        assert (Fraction(spent) == Fraction(cap["after_exact"]) if "/" in spent
                else number(spent) == number(cap["after"])), name
        assert (Fraction(headroom) == Fraction(cap["headroom_exact"]) if "/" in headroom
                else number(headroom) == number(cap["headroom"])), name
        assert cap["status"] in row.text, name
