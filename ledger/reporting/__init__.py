"""What is shown: contexts computed from the accounting, which templates only format.

views.py              what the CLI and the templates show (epsilon at a stated delta, ∞)
report.py             the report's context (build_report); headline.py: the protected-subset headline
accountant_views.py   the accountants' figures as shown; chart_data.py, charts.py: the two charts
registry.py           a DP Deployments Registry record

Invariant: no figure is computed in a template (STYLE 7); the templates are in the top-level
reports/ (ledger.reports).
"""
