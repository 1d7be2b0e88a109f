"""Errors and warnings of the analysis package (no scalelab import: the CLI maps these)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AnalysisInputError",
    "FitBudgetWarning",
    "IdentifiabilityWarning",
    "TooFewPointsError",
    "did_you_mean",
]


class AnalysisInputError(ValueError):
    """Bad input to a fit or a report: a missing column, an unknown law or parameter."""


class TooFewPointsError(AnalysisInputError):
    """A fit with fewer points than free parameters + 1 (or than ``need``, 3 for fit_law):
    it would interpolate its data (zero residuals, zero-width CIs) and determine nothing.
    ``what`` names the points ("points", "runs after --where", ...) in the message."""

    def __init__(self, n: int, n_free: int, law: str, what: str = "points", need: int = 0):
        self.n, self.n_free, self.law, self.what = n, n_free, law, what
        self.need = max(need, n_free + 1)
        super().__init__(
            f"{n} {what} for {n_free} free parameters of {law}: need >= {self.need}"
        )


class IdentifiabilityWarning(UserWarning):
    """The data cannot pin down a parameter: a flat valley, a parameter at its box bound, or
    too few points per parameter."""


class FitBudgetWarning(UserWarning):
    """A fit's ``time_budget_s`` ran out: it returned the best point found so far."""


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or ``''`` when nothing is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=cutoff)
    return f" (did you mean '{close[0]}'?)" if close else ""
