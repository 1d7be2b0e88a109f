"""Synthetic data with a known truth, for tests, benchmarks, notebooks and scripts: runs
tables from published laws (``runs``: Chinchilla, data-constrained and isoFLOP sweeps),
hand-written isoFLOP designs (``isoflop``), realistic isoFLOP studies drawn from the ranges of
published sweeps (``isoflop_realistic``) and hyperparameter-transfer sweeps (``transfer``).

Imports only the folders before it and the base modules; no analysis folder imports it.
"""
