"""The multi-start search of ``fit_law`` (fit/fit.py): screen every start, continue the best,
polish the best of those. Each stage reports to, and stops on, the fit's clock
(progress.FitClock: progress output and ``time_budget_s``).

1. Screen: every start takes up to ``SCREEN_ITERS`` = 12 iterations of batched projected
   Levenberg-Marquardt (levenberg.py) on the Gauss-Newton/IRLS normal equations
   (Objective.normal_equations), all starts vectorised together; every
   ``SCREEN_HALVE_EVERY`` = 2 iterations the worse half of the starts still moving stop
   (successive halving), down to ``SCREEN_MIN_ACTIVE`` x ``keep`` = 256. The screen is
   evaluated in float32 (``SCREEN_DTYPE``): it only ranks starts, float32 halves the cost
   of the law's exp/log over (starts x points), and its ~1e-7 relative error is far below
   the objective gaps between basins. A start also stops once a step lowers the objective
   by no more than ``SCREEN_FTOL`` = 1e-6 relative (float32's resolution). Measured on
   Epoch's data, on DataConstrained tables of 27 to 182 runs (noise 0.2% to 3%) and with
   ties, weights, MSE and linear residuals: 2 screen iterations already put a start of
   the optimum's basin among the 64 kept (every one of the 64 reached it for the
   DataConstrained tables); 12 leave a wide margin at little cost, as halving makes the
   late iterations cheap.
2. Continue: the ``KEEP`` = 64 lowest-objective rows run on in float64 LM until a step
   lowers F by no more than ``CONTINUE_FTOL`` = 1e-15 relative (float64's resolution) or
   no step lowers it at all (at most ``CONTINUE_ITERS``). No absolute gradient threshold:
   on a flat valley (Epoch's A-B one, a stage-2 DataConstrained fit's R_D*) IRLS creeps by
   steps that gtol 1e-9 or ftol 1e-12 would take for convergence, 1e-12 to 2e-12 relative
   short of the optimum.
3. Polish: the ``POLISH`` = 4 best of those with distinct end points (more than
   ``POLISH_SAME`` = 1e-6 apart in every internal coordinate's max-norm: rows LM took to
   one point would polish to one optimum) go through scipy's L-BFGS-B (analytic gradient,
   ftol 1e-15, gtol 1e-10); the lowest objective wins. On Epoch's data all 8 varpro starts
   end at one point, so one polish replaces four (solvers/varpro.py).

When the time budget runs out, the stage running stops where it is; the later stages are
skipped (the screen's kept rows are rescored in float64) and the best point so far stands.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from analysis.laws.fit_objective import Objective
from analysis.progress import FitClock
from analysis.solvers.levenberg import lm_batched
from analysis.solvers.multistart import BatchResult

__all__ = [
    "CONTINUE_FTOL",
    "CONTINUE_ITERS",
    "KEEP",
    "POLISH",
    "SCREEN_DTYPE",
    "SCREEN_FTOL",
    "SCREEN_HALVE_EVERY",
    "SCREEN_ITERS",
    "SCREEN_MIN_ACTIVE",
    "distinct_best",
    "polish_best",
    "polish_one",
    "screen_and_continue",
    "search",
]

SCREEN_ITERS = 12
SCREEN_FTOL = 1e-6
SCREEN_DTYPE = np.float32
SCREEN_HALVE_EVERY = 2
SCREEN_MIN_ACTIVE = 4  # times keep
KEEP = 64
CONTINUE_ITERS = 500
CONTINUE_FTOL = 1e-15
POLISH = 4
POLISH_SAME = 1e-6


def search(
    obj: Objective,
    z0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    clock: FitClock,
    screen_iters: int = SCREEN_ITERS,
    keep: int = KEEP,
    polish: int = POLISH,
) -> tuple[BatchResult, tuple[np.ndarray, float, bool]]:
    """All three stages from starts ``z0`` (S, P) in the box [lo, hi]: (the continued rows,
    (z, F, converged) of the best polished one)."""
    cont = screen_and_continue(obj, z0, lo, hi, clock, screen_iters, keep)
    return cont, polish_best(obj, cont, lo, hi, clock, polish)


def polish_one(
    obj: Objective, z0: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, float, bool]:
    """scipy's L-BFGS-B from ``z0`` (P,) with the analytic gradient; (z, F, success)."""

    def fun(z):
        f, g = obj.value_and_grad(z[None, :])
        return float(f[0]), g[0]

    res = minimize(
        fun,
        z0,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20_000, "maxls": 50},
    )
    return res.x, float(res.fun), bool(res.success)


