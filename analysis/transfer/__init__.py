"""Hyperparameter-transfer laws fitted to a sweep's own runs (docs/transfer.md).

- ``optimum``: each group's (one size's) optimal hp from a local quadratic in ln hp, with
  its SE; refusals at the grid's edge;
- ``profile``: a cell's loss profiled over a second hp (the lr of a batch-size law);
- ``law``: hp* = c · Π x_i^a_i by weighted least squares, parameter and prediction
  intervals;
- ``transfer``: ``fit_transfer`` and ``TransferFit``, from a runs table;
- ``holdout``: the law refitted without the largest size(s), checked on them;
- ``norms``: the output-layer norm at each size's optimum (Filatov et al. 2025, arXiv
  2510.03871), its constancy, and hp* predicted from the norm alone;
- ``rule``: the law as a sweep spec's derive rule.

Sweeps with a known optimum, for tests and docs: ``analysis.synthetic.transfer``.

Imports only the folders before it (tables, fit) and the base modules.
"""
