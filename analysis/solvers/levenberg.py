"""Batched projected Levenberg-Marquardt: many box-constrained robust least-squares fits at once.

Each row of ``x0`` (S, P) is its own problem (a grid start). One call to ``ne`` returns,
for a block of rows, the objective F, its gradient g = J^T u and the Gauss-Newton matrix
H = J^T diag(c) J (objective.Objective.normal_equations; for Huber's loss c is the IRLS
weight, Holland & Welsch 1977), so all rows step together in numpy. Per row and iteration:

1. coordinates at a bound whose gradient points out of the box are frozen (their step is
   0), as in the projected L-BFGS of multistart.py;
2. the step d solves (H + lam diag(D)) d = -g on the other coordinates: Levenberg's (1944)
   damping with Marquardt's (1963) scaling D = diag(H), floored at ``DIAG_FLOOR`` times its
   largest entry so a parameter the data do not move still gets a finite step;
3. the trial point is x + d projected onto the box (a projected LM step: Kanzow,
   Yamashita & Fukushima 2004, J. Comput. Appl. Math. 172, 375-397);
4. it is accepted iff F decreases. lam follows the gain ratio q = (actual decrease) /
   (decrease predicted by the quadratic model at the projected step) by Nielsen's rule
   (Nielsen 1999, IMM-REP-1999-05; Madsen, Nielsen & Tingleff 2004, "Methods for
   non-linear least squares problems", Alg. 3.16): on success
   lam *= max(1/3, 1 - (2q - 1)^3), nu = 2; on failure lam *= nu, nu *= 2.

A row stops when its projected gradient's max-norm is <= gtol, when an accepted step's
actual and predicted decreases are both <= ftol |F| (MINPACK's ftol test, More 1978), when
lam exceeds ``LAM_MAX`` (no decrease along ever shorter, steepest-descent-like steps: it
sits at a minimum to the evaluation's precision), or at ``maxiter``. Stopped rows leave the
active set, so late iterations are cheap. A Gauss-Newton step uses the curvature that
L-BFGS must learn over many iterations: on a 107-run DataConstrained table the best of the
32,400 grid starts was 0.4% above the optimum after 6 float32 LM iterations, and 8x above
it after the 25 L-BFGS iterations of the screen this replaced (fit/fit.py; bench/fit_speed.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from analysis.solvers.multistart import BatchResult, outward

__all__ = ["DIAG_FLOOR", "LAM0", "LAM_MAX", "LAM_MIN", "NE", "Monitor", "lm_batched"]

NE = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""ne(x (k, P), rows (k,) int) -> (F (k,), g (k, P), H (k, P, P)); ``rows`` index problems."""

Monitor = Callable[[int, np.ndarray, int], bool]
"""monitor(iterations done, F (S,) so far, rows still active) -> True to stop every row now."""

LAM0 = 1e-3
LAM_MIN = 1e-15  # keeps lam D > 0 where H is singular (a parameter the data ignore)
LAM_MAX = 1e16
DIAG_FLOOR = 1e-10


