"""The numerical minimisers behind a fit, batched over many parameter vectors at once:
projected L-BFGS and bookkeeping of a batch (``multistart``), projected
Levenberg-Marquardt (``levenberg``), a fit's box and start points (``starts``), and the
screen-continue-polish search that ``analysis.fit.fit.fit_law`` runs (``search``).

Imports only ``analysis.laws``, ``analysis.tables`` and the base modules. Nothing is
re-exported here.
"""
