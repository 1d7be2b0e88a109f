"""Batched projected L-BFGS: many independent box-constrained minimisations at once.

Each row of ``x0`` (S, P) is its own problem (a grid start, or a bootstrap resample);
one call to ``fg`` evaluates F and dF for a block of rows, so the numpy work is
vectorised over rows instead of looping scipy over them. Per row this is standard
L-BFGS (Nocedal & Wright, Alg. 7.4, two-loop recursion, memory m) with:

- bounds by projection: components at a bound whose step points outward are frozen,
  trial points are clipped into the box (a projected quasi-Newton step);
- a backtracking Armijo line search (c1 = 1e-4, step halved, at most ``max_ls`` tries);
- curvature pairs with s'y <= 1e-10 |s||y| skipped (their rho set to 0, a no-op);
- stop per row when the projected gradient's max-norm <= gtol, when an accepted step
  lowers F by <= ftol * |F|, when the line search fails, or at ``maxiter``.

Rows that have stopped are dropped from the active set, so late iterations are cheap.
The fitter polishes the best rows with scipy's L-BFGS-B afterwards (fit/fit.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["BatchResult", "lbfgs_batched", "outward", "projected_grad"]

FG = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""fg(x (k, P), rows (k,) int) -> (F (k,), dF (k, P)); ``rows`` index the problems."""


@dataclass(frozen=True)
class BatchResult:
    x: np.ndarray  # (S, P) final points
    f: np.ndarray  # (S,) final objective
    n_iter: np.ndarray  # (S,) iterations taken
    converged: np.ndarray  # (S,) bool: stopped on gtol/ftol (not maxiter / failed search)


def outward(x: np.ndarray, g: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(k, P) bool: coordinates at a bound whose descent direction -g leaves the box."""
    return ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))


def projected_grad(x: np.ndarray, g: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The gradient with its ``outward`` components zeroed (k, P)."""
    return np.where(outward(x, g, lo, hi), 0.0, g)


def lbfgs_batched(
    fg: FG,
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    maxiter: int = 500,
    m: int = 10,
    gtol: float = 1e-9,
    ftol: float = 1e-12,
    max_ls: int = 30,
) -> BatchResult:
    """Minimise S independent problems from ``x0`` (S, P) inside the box [lo, hi] (P,)."""
    x = np.clip(np.array(x0, dtype=float), lo, hi)
    S, P = x.shape
    f, g = fg(x, np.arange(S))
    s_hist = np.zeros((S, m, P))
    y_hist = np.zeros((S, m, P))
    rho = np.zeros((S, m))
    gamma = np.zeros(S)  # initial inverse-Hessian scale; 0 -> first step -g/|g|
    n_iter = np.zeros(S, dtype=int)
    converged = np.zeros(S, dtype=bool)
    active = np.isfinite(f)

    for it in range(maxiter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        xa, fa, ga = x[idx], f[idx], g[idx]
        pg = projected_grad(xa, ga, lo, hi)
        done = np.max(np.abs(pg), axis=1) <= gtol
        if done.any():
            converged[idx[done]] = True
            active[idx[done]] = False
            idx, xa, fa, ga, pg = idx[~done], xa[~done], fa[~done], ga[~done], pg[~done]
            if idx.size == 0:
                break
        pos = it % m
        # Two-loop recursion, newest pair first (all active rows step in lockstep).
        q = pg.copy()
        alphas = np.zeros((idx.size, m))
        for j in range(m):
            i = (pos - 1 - j) % m
            a_j = rho[idx, i] * np.einsum("kp,kp->k", s_hist[idx, i], q)
            q -= a_j[:, None] * y_hist[idx, i]
            alphas[:, j] = a_j
        gam = gamma[idx]
        first = gam <= 0
        gam = np.where(first, 1.0 / np.maximum(np.linalg.norm(pg, axis=1), 1e-300), gam)
        r = gam[:, None] * q
        for j in reversed(range(m)):
            i = (pos - 1 - j) % m
            b_j = rho[idx, i] * np.einsum("kp,kp->k", y_hist[idx, i], r)
            r += s_hist[idx, i] * (alphas[:, j] - b_j)[:, None]
        d = -r
        d[outward(xa, -d, lo, hi)] = 0.0  # steps out of the box from a bound
        slope = np.einsum("kp,kp->k", ga, d)
        bad = ~(slope < 0)
        if bad.any():  # not a descent direction: fall back to projected steepest descent
            d[bad] = -pg[bad] * gam[bad, None]
            slope[bad] = np.einsum("kp,kp->k", ga[bad], d[bad])
        # Backtracking Armijo line search on the projected path.
        t = np.ones(idx.size)
        x_new, f_new, g_new = xa.copy(), fa.copy(), ga.copy()
        ok_any = np.zeros(idx.size, dtype=bool)
        pending = np.arange(idx.size)
        for _ in range(max_ls):
            xt = np.clip(xa[pending] + t[pending, None] * d[pending], lo, hi)
            ft, gt = fg(xt, idx[pending])
            decrease = np.einsum("kp,kp->k", ga[pending], xt - xa[pending])
            ok = np.isfinite(ft) & (ft <= fa[pending] + 1e-4 * decrease)
            acc = pending[ok]
            x_new[acc], f_new[acc], g_new[acc] = xt[ok], ft[ok], gt[ok]
            ok_any[acc] = True
            pending = pending[~ok]
            if pending.size == 0:
                break
            t[pending] *= 0.5
        failed = ~ok_any
        if failed.any():  # no decrease possible along d: stop these rows where they are
            converged[idx[failed]] = np.max(np.abs(pg[failed]), axis=1) <= 1e3 * gtol
            active[idx[failed]] = False
        s = x_new - xa
        y = g_new - ga
        sy = np.einsum("kp,kp->k", s, y)
        yy = np.einsum("kp,kp->k", y, y)
        valid = ok_any & (sy > 1e-10 * np.linalg.norm(s, axis=1) * np.sqrt(yy))
        s_hist[idx, pos] = s
        y_hist[idx, pos] = y
        rho[idx, pos] = np.where(valid, 1.0 / np.where(valid, sy, 1.0), 0.0)
        gamma[idx] = np.where(valid, sy / np.where(valid, yy, 1.0), gamma[idx])
        x[idx], f[idx], g[idx] = x_new, f_new, g_new
        n_iter[idx] += 1
        small = ok_any & (fa - f_new <= ftol * np.maximum(np.abs(fa), 1e-300))
        converged[idx[small]] = True
        active[idx[small]] = False
    return BatchResult(x=x, f=f, n_iter=n_iter, converged=converged)
