"""The Python API: the ledger as values, for notebooks and pipelines.

    >>> import ledger
    >>> book = ledger.open("sqlite://")          # in memory; default: $LEDGER_DATABASE_URL, else sqlite:///ledger.db
    >>> book.add_dataset({"dataset": "survey", "variables": [{"name": "age"}, {"name": "income"}]})
    True
    >>> book.record({"dataset": "survey", "releases": [
    ...     {"id": "t1", "reads": ["age", "income"], "mechanism": {"name": "laplace", "epsilon": "1/2"}}]}).ids
    ('t1',)
    >>> book.subset(["income"]).exact
    Fraction(1, 2)

Every method calls the same operations the command line does (operations.py,
choices.py, engine.py), so a figure here is the figure the CLI prints: the same
composition, and no cancelled release is ever counted. Bad input raises
`InputErrors`, whose `.errors` is the list of `LedgerError` (source, field,
message) the CLI prints before exit 2; a step that would break a cap raises
`BudgetRefused`, and cancelling a release whose output exists raises
`Refused` (both exit 1 in the CLI). Nothing is written in any case.

Figures: `.epsilon` is a float that is a safe bound (a loss rounded up, a
headroom rounded down, `math.inf` when unbounded); `.exact` is the exact
Fraction where one exists (pure and approximate totals), None where the figure
comes from a floating-point conversion (zCDP to epsilon).
"""

from ..core.numbers import safe_float
from ..store.identity import Person, front_end

from .ledger import Ledger, open
from .values import AuditEvent, BudgetRefused, PlanCheck, Recorded, SubsetLoss


__all__ = ["Ledger", "SubsetLoss", "Recorded", "PlanCheck", "BudgetRefused", "AuditEvent", "Person", "front_end", "open",
           "safe_float"]
