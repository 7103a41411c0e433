"""The vocabulary every layer uses; imports nothing else of the ledger.

numbers.py   exact numbers (Fractions stay exact; floats rounded the safe way) and how they print
records.py   frozen records: dataset, variable, guarantee, release, family, cap
errors.py    bad input as values with a source (exit 2); failures.py: operational failures (exit 3)
lazy.py, memory.py, progress.py: modules imported on first use, bulk work, progress bars

Invariant: nothing here touches a file, a database or another layer.
"""
