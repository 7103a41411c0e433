"""`export registry`: a DP Deployments Registry record, validated against the
registry's own schema: the copy in tests/registry (OpenDP's deployments-registry-data, MIT licence,
commit 3e9c812), or ../shared/registry where that folder is beside the repository (and then the
copy is checked to be the same, so the copy cannot drift from the schema the project was given).

The Census-holdout-style ledger: state totals held invariant (an exact release),
person-level attributes released with Gaussian noise in rho-zCDP, as the 2020
redistricting data (the registry's example record, rho = 2.63)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema_rs
import pytest
import yaml

import ledger
from ledger.api import front_end
from support import acting_as, cli_main

COPY = Path(__file__).resolve().parents[1] / "registry"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "registry"
REGISTRY = SHARED if (SHARED / "deployments-schema.yaml").is_file() else COPY
SCHEMA = REGISTRY / "deployments-schema.yaml"

HOLDOUT = {
    "dataset": "holdout",
    "description": "Census holdout test: redistricting-style tables",
    "delta": "1e-10",
    "privacy_unit": "Person-level",
    "privacy_unit_details": "Two datasets are adjacent when one person's record is changed; the number "
                            "of records is public (bounded neighbours).",
    "variables": [{"name": "state", "classification": "public"}, {"name": "age"}, {"name": "sex"},
                  {"name": "race"}, {"name": "hispanic"}],
    "groups": {"person": ["age", "sex", "race", "hispanic"]},
    "caps": [{"name": "person", "rho": "2.63"}],
}
# sigma and sensitivity give rho = sensitivity^2 / (2 sigma^2) (Bun and Steinke 2016, Prop 1.6)
RELEASES = {"dataset": "holdout", "releases": [
    {"id": "state-totals", "title": "State population (invariant)", "reads": ["state"],
     "mechanism": {"name": "exact"}},
    {"id": "p1", "reads": ["state", "race"], "mechanism": {"name": "gaussian", "rho": "1.2"},
     "guarantees": [{"protects": ["race"], "rho": "1.2"}]},
    {"id": "p2", "reads": ["state", "hispanic", "race"], "mechanism": {"name": "gaussian", "rho": "0.8"},
     "guarantees": [{"protects": ["hispanic", "race"], "rho": "0.8"}]},
    {"id": "p3", "reads": ["state", "age", "sex"], "mechanism": {"name": "gaussian", "sigma": 1, "sensitivity": 1},
     "guarantees": [{"protects": ["age", "sex"], "rho": "0.5"}]},
]}


@pytest.fixture
def schema():
    return yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))


@pytest.fixture
def url(tmp_path):
    book = ledger.open(f"sqlite:///{tmp_path / 'holdout.db'}", person=front_end("tester", "test"))
    book.add_dataset(HOLDOUT)
    book.record(RELEASES)
    return book.url


@pytest.mark.skipif(not (SHARED / "deployments-schema.yaml").is_file(), reason="no ../shared/registry beside the repository")
@pytest.mark.parametrize("name", ["deployments-schema.yaml", "example-census_redistricting_data.yaml", "LICENSE"])
def test_the_copy_is_the_shared_registry(name):
    assert (COPY / name).read_bytes() == (SHARED / name).read_bytes()


def test_the_example_record_validates(schema):
    example = yaml.safe_load((REGISTRY / "example-census_redistricting_data.yaml").read_text(encoding="utf-8"))
    jsonschema_rs.Draft202012Validator(schema, validate_formats=True).validate(example)


@pytest.mark.parametrize("tier", [1, 2, 3])
def test_export_validates_at_every_tier(url, schema, tmp_path, tier):
    out = tmp_path / f"record-{tier}.yaml"
    run = cli_main(url, "export", "registry", "--dataset", "holdout", "--tier", tier, "--out", out)
    assert run.code == 0, run.err
    record = yaml.safe_load(out.read_text(encoding="utf-8"))
    jsonschema_rs.Draft202012Validator(schema, validate_formats=True).validate(record)
    assert record["tier"] == tier
    assert record["deployment"]["basic"]["intended_use"].startswith("PLACEHOLDER")
    assert all(author.startswith("PLACEHOLDER") for author in record["deployment"]["administrative"]["registry_authors"])


def test_holdout_export_carries_rho_and_per_attribute_figures(url, tmp_path):
    out = tmp_path / "record.yaml"
    assert cli_main(url, "export", "registry", "--tier", "3", "--out", out).code == 0
    deployment = yaml.safe_load(out.read_text(encoding="utf-8"))["deployment"]
    assert deployment["dp_variant"]["variant_name"] == "Zero-concentrated DP"
    loss = deployment["privacy_loss"]
    # protected: age, sex, race, hispanic (state is public and released exactly): 1.2 + 0.8 + 0.5
    assert Fraction(repr(loss["privacy_parameters"]["rho"])) >= Fraction("2.5")
    assert loss["privacy_parameters"]["rho"] == pytest.approx(2.5)
    assert loss["privacy_parameters"]["delta"] == pytest.approx(1e-10)
    assert loss["privacy_unit"] == "Person-level"
    assert loss["privacy_unit_details"].startswith("Two datasets are adjacent")
    details = loss["privacy_parameters_details"]
    assert "rho 2" in details.split("- race:")[1].splitlines()[0]  # race: 1.2 + 0.8
    assert "rho 0.8" in details.split("- hispanic:")[1].splitlines()[0]
    assert "rho 0.5" in details.split("- age:")[1].splitlines()[0]
    assert "Canonne" in details or "CKS" in details  # the conversion is named
    unprotected = deployment["dp_variant"]["unprotected_quantities"]
    assert "state" in unprotected and "state-totals" in unprotected
    assert "rho 2.63" in deployment["deployment_model"]["release_type_details"]


def test_export_to_stdout_and_bad_tier(url):
    run = cli_main(url, "export", "registry", "--out", "-")
    assert run.code == 0 and "url_slug:" in run.out
    assert cli_main(url, "export", "registry", "--tier", "4", "--out", "-").code == 2


def test_tier_2_names_the_conversion(url, tmp_path):
    out = tmp_path / "record.yaml"
    assert cli_main(url, "export", "registry", "--tier", "2", "--out", out).code == 0
    loss = yaml.safe_load(out.read_text(encoding="utf-8"))["deployment"]["privacy_loss"]
    assert set(loss["privacy_parameters"]) == {"rho", "epsilon", "delta"}
    assert "Canonne-Kamath-Steinke" in loss["privacy_parameters_details"]


def test_the_record_states_the_figures_subset_and_table_print(tmp_path):
    """The same answer to the same question: the registry's epsilon at the dataset's delta on the
    protected variables is the one `subset` prints for them, and each variable's the one the
    total row of `table` prints (the smallest valid figure). A pure release and Gaussians: the
    Rényi accountant beats basic composition (pure + zCDP converted), so the record gives
    `table`'s 2.1643, not the basic 2.26."""
    url = f"sqlite:///{tmp_path / 'lfs.db'}"
    book = ledger.open(url)
    book.add_dataset({"dataset": "lfs", "delta": "1e-6", "variables": [{"name": "wage"}, {"name": "hours"}]})
    book.record({"dataset": "lfs", "releases": [
        {"id": "w", "reads": ["wage"], "mechanism": {"name": "laplace", "epsilon": "0.6"}},
        *({"id": f"g{k}", "reads": ["wage", "hours"], "mechanism": {"name": "gaussian", "sigma": 8, "sensitivity": 1}}
          for k in range(8))]})
    out = tmp_path / "record.yaml"
    assert cli_main(url, "export", "registry", "--tier", "2", "--out", out).code == 0
    loss = yaml.safe_load(out.read_text(encoding="utf-8"))["deployment"]["privacy_loss"]
    shown = cli_main(url, "subset", "wage", "hours", "--json").json()
    assert shown["accountant"] != "basic" and shown["epsilon"] < shown["accountants"]["basic"]["epsilon"]
    assert loss["privacy_parameters"]["epsilon"] == pytest.approx(shown["epsilon"], rel=1e-12)
    assert loss["privacy_parameters"]["epsilon"] >= shown["epsilon"]  # never below (rounded up)
    assert f"the {shown['accountant']} accountant's figure" in loss["privacy_parameters_details"]
    for name in ("wage", "hours"):  # the total row of `table` is `subset` of the one variable (tests elsewhere)
        one = cli_main(url, "subset", name, "--json").json()["epsilon"]
        line = next(l for l in loss["privacy_parameters_details"].splitlines() if l.strip().startswith(f"- {name}:"))
        printed = float(line.split("epsilon ")[1].split()[0].rstrip(";"))
        assert printed == pytest.approx(one, abs=1e-4) and printed >= one - 1e-12


