"""Every number the ledger prints is computed here, by pure functions over records.

spend.py          `Spend`: loss per notion, composition, zCDP -> epsilon (docs/explanation/model.md#composition)
cost_rule.py      the cost of a release or a family on a subset (Tan Props 3.2-3.5), release by release;
                  charge_choice.py: the alternatives chosen (`choose`) or suffered (`Worst`)
ledger_index.py   the same rule over arrays (index_pairs.py, index_running_totals.py, index_chunks.py,
                  exact_sums.py); risk_table.py: Tan's Table 1 as data; chunked_table.py: in
                  bounded memory
dp_events.py      accounting events; renyi_curves.py: their Rényi curves and conversion
subset_composition.py, composition_figures.py, figure_validity.py: a subset's events and the basic,
                  Rényi and PLD figures (pld_accountant.py; privacy_loss.py: the PLDs), the one shown
index_figures.py  the figures over a LedgerIndex; every_pair.py, pair_extras.py: on every pair;
                  worst_pair.py: the worst pair, by bounds
cap_states.py, cap_decisions.py: a cap's running state and the filter that decides it
budget.py         caps: running totals, the pre-release check, headroom
catalogue.py      the guarantee a mechanism's parameters imply (docs/explanation/model.md#a-release)
lineage.py, lifecycle.py, history.py: which releases count, and when

Invariant: no I/O; imports only ledger.core and ledger.mechanisms.
"""
