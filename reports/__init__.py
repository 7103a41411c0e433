"""Jinja templates for reports (package data: ledger.reports)."""
