"""The database: SQLModel tables, sessions, the audit chain, and what is kept beside it.

table_models.py   the SQLModel tables; engines.py: the engine from a URL; schema_migrations.py: the schema
sessions.py       write and read transactions (the write lock); session_state.py: what one keeps
audit_chain.py    the SHA-256 audit chain: append_event, its head
*_writes.py       datasets, releases and caps written, each with its event; role_grants.py: roles
configuration.py  datasets, families and caps per transaction; process_caches.py: kept between them
running_totals.py caps' running totals and accountant states; ledger_meta.py: their stamp
row_dicts.py      rows as the codec's dicts; row_reads.py: reads by key; decoded_history.py: snapshots
audit_verify.py   `verify`: the chain and every row recomputed (totals_check.py: the running totals)
append_only.py    PostgreSQL's append-only triggers; enforced.py: what it refuses at INSERT
accounting_rows.py per-release accounting rows (the read commands without decoding releases);
                  accounting_writes.py, accounting_migrations.py, accounting_check.py: written,
                  migrated, compared with their releases
index_from_rows.py a dataset's LedgerIndex from those rows; release_heads.py: id, title, status
sealed.py         those rows, a complete range of seqs at a time, sealed in binary chunks
codec.py          records <-> JSON-able dicts; canonical JSON for the chain
facts.py          the charged releases' facts a registry record states, by SQL
report_queries.py a report's queries: the audit events about a dataset, counted and listed; release rows
opening_checks.py the database library's errors on opening a ledger, classified
checkpoint.py     signed chain heads (Ed25519); verified_head.py: incremental verification
files.py          every other file the ledger writes: never onto the ledger, whole or not at all

Invariant: SQLModel stays here (STYLE 9): no module outside the store imports the database library
(the layers above take `Session` and `Engine` from sessions.py); the accounting never sees a row, only records.
"""
