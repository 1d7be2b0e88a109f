"""What an adaptive study pins down: one recipe's E, the ranking of recipes by E, or the
data multiplier of a recipe's E. Each target is a smooth function of the recipes'
asymptotes, so its CI width follows from each recipe's E estimate (value, variance,
degrees of freedom) by the delta method, and the planner scores a run by how much that
width drops (planner.py).

Recipes are slices of one candidate space (``CandidateSpace.restrict``): e.g. Kim et al.'s
(arXiv 2509.14786) "standard" recipe is the tuning grid at weight decay 0.1 and
"regularized" the whole grid. Each recipe's E has its own fit (target_fits.py) on its own best
cell per size; the fits are treated as independent (a run in both slices makes them
positively correlated, so Var(E_A - E_B) = Var_A + Var_B overstates the variance of a
difference: conservative).

Targets (``Estimate``: E, Var E, dof of one recipe; t quantiles at ``level``):

- ``Asymptote(recipe)``: E itself; width 2 t_nu sqrt(Var E), as target_fits.py reports it.
- ``Ranking(recipes)``: the order of the recipes' E. Sorted by E, each adjacent pair (i, j)
  has Delta = E_j - E_i >= 0 with Var = Var_i + Var_j and Welch-Satterthwaite degrees of
  freedom (Satterthwaite 1946, Biometrics Bulletin 2, 110-114)

      nu = Var^2 / (Var_i^2 / nu_i + Var_j^2 / nu_j).

  The ranking is *decided* when every adjacent pair's CI excludes 0. The planner works on
  the pair most likely to be misordered, the smallest z = Delta / sqrt(Var) (``focus``),
  and scores runs by the drop of that pair's CI width; runs of other recipes gain 0 for
  that round. Two recipes with truly equal E are never decided: the loop then stops at
  the budget or the target width, as it should.
- ``Multiplier(recipe, data)``: Kim et al.'s data-efficiency multiplier of the recipe's
  asymptote: how many times more unique tokens the reference recipe would need to reach
  E. With the reference recipe's data law L(U) = A_U / U^B_U + C_U (``DataLaw``, fitted by
  ``analysis.recipes.infinite_compute`` on the data block) inverted, D_eff(L) = (A_U/(L - C_U))^(1/B_U),
  and L_ref the reference recipe's best loss at the base budget (its "1x"),

      log m = (ln(L_ref - C_U) - ln(E - C_U)) / B_U,

  with gradient d log m / dE = -1 / (B_U (E - C_U)), d/dA_U = 0,
  d/dB_U = -log m / B_U, d/dC_U = (1/(E - C_U) - 1/(L_ref - C_U)) / B_U. Its variance adds
  the study's part, (d/dE)^2 Var E, and the data fit's, g' Cov_U g, which no run of the
  study can shrink: the multiplier's width has a floor the planner reports. The interval is
  exp(log m +- t sqrt(Var)) (computed on the log scale, where the delta method is closer
  to symmetric). E at or below C_U is beyond the reference recipe's reach at any U (m =
  inf, no interval); the planner then narrows E itself until it is not.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from analysis.recipes.kim_law import MIN_SIZES
from analysis.adaptive.space import CandidateSpace
from analysis.errors import AnalysisInputError

__all__ = ["Asymptote", "DataLaw", "Estimate", "Multiplier", "Ranking", "Summary", "Target",
           "satterthwaite", "t_width"]


@dataclass(frozen=True)
class Estimate:
    """One recipe's E: value, variance and degrees of freedom (var inf: no interval)."""

    E: float
    var: float
    dof: float
    sizes: int = 0
    """Sizes in the fit (a ranking is decided only on ``Ranking.min_sizes`` or more)."""

    @property
    def finite(self) -> bool:
        return math.isfinite(self.E) and math.isfinite(self.var) and self.dof >= 1


NO_ESTIMATE = Estimate(math.nan, math.inf, 0.0)
MIN_DECISION_SIZES = MIN_SIZES


