"""One question, one answer, whoever asks: on random ledgers, every reader prints for a subset
the figure `subset --json` prints for it.

The readers: the Python API (`subset`, `table`, `pairs`, `caps`), the command line's JSON
(`table`, `pairs`, `cap list`) and its sentence (`subset --explain`, the API's `statement`),
the report (its Markdown headline and the CSV's composed row) and the registry export (the
protected subset's privacy parameters). A printed figure with four decimals is the figure
rounded up (never below what was spent), so it is compared as such.
"""

from __future__ import annotations

import csv
import io
import math
import re
from itertools import combinations

import yaml
from hypothesis import HealthCheck, given, settings
from support import cli_main
from test_engine_properties import VARIABLES, ledgers
from test_same_figure_everywhere import record_noise_ledger, same

import ledger as ledger_api

SUBSETS = [list(c) for k in (1, 2, 3, 4) for c in combinations(VARIABLES, k)]
DELTA = "1e-4"  # the dataset's own delta (test_same_figure_everywhere.WIDE)


def value(printed) -> float:
    """A JSON figure: a number, or "inf"."""
    return math.inf if printed == "inf" else float(printed)


def shown_up(text: str, figure: float) -> bool:
    """`text` is `figure` as a report prints it: rounded up at four decimals (∞ as ∞)."""
    if math.isinf(figure):
        return "∞" in text
    shown = float(text)
    return figure <= shown + 1e-12 and shown - figure < 1e-4 + 1e-12


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=ledgers(max_releases=4))
def test_every_reader_prints_the_figure_subset_prints(drawn, tmp_path_factory):
    directory = tmp_path_factory.mktemp("readers")
    url = record_noise_ledger(directory, drawn, planned=False)
    assert cli_main(url, "cap", "set", "a", "b", "--name", "ab", "--epsilon", "50", "--delta", DELTA).code == 0
    assert cli_main(url, "cap", "set", "c", "--name", "c", "--epsilon", "50").code == 0
    book = ledger_api.open(url)
    printed = {tuple(s): cli_main(url, "subset", *s, "--json").json() for s in SUBSETS}

    for subset, answer in printed.items():
        loss = book.subset(list(subset))
        assert value(answer["epsilon"]) == loss.epsilon and answer["accountant"] == loss.accountant, subset
        assert answer["reason"] == loss.reason, subset
        words = cli_main(url, "subset", *subset, "--explain").out.splitlines()[-1]
        assert words == "  in words: " + loss.statement, subset

    table = cli_main(url, "table", "--json").json()
    frame = book.table()
    composed = next(row for row in csv.reader(io.StringIO(cli_main(url, "report", "--format", "csv",
                                                                        "--out", "-").out))
                    if row[0] == "All releases (composed)")
    header = next(csv.reader(io.StringIO(cli_main(url, "report", "--format", "csv", "--out", "-").out)))
    for variable in VARIABLES:
        figure = value(printed[(variable,)]["epsilon"])
        assert value(table["total_shown"]["values"][variable]) == figure, variable
        assert frame.loc["All releases", variable] == figure, variable
        assert value(composed[header.index("{" + variable + "}")]) == figure, variable

    for entry, row in zip(cli_main(url, "pairs", "--json").json(), book.pairs().itertuples()):
        figure = value(printed[tuple(entry["subset"])]["epsilon"])
        # (rdp's curves are summed over arrays for pairs, in another order: ulps)
        assert same(value(entry["epsilon"]), figure) and same(row.epsilon, figure), entry

    listed = {c["cap"]: c for c in cli_main(url, "cap", "list", "--json").json()}
    for check in book.caps():
        assert value(listed[check.cap.name]["current"]) == float(check.current), check.cap.name

    protected = value(printed[tuple(VARIABLES)]["epsilon"])
    markdown = cli_main(url, "report", "--format", "md", "--out", "-").out
    headline = re.search(r"\*\*Protected subset epsilon\*\* .*?\| \*\*(.+?)\*\* \|", markdown).group(1)
    assert shown_up(headline, protected), headline
    record = yaml.safe_load(cli_main(url, "export", "registry", "--tier", "3", "--out", "-").out)
    parameters = record["deployment"]["privacy_loss"]["privacy_parameters"]
    if not math.isinf(protected):
        assert parameters["epsilon"] == protected
