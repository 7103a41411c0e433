"""privacy-ledger: the book of record for privacy loss, per variable and per subset.

The Python API (ledger/api/):

    import ledger
    book = ledger.open()                       # $LEDGER_DATABASE_URL, else sqlite:///ledger.db
    book.subset(["income"]).epsilon            # a safe float; .exact: the Fraction where one exists
    book.table()                               # pandas DataFrame: a row per release, a total row

Errors: `InputErrors` (bad input; `.errors` is a list of `LedgerError` with
source, field and message), `BudgetRefused` (a cap would break; `.checks`) and
`Refused` (another step the accounting refuses: cancelling a release whose output
exists; `.error`).
Adapters from OpenDP, dp_accounting and diffprivlib: `ledger.adapters`.

Where things live (the layers, lowest first; a module imports only its own layer and
the ones below -- tests/test_layers.py):
  core/         numbers, records, errors: the vocabulary
  mechanisms/   the data mechanisms (pure)
  accounting/   every number: spend.py (composition), cost_rule.py and ledger_index.py (cost per
                subset), the accountants (composition_figures.py), budget.py (caps; cap_measure.py,
                cap_unbounded.py), catalogue.py
  input/        files -> validated records: documents.py (parse), schema_check.py, datasets.py,
                releases.py, batch.py (checks across one record)
  store/        table_models.py, engines.py, sessions.py, schema_migrations.py, audit_chain.py, the
                writes (dataset_, release_, cap_, accounting_writes.py), audit_verify.py, the
                accounting rows (accounting_rows.py, index_from_rows.py), codec.py
  operations/   transactions.py (record, check, lifecycle, caps), choices.py, people.py, opening.py;
                what a reader is shown, computed: table_view.py, shown_figures.py, report_inputs.py
  api/          the Python API, the one façade (Ledger: reading, decisions, figures, plans, audit, reports)
  cli/, reporting/, web/, adapters/   the interfaces: command line, reports (report.py, charts.py,
                write.py), web app, other libraries
Templates are in reports/ (ledger.reports), JSON Schemas in schemas/ (ledger.schemas).
"""

__version__ = "0.1.0"


__all__ = [
    "BudgetRefused", "Cap", "Dataset", "Guarantee", "InputErrors", "Ledger", "LedgerError", "Mechanism", "Notion",
    "PlanCheck", "Recorded", "Refused", "Relation", "Release", "Status", "SubsetLoss", "__version__", "open", "safe_float",
]


_API = ("Ledger", "PlanCheck", "Recorded", "SubsetLoss", "open", "safe_float")


_RECORDS = ("Cap", "Dataset", "Guarantee", "Mechanism", "Notion", "Relation", "Release", "Status")
_ERRORS = ("InputErrors", "LedgerError", "Refused")


def __getattr__(name: str):
    """Everything here is imported on first use: the API (and with it the ORM), so the command
    line's `--help` does not pay for it, and the records, so `--version` pays for nothing."""
    if name in _RECORDS:
        from .core import records

        return getattr(records, name)
    if name in _ERRORS:
        from .core import errors

        return getattr(errors, name)
    if name in _API:
        from . import api

        return getattr(api, name)
    if name == "BudgetRefused":  # with the operations it guards (not imported by `--version`)
        from .operations.transactions import BudgetRefused

        return BudgetRefused
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
