"""Fitting a law to points and saying how well it is pinned down: ``fit_law`` and its
``FitResult`` (``fit``), the bootstrap (``bootstrap``), profile-likelihood intervals
(``profile``, ``profile_threshold``), Hessian, bound and open-side diagnostics
(``diagnostics``), the data-constrained fit (``constrained``) and whether its saturation
constants are identified (``saturation_identified``), the law A/x^B + E with its one result
type ``PowerLawFit`` (``power_law``) and when its asymptote may be written (``identified``),
and fits of a sweep's runs table per group (``xvars``: x columns; ``grouped``:
``fit_selection``).

Imports only ``analysis.solvers``, ``analysis.laws``, ``analysis.tables`` and the base
modules. Nothing is re-exported here: ``from analysis import fit_law`` is the short path.
"""
