"""One isoFLOP budget's parabola in x = ln N, its guards, and the bootstrap of its vertex.

Hoffmann et al. 2022 (arXiv 2203.15556, sec. 3.2) "fit a parabola to each IsoFLOPs curve"
of the loss against log N (their Fig. 3); the Llama 3 report (arXiv 2407.21783,
sec. 3.2.1) fits "a second-degree polynomial" of the validation loss in log tokens. Here:
least squares of the loss (or, with ``log_loss``, of ln loss) on
L(x) = p0 + p1 u + p2 u², u = x - mean x, written in vertex form
L(x) = L_opt + kappa (x - ln N_opt)², kappa = p2, ln N_opt = mean x - p1 / (2 p2).
All of a budget's points enter its parabola, as in Hoffmann et al.

Guards (``guard``), in order; the first that fails is the budget's reason:

- "too few points": fewer than ``min_points`` points or fewer than 3 distinct N;
- "non-convex": kappa <= 0, the parabola has no minimum;
- "off-centre": the vertex lies outside the sampled N range (an extrapolated optimum);
- "one-sided": fewer than ``min_side`` points below or above the vertex.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["BudgetFit", "bootstrap_vertices", "fit_budget", "guard", "parabolas"]


class BudgetFit(NamedTuple):
    """One budget's parabola: ``log_n_opt`` and ``loss_opt`` are NaN without a minimum
    (too few points, non-convex); ``reason`` is "" for a kept budget."""

    n_points: int
    curvature: float
    log_n_opt: float
    loss_opt: float
    reason: str


def parabolas(x: np.ndarray, y: np.ndarray, centre: float) -> tuple[np.ndarray, ...]:
    """Least-squares parabolas y ≈ p0 + p1 u + p2 u², u = x - centre, of each row of x, y
    (B, n), by the batched 3x3 normal equations. Returns (curvature p2, vertex x, vertex
    y), each (B,), NaN for a row with fewer than 3 distinct x."""
    u = x - centre
    powers = np.stack([np.ones_like(u), u, u * u, u**3, u**4], axis=-1).sum(axis=1)  # (B, 5)
    rhs = np.stack([y, y * u, y * u * u], axis=-1).sum(axis=1)  # (B, 3)
    gram = powers[:, [[0, 1, 2], [1, 2, 3], [2, 3, 4]]]  # (B, 3, 3)
    distinct = 1 + np.sum(np.diff(np.sort(x, axis=1), axis=1) > 0, axis=1)
    ok = distinct >= 3
    gram[~ok] = np.eye(3)
    p0, p1, p2 = np.linalg.solve(gram, rhs[..., None])[..., 0].T
    with np.errstate(divide="ignore", invalid="ignore"):
        vx = -p1 / (2 * p2)
        vy = p0 - p1 * p1 / (4 * p2)
    nan = np.where(ok, 1.0, np.nan)
    return p2 * nan, (centre + vx) * nan, vy * nan


def guard(x: np.ndarray, curv: float, vx: float, min_points: int, min_side: int) -> str:
    """Why a budget (x = ln N of its points) gives no usable optimum ("" when it does)."""
    n, distinct = x.size, np.unique(x).size
    if n < min_points or distinct < 3:
        return f"too few points: {n} point(s), {distinct} distinct N (need >= {min_points}, 3)"
    if not curv > 0:
        return f"non-convex: curvature {curv:.3g} <= 0, no minimum"
    if not x.min() <= vx <= x.max():
        lo, hi = np.exp(x.min()), np.exp(x.max())
        return f"off-centre: vertex N {np.exp(vx):.3g} outside the sampled N [{lo:.3g}, {hi:.3g}]"
    below, above = int(np.sum(x < vx)), int(np.sum(x > vx))
    if below < min_side or above < min_side:
        return (
            f"one-sided: {below} point(s) below and {above} above the vertex "
            f"(need >= {min_side} each side)"
        )
    return ""


def _xy(N: np.ndarray, loss: np.ndarray, log_loss: bool) -> tuple[np.ndarray, np.ndarray]:
    return np.log(N), np.log(loss) if log_loss else loss


def fit_budget(
    N: np.ndarray, loss: np.ndarray, *, log_loss: bool, min_points: int, min_side: int
) -> BudgetFit:
    """The parabola of one budget's points and the guard's verdict on it."""
    x, y = _xy(N, loss, log_loss)
    curv = vx = vy = float("nan")
    if x.size:
        curv, vx, vy = (float(v[0]) for v in parabolas(x[None], y[None], float(x.mean())))
    reason = guard(x, curv, vx, min_points, min_side)
    if reason.startswith(("too few", "non-convex")):
        vx = vy = float("nan")
    return BudgetFit(int(x.size), curv, vx, float(np.exp(vy)) if log_loss else vy, reason)


def bootstrap_vertices(
    N: np.ndarray, loss: np.ndarray, rng: np.random.Generator, n_boot: int, *, log_loss: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``n_boot`` resamples of one budget's points (with replacement, all at once): each
    resample's ln N_opt and loss_opt (n_boot,), NaN where its parabola is not convex or
    its vertex leaves the budget's sampled N range."""
    x, y = _xy(N, loss, log_loss)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    curv, vx, vy = parabolas(x[idx], y[idx], float(x.mean()))
    ok = (curv > 0) & (vx >= x.min()) & (vx <= x.max())
    with np.errstate(over="ignore"):
        vy = np.exp(vy) if log_loss else vy
    return np.where(ok, vx, np.nan), np.where(ok, vy, np.nan)