SECOND = {"dataset": "holdout", "families": [{"id": "by-state", "partition": ["state"]}], "releases": [
    {"id": "p4", "reads": ["state", "age"], "family": "by-state", "part": "state=CA", "mechanism": {"name": "laplace", "epsilon": "1/4"},
     "guarantees": [{"protects": ["age"], "epsilon": "1/4"}]},
    {"id": "p5", "reads": ["state", "sex", "race"], "family": "by-state", "part": "state=NY",
     "mechanism": {"name": "laplace", "epsilon": "1/3"}},
    {"id": "p6", "reads": ["age"], "derived_from": ["p4"], "mechanism": {"name": "declared"},
     "guarantees": [{"protects": ["age"], "epsilon": "1/4"}]},
    {"id": "p8", "reads": [], "derived_from": ["p1", "p2"]},
    {"id": "p7", "reads": ["hispanic"], "mechanism": {"name": "laplace", "epsilon": "1/10"}, "status": "planned"},
]}


@pytest.mark.parametrize("tier", [1, 2, 3])
def test_the_export_read_from_rows_a_chunk_at_a_time_is_the_record_of_the_releases(url, tmp_path, tier,
                                                                                  monkeypatch):
    """`export registry` reads the figures from the accounting rows and the releases' facts a
    chunk at a time: the record is the one
    `registry_record` makes from every release decoded (the API's path), with families, a
    derived release, a release read exactly and a cancelled one, over several chunks."""
    from ledger.store import decoded_history

    with acting_as("tester"):
        book = ledger.open(url)
        book.record(SECOND)
        book.cancel("p7", reason="not run")
        expected = book.export_registry("holdout", tier=tier)
        if tier == 3:  # p6 reads age itself: charged, not post-processing alone (docs/explanation/model.md#post-processing-and-lineage)
            assert expected["deployment"]["accounting"]["post_processing"] == (
                "- 'p6' is computed from p4 and reads age itself: charged as any release reading them (docs/explanation/model.md#post-processing-and-lineage).\n"
                "- 'p8' is computed from p1, p2 (post-processing: no further loss).\n")
            assert "- laplace: 2 releases\n" in expected["deployment"]["implementation"]["mechanisms"]
        with monkeypatch.context() as patch:
            patch.setattr(decoded_history, "RELEASE_PAGE", 2)
            patch.setattr(decoded_history, "snapshot", lambda *a, **k: pytest.fail("export decoded the whole history"))
            run = cli_main(url, "export", "registry", "--dataset", "holdout", "--tier", tier, "--out", "-", "--json")
        assert run.code == 0, run.err
        assert json.loads(run.out) == expected