def t_width(var: float, dof: float, level: float, studentized: bool = True) -> float:
    """2 t_{max(dof, 1), (1+level)/2} sqrt(var) (studentized) or 2 z sqrt(var)."""
    if not math.isfinite(var):
        return math.inf
    q = stats.t.ppf(0.5 + level / 2, max(dof, 1.0)) if studentized else stats.norm.ppf(0.5 + level / 2)
    return float(2.0 * q * math.sqrt(max(var, 0.0)))


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance parts
    (var_k, dof_k): (SUM var_k)^2 / SUM var_k^2 / dof_k (module docstring); 0 when a part
    with variance has no degrees of freedom."""
    total = sum(v for v, _ in parts)
    if any(v > 0 and d <= 0 for v, d in parts):  # a part with no degrees of freedom
        return 0.0
    denom = sum(v * v / d for v, d in parts if v > 0)
    if not total > 0 or not denom > 0:
        return min((d for _, d in parts), default=0.0)
    return float(total * total / denom)


@dataclass(frozen=True)
class Summary:
    """A target as reported: value with its CI (nan without), the CI width (inf without),
    and for a ranking whether it is decided and the order (best first)."""

    name: str
    value: float
    lo: float
    hi: float
    width: float
    decided: bool = False
    order: tuple[str, ...] = ()
    note: str = ""

    def met(self, target_width: float) -> bool:
        """The study may stop: the width is at most ``target_width``, or the ranking is decided."""
        return self.decided or self.width <= target_width


Objective = Callable[[Mapping[str, Estimate]], float]
"""The CI width a round of planning minimises, given every recipe's estimate."""


class Target(ABC):
    """Base of the three targets (module docstring)."""

    name: str
    recipes: Mapping[str, CandidateSpace]
    level: float

    @abstractmethod
    def summary(self, est: Mapping[str, Estimate]) -> Summary:
        """The target as reported, from every recipe's estimate."""

    @abstractmethod
    def objective(self, est: Mapping[str, Estimate], studentized: bool = True) -> Objective:
        """The width to minimise this round, at the planning estimates ``est``."""


@dataclass(frozen=True)
class Asymptote(Target):
    """One recipe's E (module docstring)."""

    recipe: str
    space: CandidateSpace
    level: float = 0.95
    name: str = field(default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name or f"{self.recipe}.E")

    @property
    def recipes(self) -> Mapping[str, CandidateSpace]:
        return {self.recipe: self.space}

    def summary(self, est: Mapping[str, Estimate]) -> Summary:
        e = est[self.recipe]
        if not e.finite:
            return Summary(self.name, e.E, math.nan, math.nan, math.inf)
        w = t_width(e.var, e.dof, self.level)
        return Summary(self.name, e.E, e.E - w / 2, e.E + w / 2, w)

    def objective(self, est: Mapping[str, Estimate], studentized: bool = True) -> Objective:
        return lambda x: t_width(x[self.recipe].var, x[self.recipe].dof, self.level, studentized)


def _pair(a: Estimate, b: Estimate) -> tuple[float, float, float]:
    """(Delta = b.E - a.E, Var, Satterthwaite dof) of an adjacent pair."""
    var = a.var + b.var
    return b.E - a.E, var, satterthwaite([(a.var, a.dof), (b.var, b.dof)])


@dataclass(frozen=True)
class Ranking(Target):
    """The order of the recipes by E (module docstring)."""

    spaces: Mapping[str, CandidateSpace]
    level: float = 0.95
    name: str = "ranking"
    min_sizes: int = MIN_DECISION_SIZES
    """Settled sizes every recipe's fit needs before the ranking may be called decided."""

    def __post_init__(self) -> None:
        if len(self.spaces) < 2:
            raise AnalysisInputError(f"a ranking needs >= 2 recipes, got {list(self.spaces)}")
        object.__setattr__(self, "spaces", dict(self.spaces))

    @property
    def recipes(self) -> Mapping[str, CandidateSpace]:
        return self.spaces

    def _pairs(self, est: Mapping[str, Estimate]) -> list[tuple[str, str, float, float, float]]:
        """Adjacent pairs (better, worse, Delta, Var, dof) in the order of E (finite only)."""
        order = sorted(self.spaces, key=lambda r: est[r].E if math.isfinite(est[r].E) else math.inf)
        return [(a, b, *_pair(est[a], est[b])) for a, b in itertools.pairwise(order)]

    def focus(self, est: Mapping[str, Estimate]) -> tuple[str, str]:
        """The adjacent pair with the smallest z = Delta / sqrt(Var)."""
        pairs = self._pairs(est)
        z = [d / math.sqrt(v) if v > 0 and math.isfinite(v) else math.inf for _, _, d, v, _ in pairs]
        if all(math.isinf(x) for x in z):  # no finite variance yet: the first pair
            return pairs[0][0], pairs[0][1]
        a, b, *_ = pairs[int(np.argmin(z))]
        return a, b

    def summary(self, est: Mapping[str, Estimate]) -> Summary:
        if not all(est[r].finite for r in self.spaces):
            missing = [r for r in self.spaces if not est[r].finite]
            return Summary(self.name, math.nan, math.nan, math.nan, math.inf,
                           note=f"no interval on E yet: {', '.join(missing)}")
        pairs = self._pairs(est)
        halves = [t_width(v, dof, self.level) / 2 for _, _, _, v, dof in pairs]
        decided = (all(d - h > 0 for (_, _, d, _, _), h in zip(pairs, halves))
                   and all(est[r].sizes >= self.min_sizes for r in self.spaces))
        a, b = self.focus(est)
        i = next(k for k, p in enumerate(pairs) if p[:2] == (a, b))
        d, h = pairs[i][2], halves[i]
        order = tuple([pairs[0][0]] + [p[1] for p in pairs])
        return Summary(self.name, d, d - h, d + h, 2 * h, decided, order,
                       note=f"E_{b} - E_{a}")

    def objective(self, est: Mapping[str, Estimate], studentized: bool = True) -> Objective:
        a, b = self.focus(est)

        def width(x: Mapping[str, Estimate]) -> float:
            _, var, dof = _pair(x[a], x[b])
            return t_width(var, dof, self.level, studentized)

        return width


