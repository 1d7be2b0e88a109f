"""The data multiplier of a recipe's E as an adaptive target, valued as ``scalelab report``
values it.

Kim, Kotha, Liang, Hashimoto 2025, "Pre-training under infinite compute", arXiv 2509.14786:
the reference (standard) recipe's data law L(U) = A / U^B + C inverted, D_eff(L) =
(A / (L - C))^(1/B), and a recipe's multiplier m = D_eff(E) / D_eff(L_ref) =
((L_ref - C) / (E - C))^(1/B), L_ref the reference's best loss at the base budget (its "1x").

What is reported (``summary``) is the report's number: the law the data support
(``analysis.recipes.data_multiplier.choose_data_law``: the floor C only where an F test
keeps it, else A / U^B, a lower bound) and ``data_multiplier.data_multiplier``'s value and
residual-bootstrap percentile CI (Davison & Hinkley 1997, algorithm 6.1), with the recipe's
E and its standard error sqrt(Cov_EE) from target_fits.py, the report's fit. Where that
module refuses a number (E at or below the floor, a CI that is not finite or beyond
``MAX_MULTIPLIER``) the summary has none, and its note is the reason.

What the planner minimises (``objective``) is a linearisation of that width, cheap enough
to score every candidate run: on the log scale, log m = (ln(L_ref - C) - ln(E - C)) / B with

    d log m / dE = -1 / (B (E - C)),   d/dA = 0,   d/dB = -log m / B,
    d/dC = (1 / (E - C) - 1 / (L_ref - C)) / B   (C free only with the floor),

and Var = (d/dE)^2 Var E + g' Cov_law g (the chosen fit's Gauss-Newton covariance), with
Welch-Satterthwaite degrees of freedom (Satterthwaite 1946). The data law's share no run of
the study can shrink. Before E is within the law's reach (E > C) the planner narrows E
itself. This width ranks runs; it is never printed as the multiplier's interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from analysis.adaptive.space import CandidateSpace
from analysis.adaptive.targets import Estimate, Objective, Summary, Target, satterthwaite, t_width
from analysis.fit.power_law import t_scaled_se
from analysis.recipes import data_multiplier as dm

__all__ = ["Multiplier"]


@dataclass(frozen=True)
class Multiplier(Target):
    """The data multiplier of one recipe's E against the reference's data law (module
    docstring). ``n_boot`` and ``seed``: the report's bootstrap (its defaults)."""

    recipe: str
    space: CandidateSpace
    law: dm.DataLaw
    L_ref: float
    level: float = 0.95
    n_boot: int = 2000
    seed: int = 0
    name: str = field(default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name or f"{self.recipe}.multiplier")

    @property
    def recipes(self) -> Mapping[str, CandidateSpace]:
        return {self.recipe: self.space}

    def reported(self, e: Estimate) -> dm.Multiplier:
        """The report's multiplier of the estimate's E (``data_multiplier``)."""
        se = t_scaled_se(math.sqrt(max(e.var, 0.0)), e.dof, self.level)
        return dm.data_multiplier(self.law, e.E, se, self.L_ref,
                                  n_boot=self.n_boot, seed=self.seed, level=self.level)

    def summary(self, est: Mapping[str, Estimate]) -> Summary:
        e = est[self.recipe]
        if not e.finite:
            why = e.why or "no interval yet"
            return Summary(self.name, math.nan, math.nan, math.nan, math.inf,
                           note=f"E_{self.recipe}: {why}")
        m = self.reported(e)
        if not m.identified:
            return Summary(self.name, math.nan, math.nan, math.nan, math.inf, note=m.why)
        bound = "; a lower bound if the loss has a floor" if m.lower_bound else ""
        return Summary(self.name, m.value, m.lo, m.hi, math.log(m.hi / m.lo),
                       note=f"data law {self.law.why}{bound}")

    def _log_m(self, E: float) -> float:
        C, B = self.law.E, self.law.B
        if not (E > C and self.L_ref > C and B > 0):
            return math.inf
        return (math.log(self.L_ref - C) - math.log(E - C)) / B

    def parts(self, E: float) -> tuple[float, float]:
        """(d log m / dE, Var of log m from the data law alone) at E (module docstring)."""
        C, B = self.law.E, self.law.B
        lm = self._log_m(E)
        g = np.array([0.0, -lm / B, (1.0 / (E - C) - 1.0 / (self.L_ref - C)) / B])
        g = g[list(self.law.fit.free)]
        return -1.0 / (B * (E - C)), float(g @ self.law.fit.cov @ g)

    def _log_width(self, e: Estimate, studentized: bool) -> float:
        g_e, data_var = self.parts(e.E)
        study = g_e * g_e * e.var
        dof = satterthwaite([(study, e.dof), (data_var, float(self.law.fit.dof))])
        return t_width(study + data_var, dof, self.level, studentized)

    def objective(self, est: Mapping[str, Estimate], studentized: bool = True) -> Objective:
        e0 = est[self.recipe]
        if not (math.isfinite(self._log_m(e0.E)) and self.law.fit.has_cov):
            return lambda x: t_width(x[self.recipe].var, x[self.recipe].dof, self.level, studentized)
        return lambda x: self._log_width(x[self.recipe], studentized)
