"""What a data steward new to the tool ran into, written as the steward wrote it: a labour
force survey with caps on wage alone and on a group of work variables, release files with
numbers as 1e-3, 0.1 and 1/10, a variable list given as a comma string, a release that
breaks two caps at once, and `--json` on the refusal."""

from __future__ import annotations

import textwrap

import pytest
from support import cli_main

DATASET = """\
dataset: lfs
delta: 1e-6
variables:
  - {name: age, classification: identifying}
  - {name: region, classification: public}
  - {name: wage, classification: sensitive}
  - {name: hours, classification: sensitive}
groups:
  work: [wage, hours]
caps:
  - {subset: [wage], epsilon: 2}
  - {name: work, rho: 1/2}
"""


@pytest.fixture
def ledger(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"

    def write(name: str, text: str):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    assert cli_main(url, "dataset", "add", write("lfs.yaml", DATASET)).code == 0
    return url, write


def test_a_refusal_in_json_names_each_broken_cap_with_its_own_figures(ledger):
    url, write = ledger
    history = write("history.yaml", """\
        dataset: lfs
        releases:
          - {id: wage-by-region, reads: [region, wage], mechanism: {name: laplace, epsilon: 0.5}}
          - {id: hours-2024, reads: [hours], mechanism: {name: laplace, epsilon: 1/10}}
        """)
    assert cli_main(url, "record", history).code == 0
    # Laplace scale 1, sensitivity 3/2: epsilon 3/2 on {wage, hours}, so rho 9/8.
    # wage cap: 1/2 + 3/2 = 2 fits exactly; add 1/10 more to break it too.
    too_much = write("too-much.yaml", """\
        dataset: lfs
        releases:
          - {id: wage-detail, reads: [wage, hours], mechanism: {name: laplace, scale: 1, sensitivity: 1.5}}
          - {id: wage-extra, reads: [wage], mechanism: {name: laplace, epsilon: 0.1}}
        """)
    text = cli_main(url, "record", too_much)
    run = cli_main(url, "record", too_much, "--json")
    assert text.code == run.code == 1
    errors = run.json()["errors"]
    assert [e["field"] for e in errors] == ["cap lfs/wage", "cap lfs/work"]
    wage, work = (e["message"] for e in errors)
    # each message is about its own cap: wage 1/2 + 3/2 + 1/10 = 21/10 against 2 (pure epsilon);
    # work 1/8 + 1/200 + 9/8 + 1/200 = 63/50 in rho (epsilon^2/2 each, Bun and Steinke 2016) against 1/2
    assert wage.startswith("cap lfs/wage: epsilon would be 2.1 against a cap of 2, over by 0.1")
    assert "release wage-detail charges 1.5" in wage and "release wage-extra charges 0.1" in wage
    assert work.startswith("cap lfs/work: rho would be 1.26 against a cap of 0.5, over by 0.76")
    assert "release wage-detail charges 1.125" in work and "Remark 4.4" in work
    # the same words as the text refusal, cap by cap
    for message in (wage, work):
        assert message.split("; ")[0] in text.err
