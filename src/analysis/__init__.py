"""Released prompt and result datasets -> the papers' metrics, tables, figures and report.

Filled by the analysis issue; the builders never import it.
"""
