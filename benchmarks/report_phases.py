"""Where a report's CPU goes: `report --format html`'s steps timed one by one in one process. Run by `bench_report.py --scale --phases` for this branch and the old
path (its package first on PYTHONPATH), or alone:

    PYTHONPATH=. .venv/bin/python benchmarks/report_phases.py LEDGER.db

Prints one JSON object: CPU seconds (time.process_time) of each step, the garbage collector
paused as the command pauses it, helpers' work (the verification, the pairs panel) done here:
- imports: the modules the command imports (ledger's CLI and store, the report, numpy, jinja2);
- verify (full), verify since the head: `audit_verify.verify`, and `verified_head.verify_since` when the
  ledger keeps a head (0 otherwise);
- read (gather): the release rows decoded, the events, caps and checks;
- pairs, table accounts, timeline, register entries, risk table, Table 1: the report's steps
  inside `build_report` (the pairs panel runs in a forked helper in the command), and the rest
  of build_report;
- render: the HTML template (the register's rows included).
"""

from __future__ import annotations

import json
import sys
import time

START = time.process_time()
import gc  # noqa: E402

gc.disable()  # as the command (core.memory.paused_gc)
import jinja2  # noqa: E402,F401
import numpy  # noqa: E402,F401

from ledger.cli import app  # noqa: E402,F401
from ledger.operations.report_inputs import gather  # noqa: E402
from ledger.reporting.write import render_text  # noqa: E402
from ledger.reporting import report as R  # noqa: E402
from ledger.store import audit_verify, decoded_history, engines, sessions  # noqa: E402

IMPORTS = time.process_time() - START
spent: dict[str, float] = {}


def timed(module, name: str, label: str) -> None:
    function = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - start

    setattr(module, name, wrapper)


def main(path: str) -> None:
    from ledger.accounting import ledger_index

    for name, label in (("pair_figures", "pairs"), ("shown_accounts", "table accounts"),
                        ("timeline_of", "timeline"), ("register_entry", "register entries"),
                        ("risk_table", "risk table")):
        timed(R, name, label)
    timed(ledger_index.LedgerIndex, "table_by_arrays", "Table 1")
    engine = engines.make_engine(f"sqlite:///{path}")
    figures = {"imports": IMPORTS}
    with sessions.read_session(engine) as session:
        start = time.process_time()
        audit_verify.verify(session)
        figures["verify (full)"] = time.process_time() - start
        from ledger.store import verified_head

        kept = verified_head.read_head(session)
        start = time.process_time()
        if kept is not None:
            verified_head.verify_since(session, (kept.seq, kept.hash))
        figures["verify since the head"] = time.process_time() - start
        snapshot = decoded_history.snapshot(session)
        dataset = next(iter(snapshot.datasets.values()))
        chain = R.ChainStatus(True, 1, "0" * 64, (), 0, None, None)
        start = time.process_time()
        inputs = gather(session, dataset, dataset.delta, None, chain=lambda: chain)
        figures["read (gather)"] = time.process_time() - start
    start = time.process_time()
    context = R.build_report(inputs)
    built = time.process_time() - start
    figures.update(spent)
    figures["build_report, the rest"] = built - sum(spent.values())
    start = time.process_time()
    render_text(context, "html")
    figures["render"] = time.process_time() - start
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1])
