"""Variable-projection starts for the Chinchilla law L = E + A/N^alpha + B/D^beta.

At fixed exponents (alpha, beta) the law is linear in (E, A, B): L = X c with the design
X = [1, N^-alpha, D^-beta] (n, 3) and c = (E, A, B) >= 0. Variable projection (Golub &
Pereyra 1973, "The differentiation of pseudo-inverses and nonlinear least squares
problems", SIAM J. Numer. Anal. 10(2), 413-432; used for scaling laws in arXiv
2603.22339) eliminates c by a linear solve and leaves a 2-D problem in (alpha, beta).

The fit's objective is Huber on log residuals (Hoffmann et al. 2022, arXiv 2203.15556;
Besiroglu et al. 2024, arXiv 2404.10102), in which c does NOT enter linearly. So the
projection here is used honestly, as a start generator only:

1. on a grid of (alpha, beta) (``EXP_GRID``: 0 to 3 by 0.05; ``alpha = beta`` on its
   diagonal when one is tied to the other), c solves the non-negative weighted least
   squares  min_{c >= 0} SUM_i w_i (X_i c - L_i)^2  with w_i = v_i / L_i^2 in log space
   (v_i the user's point weights): the relative residual (Lhat - L)/L is the log residual
   to first order, so this is the log-space least-squares fit at those exponents; in
   linear space w_i = v_i. The 3-variable NNLS is solved exactly by enumerating the 7
   non-empty supports (Lawson & Hanson 1974, "Solving Least Squares Problems", ch. 23:
   the NNLS solution is the unconstrained LS solution on its support, and it is the
   feasible support solution of least residual); all grid points at once from 3x3 Gram
   matrices, which are separable in alpha and beta (the N^-alpha D^-beta block is one
   matrix product).
2. The grid's local minima of the projected residual (8-neighbourhood), best first, then
   the lowest other points, give ``VARPRO_KEEP`` = 8 starts (E, A, B, alpha, beta); a
   zero coefficient starts at its box's lower bound.
3. The existing local solver (solvers/search.py) minimises the fit's real objective from
   those starts: float64 Levenberg-Marquardt to float64's resolution (``CONTINUE_FTOL``),
   then the L-BFGS-B polish; the float32 screen is skipped (8 starts need no ranking).
   Measured on Epoch's data: every one of the 8 starts reaches the 4,500-start grid's
   optimum (to 1e-14 relative), so the polish runs once (``search.distinct_best``). The
   local solver, not the start generator, dominates the time: LM creeps along Epoch's
   flat A-B valley (about 110 iterations to 1e-15), as it does from the grid's 64
   continued starts. The whole fit is 7.7-8.1x faster than the grid's (median CPU over
   11-21 interleaved pairs, BLAS on one thread; bench/varpro_speed.py).

Applies when the law is Chinchilla with A, B, E free and untied (alpha and beta free, or
tied to each other); elsewhere ``fit_law`` uses the start grid (fit/fit.py).
"""

from __future__ import annotations

import itertools

import numpy as np

from analysis.laws.fit_objective import Objective
from analysis.laws.laws import Chinchilla

__all__ = [
    "EXP_GRID",
    "VARPRO_KEEP",
    "projected_grid",
    "varpro_applies",
    "varpro_starts",
]

EXP_GRID = np.round(np.arange(0.05, 3.0 + 1e-9, 0.05), 10)  # (60,) alpha, beta values
"""No exponent 0: N^0 is a second constant beside E, and a start there stays a constant
(alpha stuck at its bound 0) in fits that tie with the E representation."""
VARPRO_KEEP = 8
_DET_MIN = 1e-10  # a column-scaled Gram matrix with a smaller determinant is singular
_LINEAR = ("E", "A", "B")
_SUPPORTS = [s for k in (1, 2, 3) for s in itertools.combinations(range(3), k)]


