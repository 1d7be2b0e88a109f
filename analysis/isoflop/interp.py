"""Interpolate-then-argmin: one budget's optimum as the minimum of a smooth curve through
its points, with no parabola assumed.

Porian et al. 2024 ("Resolving discrepancies in compute-optimal scaling of language
models", arXiv 2406.19146) locate each isoFLOP curve's minimum by interpolating the loss in
log N and taking the interpolant's argmin, rather than a parabola's vertex. Here the
interpolant is a cubic smoothing spline of the loss in x = ln N (Reinsch 1967; scipy's
``make_smoothing_spline``, its penalty chosen by generalised cross-validation, Craven &
Wahba 1979), so noisy points are smoothed, not threaded:

1. Points at the same N are averaged (seeds), giving m distinct (x_i, ybar_i).
2. m >= 5: the spline; its argmin on a grid of ``GRID`` points over [x_1, x_m] (a step
   of (x_m - x_1)/(GRID - 1) in ln N: 0.0035 over 3 decades).
   m = 3 or 4: too few for a penalised spline; the least-squares parabola's vertex instead.
3. An argmin on the first or last grid point is an unbracketed minimum ("off-centre").

The spline's curvature at the argmin is reported as the budget's curvature.
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import make_smoothing_spline

from analysis.isoflop.parabola import BudgetFit, guard, parabolas

__all__ = ["GRID", "fit_budget_interp"]

GRID = 2001
_MIN_SPLINE = 5  # distinct N a smoothing spline needs (fewer: the parabola)


def _averaged(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xs, inv = np.unique(x, return_inverse=True)
    return xs, np.bincount(inv, weights=y) / np.bincount(inv)


def fit_budget_interp(
    N: np.ndarray, loss: np.ndarray, *, log_loss: bool, min_points: int, min_side: int
) -> BudgetFit:
    """One budget's optimum from the smoothing spline (the module docstring); the same
    "too few points" and "one-sided" guards as the parabola (``parabola.guard``)."""
    x, y = np.log(N), (np.log(loss) if log_loss else loss)
    xs, ys = _averaged(x, y) if x.size else (x, y)
    nan = float("nan")
    if xs.size < 3 or x.size < min_points:
        return BudgetFit(int(x.size), nan, nan, nan, guard(x, nan, nan, min_points, min_side))
    if xs.size < _MIN_SPLINE:
        curv, vx, vy = (float(v[0]) for v in parabolas(xs[None], ys[None], float(xs.mean())))
    else:
        spline = make_smoothing_spline(xs, ys)
        grid = np.linspace(xs[0], xs[-1], GRID)
        values = spline(grid)
        i = int(np.argmin(values))
        vx, vy = float(grid[i]), float(values[i])
        curv = float(spline.derivative(2)(vx))
        if i in (0, GRID - 1):  # the curve still falls at the edge: no bracketed minimum
            lo, hi = np.exp(xs[0]), np.exp(xs[-1])
            return BudgetFit(int(x.size), curv, vx, _loss(vy, log_loss),
                             f"off-centre: spline minimum at the edge of the sampled N "
                             f"[{lo:.3g}, {hi:.3g}]")  # fmt: skip
        curv = max(curv, np.finfo(float).tiny)  # a flat-bottomed minimum still is one
    reason = guard(x, curv, vx, min_points, min_side)
    if reason.startswith(("too few", "non-convex")):
        vx = vy = nan
    return BudgetFit(int(x.size), curv, vx, _loss(vy, log_loss), reason)


def _loss(vy: float, log_loss: bool) -> float:
    return float(np.exp(vy)) if log_loss else vy
