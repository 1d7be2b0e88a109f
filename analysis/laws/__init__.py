"""Scaling laws and what a fit of one minimises: the laws and their registry (``laws``),
the checks that refuse data a law cannot be fitted to (``checks``), tied parameters
(``tie``), and the fitting objective, Huber or squared error over log or linear residuals
(``fit_objective``).

Imports only ``analysis.tables`` and the base modules. Nothing is re-exported here.
"""
