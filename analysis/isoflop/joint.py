"""The power law through the budgets' optima as one joint least-squares fit.

Approach 2 (Hoffmann et al. 2022, arXiv 2203.15556, sec. 3.2) is two-stage: a parabola
per budget, then a line through the vertices in (ln C, ln N). The vertex of a parabola
fitted to a few noisy points, v = -p1 / (2 p2), is heavy-tailed (a weakly curved budget
puts it anywhere), and the line weighs every vertex alike. Here the two stages are one
least-squares problem over the same windowed points (budget j, point i):

    y_ij ≈ h_j + k_j (x_ij - v_j)²,   v_j = c + a (ℓ_j - ℓ̄),   k_j >= 0,

x = ln N, y the loss, ℓ_j = ln C_j (ℓ̄ their mean). The parabolas keep their own height
h_j and curvature k_j; only their vertices are tied to the power law ln N* = c + a ℓ,
the assumption approach 2 already makes in its second stage. A weakly curved budget
then moves the line as little as its points say, not as much as its vertex wanders.

For fixed (c, a) every budget's (h_j, k_j) is linear least squares with a closed form
(z = (x - v_j)²: k_j = max(0, S_zy / S_zz), RSS_j = S_yy - k_j S_zy), so only (c, a) are
searched (variable projection, Golub & Pereyra 1973, SIAM J. Numer. Anal. 10:413), by
Nelder-Mead from the two-stage line. ``fit_isoflops(joint=True)``; not the default:
on the realistic synthetic study (``bench/isoflop_study.py``, docs/isoflop.md) it lowers
the median error but not the worst, is worse on the hand-written sweeps' worst case, and
moves a on Epoch's Chinchilla points from 0.494 to 0.517.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

__all__ = ["joint_line"]


def _padded(xs: list[np.ndarray], ys: list[np.ndarray]):
    """(K, m) arrays of x, y and a 0/1 mask, m the largest budget."""
    m = max(x.size for x in xs)
    X, Y, W = (np.zeros((len(xs), m)) for _ in range(3))
    for j, (x, y) in enumerate(zip(xs, ys)):
        X[j, : x.size], Y[j, : y.size], W[j, : x.size] = x, y, 1.0
    return X, Y, W


def _rss(theta, X, Y, W, dl) -> float:
    """The profiled residual sum of squares at (c, a): every budget's best h_j, k_j >= 0."""
    c, a = theta
    v = c + a * dl  # (K,)
    n = W.sum(axis=1)
    z = W * (X - v[:, None]) ** 2
    zc = W * (z - (z.sum(axis=1) / n)[:, None])
    yc = W * (Y - ((W * Y).sum(axis=1) / n)[:, None])
    szz, szy, syy = (zc * zc).sum(axis=1), (zc * yc).sum(axis=1), (yc * yc).sum(axis=1)
    k = np.where(szz > 0, np.maximum(szy, 0.0) / np.where(szz > 0, szz, 1.0), 0.0)
    return float(np.sum(syy - k * szy))


def joint_line(
    xs: list[np.ndarray], ys: list[np.ndarray], log_c: np.ndarray, start: tuple[float, float]
) -> tuple[float, float]:
    """(a, ln G): ln N* = ln G + a ln C from the joint fit (module docstring) of the
    budgets' points ``xs`` (ln N) and ``ys`` (loss), one array each, at ``log_c``
    (K,) = ln C; ``start``: the two-stage (a, ln G). Under 2 budgets: ``start``."""
    if len(xs) < 2:
        return start
    X, Y, W = _padded(xs, ys)
    lbar = float(np.mean(log_c))
    dl = np.asarray(log_c, dtype=float) - lbar
    a0, g0 = start
    res = minimize(_rss, np.array([g0 + a0 * lbar, a0]), args=(X, Y, W, dl),
                   method="Nelder-Mead",
                   options={"xatol": 1e-7, "fatol": 1e-14, "maxiter": 4000})  # fmt: skip
    c, a = (float(v) for v in res.x)
    if not (np.isfinite(c) and np.isfinite(a)):
        return start
    return a, c - a * lbar