@dataclass(frozen=True)
class DataLaw:
    """The reference recipe's data law L(U) = A/U^B + C (U in the fit's own units) with
    its (3, 3) covariance of (A, B, C) and degrees of freedom, and L_ref, its best loss at
    the base budget (the multiplier's 1x)."""

    A: float
    B: float
    C: float
    cov: np.ndarray
    dof: float
    L_ref: float

    def log_multiplier(self, E: float) -> float:
        if not (E > self.C and self.L_ref > self.C and self.B > 0):
            return math.inf
        return (math.log(self.L_ref - self.C) - math.log(E - self.C)) / self.B

    def parts(self, E: float) -> tuple[float, float]:
        """(d log m / dE, Var of log m from the data fit alone) at E (module docstring)."""
        lm = self.log_multiplier(E)
        g_e = -1.0 / (self.B * (E - self.C))
        g = np.array([0.0, -lm / self.B, (1.0 / (E - self.C) - 1.0 / (self.L_ref - self.C)) / self.B])
        return g_e, float(g @ np.asarray(self.cov, dtype=float) @ g)


@dataclass(frozen=True)
class Multiplier(Target):
    """The data multiplier of one recipe's E against the reference data law (module docstring)."""

    recipe: str
    space: CandidateSpace
    data: DataLaw
    level: float = 0.95
    name: str = field(default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name or f"{self.recipe}.multiplier")

    @property
    def recipes(self) -> Mapping[str, CandidateSpace]:
        return {self.recipe: self.space}

    def _log(self, e: Estimate, studentized: bool = True) -> tuple[float, float]:
        """(log m, CI width of log m) for the estimate e (inf when E <= C_U)."""
        lm = self.data.log_multiplier(e.E)
        if not math.isfinite(lm) or not math.isfinite(e.var):
            return lm, math.inf
        g_e, data_var = self.data.parts(e.E)
        study = g_e * g_e * e.var
        dof = satterthwaite([(study, e.dof), (data_var, self.data.dof)])
        return lm, t_width(study + data_var, dof, self.level, studentized)

    def floor(self, E: float) -> float:
        """A lower bound on log m's CI width that no run of the study can beat: the data
        fit's share alone with a normal quantile, 2 z sqrt(g' Cov_U g) (t_nu >= z and the
        study's share is >= 0)."""
        if not math.isfinite(self.data.log_multiplier(E)):
            return math.inf
        return t_width(self.data.parts(E)[1], math.inf, self.level, studentized=False)

    def summary(self, est: Mapping[str, Estimate]) -> Summary:
        e = est[self.recipe]
        if not e.finite:
            return Summary(self.name, math.nan, math.nan, math.nan, math.inf,
                           note=f"no interval on E_{self.recipe} yet")
        lm, w = self._log(e)
        if not math.isfinite(lm):
            return Summary(self.name, math.inf, math.nan, math.nan, math.inf,
                           note=f"E = {e.E:.4g} is at or below the data law's C = {self.data.C:.4g}")
        return Summary(self.name, math.exp(lm), math.exp(lm - w / 2), math.exp(lm + w / 2), w,
                       note=f"the data law alone keeps it >= {self.floor(e.E):.3f}")

    def objective(self, est: Mapping[str, Estimate], studentized: bool = True) -> Objective:
        if not math.isfinite(self.data.log_multiplier(est[self.recipe].E)):  # narrow E first
            return lambda x: t_width(x[self.recipe].var, x[self.recipe].dof, self.level, studentized)
        return lambda x: self._log(x[self.recipe], studentized)[1]
