"""The target of an adaptive study: a recipe's asymptote E and its confidence interval.

From the finished runs (a run frame with a ``loss`` column, ``space.CandidateSpace``):

1. cells: the runs of one (N, tuned values) are seed replicates (replicate 0 first);
2. size points: at each N the best cell, chosen by its first run (the lowest loss of
   replicate 0: the tuning grid's run, as ``infinite_compute`` takes the best loss per
   size and Kim et al., arXiv 2509.14786, the tuned optimum), valued at the mean over its
   m replicates (``infinite_compute``'s "mean of seeds": the best cell's seeds). Choosing
   on replicate 0 alone keeps later seeds out of the choice: a replicate refines the
   point's value without reshuffling which cell is best (a mean over seeds compared with a
   neighbour's single lucky run would hand the choice to that run, the winner's curse);
3. settled: a size's best cell is *settled* when every in-grid coordinate-search neighbour
   (one step on one axis) has been run: it is a local optimum of the grid, the condition
   on which Kim et al.'s coordinate search stops (``scalelab.tune.coordinate``; at a grid
   edge the missing neighbour cannot be run, as for a fixed grid). Only settled sizes
   enter the fit: an unsettled best cell may sit on the slope of the tuning penalty, and
   its loss would bias E upwards by an amount no interval shows;
4. the fit: A/x^B + E on the settled points, weights m (``law.fit_points``), with
   >= ``law.MIN_SIZES`` = 5 sizes (fewer: no interval, width inf; why 5: law.py);
5. the interval: the Wald/t interval of nonlinear least squares (Seber & Wild 1989,
   "Nonlinear Regression", ch. 5),

       Cov(theta) = s^2 (J^T W J)^-1,   W = diag(m),   E +- t_{nu, (1+level)/2} sqrt(Cov_EE),

   with J the law's Jacobian at the settled sizes (``law.jacobian``) and s^2 the pooled
   estimate of one run's noise variance from the law's weighted residuals (n - 3 degrees
   of freedom) and the replicate scatter within every cell ("pure error", SUM (m_c - 1)
   degrees of freedom; Draper & Smith 1998, "Applied Regression Analysis", sec. 2.1):

       s^2 = (SUM_i m_i (ybar_i - L(x_i))^2 + SUM_c SUM_r (y_cr - ybar_c)^2) / nu,
       nu = (n - 3) + SUM_c (m_c - 1).

The width 2 t sqrt(Cov_EE) is what every design (adaptive, grid, random) is judged by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from analysis.adaptive.law import fit_points
from analysis.recipes.kim_law import MIN_SIZES, SCALE, jacobian
from analysis.adaptive.targets import NO_ESTIMATE, Estimate, Summary, Target
from analysis.adaptive.space import CandidateSpace

__all__ = ["SizePoints", "TargetFit", "estimate", "evaluate", "fit_target", "judge", "settled_sizes",
           "size_points"]


@dataclass(frozen=True)
class SizePoints:
    """Per size with runs: N, the best cell's axis values, loss (its seed mean), m, settled,
    runs (at that size); and the replicate scatter of every cell."""

    frame: pl.DataFrame
    within_ss: float
    """SUM over cells of SUM_r (y_cr - ybar_c)^2."""
    within_dof: int
    """SUM over cells of (m_c - 1)."""

    @property
    def settled(self) -> pl.DataFrame:
        return self.frame.filter(pl.col("settled"))


def size_points(done: pl.DataFrame, space: CandidateSpace) -> SizePoints:
    """Best cell per size, its replicate count and whether it is settled (module docstring)."""
    names = list(space.names)
    schema = {"N": pl.Float64, **{n: pl.Float64 for n in names}, "loss": pl.Float64,
              "m": pl.Int64, "settled": pl.Boolean, "runs": pl.Int64}
    if done.height == 0:
        return SizePoints(pl.DataFrame(schema=schema), 0.0, 0)
    cells: dict[tuple, list[tuple[int, float]]] = {}  # (N, *values) -> [(replicate, loss)]
    for n, *vals, rep, loss in done.select("N", *names, "replicate", "loss").iter_rows():
        cells.setdefault((float(n), *map(float, vals)), []).append((int(rep), float(loss)))
    within_ss, within_dof = 0.0, 0
    by_size: dict[float, list[tuple[float, tuple, float, int]]] = {}  # N -> [(first, values, mean, m)]
    for (n, *vals), runs in cells.items():
        losses = np.array([v for _, v in runs])
        within_ss += float(np.sum((losses - losses.mean()) ** 2))
        within_dof += losses.size - 1
        first = min(runs)[1]  # the lowest replicate's loss
        by_size.setdefault(n, []).append((first, tuple(vals), float(losses.mean()), losses.size))
    rows = []
    for n in sorted(by_size):
        sub = by_size[n]
        _, vals, mean, m = min(sub, key=lambda c: c[0])
        tried = {tuple(a.values.index(v) for a, v in zip(space.axes, c[1])) for c in sub}
        best = tuple(a.values.index(v) for a, v in zip(space.axes, vals))
        settled = all(c in tried for c in space.neighbours(best))
        rows.append({"N": n, **dict(zip(names, vals)), "loss": mean, "m": m,
                     "settled": settled, "runs": sum(c[3] for c in sub)})
    return SizePoints(pl.DataFrame(rows, schema=schema), within_ss, within_dof)


@dataclass(frozen=True)
class TargetFit:
    """E of the settled sizes' law with its t-interval (module docstring)."""

    n_sizes: int
    theta: tuple[float, float, float] | None
    """(A, B, E), or None with fewer than MIN_SIZES settled sizes."""
    cov: np.ndarray | None
    """(3, 3) Cov of (A, B, E), or None."""
    s2: float
    dof: int
    level: float

    @property
    def E(self) -> float:
        return math.nan if self.theta is None else self.theta[2]

    @property
    def half_width(self) -> float:
        if self.cov is None or self.dof < 1 or not np.isfinite(self.cov[2, 2]):
            return math.inf
        return float(stats.t.ppf(0.5 + self.level / 2, self.dof) * math.sqrt(max(self.cov[2, 2], 0.0)))

    @property
    def width(self) -> float:
        """2 t sqrt(Cov_EE); inf without an interval."""
        return 2.0 * self.half_width

    @property
    def ci(self) -> tuple[float, float]:
        h = self.half_width
        return (self.E - h, self.E + h)


