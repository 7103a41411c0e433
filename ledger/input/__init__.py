"""The steward's files, from text to validated records: parse -> validate -> build -> check.

documents.py        parse: a file read as YAML or JSON, each value with its line
schema_check.py     validate: against the JSON Schemas, in the steward's words
datasets.py         build: a dataset document -> Dataset and caps
releases.py         build: a release document -> releases and families
mechanism_entry.py  a release entry's mechanism and guarantees
release_rules.py    rules every release meets, from a file or handed over whole
batch.py            check: across one `record` and the ledger (ids, retries, lineage, parts)
snapshot.py         what the ledger already holds, as the checks need it
utc_moments.py      ISO 8601 text -> an aware UTC moment within the moments a ledger keeps
limits.py           what input text may be: sizes, nesting, characters

Invariant: nothing is written; the JSON Schemas are in the top-level schemas/ (ledger.schemas).
"""
