"""Layering (issue 14, product owner): report.py and charts.py no longer import each other;
the shared chart inputs live in chart_data.py, and report.py still offers them by name."""

from __future__ import annotations

import ast
from pathlib import Path

LEDGER = Path(__file__).resolve().parents[1] / "ledger"


def imported_modules(name: str) -> set[str]:
    tree = ast.parse((LEDGER / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.add(node.module or "")
            if node.module is None:
                found |= {alias.name for alias in node.names}
    return found


def test_report_and_charts_do_not_import_each_other():
    # one direction only: report.draw_here calls charts; charts reads chart_data, never report
    assert "report" not in imported_modules("charts")
    assert "chart_data" in imported_modules("charts") and "chart_data" in imported_modules("report")


def test_report_still_offers_the_chart_inputs():
    from ledger import chart_data, report

    assert report.Pairs is chart_data.Pairs and report.Timeline is chart_data.Timeline
    assert report.PairFigure is chart_data.PairFigure


def test_cli_run_and_report_use_the_shared_choices():
    for name in ("cli_run", "cli_report"):
        source = (LEDGER / f"{name}.py").read_text(encoding="utf-8")
        assert "_pick_dataset, " not in source.replace("as _pick_dataset", "")
        assert "cli._pick_dataset" not in source and "cli._delta" not in source


def test_no_cli_module_reaches_into_another_cli_modules_private_helpers():
    """The CLI modules take the ledger from cli_context (which ledger, how it is opened, the light read,
    who acts), never from cli.py's private helpers; cli_context imports no CLI module."""
    for path in sorted(LEDGER.glob("cli*.py")):
        source = path.read_text(encoding="utf-8")
        assert "cli._" not in source, path.name
        assert "from .cli import _" not in source, path.name
    assert not {m for m in imported_modules("cli_context") if m.startswith("cli")}
