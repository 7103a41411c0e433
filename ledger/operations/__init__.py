"""What the ledger does, over the store: each step one transaction, checked first.

transactions.py    record, check, change status, set caps (atomic; BudgetRefused, InputErrors)
cap_accounting.py  caps checked with the best valid figure (over budget.check)
choices.py         what a command or API call refers to (dataset, delta, variables, URL)
people.py          roles and who may do what; amend.py: a changed dataset as audited amendments
recording.py       run a mechanism on data and record its release in the same step
run_mechanisms.py  the mechanisms `run` offers: what each reads and guarantees, and how it runs

What a reader is shown, computed and read here so that the façade (ledger.api) and every interface
show the same: table_view.py (Tan's Table 1 as shown: `table_figures`, one computation at any size), headline.py
(the protected-subset headline), shown_figures.py (the figure each
accountant gives and the one shown), explain.py (a figure in words), registry_record.py (a DP
Deployments Registry record), report_inputs.py and report_reading.py (what a report is computed
from, read from the store; report_source.py: the choice between every release and the summary,
made in the read the page is read in; large_report.py, large_meeting.py and large_register.py: the summarised
report of a large ledger, its meeting pack and its register, from the accounting rows), meeting_pack.py (what changed in a period, how each cap moved),
reasons.py (why an ∞ is infinite, in words), moments.py (the dates a reader names).

Invariant: a refused step writes nothing.
"""
