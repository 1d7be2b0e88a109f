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
- ``Multiplier(recipe, ...)``: Kim et al.'s data-efficiency multiplier of the recipe's E,
  in its own module (multiplier.py): the report's law choice and bootstrap interval.

A recipe whose E the report does not write (``Estimate.why``: too few sizes, not
identified) gives no value and no interval here either: the summary's note is the reason.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from analysis.adaptive.space import CandidateSpace
from analysis.errors import AnalysisInputError
from analysis.fit.identified import MIN_SIZES

__all__ = ["NO_ESTIMATE", "Asymptote", "Estimate", "Ranking", "Summary", "Target", "satterthwaite",
           "t_width"]


@dataclass(frozen=True)
class Estimate:
    """One recipe's E: value, variance and degrees of freedom (var inf: no interval)."""

    E: float
    var: float
    dof: float
    sizes: int = 0
    """Sizes in the fit (a ranking is decided only on ``Ranking.min_sizes`` or more)."""
    why: str | None = None
    """Why the report writes no E for this recipe (``recipe_asymptote.why_not``), or None."""

    @property
    def finite(self) -> bool:
        return (self.why is None and math.isfinite(self.E) and math.isfinite(self.var)
                and self.dof >= 1)


NO_ESTIMATE = Estimate(math.nan, math.inf, 0.0)
MIN_DECISION_SIZES = MIN_SIZES + 2
"""Settled sizes every recipe's fit needs before a ranking may be called decided: 7. The
loop looks after every round and stops at the first decided look, so a few-dof interval
that happens to be narrow decides for it (optional stopping). Under the report's interval
(n - 3 residual dof) it decided the wrong order in 1 of 12 seeds at 5 or 6 sizes (a 6-size
fit whose largest size was 80k, E 0.1 below the truth); at 7 in none
(tests/analysis/test_adaptive_targets.py, docs/adaptive.md)."""


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
            return Summary(self.name, math.nan, math.nan, math.nan, math.inf, note=e.why or "")
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
            missing = [f"{r} ({est[r].why})" if est[r].why else r
                       for r in self.spaces if not est[r].finite]
            return Summary(self.name, math.nan, math.nan, math.nan, math.inf,
                           note=f"no interval on E: {'; '.join(missing)}")
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