# --------------------------------------------------------------------------
# The releases' facts by SQL: equal to the pass over every release
# --------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_accounting_rows import FAMILIES, T0, VARIABLES, dataset, ledgers, moment  # noqa: E402


def _with_more(entries, data):
    """`ledgers()`'s entries and: releases whose guarantees each cover part of what they read (exact
    only where none covers a variable), a release with no guarantee and no mechanism event, and
    releases derived from earlier ones (post-processing alone, or reading variables themselves)."""
    more = []
    for k in range(data.draw(st.integers(0, 4))):
        reads = sorted(data.draw(st.sets(st.sampled_from("abcd"), min_size=1, max_size=4)))
        parts = data.draw(st.lists(st.sets(st.sampled_from("abcd"), min_size=1, max_size=2), min_size=1, max_size=3))
        more.append({"id": f"m{k}", "reads": reads, "mechanism": {"name": "declared"},
                     "guarantees": [{"protects": sorted(p), "epsilon": "1/2"} for p in parts]})
    if data.draw(st.booleans()):
        more.append({"id": "bare", "reads": ["b"], "mechanism": {"name": "exact"}})
    for k in range(data.draw(st.integers(0, 2))):
        sources = sorted(data.draw(st.sets(st.sampled_from([e["id"] for e in entries]), min_size=1, max_size=2)))
        reads = sorted(data.draw(st.sets(st.sampled_from("abcd"), max_size=2)))
        more.append({"id": f"d{k}", "reads": reads, "derived_from": sources,
                     **({"mechanism": {"name": "laplace", "epsilon": "1/3"}} if reads else {})})
    return entries + more


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_the_facts_by_sql_are_the_facts_of_every_release_decoded(ledger, data):
    """`export registry`'s facts (store.facts.charged_facts, registry.facts_of) against
    `registry.release_facts` over every charged release decoded, the path before: the count, the
    earliest moment, the releases read exactly (with what they read exactly), the derived ones
    and the mechanisms' counts, on random ledgers (every status, moments or none, families,
    several partial guarantees, derived releases); and `LedgerIndex.exactly_read` of the rows'
    index names the releases whose `exact_variables` is not empty, a chunk of releases at a time or not."""
    import tempfile
    from dataclasses import replace

    from sqlmodel import Session

    from ledger.core.records import CHARGED_STATUSES, Status
    from ledger.input.documents import Document
    from ledger.input.releases import build_releases
    from ledger.input.snapshot import LedgerSnapshot
    from ledger.operations.registry_record import facts_of, release_facts
    from ledger.store import dataset_writes, decoded_history, engines, index_from_rows, release_writes, schema_migrations, sessions
    from ledger.store.facts import charged_facts

    entries, lifecycle = ledger
    entries = _with_more(entries, data)
    for _ in range(len(entries) - len(lifecycle)):
        status = data.draw(st.sampled_from(list(Status)))
        published = data.draw(st.one_of(st.none(), st.integers(0, 5))) if status in (
            Status.PUBLISHED, Status.RETRACTED) else None
        lifecycle.append((status, data.draw(st.one_of(st.none(), st.integers(0, 5))), published, False))
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        engine = engines.make_engine(url)
        schema_migrations.ensure_schema(engine)
        releases, _, errors = build_releases(
            Document("r.json", {"dataset": "t", "releases": entries}),
            LedgerSnapshot(datasets={"t": dataset()}, families={f.id: f for f in FAMILIES}),
            recorded_by="t", recorded_at=T0)
        assert not errors, errors
        stated = [replace(r, status=status, recorded_at=moment(recorded), published_at=moment(published))
                  for r, (status, recorded, published, _) in zip(releases, lifecycle)]
        with sessions.write_session(engine) as session:
            dataset_writes.add_dataset(session, dataset(), "t")
            release_writes.add_releases(session, stated, FAMILIES, "t")
        with Session(engine) as session:
            charged = [r for r in decoded_history.snapshot(session, "t").releases.values() if r.status in CHARGED_STATUSES]
            index = index_from_rows.index_for(session, VARIABLES, "t", {f.id: f for f in FAMILIES})
            from ledger.accounting import ledger_index

            chunk = ledger_index._CHUNK
            ledger_index._CHUNK = data.draw(st.sampled_from([2, 3, chunk]))  # (several chunks of releases)
            try:
                rows = index.exactly_read()
            finally:
                ledger_index._CHUNK = chunk
            found = facts_of(charged_facts(session.connection(), "t", index.releases.seqs[rows].tolist()))
            assert [index.releases[int(i)].id for i in rows] == [r.id for r in charged if r.exact_variables]
        engine.dispose()
    expected = release_facts(charged)
    assert found == expected
    assert expected.count == len(charged)  # (the pass counts what it is given)
