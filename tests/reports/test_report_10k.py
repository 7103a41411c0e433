"""The report at 10,000 releases: what was made faster prints and proves the same.

- The HTML register's rows are written by `views.register_row`, not by Jinja: every row equals,
  byte for byte, the row the template wrote (the template's markup kept here as the reference),
  for entries that take every branch, hostile text included.
- Release rows are read with their JSON columns as text (`row_dicts.release_row_dicts`): the same
  dicts as the JSON type's processor gave, and a cell that is not JSON still fails.
- `cap_states.state_apply` over a chunk gives the state of applying it release by release.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from sqlalchemy import select, text

from ledger.store import audit_verify, decoded_history, row_dicts, sessions, table_models
from ledger.operations.report_reading import Ending
from ledger.reporting.register_section import GuaranteeText, RegisterEntry
from ledger.reporting.views import report_environment

# report.html.j2's register row as it was written in Jinja (before views.register_row)
TEMPLATE_ROW = (
    '<tr><td><span class="id">{{ r.id }}</span> <span class="status release-{{ r.status }}">{{ r.status }}</span><br>'
    '{{ r.title }}</td><td>reads {{ r.reads | names }}{% for g in r.guarantees %}<br>{{ g | guarantee }}{% endfor %}'
    '{% if r.exact %}{% set exact_protected = r.exact | reject("in", public) | list %}'
    '{% set exact_public = r.exact | select("in", public) | list %}{% if exact_protected %}<br>'
    '<span class="tag exact">exact: {{ exact_protected | names }}</span>{% endif %}{% if exact_public %}<br>'
    '<span class="tag">public, released exactly: {{ exact_public | names }}</span>{% endif %}{% endif %}'
    '{% for label in r.pufferfish %}<br><span class="tag">Pufferfish: {{ label }}</span>{% endfor %}</td><td>'
    '{{ r.mechanism }}{% for key, value in r.parameters %}<br>{{ key }} {{ value | param }}{% endfor %}'
    '{% if r.output_digest %}<br><span class="note">output SHA-256 <code>{{ r.output_digest }}</code></span>'
    '{% endif %}</td><td>{% if r.family %}family {{ r.family }} ({{ r.family_split }}){% if r.part %}, part '
    '{{ r.part }}{% endif %}{% endif %}'
    '{% if r.derived_from %}{% if r.family %}<br>{% endif %}from {{ r.derived_from | join(", ") }}{% endif %}'
    '{% if not r.family and not r.derived_from %}—{% endif %}</td><td>recorded {{ r.recorded_at | when }} by '
    '{{ r.recorded_by }}{% if r.approved_by %}<br>approved {{ r.approved_at | when }} by {{ r.approved_by }}'
    '{% endif %}{% if r.published_at %}<br>published {{ r.published_at | when }}{% if r.published_by %} by '
    '{{ r.published_by }}{% endif %}{% endif %}{% if r.ended %}<br>{{ r.ended.action }} {{ r.ended.at | when }} '
    'by {{ r.ended.by }}: {{ r.ended.reason }}{% endif %}</td>{% if sparse %}<td class="sparse-cells">'
    '{{ r.cells | cells(public) }}{% if r.dataset_wide is not none %}{% if r.cells %}<br>{% endif %}whole dataset '
    '{{ r.dataset_wide | figure }}{% else %}not charged{% endif %}</td>{% endif %}</tr>')

HOSTILE = ('<script>alert("x")</script> & \u202e', 'a\x00b\x1bc', "plain")
WHEN = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def entries(count: int, seed: int = 3):
    rng = random.Random(seed)
    variables = ["age", "sex", "income", "zip", "<b>"]
    for k in range(count):
        reads = tuple(sorted(rng.sample(variables, rng.randint(0, 3))))
        exact = tuple(name for name in reads if rng.random() < 0.4)
        guarantees = tuple(GuaranteeText(protects=tuple(sorted(rng.sample(variables, 2))),
                                         notion=rng.choice(["pure", "approx", "zcdp"]), epsilon=Fraction(1, k + 2),
                                         delta=Fraction(1, 10 ** 9), rho=Fraction(k, 7),
                                         relation=rng.choice(["replace", "add-remove"]))
                           for _ in range(rng.randint(0, 2)))
        cells = tuple((name, rng.choice([Fraction(1, 3), Fraction(0), float("inf"), Fraction(104, 4099)]))
                      for name in reads)
        yield RegisterEntry(
            id=f"r{k}{rng.choice(HOSTILE) if k % 7 == 0 else ''}", title=rng.choice(HOSTILE),
            status=rng.choice(["planned", "published", "retracted", "cancelled"]), charged=rng.random() < 0.5,
            recorded_at=rng.choice([None, WHEN, WHEN + timedelta(hours=k)]), recorded_by=rng.choice(HOSTILE),
            approved_at=rng.choice([None, WHEN]), approved_by=rng.choice([None, "grace", "<i>"]),
            published_at=rng.choice([None, WHEN + timedelta(days=1)]), reads=reads, exact=exact,
            mechanism=rng.choice(["laplace", "gaussian", "a<b"]),
            parameters=tuple(rng.sample([("epsilon", Fraction(1, 3)), ("sigma", 40.0), ("sensitivity", 1),
                                         ("flag", True), ("none", None), ("text", "<x>")], rng.randint(0, 3))),
            guarantees=guarantees, family=rng.choice([None, "fam&1"]),
            family_split=rng.choice(["random split", "partition by zip"]),
            derived_from=tuple(rng.sample(["r1", "r<2>", "r3"], rng.randint(0, 2))),
            output_digest=rng.choice([None, "ab" * 32]),
            pufferfish=tuple(rng.sample(["p% rule", "<attr>"], rng.randint(0, 2))),
            cells=cells, dataset_wide=rng.choice([None, Fraction(2, 3), float("inf")]),
            published_by=rng.choice([None, "ada", "<u>"]),
            ended=rng.choice([None, Ending("retracted", "edsger", WHEN, "an error <found>\n")]),
            part=rng.choice([None, "zip=<9>", "part & 1"]))


@pytest.mark.parametrize("sparse", [True, False])
def test_register_rows_are_the_rows_the_template_wrote(sparse):
    env = report_environment("html")
    reference = env.from_string(TEMPLATE_ROW)
    row = env.from_string("{{ r | register_row(sparse, public) }}")
    public = ("zip", "<b>")
    count = 0
    for entry in entries(400):
        expected = reference.render(r=entry, sparse=sparse, public=public)
        assert row.render(r=entry, sparse=sparse, public=public) == expected, entry
        count += 1
    assert count == 400


def test_the_report_template_writes_every_register_row_with_register_row(tmp_path):
    """report.html.j2 prints each row through the filter (not a copy of the markup of its own)."""
    from importlib import resources

    source = resources.files("ledger.reports").joinpath("report.html.j2").read_text(encoding="utf-8")
    assert "{{ r | register_row(report.sparse, report.risk.public) }}" in source
    assert '<tr><td><span class="id">' not in source


# --------------------------------------------------------------------------
# Release rows read as text
# --------------------------------------------------------------------------


def _demo_engine(tmp_path):
    from ledger.api import Ledger, front_end
    from ledger.cli.demo import run_demo
    from ledger.store import engines, schema_migrations

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    engine = engines.make_engine(url)
    schema_migrations.ensure_schema(engine)
    run_demo(Ledger(url, engine, person=front_end("steward", "test")), tmp_path / "demo.html")
    return engine


def test_release_rows_read_as_text_are_the_dicts_the_json_type_gave(tmp_path):
    engine = _demo_engine(tmp_path)
    table = table_models.ReleaseRow.__table__
    with sessions.read_session(engine) as session:
        connection = session.connection()
        processed = [row_dicts.release_row_dict(row) for row in connection.execute(select(table).order_by(table.c.seq))]
        as_text = row_dicts.release_row_dicts(
            connection.execute(select(*row_dicts.RELEASE_TEXT_COLUMNS).order_by(table.c.seq)).all())
    assert processed and as_text == processed
    assert [json.dumps(d, sort_keys=True) for d in as_text] == [json.dumps(d, sort_keys=True) for d in processed]


def test_a_release_cell_that_is_not_json_still_fails_verification_and_the_snapshot(tmp_path):
    engine = _demo_engine(tmp_path)
    with engine.begin() as connection:
        rid = connection.execute(text("SELECT id FROM releases ORDER BY seq LIMIT 1")).scalar_one()
        connection.execute(text("UPDATE releases SET reads = :bad WHERE id = :id"), {"bad": '["age",', "id": rid})
    with sessions.read_session(engine) as session, pytest.raises(ValueError):
        decoded_history.snapshot(session)
    with sessions.read_session(engine) as session, pytest.raises(ValueError):
        audit_verify.verify(session)


def test_a_release_row_changed_to_other_json_is_named_by_verify(tmp_path):
    """A cell rewritten as other valid JSON (an exact parameter written as a float) is a changed row."""
    engine = _demo_engine(tmp_path)
    with sessions.read_session(engine) as session:
        assert audit_verify.verify(session).ok
    with engine.begin() as connection:
        rid, params = connection.execute(text("SELECT id, mechanism_params FROM releases ORDER BY seq LIMIT 1")).one()
        changed = json.dumps({key: (float(Fraction(value["fraction"])) if isinstance(value, dict) else value)
                              for key, value in json.loads(params).items()})
        assert changed != params
        connection.execute(text("UPDATE releases SET mechanism_params = :p WHERE id = :id"), {"p": changed, "id": rid})
    with sessions.read_session(engine) as session:
        verification = audit_verify.verify(session)
    assert not verification.ok
    assert any(f"release {rid}): the release row was changed outside the ledger" in p for p in verification.problems)


# --------------------------------------------------------------------------
# The running accountant state over a chunk
# --------------------------------------------------------------------------


def test_state_apply_over_a_chunk_is_state_apply_release_by_release():
    """A cap's running state is the same whether the releases are applied together or one at a
    time, in any order of times."""
    from ledger.accounting.cap_states import state_apply, state_from_history
    from ledger.core.records import Cap, Guarantee, Mechanism, Notion, Relation, Release, Status

    rng = random.Random(11)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    releases = []
    for k in range(60):
        recorded = None if k % 13 == 0 else start + timedelta(minutes=rng.randrange(10_000))
        if k % 5 == 0 and recorded is not None:
            recorded = recorded.replace(tzinfo=None)  # a naive time (UTC) beside aware ones
        status = rng.choice([Status.PUBLISHED, Status.PLANNED, Status.APPROVED, Status.RETRACTED])
        published = start + timedelta(minutes=rng.randrange(10_000)) if status == Status.PUBLISHED and k % 3 else None
        reads = frozenset(rng.sample(["age", "sex", "income"], rng.randint(1, 2)))
        releases.append(Release(
            id=f"r{k}", dataset="d", title="", reads=reads,
            mechanism=Mechanism("laplace", (("epsilon", Fraction(1, 10)),)),
            guarantees=(Guarantee(reads, Notion.PURE, Fraction(1, 10), None, None, Relation.REPLACE),),
            status=status, recorded_by="ada", recorded_at=recorded, published_at=published))
    cap = Cap(dataset="d", name="c", subset=frozenset({"age", "income"}), epsilon=Fraction(5),
              delta=Fraction(1, 10 ** 9))
    empty = state_from_history(cap, (), {})
    together = state_apply(empty, cap, releases, {}, {})
    one_by_one = empty
    for release in releases:
        one_by_one = state_apply(one_by_one, cap, [release], {}, {})
    assert together == one_by_one
    # every charged release reading {age, income} is one Laplace of epsilon 1/10 (retracted ones are charged)
    assert sum(together["events"].values()) == sum(1 for r in releases if r.reads & cap.subset)
