"""Scaling-law analysis: laws, fits with asymptotes and CIs, recipes, plots, reports.

Depends on numpy, scipy, polars and matplotlib only (never torch, never scalelab), so
fits run on a laptop. Public names::

    from analysis import Chinchilla, fit_law, load_epoch_chinchilla
    fit = fit_law(Chinchilla(), load_epoch_chinchilla())
    boot = fit.bootstrap(1000, seed=0)
    boot.se, boot.ci()
    iso = fit_isoflops(load_epoch_chinchilla())  # approach 2: iso.a, iso.a_ci, iso.optima

``analysis.recipes`` holds the compute-optimal allocation, ensemble/joint asymptotes
and the data-efficiency multiplier; ``analysis.plots`` and ``analysis.report`` draw and
write (matplotlib is imported only there).
"""

import importlib

# Public name -> defining module. Loaded on first access (PEP 562), so importing a
# light submodule (e.g. ``analysis.atomic`` from scalelab's store) costs no scipy.
_EXPORTS = {
    "AnalysisInputError": "analysis.errors",
    "BootstrapResult": "analysis.bootstrap",
    "Chinchilla": "analysis.laws",
    "DataConstrained": "analysis.laws",
    "FitBudgetWarning": "analysis.errors",
    "FitProgress": "analysis.progress",
    "FitResult": "analysis.fit",
    "FitTable": "analysis.runs",
    "IdentifiabilityWarning": "analysis.errors",
    "IsoFlopFit": "analysis.isoflop",
    "TooFewPointsError": "analysis.errors",
    "Law": "analysis.laws",
    "PowerLaw": "analysis.laws",
    "Profile": "analysis.profile",
    "fit_data_constrained": "analysis.constrained",
    "fit_isoflops": "analysis.isoflop",
    "fit_law": "analysis.fit",
    "fit_selection": "analysis.grouped",
    "get_law": "analysis.laws",
    "load_epoch_chinchilla": "analysis.published",
    "prepare_runs": "analysis.runs",
    "select_runs": "analysis.select",
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
    "fit_data_constrained",
    "fit_isoflops",
    "fit_law",
    "fit_selection",
    "get_law",
    "load_epoch_chinchilla",
    "prepare_runs",
    "recipes",
    "select_runs",
]
