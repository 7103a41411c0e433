"""The database: SQLModel tables, sessions, the audit chain, and what is kept beside it.

database.py       tables, sessions, atomic writes, the SHA-256 audit chain, snapshots
columns.py        per-release accounting rows (the read commands without decoding releases)
sealed.py         those rows, a complete range of seqs at a time, sealed in binary chunks
codec.py          records <-> JSON-able dicts; canonical JSON for the chain
facts.py          the charged releases' facts a registry record states, by SQL
checkpoint.py     signed chain heads (Ed25519); verified_head.py: incremental verification
files.py          every other file the ledger writes: never onto the ledger, whole or not at all

Invariant: SQLModel stays here (STYLE 9); the accounting never sees a row, only records.
"""
