"""What is shown: contexts computed from the accounting, which templates only format.

An interface over the façade (ledger.api.Ledger): the figures and the report's inputs are computed
and gathered below it (operations/); here they are arranged, put in words, drawn and rendered.

views.py              what the CLI and the templates show (epsilon at a stated delta, ∞)
report.py             the report's context (build_report), assembled from its sections:
  certificate.py, risk_view.py (Tan's Table 1), cap_section.py, register_section.py, audit_section.py,
  chart_figures.py (the figures the charts show); headline.py: the protected-subset headline in words
accountant_views.py   the accountants' figures in words; chart_data.py, charts.py: the two charts
registry.py           a DP Deployments Registry record as YAML
write.py              write_report(ledger, out): a ledger's report rendered and written to a file

Invariant: no figure is computed in a template (STYLE 7); the templates are in the top-level
reports/ (ledger.reports).
"""

from .write import write_report

__all__ = ["write_report"]
