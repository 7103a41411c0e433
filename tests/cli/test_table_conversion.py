"""`table --json` names the zCDP conversion only when a figure in it went through it.

Only a rho is converted (Spend.epsilon, own_epsilon: Canonne, Kamath and Steinke 2020); pure
epsilons and (epsilon, delta) guarantees compose by sums (Tan Prop 3.4; Dwork and Roth 2014,
Thm 3.16). The field named the conversion for every table that was not pure-only, an (epsilon,
delta)-only one included, as the report's certificate did before (report.with_conversion)."""

from __future__ import annotations

import pytest

from ledger.accounting.spend import CONVERSION_NAME
from support import cli_main

DATASET = "dataset: d\ndelta: 1e-6\nvariables:\n  - {name: a}\n  - {name: b}\n"


@pytest.mark.parametrize("mechanism, converted", [
    ("{name: laplace, epsilon: 1}", False),
    ("{name: declared}, guarantees: [{epsilon: 1, delta: 1e-8}]", False),
    ("{name: gaussian, sigma: 2, sensitivity: 1}", True),
])
def test_the_table_names_the_conversion_where_a_rho_is_converted(tmp_path, mechanism, converted):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "d.yaml").write_text(DATASET)
    (tmp_path / "r.yaml").write_text(f"dataset: d\nreleases:\n  - {{id: r, reads: [a], mechanism: {mechanism}}}\n")
    assert cli_main(url, "dataset", "add", tmp_path / "d.yaml").code == 0
    assert cli_main(url, "record", tmp_path / "r.yaml").code == 0
    table = cli_main(url, "table", "--json").json()
    assert table["conversion"] == (CONVERSION_NAME if converted else None)
