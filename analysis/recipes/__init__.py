"""Recipes compared (Kim et al. 2025, "Pre-training under infinite compute", arXiv
2509.14786): the recipes' names, the reference weight decay and the base budget (``names``),
the recipe rows of a runs table (``rows``) and each recipe's points per size (``cells``), a
recipe's E with its CI and identifiability (``recipe_asymptote``), the whole infinite-compute
analysis of a sweep (``infinite_compute``), recipes compared by a common law fit
(``compare``), the verdict in words, ensembles against recipes included
(``verdicts``), a run's noise from replicate seeds (``replicates``), the data
multiplier with a bootstrap CI (``data_multiplier``), a recipe at each budget U
(``budgets``), the holdout extrapolation check (``extrapolation``) and the share of the
ensembling gain a distilled student keeps (``distill_share``).

The law A/x^B + E and its fit are ``analysis.fit.power_law`` (``PowerLawFit``); when its E may
be written, ``analysis.fit.identified``; the compute-optimal allocation,
``analysis.laws.allocation``.

Imports only the folders before it (``isoflop``, ``fit``, ``solvers``, ``laws``,
``tables``) and the base modules.

``analysis.recipes.fit_asymptote`` and the other names below resolve here too (loaded on
first access, so importing ``analysis.recipes.rows`` costs no scipy).
"""

import importlib

_EXPORTS = {
    "PowerLawFit": "analysis.fit.power_law",
    "ensemble_asymptote": "analysis.fit.power_law",
    "fit_asymptote": "analysis.fit.power_law",
    "joint_asymptote": "analysis.fit.power_law",
    "compute_optimal": "analysis.laws.allocation",
    "compute_optimal_constrained": "analysis.laws.allocation",
    "data_efficiency": "analysis.recipes.data_multiplier",
    "effective_data": "analysis.recipes.data_multiplier",
    "compare_asymptotes": "analysis.recipes.infinite_compute",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analysis.recipes' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
