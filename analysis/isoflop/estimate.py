"""Per-budget optima for one (window, method) choice, and the power laws through them.

``method``: "parabola" (Hoffmann et al. 2022, arXiv 2203.15556, sec. 3.2: the vertex of a
least-squares parabola in ln N, ``analysis.isoflop.parabola``) or "interp" (Porian et al.
2024, arXiv 2406.19146: the argmin of a smoothing spline in ln N,
``analysis.isoflop.interp``). Either sees only the budget's points inside the window
(``analysis.isoflop.window``).

The power laws: least squares of the kept budgets' ln N_opt on ln C (the two-stage fit of
Hoffmann et al.), or with ``joint`` and the parabola the joint fit of every kept budget's
parabola with its vertex on the line (``analysis.isoflop.joint``); ``two_stage`` keeps the
line through the vertices either way (the bootstrap's centre).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.isoflop.budgets import Budgets
from analysis.isoflop.interp import fit_budget_interp
from analysis.isoflop.joint import joint_line
from analysis.isoflop.parabola import BudgetFit, fit_budget
from analysis.isoflop.window import window_mask

__all__ = ["METHODS", "Estimate", "estimate", "power_law"]

METHODS = ("parabola", "interp")


@dataclass(frozen=True, eq=False)
class Estimate:
    """One choice's result. ``fits``: per budget (K,); ``used``: (n,) the points inside
    their budget's window; ``keep``: (K,) budgets with an accepted optimum; ``a``, ``ln_gn``,
    ``b``, ``ln_gd``: the power laws (NaN under 2 kept budgets); ``two_stage``: (a, ln_gn,
    b, ln_gd) of the line through the vertices (the same as those without ``joint``)."""

    window: float | None
    method: str
    fits: list[BudgetFit]
    used: np.ndarray
    keep: np.ndarray
    a: float
    ln_gn: float
    b: float
    ln_gd: float
    joint: bool = False
    two_stage: tuple[float, float, float, float] = (float("nan"),) * 4


def power_law(log_c: np.ndarray, log_y: np.ndarray, w: np.ndarray):
    """Least squares ln y = c + s ln C in each row of ``log_y`` (B, K) over the budgets
    where ``w`` (B, K) is 1 (a NaN elsewhere is ignored): (s, c), each (B,)."""
    log_y = np.where(w > 0, log_y, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sw = w.sum(axis=1)
        mc = (w * log_c).sum(axis=1) / sw
        my = (w * log_y).sum(axis=1) / sw
        dc = log_c - mc[:, None]
        slope = (w * dc * (log_y - my[:, None])).sum(axis=1) / (w * dc * dc).sum(axis=1)
    return slope, my - slope * mc


def estimate(
    g: Budgets, *, window: float | None, method: str, log_loss: bool, min_points: int,
    min_side: int, joint: bool = False,
) -> Estimate:  # fmt: skip
    """Each budget's optimum from its windowed points, then ln N* and ln D* on ln C
    (with ``joint`` and the parabola: the joint fit, ``analysis.isoflop.joint``)."""
    one = fit_budget if method == "parabola" else fit_budget_interp
    used = np.zeros(g.N.size, dtype=bool)
    fits = []
    for j in range(g.k.size):
        idx = np.flatnonzero(g.label == j)
        m = window_mask(g.N[idx], g.loss[idx], window, min_side=min_side)
        used[idx[m]] = True
        fits.append(one(g.N[idx[m]], g.loss[idx[m]], log_loss=log_loss,
                        min_points=min_points, min_side=min_side))  # fmt: skip
    keep = np.array([not f.reason for f in fits], dtype=bool)
    log_c = np.log(g.C_budget)
    log_n = np.array([f.log_n_opt for f in fits])
    log_d = log_c - np.log(g.k) - log_n  # D* = C / (k N*)
    w = keep[None, :].astype(float)
    if keep.sum() < 2:
        nan = float("nan")
        return Estimate(window, method, fits, used, keep, nan, nan, nan, nan, joint)
    a, ln_gn = (float(v[0]) for v in power_law(log_c, log_n[None], w))
    b, ln_gd = (float(v[0]) for v in power_law(log_c, log_d[None], w))
    two = (a, ln_gn, b, ln_gd)
    if joint and method == "parabola":
        kept = np.flatnonzero(keep)
        xs = [np.log(g.N[(g.label == j) & used]) for j in kept]
        ys = [g.loss[(g.label == j) & used] for j in kept]
        ys = [np.log(y) for y in ys] if log_loss else ys
        a, ln_gn = joint_line(xs, ys, log_c[kept], (a, ln_gn))
        line_d = log_c - np.log(g.k) - (ln_gn + a * log_c)  # D* = C / (k N*) on the line
        b, ln_gd = (float(v[0]) for v in power_law(log_c, line_d[None], w))
    return Estimate(window, method, fits, used, keep, a, ln_gn, b, ln_gd, joint, two)
