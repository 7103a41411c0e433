"""What the ledger does, over the store: each step one transaction, checked first.

transactions.py    record, check, change status, set caps (atomic; BudgetRefused, InputErrors)
cap_accounting.py  caps checked with the best valid figure (over budget.check)
choices.py         what a command or API call refers to (dataset, delta, variables, URL)
people.py          roles and who may do what; amend.py: a changed dataset as audited amendments
recording.py       run a mechanism on data and record its release in the same step

Invariant: a refused step writes nothing.
"""
