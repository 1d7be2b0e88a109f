"""Hoffmann et al.'s approach 2 (isoFLOP profiles): budgets grouped from points
(``budgets``), the window around each minimum (``window``), one parabola per budget and
its bootstrap (``parabola``) or a spline's argmin (``interp``), the line through the optima
(``estimate``; jointly with the parabolas: ``joint``), the fit of the optima against compute
(``isoflop``: ``fit_isoflops``, ``IsoFlopFit``), the CI widened by the analysis choices
(``robust``) and a sweep's runs table taken to that fit (``from_runs``). Synthetic sweeps
with a known exponent: ``analysis.synthetic``.

Imports only the folders before it (``fit``, ``solvers``, ``laws``, ``tables``) and the
base modules. Nothing is re-exported here.
"""
