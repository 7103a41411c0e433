"""privacy-ledger: the book of record for privacy loss, per variable and per subset.

The Python API (ledger/api.py):

    import ledger
    book = ledger.open()                       # $LEDGER_DATABASE_URL, else sqlite:///ledger.db
    book.subset(["income"]).epsilon            # a safe float; .exact: the Fraction where one exists
    book.table()                               # pandas DataFrame: a row per release, a total row

Errors: `InputErrors` (bad input; `.errors` is a list of `LedgerError` with
source, field and message) and `BudgetRefused` (a cap would break; `.checks`).
Adapters from OpenDP, dp_accounting and diffprivlib: `ledger.adapters`.

Where a number comes from:
  records.py     what a release is (frozen data)
  accounting.py  Spend, composition per notion, zCDP -> epsilon conversion
  engine.py      the cost rule per release and subset, families, the risk table
  loader.py      files -> validated records (errors carry file and field)
  store.py       the database (SQLModel) and the audit chain
  operations.py  record, check, lifecycle steps, caps: atomic transactions
  api.py         the Python API over operations (what `import ledger` gives)
  cli.py         the command line over the same operations
"""

__version__ = "0.1.0"


__all__ = [
    "BudgetRefused", "Cap", "Dataset", "Guarantee", "InputErrors", "Ledger", "LedgerError", "Mechanism", "Notion",
    "PlanCheck", "Recorded", "Relation", "Release", "Status", "SubsetLoss", "__version__", "open", "safe_float",
]


_API = ("Ledger", "PlanCheck", "Recorded", "SubsetLoss", "open", "safe_float")


_RECORDS = ("Cap", "Dataset", "Guarantee", "Mechanism", "Notion", "Relation", "Release", "Status")
_ERRORS = ("InputErrors", "LedgerError")


def __getattr__(name: str):
    """Everything here is imported on first use: the API (and with it the ORM), so the command
    line's `--help` does not pay for it, and the records, so `--version` pays for nothing
    (issue 13, section 2)."""
    if name in _RECORDS:
        from . import records

        return getattr(records, name)
    if name in _ERRORS:
        from . import errors

        return getattr(errors, name)
    if name in _API:
        from . import api

        return getattr(api, name)
    if name == "BudgetRefused":  # with the operations it guards (not imported by `--version`)
        from .operations import BudgetRefused

        return BudgetRefused
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
