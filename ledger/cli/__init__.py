"""The command line (`privacy-ledger`, `python -m ledger`): thin adapters over the layers below.

entry.py     the console entry point (`--version` answered before typer is imported)
app.py       the application and its core commands; context.py: which ledger, how it is opened
report.py, run.py, export.py, stewardship.py, demo.py: further commands
json_output.py, style.py, terminal.py, outputs.py: how the CLI prints and where it may write

Invariant: this package's __init__ imports nothing, so `--help` and `--version` stay cheap.
"""
