"""JSON Schemas for input files (package data: ledger.schemas)."""
