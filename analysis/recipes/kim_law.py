"""Kim et al.'s recipe law L(x) = A / x^B + E, its least-squares fit and its Gauss-Newton
covariance: the one place the extrapolation check (``extrapolation``) and the data-efficiency
multiplier (``data_multiplier``) fit it.

Kim, Kotha, Liang, Hashimoto 2025, "Pre-training under infinite compute", arXiv 2509.14786:
the loss of a recipe against parameters, L(N) = A / N^B + E, and of the standard recipe
against unique tokens, L(U) = A / U^B + C. Here x = N / 1e6 or U / 1e6 (``SCALE``).

The fit minimises the (weighted) sum of squared errors of the loss itself (``fit_law(PowerLaw(),
loss="mse", space="linear")``; PowerLaw names B "alpha"). Two forms:

* ``floor=True``: A / x^B + E with A, E >= 0 (fit_law keeps A, E > 0 through their logs);
* ``floor=False``: the pure power law A / x^B (E fixed at 0), Muennighoff et al. 2023
  (arXiv 2305.16264) fit data-constrained losses without a floor too.

The law is linear in (A, E) at fixed B, so the least-squares problem is one-dimensional in B
(variable projection, Golub & Pereyra 1973): ``profile_fit`` minimises the profiled sum of
squares over a grid of B and refines the best cell by golden-section search, for many data
sets at once (a bootstrap's replicates). ``fit_kim`` polishes the 3-parameter fit with
``fit_law`` from that start (they agree to ~1e-9 in SSE; tests/analysis/test_kim_law.py).

Covariance (Seber & Wild 1989, "Nonlinear Regression", §2.1 and §5.1): with J (n, p) the
Jacobian of L in the natural parameters (A, B[, E]) at the optimum, W = diag(w),

    s^2 = SUM w_i r_i^2 / (n - p),   Cov = s^2 (J' W J)^-1,

    dL/dA = x^-B,   dL/dB = -A ln(x) x^-B,   dL/dE = 1.

It is a local (linearised) covariance: valid when the parameters are interior (not at a bound
A = 0 or E = 0) and the curvature of the model over the parameters' uncertainty is small.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from analysis import AnalysisInputError, PowerLaw, fit_law

__all__ = ["B_GRID", "MIN_SIZES", "MIN_SIZES_E", "SCALE", "LawFit", "fit_kim", "jacobian",
           "min_sizes", "min_sizes_e", "one_dof_flag", "profile_fit"]

SCALE = 1e6
"""x = N / SCALE (millions of parameters) or U / SCALE (millions of unique tokens). Every
A / x^B + E fit of a sweep uses it (the report, ``compare``, ``next``, the adaptive loop):
Kim et al. use billions; the unit rescales A only, and millions keep x near 1 at CPU scale."""
MIN_SIZES = 5
"""Sizes (distinct x) a 3-parameter fit needs before its asymptote is written with an
interval: two residual degrees of freedom (``min_sizes(3)``). With 3 sizes the three
parameters interpolate (no interval); with 4 the Wald interval rests on one residual degree
of freedom (t_0.975 = 12.7) and was not to be trusted: on the CPU twin's real runs the
adaptive loop's first intervals on 4 sizes (0.29-0.37 nats wide) missed the whole cache's
E in 5 of 10 arms, and a ranking decided on 4 sizes per recipe was wrong in 3 of 12
synthetic seeds; with 5 its first intervals covered E in 8 of 8 arms and no decision was
wrong (docs/adaptive.md). The one rule of the report, ``compare``, ``next`` and the loop."""


MIN_SIZES_E = 4
"""Sizes before a recipe's asymptote E is *written* with its interval: one residual degree of
freedom (``min_sizes_e(3)``). On 4 sizes the t interval (t_0.975 = 12.7 on 1 dof) is honest
but wide and rests on one scatter estimate, so it is printed flagged (``one_dof_flag``):
Kim et al.'s own K -> inf losses at their 4 sizes (150M-1.4B, Table 4 of arXiv 2509.14786)
give E = 3.169 with a 1-dof 95% CI of 3.02 to 3.32, the paper's 3.17 to the digit. Decisions
measured to go wrong on 4 sizes keep ``MIN_SIZES`` (the adaptive loop's stopping, ``next``'s
ranking, the paired bootstrap's size draws)."""


def min_sizes_e(n_free: int) -> int:
    """Sizes a fit with ``n_free`` free parameters needs before its asymptote is written with
    a (flagged, ``one_dof_flag``) interval: n_free + 1, one residual degree of freedom."""
    return int(n_free) + 1


def one_dof_flag(n: int, n_free: int, level: float = 0.95) -> str | None:
    """The flag of an asymptote fitted with one residual degree of freedom, or None."""
    if n - n_free != 1:
        return None
    from scipy import stats

    t = float(stats.t.ppf(0.5 + level / 2, 1))
    t2 = float(stats.t.ppf(0.5 + level / 2, 2))
    return (f"rests on 1 residual degree of freedom ({n} sizes, t = {t:.1f}); a size more "
            f"gives 2 (t = {t2:.2f}, an interval ~{t / t2:.0f}x narrower at the same scatter)")


def min_sizes(n_free: int) -> int:
    """Sizes a fit with ``n_free`` free parameters needs for an interval: n_free + 2 (two
    residual degrees of freedom; ``MIN_SIZES`` for A, B, E; 4 for A / K + C with B fixed)."""
    return int(n_free) + 2

B_GRID = np.geomspace(0.005, 8.0, 320)
"""Exponents the profiled sum of squares is evaluated on before the golden-section refine
(ratio 1.023 between neighbours; fit_law's box for the exponent is [0, 10])."""
_GOLDEN_ITERS = 48  # bracket of 2 grid cells (log width 0.046) shrinks to ~4e-12 in log B
_MAX_COND = 1e10  # column-scaled J'WJ worse conditioned than this: no covariance (nan)


@dataclass(frozen=True)
class LawFit:
    """A least-squares fit of A / x^B + E (``floor``) or A / x^B (E = 0, not ``floor``)."""

    A: float
    B: float
    E: float  # 0.0 for the pure power law
    floor: bool  # E free (>= 0) or fixed at 0
    sse: float  # SUM w_i (y_i - L(x_i))^2 at the optimum
    x: np.ndarray = field(repr=False)  # (n,) the law's variable, count / SCALE
    y: np.ndarray = field(repr=False)  # (n,) losses
    w: np.ndarray = field(repr=False)  # (n,) weights (ones when unweighted)
    cov: np.ndarray = field(repr=False)  # (p, p) Gauss-Newton covariance of the free
    # parameters (A, B[, E]), or (A, E) with B fixed; nan when singular
    fixed_B: bool = False  # B held at its value (A / x^B + E with A, E free; p = 2)

    @property
    def n(self) -> int:
        return int(self.x.size)

    @property
    def free(self) -> tuple[int, ...]:
        """Columns of (A, B, E) that are free: (0, 1, 2), (0, 1) or (0, 2) with B fixed."""
        if self.fixed_B:
            return (0, 2) if self.floor else (0,)
        return (0, 1, 2) if self.floor else (0, 1)

    @property
    def p(self) -> int:
        """Free parameters: 3 (A, B, E), 2 (A, B), or 2 (A, E) with B fixed."""
        return len(self.free)

    def var(self, name: str) -> float:
        """Variance of "A", "B" or "E" (0 for a fixed one, nan without a covariance)."""
        i = "ABE".index(name)
        if i not in self.free:
            return 0.0
        k = self.free.index(i)
        return float(self.cov[k, k])

    @property
    def dof(self) -> int:
        return self.n - self.p

    @property
    def s2(self) -> float:
        """Residual variance of a weight-1 point, SSE / (n - p) (nan without a residual dof)."""
        return self.sse / self.dof if self.dof > 0 else float("nan")

    @property
    def has_cov(self) -> bool:
        return bool(np.all(np.isfinite(self.cov)))

    def predict(self, x) -> np.ndarray:
        """L at x (m,) -> (m,)."""
        return self.A * np.asarray(x, dtype=float) ** -self.B + self.E

    def residuals(self) -> np.ndarray:
        """y - L(x), (n,)."""
        return self.y - self.predict(self.x)

    def jacobian(self, x) -> np.ndarray:
        """dL/d(A, B[, E]) at x (m,) -> (m, p)."""
        return jacobian(self.A, self.B, x)[:, list(self.free)]

    def mean_var(self, x) -> np.ndarray:
        """Delta-method variance of the fitted L at x (m,) -> (m,): g Cov g'."""
        g = self.jacobian(x)  # (m, p)
        return np.einsum("mi,ij,mj->m", g, self.cov, g)


def jacobian(A: float, B: float, x) -> np.ndarray:
    """dL/d(A, B, E) of A / x^B + E at x (m,) -> (m, 3)."""
    x = np.asarray(x, dtype=float)
    p = x ** -B
    return np.stack([p, -A * np.log(x) * p, np.ones_like(x)], axis=1)


def _solve(pp, ps, py, sy, yy, sw: float, floor: bool):
    """Weighted least-squares (A, E) >= 0 of y on [p, 1] from the sums p'Wp, p'W1, p'Wy,
    1'Wy, y'Wy, 1'W1 (broadcastable arrays) -> A, E, SSE.

    With the floor it is a two-variable non-negative least squares: the unconstrained
    solution when feasible, else the better of the two faces A = 0 and E = 0 (the objective
    is convex, so one of the three holds the constrained minimum)."""
    a1 = np.maximum(py / pp, 0.0)  # face E = 0
    sse1 = yy - 2 * a1 * py + a1 * a1 * pp
    if not floor:
        return a1, np.zeros_like(a1), np.maximum(sse1, 0.0)
    e2 = np.maximum(sy / sw, 0.0) * np.ones_like(a1)  # face A = 0
    sse2 = yy - 2 * e2 * sy + e2 * e2 * sw
    det = pp * sw - ps * ps
    with np.errstate(divide="ignore", invalid="ignore"):
        a0 = (sw * py - ps * sy) / det
        e0 = (pp * sy - ps * py) / det
    sse0 = yy - 2 * a0 * py - 2 * e0 * sy + a0 * a0 * pp + 2 * a0 * e0 * ps + e0 * e0 * sw
    inside = (a0 >= 0) & (e0 >= 0) & np.isfinite(sse0)
    face1 = sse1 <= sse2
    A = np.where(inside, a0, np.where(face1, a1, 0.0))
    E = np.where(inside, e0, np.where(face1, 0.0, e2))
    sse = np.where(inside, sse0, np.where(face1, sse1, sse2))
    return A, E, np.maximum(sse, 0.0)


def _coef_grid(P: np.ndarray, Y: np.ndarray, w: np.ndarray, floor: bool):
    """(A, E, SSE) each (R, G) for design columns P (G, n) (one per exponent) and data Y (R, n)."""
    Yw = Y * w
    return _solve((P * P * w).sum(1), (P * w).sum(1), Yw @ P.T, Yw.sum(1)[:, None],
                  (Y * Yw).sum(1)[:, None], float(w.sum()), floor)


def _coef_rows(P: np.ndarray, Y: np.ndarray, w: np.ndarray, floor: bool):
    """(A, E, SSE) each (R,) with one design column per data set: P (R, n), Y (R, n)."""
    Yw = Y * w
    return _solve((P * P * w).sum(1), (P * w).sum(1), (P * Yw).sum(1), Yw.sum(1),
                  (Y * Yw).sum(1), float(w.sum()), floor)


def profile_fit(x, Y, w=None, *, floor: bool = True):
    """Least-squares A / x^B + E (E >= 0, ``floor``) or A / x^B for each row of Y.

    x (n,) > 0; Y (n,) or (R, n); w (n,) weights or None. Returns (A, B, E, SSE), each (R,)
    (scalars' arrays of shape (1,) for a 1-D Y). B is searched on ``B_GRID`` and refined by
    golden-section search over the two cells around the best grid point, in log B."""
    x = np.asarray(x, dtype=float)
    Y = np.atleast_2d(np.asarray(Y, dtype=float))  # (R, n)
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float)
    logx = np.log(x)
    lb = np.log(B_GRID)  # (G,)
    _, _, sse = _coef_grid(np.exp(-np.outer(B_GRID, logx)), Y, w, floor)  # (R, G)
    i = np.argmin(sse, axis=1)  # (R,)
    lo = lb[np.maximum(i - 1, 0)]
    hi = lb[np.minimum(i + 1, lb.size - 1)]

    def f(logb: np.ndarray) -> np.ndarray:  # (R,) -> profiled SSE (R,)
        P = np.exp(-np.exp(logb)[:, None] * logx[None, :])  # (R, n): one exponent per row
        return _coef_rows(P, Y, w, floor)[2]

    g = (np.sqrt(5.0) - 1) / 2
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = f(c), f(d)
    for _ in range(_GOLDEN_ITERS):
        left = fc < fd  # minimum in [lo, d]
        hi = np.where(left, d, hi)
        lo = np.where(left, lo, c)
        new_c, new_d = hi - g * (hi - lo), lo + g * (hi - lo)
        c_old, d_old, fc_old, fd_old = c, d, fc, fd
        c = np.where(left, new_c, d_old)
        d = np.where(left, c_old, new_d)
        fnew = f(np.where(left, c, d))
        fc = np.where(left, fnew, fd_old)
        fd = np.where(left, fc_old, fnew)
    b = np.exp((lo + hi) / 2)
    # keep the grid point when the refine did not improve on it (a boundary cell)
    A, E, s = _coef_rows(np.exp(-b[:, None] * logx[None, :]), Y, w, floor)
    bg = B_GRID[i]
    Ag, Eg, sg = _coef_rows(np.exp(-bg[:, None] * logx[None, :]), Y, w, floor)
    better = s <= sg
    return (np.where(better, A, Ag), np.where(better, b, bg), np.where(better, E, Eg),
            np.where(better, s, sg))


