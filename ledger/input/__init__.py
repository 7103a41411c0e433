"""The steward's files, from text to validated records: parse -> validate -> build -> check.

loader.py   the pipeline; every problem a LedgerError naming file, line and field
limits.py   what input text may be: sizes, nesting, characters

Invariant: nothing is written; the JSON Schemas are in the top-level schemas/ (ledger.schemas).
"""
