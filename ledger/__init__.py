"""privacy-ledger: the book of record for privacy loss, per variable and per subset.

Where a number comes from:
  records.py     what a release is (frozen data)
  accounting.py  Spend, composition per notion, zCDP -> epsilon conversion
  engine.py      the cost rule per release and subset, families, the risk table
  loader.py      files -> validated records (errors carry file and field)
  store.py       the database (SQLModel) and the audit chain
  cli.py         the command line
"""

__version__ = "0.1.0"