def _covariance(A: float, B: float, x: np.ndarray, w: np.ndarray, sse: float,
                floor: bool, cols: tuple[int, ...] | None = None) -> np.ndarray:
    """Gauss-Newton covariance s^2 (J'WJ)^-1 (p, p); nan when there is no residual degree of
    freedom or J'WJ is singular. Singular is judged on the column-scaled matrix (condition
    number > ``_MAX_COND`` of D J'WJ D, D = 1 / column norms), so a small A alone is not
    singular; A = 0 (dL/dB = 0) or B -> 0 (x^-B ~ 1 - B ln x, A and E collinear) are."""
    cols = cols if cols is not None else ((0, 1, 2) if floor else (0, 1))
    p = len(cols)
    J = jacobian(A, B, x)[:, list(cols)] * np.sqrt(w)[:, None]  # (n, p)
    dof = x.size - p
    norms = np.linalg.norm(J, axis=0)  # (p,)
    if dof <= 0 or not np.all(np.isfinite(J)) or np.any(norms == 0):
        return np.full((p, p), np.nan)
    Js = J / norms
    M = Js.T @ Js
    if np.linalg.cond(M) > _MAX_COND:
        return np.full((p, p), np.nan)
    return (sse / dof) * np.linalg.inv(M) / np.outer(norms, norms)