def screen_and_continue(
    obj: Objective,
    z0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    clock: FitClock,
    screen_iters: int,
    keep: int,
) -> BatchResult:
    """Steps 1 and 2 of the module docstring: the float32 LM screen of all starts (S, P),
    then float64 LM on the ``keep`` best to convergence. Returns the continued rows, or
    the kept screened rows rescored in float64 when the time budget cut the screen."""
    screen = obj.astype(SCREEN_DTYPE)
    screened = lm_batched(
        lambda z, rows: screen.normal_equations(z),
        z0,
        lo,
        hi,
        maxiter=screen_iters,
        gtol=0.0,
        ftol=SCREEN_FTOL,
        halve_every=SCREEN_HALVE_EVERY,
        min_active=SCREEN_MIN_ACTIVE * keep,
        monitor=clock.monitor("screen", screen_iters, z0.shape[0]),
    )
    order = np.argsort(np.where(np.isfinite(screened.f), screened.f, np.inf))[:keep]
    z_kept = screened.x[order]
    if clock.cut is not None:
        with np.errstate(all="ignore"):
            f = obj.value_and_grad(z_kept, grad=False)[0]
        n = np.zeros(f.size, dtype=int)
        return BatchResult(x=z_kept, f=f, n_iter=n, converged=n.astype(bool))
    return lm_batched(
        lambda z, rows: obj.normal_equations(z),
        z_kept,
        lo,
        hi,
        maxiter=CONTINUE_ITERS,
        gtol=0.0,
        ftol=CONTINUE_FTOL,
        monitor=clock.monitor("continue", CONTINUE_ITERS, z_kept.shape[0]),
    )


def distinct_best(cont: BatchResult, n: int, tol: float = POLISH_SAME) -> np.ndarray:
    """Indices of the ``n`` lowest-objective continued rows whose end points differ: a row
    within ``tol`` (max-norm over the internal coordinates) of a better kept one is the
    same end point, which L-BFGS-B would polish to the same optimum, and is skipped."""
    order = np.argsort(np.where(np.isfinite(cont.f), cont.f, np.inf), kind="stable")
    kept: list[int] = []
    for j in order:
        if len(kept) == n:
            break
        if not kept or np.min(np.max(np.abs(cont.x[kept] - cont.x[j]), axis=1)) > tol:
            kept.append(int(j))
    return np.array(kept, dtype=int)


def polish_best(
    obj: Objective, cont: BatchResult, lo: np.ndarray, hi: np.ndarray, clock: FitClock, n: int
) -> tuple[np.ndarray, float, bool]:
    """Step 3: scipy-polish the ``n`` best continued rows; (z, F, converged) of the best.
    Once the time budget is spent, no further row is polished (the best so far stands)."""
    best = distinct_best(cont, max(n, 1))
    report = clock.monitor("polish", best.size, best.size)
    cands: list[tuple[np.ndarray, float, bool]] = []
    for i, j in enumerate(best):
        if clock.spent:
            clock.stop(f"polish {i} of {best.size}")
            break
        cands.append(polish_one(obj, cont.x[j], lo, hi))
        report(i + 1, np.array([c[1] for c in cands]), best.size - i - 1)
    if not cands:  # the budget ran out before the polish: the best continued row stands
        return cont.x[best[0]], float(cont.f[best[0]]), False
    return min(cands, key=lambda c: c[1])
