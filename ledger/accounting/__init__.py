"""Every number the ledger prints is computed here, by pure functions over records.

spend.py          `Spend`: loss per notion, composition, zCDP -> epsilon (docs/explanation/model.md#composition)
engine.py         the cost of a release on a subset (Tan Props 3.2-3.5), families, the risk table
accountants.py    basic, Renyi and PLD accountants per subset (docs/explanation/accounting.md); privacy_loss.py: Gaussian PLD
budget.py         caps: running totals, the pre-release check, headroom
catalogue.py      the guarantee a mechanism's parameters imply (docs/explanation/model.md#a-release)
lineage.py, lifecycle.py, history.py: which releases count, and when

Invariant: no I/O; imports only ledger.core and ledger.mechanisms.
"""