def fit_target(points: SizePoints, level: float = 0.95) -> TargetFit:
    """The law on the settled sizes and its interval on E (module docstring)."""
    s = points.settled
    n = s.height
    if n < MIN_SIZES:
        return TargetFit(n, None, None, math.nan, 0, level)
    x, y, m = s["N"].to_numpy() / SCALE, s["loss"].to_numpy(), s["m"].to_numpy().astype(float)
    A, B, E = fit_points(x, y, m)
    J = jacobian(A, B, x)  # (n, 3)
    resid = y - (A * x**-B + E)
    dof = (n - 3) + points.within_dof
    s2 = (float(np.sum(m * resid**2)) + points.within_ss) / dof
    info = J.T @ (m[:, None] * J)  # (3, 3)
    try:
        cov = s2 * np.linalg.inv(info)
    except np.linalg.LinAlgError:
        cov = np.full((3, 3), np.inf)
    return TargetFit(n, (A, B, E), cov, s2, dof, level)


def evaluate(done: pl.DataFrame, space: CandidateSpace, level: float = 0.95) -> TargetFit:
    """``fit_target(size_points(done, space), level)``."""
    return fit_target(size_points(done, space), level)


def estimate(fit: TargetFit) -> Estimate:
    """The fit's E as an ``objective.Estimate`` (no interval: var inf)."""
    if fit.theta is None or fit.cov is None or not np.isfinite(fit.cov[2, 2]) or fit.dof < 1:
        return NO_ESTIMATE
    return Estimate(fit.E, float(fit.cov[2, 2]), float(fit.dof), fit.n_sizes)


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
        sig = (name, tuple(points.settled.rows()), points.within_ss, points.within_dof)
        if sig not in cache:
            cache[sig] = fit_target(points, target.level)
        fits[name] = cache[sig]
    summary = target.summary({n: estimate(f) for n, f in fits.items()})
    return summary, fits