def fit_kim(x, y, w=None, *, floor: bool = True, polish: bool = True,
            fixed_B: float | None = None) -> LawFit:
    """Least-squares fit of A / x^B + E (``floor``) or A / x^B to points (x, y), x = count / SCALE.

    The 3-parameter fit is ``fit_law(PowerLaw(), loss="mse", space="linear", weights=w)``
    started at the profiled optimum (``profile_fit``); the better of the two by SSE is kept
    (they agree). A fit whose E is at its bound 0 stays the profiled one (fit_law keeps E > 0
    through its log). The pure power law is the profiled fit (one free exponent).
    ``polish=False`` skips fit_law (the same optimum, ~10x faster: for simulations).
    ``fixed_B``: B held at that value, A and E (>= 0) by weighted linear least squares (exact:
    the law is linear in them), e.g. B = 1 for an ensemble's A / K + C."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or w.shape != x.shape:
        raise AnalysisInputError(f"x, y and weights must be 1-D of one length, got "
                                 f"{x.shape}, {y.shape}, {w.shape}")
    if not (np.all(np.isfinite(x)) and np.all(x > 0) and np.all(np.isfinite(y))
            and np.all(np.isfinite(w)) and np.all(w > 0)):
        raise AnalysisInputError("x must be finite and > 0, losses finite, weights > 0")
    if fixed_B is not None:
        if not (np.isfinite(fixed_B) and fixed_B > 0):
            raise AnalysisInputError(f"fixed_B must be finite and > 0, got {fixed_B}")
        p = 2 if floor else 1
        if x.size < p + 1:
            raise AnalysisInputError(f"{x.size} points for {p} parameters of A/x^{fixed_B:g}"
                                     f"{' + E' if floor else ''}: need >= {p + 1}")
        B = float(fixed_B)
        A, E, sse = (float(v[0]) for v in _coef_rows(x[None, :] ** -B, y[None, :], w, floor))
        cols = (0, 2) if floor else (0,)
        cov = _covariance(A, B, x, w, sse, floor, cols)
        return LawFit(A=A, B=B, E=E, floor=floor, sse=sse, x=x, y=y, w=w, cov=cov, fixed_B=True)
    p = 3 if floor else 2
    if x.size < p + 1:
        raise AnalysisInputError(f"{x.size} points for {p} parameters of "
                                 f"{'A/x^B + E' if floor else 'A/x^B'}: need >= {p + 1}")
    A, B, E, sse = (float(v[0]) for v in profile_fit(x, y, w, floor=floor))
    if polish and floor and A > 0 and E > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                res = fit_law(PowerLaw(), {"N": x, "loss": y}, loss="mse", space="linear",
                              weights=w, starts=[{"A": A, "alpha": B, "E": E}], warn=False)
            except AnalysisInputError:
                res = None
        if res is not None:
            pa, pb, pe = res.params["A"], res.params["alpha"], res.params["E"]
            s = float(np.sum(w * (y - pa * x**-pb - pe) ** 2))
            if np.isfinite(s) and s < sse:
                A, B, E, sse = pa, pb, pe, s
    cov = _covariance(A, B, x, w, sse, floor)
    return LawFit(A=A, B=B, E=E, floor=floor, sse=sse, x=x, y=y, w=w, cov=cov)
