"""Hoffmann et al.'s approach 2 (isoFLOP profiles): budgets grouped from points
(``budgets``), one parabola per budget and its bootstrap (``parabola``), the fit of the
optima against compute (``isoflop``: ``fit_isoflops``, ``IsoFlopFit``), and a sweep's runs
table taken to that fit (``from_runs``).

Imports only the folders before it (``fit``, ``solvers``, ``laws``, ``tables``) and the
base modules. Nothing is re-exported here.
"""