def _steps(H: np.ndarray, g: np.ndarray, frozen: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Damped Gauss-Newton steps (k, P): (H + lam D) d = -g on the free coordinates."""
    P = g.shape[1]
    free = (~frozen).astype(float)  # (k, P)
    diag = np.diagonal(H, axis1=1, axis2=2)  # (k, P)
    top = np.max(np.where(frozen, 0.0, diag), axis=1, keepdims=True)  # (k, 1)
    D = np.maximum(diag, DIAG_FLOOR * np.where(top > 0, top, 1.0))
    A = H * free[:, :, None] * free[:, None, :]  # frozen rows/columns cleared
    idx = np.arange(P)
    A[:, idx, idx] += lam[:, None] * D * free + (1.0 - free)  # frozen: identity
    rhs = -g * free
    try:
        return np.linalg.solve(A, rhs[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:  # a row singular to working precision: pseudo-inverse
        return np.matmul(np.linalg.pinv(A), rhs[:, :, None])[:, :, 0]


def _finite(g: np.ndarray, H: np.ndarray) -> np.ndarray:
    """(k,) bool: the row's gradient (k, P) and Gauss-Newton matrix (k, P, P) are finite."""
    return np.all(np.isfinite(g), axis=1) & np.all(np.isfinite(H), axis=(1, 2))


def _halve(active: np.ndarray, f: np.ndarray, min_active: int) -> None:
    """Deactivate the worse half of the active rows (by F, in place), keeping at least
    ``min_active`` of them active."""
    idx = np.flatnonzero(active)
    n_keep = max(idx.size - idx.size // 2, min_active)
    if n_keep < idx.size:
        order = np.argsort(f[idx], kind="stable")
        active[idx[order[n_keep:]]] = False


def lm_batched(
    ne: NE,
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    maxiter: int = 200,
    gtol: float = 1e-9,
    ftol: float = 1e-12,
    halve_every: int = 0,
    min_active: int = 0,
    monitor: Monitor | None = None,
) -> BatchResult:
    """Minimise S independent problems from ``x0`` (S, P) inside the box [lo, hi] (P,).

    ``halve_every`` > 0: successive halving (Jamieson & Talwalkar 2016, AISTATS; the rule
    of Hyperband, Li et al. 2018, JMLR 18): after every ``halve_every`` iterations the
    worse half of the active rows (by F) stop where they are, never leaving fewer than
    ``min_active`` active. ``monitor`` is called after every iteration; when it returns
    True all rows stop where they are (a fit's time budget, fit/fit.py)."""
    x = np.clip(np.array(x0, dtype=float), lo, hi)
    S = x.shape[0]
    with np.errstate(all="ignore"):  # wild starts overflow exp(); such rows are dropped
        f, g, H = ne(x, np.arange(S))
    lam = np.full(S, LAM0)
    nu = np.full(S, 2.0)
    n_iter = np.zeros(S, dtype=int)
    converged = np.zeros(S, dtype=bool)
    active = np.isfinite(f) & _finite(g, H)
    for it in range(maxiter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        xa, fa, ga, Ha = x[idx], f[idx], g[idx], H[idx]
        frozen = outward(xa, ga, lo, hi)  # at a bound, pushing outward: step 0
        pg = np.where(frozen, 0.0, ga)
        done = np.max(np.abs(pg), axis=1) <= gtol
        if done.any():
            converged[idx[done]] = True
            active[idx[done]] = False
            keep = ~done
            idx, xa, fa, ga, Ha = idx[keep], xa[keep], fa[keep], ga[keep], Ha[keep]
            frozen, pg = frozen[keep], pg[keep]
            if idx.size == 0:
                break
        d = _steps(Ha, ga, frozen, lam[idx])
        xt = np.clip(xa + d, lo, hi)
        step = xt - xa  # (k, P) the projected step
        Hs = np.einsum("kpq,kq->kp", Ha, step)
        predicted = -(np.einsum("kp,kp->k", ga, step) + 0.5 * np.einsum("kp,kp->k", step, Hs))
        with np.errstate(all="ignore"):
            ft, gt, Ht = ne(xt, idx)
        actual = fa - ft
        ok = (actual > 0) & np.isfinite(ft) & _finite(gt, Ht)
        q = np.where(predicted > 0, actual / np.where(predicted > 0, predicted, 1.0), -1.0)
        acc, rej = idx[ok], idx[~ok]
        x[acc], f[acc], g[acc], H[acc] = xt[ok], ft[ok], gt[ok], Ht[ok]
        shrink = np.maximum(1.0 / 3.0, 1.0 - (2.0 * np.minimum(q[ok], 1.0) - 1.0) ** 3)
        lam[acc] = np.maximum(lam[acc] * shrink, LAM_MIN)
        nu[acc] = 2.0
        lam[rej] *= nu[rej]
        nu[rej] *= 2.0
        n_iter[idx] += 1
        tol = ftol * np.abs(fa)
        flat = ok & (actual <= tol) & (predicted <= tol)
        converged[idx[flat]] = True
        stuck = lam[idx] > LAM_MAX
        converged[idx[stuck]] = np.max(np.abs(pg[stuck]), axis=1) <= 1e3 * gtol
        active[idx[flat | stuck]] = False
        if halve_every and (it + 1) % halve_every == 0:
            _halve(active, f, min_active)
        if monitor is not None and monitor(it + 1, f, int(active.sum())):
            break
    return BatchResult(x=x, f=f, n_iter=n_iter, converged=converged)
