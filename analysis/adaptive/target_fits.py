"""The target of an adaptive study: a recipe's asymptote E and its confidence interval, by
the one rule and the one engine of ``scalelab report`` and ``scalelab compare``.

Kim et al. 2025, "Pre-training under infinite compute" (arXiv 2509.14786): L(N) = A/N^B + E
per recipe. From the finished runs (a run frame with a ``loss`` column,
``space.CandidateSpace``):

1. cells: the runs of one (N, tuned values) are seed replicates of one cell;
2. size points: at each N the best cell by its *mean loss over seeds* (ties: more seeds,
   then the first in run order), valued at that mean with weight m (its seeds): the report's
   point rule, ``analysis.tables.cells.best_cells`` / ``cells.size_points``, called here;
3. settled (what is adaptive): a size's best cell is *settled* when every in-grid
   coordinate-search neighbour (one step on one axis) has been run: a local optimum of the
   grid, where Kim et al.'s coordinate search stops (``scalelab.tune.coordinate``; at a grid
   edge the missing neighbour cannot be run, as for a fixed grid), *and* it has as many
   seeds as the most replicated cell at that size (``behind`` = 0). Only settled sizes enter
   the fit: an unsettled best cell may sit on the slope of the tuning penalty, and its loss
   would bias E upwards by an amount no interval shows; and a best cell with fewer seeds
   than the cell it beat won a mean of one lucky run against a mean of several (the
   winner's curse the adaptive planner's replicates would otherwise create: on the ranking
   study of tests/analysis/test_adaptive_targets.py it decided the wrong order in 2 of 12
   seeds). The planner replicates such a cell until it is level (planner.py). On a complete
   grid every size is settled and the points are exactly the report's;
4. the fit, its interval and whether E may be written at all: ``analysis.recipes.
   recipe_asymptote.recipe_asymptote`` on the settled points (``power_law.fit_kim``, weights m;
   the Wald/t interval of nonlinear least squares, Seber & Wild 1989, "Nonlinear
   Regression", ch. 5, E +- t_{n-3, (1+level)/2} sqrt(Cov_EE), Cov = s^2 (J'WJ)^-1,
   s^2 = SUM m_i r_i^2 / (n - 3); and its ``why_not``, e.g. "not identified: the loss rises
   again with x ..."). With fewer than ``identified.MIN_SIZES`` settled sizes there is no fit yet.

The replicate scatter within cells (``SizePoints.within_ss``, ``within_dof``: "pure error",
Draper & Smith 1998, "Applied Regression Analysis", sec. 2.1) is kept for the planner's
prior guess of one run's noise (posterior.py) only: it never enters E or its interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analysis.adaptive.space import CandidateSpace, Cell
from analysis.adaptive.targets import Estimate, Summary, Target
from analysis.fit.identified import MIN_SIZES
from analysis.recipes import cells
from analysis.recipes.recipe_asymptote import RecipeE, recipe_asymptote
from analysis.tables.cells import best_cells

__all__ = ["SizePoints", "TargetFit", "estimate", "evaluate", "fit_target", "judge",
           "settled_sizes", "size_points"]

RIVAL_Z = 1.0
"""Standard errors of the difference within which a less replicated neighbour is a rival
(module docstring, step 3)."""


@dataclass(frozen=True)
class SizePoints:
    """Per size with runs: N, the best cell's axis values, loss (its seed mean), m, behind
    (seeds it lacks against the most replicated cell at N), settled, runs (at that size); the best cells' runs; and the
    replicate scatter of every cell."""

    frame: pl.DataFrame
    rows: pl.DataFrame
    """The best cell's runs per N (``cells.best_cells``' first frame: N, loss, seed, flops)."""
    within_ss: float
    """SUM over cells of SUM_r (y_cr - ybar_c)^2 (the planner's noise guess only)."""
    within_dof: int
    """SUM over cells of (m_c - 1)."""
    rivals: dict[float, tuple[Cell, ...]] = field(default_factory=dict)
    """Per N, the best cell's rivals: neighbours with fewer seeds whose mean is within
    ``RIVAL_Z`` standard errors of the best's (module docstring, step 3)."""

    @property
    def settled(self) -> pl.DataFrame:
        return self.frame.filter(pl.col("settled"))

    def settled_points(self) -> cells.SizePoints:
        """The settled sizes as the report's points (``cells.size_points``)."""
        keep = self.settled["N"].to_list()
        return cells.size_points(self.rows.filter(pl.col("N").is_in(keep)))


def _schema(names: list[str]) -> dict:
    return {"N": pl.Float64, **{n: pl.Float64 for n in names}, "loss": pl.Float64,
            "m": pl.Int64, "behind": pl.Int64, "settled": pl.Boolean, "runs": pl.Int64}


def size_points(done: pl.DataFrame, space: CandidateSpace) -> SizePoints:
    """Best cell per size (the report's rule), its seed count and whether it is settled
    (module docstring)."""
    names = list(space.names)
    rows_schema = {"N": pl.Float64, "loss": pl.Float64, "seed": pl.String, "flops": pl.Float64}
    if done.height == 0:
        return SizePoints(pl.DataFrame(schema=_schema(names)), pl.DataFrame(schema=rows_schema),
                          0.0, 0, {})
    # a run's seed label is its replicate: the rows of a size are in replicate order, the
    # order the report's rows have when the spec's seeds are 0, 1, ... (the mean's sum order)
    frame = done.select(pl.col("N").cast(pl.Float64), *[pl.col(n).cast(pl.Float64) for n in names],
                        pl.col("loss").cast(pl.Float64),
                        *([pl.col("replicate").alias("seed")] if "replicate" in done.columns else []),
                        *([pl.col("flops")] if "flops" in done.columns else []))
    rows, best = best_cells(frame, ["N", *names])
    scatter = (frame.group_by("N", *names, maintain_order=True)
               .agg(((pl.col("loss") - pl.col("loss").mean()) ** 2).sum().alias("ss"),
                    (pl.len() - 1).alias("dof"), pl.col("loss").mean().alias("mean")))
    within_ss, within_dof = float(scatter["ss"].sum()), int(scatter["dof"].sum())
    sd = math.sqrt(within_ss / within_dof) if within_dof > 0 else math.nan
    tried: dict[float, dict[Cell, tuple[float, int]]] = {}  # N -> cell -> (mean, seeds)
    for n, *vals, _, dof, mean in scatter.iter_rows():
        cell = tuple(a.values.index(v) for a, v in zip(space.axes, vals))
        tried.setdefault(n, {})[cell] = (float(mean), int(dof) + 1)
    runs_at = dict(frame.group_by("N").len().iter_rows())
    out, rivals = [], {}
    for r in best.iter_rows(named=True):
        cell = tuple(a.values.index(r[a.name]) for a in space.axes)
        behind = max(m for _, m in tried[r["N"]].values()) - r["seeds"]
        near = [c for c in space.neighbours(cell) if c in tried[r["N"]]]
        rivals[r["N"]] = tuple(c for c in near if _rival(tried[r["N"]][c], r["mean"], r["seeds"], sd))
        settled = (behind == 0 and len(near) == len(space.neighbours(cell))
                   and not rivals[r["N"]])
        out.append({"N": r["N"], **{n: r[n] for n in names}, "loss": r["mean"], "m": r["seeds"],
                    "behind": behind, "settled": settled, "runs": runs_at[r["N"]]})
    return SizePoints(pl.DataFrame(out, schema=_schema(names)), rows, within_ss, within_dof,
                      rivals)


def _rival(cell: tuple[float, int], best_mean: float, best_m: int, sd: float) -> bool:
    """A neighbour with fewer seeds than the best cell whose mean is within ``RIVAL_Z``
    standard errors of the difference above the best's (module docstring, step 3)."""
    mean, m = cell
    if m >= best_m or not math.isfinite(sd):
        return False
    return mean - best_mean < RIVAL_Z * sd * math.sqrt(1.0 / m + 1.0 / best_m)


@dataclass(frozen=True)
class TargetFit:
    """E of the settled sizes as the report gives it (module docstring)."""

    n_sizes: int
    asymptote: RecipeE | None
    """``recipe_asymptote`` of the settled points; None with fewer than MIN_SIZES of them."""
    level: float

    @property
    def why_not(self) -> str | None:
        """Why E is not written (the report's reason), or None."""
        if self.asymptote is None:
            return f"{self.n_sizes} settled sizes, need >= {MIN_SIZES}"
        return self.asymptote.why_not

    @property
    def identified(self) -> bool:
        return self.why_not is None

    @property
    def E(self) -> float:
        """The asymptote, nan where the report writes none."""
        return self.asymptote.E if self.identified else math.nan

    @property
    def theta(self) -> tuple[float, float, float] | None:
        """(A, B, E) of the fit (identified or not), or None without one."""
        fit = None if self.asymptote is None else self.asymptote.fit
        return None if fit is None else (fit.A, fit.B, fit.E)

    @property
    def var(self) -> float:
        """Cov_EE of the fit (inf where E is not written)."""
        if not self.identified:
            return math.inf
        return self.asymptote.fit.se["E"] ** 2

    @property
    def dof(self) -> int:
        """Residual degrees of freedom of the interval, n - 3 (0 without a written E)."""
        return self.asymptote.fit.dof if self.identified else 0

    @property
    def ci(self) -> tuple[float, float]:
        """The report's interval (nan, nan where E is not written)."""
        if not self.identified:
            return (math.nan, math.nan)
        return (self.asymptote.lo, self.asymptote.hi)

    @property
    def half_width(self) -> float:
        lo, hi = self.ci
        return (hi - lo) / 2 if self.identified else math.inf

    @property
    def width(self) -> float:
        """2 t sqrt(Cov_EE); inf where E is not written."""
        return 2.0 * self.half_width


def fit_target(points: SizePoints, level: float = 0.95) -> TargetFit:
    """``recipe_asymptote`` on the settled sizes (module docstring)."""
    n = points.settled.height
    if n < MIN_SIZES:
        return TargetFit(n, None, level)
    return TargetFit(n, recipe_asymptote(points.settled_points(), level), level)


def evaluate(done: pl.DataFrame, space: CandidateSpace, level: float = 0.95) -> TargetFit:
    """``fit_target(size_points(done, space), level)``."""
    return fit_target(size_points(done, space), level)


def estimate(fit: TargetFit) -> Estimate:
    """The fit's E as a ``targets.Estimate``: E, Cov_EE, n - 3, or why there is none."""
    if not fit.identified:
        return Estimate(math.nan, math.inf, 0.0, fit.n_sizes, why=fit.why_not)
    return Estimate(fit.E, fit.var, float(fit.dof), fit.n_sizes)


def settled_sizes(fits: dict[str, TargetFit]) -> int:
    """The fewest settled sizes in any recipe's fit (what a trajectory's ``sizes`` says)."""
    return min(f.n_sizes for f in fits.values())


def judge(target: Target, done: pl.DataFrame, cache: dict | None = None
          ) -> tuple[Summary, dict[str, TargetFit]]:
    """The target as reported on the finished runs: each recipe's fit on its own slice of
    the runs (targets.py) and the target's summary of them. ``cache``: fits kept by
    recipe and settled points, for a caller that judges after every run (a fit only
    changes when a settled point does)."""
    fits = {}
    for name, sub in target.recipes.items():
        points = size_points(sub.runs_in(done), sub)
        if cache is None:
            fits[name] = fit_target(points, target.level)
            continue
        p = points.settled_points() if points.settled.height else None
        sig = (name, None if p is None else tuple(map(np.ndarray.tobytes, (p.x, p.y, p.m))))
        if sig not in cache:
            cache[sig] = fit_target(points, target.level)
        fits[name] = cache[sig]
    summary = target.summary({n: estimate(f) for n, f in fits.items()})
    return summary, fits