def varpro_applies(obj: Objective, names: tuple[str, ...]) -> bool:
    """Whether ``obj`` (its free coordinates ``names``) is a Chinchilla fit with A, B, E
    free and untied and alpha, beta free (possibly tied to each other)."""
    law = obj.law
    if not isinstance(law, Chinchilla) or obj.free.size != law.n_params:
        return False
    tied = len(names) == 4
    if tied:
        return set(names) == {"A", "B", "E", "alpha"} or set(names) == {"A", "B", "E", "beta"}
    return len(names) == 5


def _pairs(tied: bool) -> np.ndarray:
    """(G, 2) (alpha, beta) grid points, alpha-major; the diagonal when tied."""
    if tied:
        return np.stack([EXP_GRID, EXP_GRID], axis=1)
    a, b = np.meshgrid(EXP_GRID, EXP_GRID, indexing="ij")
    return np.stack([a.ravel(), b.ravel()], axis=1)


def _gram(obj: Objective, tied: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """Gram matrices M (G, 3, 3) = X'WX and moments v (G, 3) = X'WL over the grid, and
    L'WL, for X = [1, N^-alpha, D^-beta] (columns in the order E, A, B)."""
    L = np.exp(obj.logy)  # (n,)
    pw = np.ones_like(L) if obj.point_weights is None else obj.point_weights
    w = pw / L**2 if obj.space == "log" else pw  # (n,)
    pN = np.exp(-np.outer(EXP_GRID, np.log(obj.X["N"])))  # (K, n) N^-alpha
    pD = np.exp(-np.outer(EXP_GRID, np.log(obj.X["D"])))  # (K, n) D^-beta
    s1 = float(w.sum())
    sN, sD = pN @ w, pD @ w  # (K,)
    sNN, sDD = (pN**2) @ w, (pD**2) @ w  # (K,)
    sL, sNL, sDL = float(w @ L), pN @ (w * L), pD @ (w * L)
    if tied:
        sND = np.einsum("kn,kn,n->k", pN, pD, w)  # (K,) diagonal only
        ia = ib = np.arange(EXP_GRID.size)
    else:
        sND = ((pN * w) @ pD.T).ravel()  # (K*K,) alpha-major
        ia, ib = (g.ravel() for g in np.meshgrid(*(np.arange(EXP_GRID.size),) * 2, indexing="ij"))
    G = ia.size
    M = np.empty((G, 3, 3))
    M[:, 0, 0] = s1
    M[:, 0, 1] = M[:, 1, 0] = sN[ia]
    M[:, 0, 2] = M[:, 2, 0] = sD[ib]
    M[:, 1, 1] = sNN[ia]
    M[:, 2, 2] = sDD[ib]
    M[:, 1, 2] = M[:, 2, 1] = sND
    v = np.stack([np.full(G, sL), sNL[ia], sDL[ib]], axis=1)
    return M, v, float(w @ L**2)


def _solve_scaled(Mn: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve Mn c = b for unit-diagonal symmetric Mn (G, k, k), k <= 3, by the adjugate;
    (c (G, k), ok (G,)): ok is False where det(Mn) <= ``_DET_MIN`` (collinear columns,
    e.g. N^0 = 1 beside the constant: such a support is left to a smaller one)."""
    k = Mn.shape[1]
    if k == 1:
        return b.copy(), np.ones(b.shape[0], dtype=bool)
    if k == 2:
        m01 = Mn[:, 0, 1]
        det = 1.0 - m01**2
        ok = det > _DET_MIN
        det = np.where(ok, det, 1.0)
        c = np.stack([b[:, 0] - m01 * b[:, 1], b[:, 1] - m01 * b[:, 0]], axis=1) / det[:, None]
        return c, ok
    adj = np.empty_like(Mn)
    for i in range(3):
        for j in range(3):
            r = [x for x in range(3) if x != j]
            q = [x for x in range(3) if x != i]
            minor = Mn[:, r[0], q[0]] * Mn[:, r[1], q[1]] - Mn[:, r[0], q[1]] * Mn[:, r[1], q[0]]
            adj[:, i, j] = (-1) ** (i + j) * minor
    det = np.einsum("gj,gj->g", Mn[:, 0, :], adj[:, :, 0])
    ok = det > _DET_MIN
    c = np.einsum("gij,gj->gi", adj, b) / np.where(ok, det, 1.0)[:, None]
    return c, ok


def _nnls3(M: np.ndarray, v: np.ndarray, yy: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact NNLS on every grid point from its Gram matrix M (G, 3, 3) and moments v (G, 3):
    (coefficients c (G, 3) >= 0, residual sums of squares (G,))."""
    G = M.shape[0]
    best_c = np.zeros((G, 3))
    best_r = np.full(G, yy)  # the empty support: c = 0
    for s in _SUPPORTS:
        idx = np.array(s)
        Ms, vs = M[:, idx[:, None], idx[None, :]], v[:, idx]  # (G, k, k), (G, k)
        d = np.sqrt(np.maximum(np.diagonal(Ms, axis1=1, axis2=2), 1e-300))  # (G, k) scaling
        cn, ok = _solve_scaled(Ms / d[:, :, None] / d[:, None, :], vs / d)
        cs = cn / d  # (G, k)
        rss = yy - np.einsum("gi,gi->g", cs, vs)
        ok &= np.all(cs >= 0, axis=1) & (rss < best_r)
        best_r[ok] = rss[ok]
        best_c[ok] = 0.0
        best_c[np.ix_(ok, idx)] = cs[ok]
    return best_c, np.maximum(best_r, 0.0)


def projected_grid(obj: Objective, tied: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The projected problem over the grid: ((alpha, beta) (G, 2), (E, A, B) (G, 3) >= 0,
    weighted residual sum of squares (G,))."""
    M, v, yy = _gram(obj, tied)
    c, rss = _nnls3(M, v, yy)
    return _pairs(tied), c, rss


def _local_minima(rss: np.ndarray, tied: bool) -> np.ndarray:
    """Flat indices of grid points no higher than any of their (8- or 2-) neighbours."""
    K = EXP_GRID.size
    r = rss.reshape((K,) if tied else (K, K))
    pad = np.pad(r, 1, constant_values=np.inf)
    is_min = np.ones(r.shape, dtype=bool)
    for off in itertools.product((-1, 0, 1), repeat=r.ndim):
        if any(off):
            sl = tuple(slice(1 + o, 1 + o + n) for o, n in zip(off, r.shape))
            is_min &= r <= pad[sl]
    return np.flatnonzero(is_min.ravel())


def varpro_starts(
    obj: Objective, names: tuple[str, ...], lo: np.ndarray, hi: np.ndarray, keep: int = VARPRO_KEEP
) -> np.ndarray:
    """Up to ``keep`` internal start points (S, P_free) for the free coordinates ``names``
    (module docstring, steps 1-2), clipped into the box [lo, hi]."""
    tied = len(names) == 4
    ab, c, rss = projected_grid(obj, tied)
    minima = _local_minima(rss, tied)
    minima = minima[np.argsort(rss[minima], kind="stable")]
    rest = np.setdiff1d(np.argsort(rss, kind="stable")[: keep + minima.size], minima)
    rest = rest[np.argsort(rss[rest], kind="stable")]
    pick = np.concatenate([minima, rest])[:keep]
    with np.errstate(divide="ignore"):
        logc = np.log(c[pick])  # (S, 3): log E, log A, log B; -inf for a zero coefficient
    vals = {"E": logc[:, 0], "A": logc[:, 1], "B": logc[:, 2]}
    vals["alpha"], vals["beta"] = ab[pick, 0], ab[pick, 1]
    z = np.stack([vals[p] for p in names], axis=1)
    return np.clip(np.where(np.isfinite(z), z, -np.inf), lo, hi)

