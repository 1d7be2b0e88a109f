"""Scaling-law analysis: laws, fits with asymptotes and CIs, recipes, plots, reports.

Depends on numpy, scipy, polars and matplotlib only (never torch, never scalelab), so
fits run on a laptop. Public names::

    from analysis import Chinchilla, fit_law, load_epoch_chinchilla
    fit = fit_law(Chinchilla(), load_epoch_chinchilla())
    boot = fit.bootstrap(1000, seed=0)
    boot.se, boot.ci()
    iso = fit_isoflops(load_epoch_chinchilla())  # approach 2: iso.a, iso.a_ci, iso.optima

Folders by concept, in import order (a folder imports only those before it and the base
modules ``errors``, ``atomic``, ``progress``; tests/test_architecture.py checks it)::

    tables    a sweep directory's layout, the runs table, selections, published data
    laws      the laws, their input checks, tied parameters, the fitting objective,
              the compute-optimal allocation
    solvers   batched L-BFGS and Levenberg-Marquardt, start points, the multi-start search
    fit       fit_law, bootstrap, profile likelihood, diagnostics, grouped fits of runs,
              the law A/x^B + E (one result type, PowerLawFit) and when its E may be written
    isoflop   approach 2: parabolas per budget, optima against compute
    recipes   recipes compared: each recipe's E, verdicts, data efficiency, budgets
    adaptive  choosing the next runs of an adaptive study
    transfer  hyperparameter-transfer laws: per-size optima, hp* = c x^a, the norm check
    synthetic data with a known truth for tests, benchmarks and notebooks
    plots     figures (matplotlib is imported only here)
    report    the reports written to disk

``analysis.recipes.fit_asymptote`` and the allocation and data-efficiency functions resolve
from ``analysis.recipes`` too; ``analysis.plots`` and ``analysis.report`` draw and write.
"""

import importlib

# Public name -> defining module. Loaded on first access (PEP 562), so importing a
# light submodule (e.g. ``analysis.atomic`` from scalelab's store) costs no scipy.
_EXPORTS = {
    "AnalysisInputError": "analysis.errors",
    "BootstrapResult": "analysis.fit.bootstrap",
    "Chinchilla": "analysis.laws.laws",
    "DataConstrained": "analysis.laws.laws",
    "FitBudgetWarning": "analysis.errors",
    "FitProgress": "analysis.progress",
    "FitResult": "analysis.fit.fit",
    "FitTable": "analysis.tables.runs",
    "IdentifiabilityWarning": "analysis.errors",
    "IsoFlopFit": "analysis.isoflop.isoflop",
    "TooFewPointsError": "analysis.errors",
    "TransferFit": "analysis.transfer.transfer",
    "Law": "analysis.laws.laws",
    "PowerLaw": "analysis.laws.laws",
    "Profile": "analysis.fit.profile",
    "fit_data_constrained": "analysis.fit.constrained",
    "fit_isoflops": "analysis.isoflop.isoflop",
    "fit_law": "analysis.fit.fit",
    "fit_selection": "analysis.fit.grouped",
    "fit_transfer": "analysis.transfer.transfer",
    "get_law": "analysis.laws.laws",
    "load_epoch_chinchilla": "analysis.tables.published",
    "prepare_runs": "analysis.tables.runs",
    "select_runs": "analysis.tables.select",
}


def __getattr__(name: str):
    if name == "recipes":
        return importlib.import_module("analysis.recipes")
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AnalysisInputError",
    "BootstrapResult",
    "Chinchilla",
    "DataConstrained",
    "FitBudgetWarning",
    "FitProgress",
    "FitResult",
    "FitTable",
    "IdentifiabilityWarning",
    "IsoFlopFit",
    "Law",
    "PowerLaw",
    "Profile",
    "TooFewPointsError",
    "TransferFit",
    "fit_data_constrained",
    "fit_isoflops",
    "fit_law",
    "fit_selection",
    "fit_transfer",
    "get_law",
    "load_epoch_chinchilla",
    "prepare_runs",
    "recipes",
    "select_runs",
]
