"""The law L(x) = A / x^B + E (Kim et al. 2025, "Pre-training under infinite compute", arXiv
2509.14786), its least-squares fit and its Gauss-Newton covariance: the one result type of this
law (``PowerLawFit``) and the one engine every recipe fit, the extrapolation check, the data
multiplier, ``compare``, ``next`` and the adaptive loop use.

The law of a recipe against parameters, L(N) = A / N^B + E, and of the standard recipe
against unique tokens, L(U) = A / U^B + E; an ensemble's loss against its member count,
A / K + E (B = 1: ``ensemble_asymptote``). Here x = N / 1e6 or U / 1e6 (``SCALE``). The
printed reports call the asymptote "C" in their text (Kim et al.'s letter); its parameter is E.

The fit minimises the (weighted) sum of squared errors of the loss itself (``fit_law(PowerLaw(),
loss="mse", space="linear")``; the law registry's ``PowerLaw`` names B "alpha", as
``Chinchilla`` names its exponents). Two forms:

* ``floor=True``: A / x^B + E with A, E >= 0 (fit_law keeps A, E > 0 through their logs);
* ``floor=False``: the pure power law A / x^B (E fixed at 0), Muennighoff et al. 2023
  (arXiv 2305.16264) fit data-constrained losses without a floor too.

The law is linear in (A, E) at fixed B, so the least-squares problem is one-dimensional in B
(variable projection, Golub & Pereyra 1973): ``profile_fit`` minimises the profiled sum of
squares over a grid of B and refines the best cell by golden-section search, for many data
sets at once (a bootstrap's replicates). ``fit_kim`` polishes the 3-parameter fit with
``fit_law`` from that start (they agree to ~1e-9 in SSE; tests/analysis/test_kim_law.py).

Covariance (Seber & Wild 1989, "Nonlinear Regression", §2.1 and §5.1): with J (n, p) the
Jacobian of L in the free parameters (A, B[, E]) at the optimum, W = diag(w),

    s^2 = SUM w_i r_i^2 / (n - p),   Cov = s^2 (J' W J)^-1,

    dL/dA = x^-B,   dL/dB = -A ln(x) x^-B,   dL/dE = 1.

It is a local (linearised) covariance: valid when the parameters are interior (not at a bound
A = 0 or E = 0) and the curvature of the model over the parameters' uncertainty is small.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from analysis.errors import AnalysisInputError
from analysis.fit.fit import fit_law
from analysis.laws.laws import PowerLaw

__all__ = ["B_GRID", "SCALE", "PowerLawFit", "ensemble_asymptote", "fit_asymptote", "fit_kim",
           "jacobian", "joint_asymptote", "profile_fit", "t_scaled_se"]

SCALE = 1e6
"""x = N / SCALE (millions of parameters) or U / SCALE (millions of unique tokens). Every
A / x^B + E fit of a sweep uses it (the report, ``compare``, ``next``, the adaptive loop):
Kim et al. use billions; the unit rescales A only, and millions keep x near 1 at CPU scale."""
B_GRID = np.geomspace(0.005, 8.0, 320)
"""Exponents the profiled sum of squares is evaluated on before the golden-section refine
(ratio 1.023 between neighbours; fit_law's box for the exponent is [0, 10])."""
_GOLDEN_ITERS = 48  # bracket of 2 grid cells (log width 0.046) shrinks to ~4e-12 in log B
_MAX_COND = 1e10  # column-scaled J'WJ worse conditioned than this: no covariance (nan)


@dataclass(frozen=True)
class PowerLawFit:
    """A (weighted) least-squares fit of A / x^B + E (``floor``) or A / x^B (E = 0, not
    ``floor``), the one result type of this law. ``cov`` is the Gauss-Newton covariance
    s^2 (J'WJ)^-1 of the free parameters (``free``: (A, B, E), (A, B), or (A, E) with B
    fixed), nan when singular or without a residual degree of freedom."""

    A: float
    B: float
    E: float  # 0.0 for the pure power law
    cov: np.ndarray = field(repr=False)  # (p, p) over the free parameters ``free``
    x: np.ndarray = field(repr=False)  # (n,) the law's variable, count / SCALE
    y: np.ndarray = field(repr=False)  # (n,) losses
    w: np.ndarray | None = field(default=None, repr=False)  # (n,) weights (None: all 1)
    floor: bool = True  # E free (>= 0) or fixed at 0
    fixed_B: bool = False  # B held at its value (A / x^B + E with A, E free)
    sse: float = math.nan  # SUM w_i (y_i - L(x_i))^2 at the optimum

    def __post_init__(self) -> None:
        if self.w is None:
            object.__setattr__(self, "w", np.ones_like(np.asarray(self.y, dtype=float)))

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
    def n_free(self) -> int:
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
    def se(self) -> dict[str, float]:
        """Standard errors of A, B and E (0 for a fixed one)."""
        return {p: float(np.sqrt(max(self.var(p), 0.0))) for p in "ABE"}

    @property
    def dof(self) -> int:
        """Residual degrees of freedom, n - free parameters."""
        return self.n - self.n_free

    @property
    def s2(self) -> float:
        """Residual variance of a weight-1 point, SSE / (n - p) (nan without a residual dof)."""
        return self.sse / self.dof if self.dof > 0 else float("nan")

    @property
    def has_cov(self) -> bool:
        return bool(np.all(np.isfinite(self.cov)))

    @property
    def has_ci(self) -> bool:
        """More points than parameters and a finite covariance: an interval exists."""
        return self.n > self.n_free and self.has_cov

    def __call__(self, x) -> np.ndarray:
        """L at x (m,) -> (m,)."""
        return self.A / np.asarray(x, dtype=float) ** self.B + self.E

    def predict(self, x) -> np.ndarray:
        """L at x (m,) -> (m,), as A x^-B + E (the form ``jacobian`` differentiates)."""
        return self.A * np.asarray(x, dtype=float) ** -self.B + self.E

    def residuals(self) -> np.ndarray:
        """y - L(x), (n,)."""
        return self.y - self.predict(self.x)

    @property
    def r2(self) -> float:
        ss_res = float(np.sum(self.w * (self.y - self(self.x)) ** 2))
        ss_tot = float(np.sum(self.w * (self.y - np.average(self.y, weights=self.w)) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")

    def jacobian(self, x) -> np.ndarray:
        """dL/d(A, B[, E]) at x (m,) -> (m, p)."""
        return jacobian(self.A, self.B, x)[:, list(self.free)]

    def mean_var(self, x) -> np.ndarray:
        """Delta-method variance of the fitted L at x (m,) -> (m,): g Cov g'."""
        g = self.jacobian(x)  # (m, p)
        return np.einsum("mi,ij,mj->m", g, self.cov, g)

    def _t(self, level: float) -> float:
        return float(stats.t.ppf(0.5 + level / 2, max(self.dof, 1)))

    def band(self, x, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise delta-method interval of the fitted curve at ``x`` (t, ``dof``)."""
        x = np.asarray(x, dtype=float)
        sd = np.sqrt(np.clip(self.mean_var(x), 0, None))
        h = self._t(level) * sd
        mid = self(x)
        return mid - h, mid + h

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval on E with ``dof`` degrees of freedom (wide with 4 points)."""
        h = self._t(level) * self.se["E"]
        return (self.E - h, self.E + h)

    def e_se_t(self, level: float = 0.95) -> float:
        """E's standard error widened for its Student-t interval (``t_scaled_se``)."""
        return t_scaled_se(self.se["E"], self.dof, level)

    def __str__(self) -> str:
        power = "x" if self.n_free == 2 and self.B == 1.0 else f"x^{self.B:.4g}"
        return f"{self.A:.4g}/{power} + {self.E:.4f}"


def t_scaled_se(se: float, dof: float, level: float = 0.95) -> float:
    """``se`` widened by t_{dof} / z at ``level``: a normal with this scale has the Student-t
    interval's ends (estimate +- t se) as its quantiles. A bootstrap that draws an
    asymptote from a normal (``data_multiplier``) needs it: with 5 sizes (2 residual dof) t
    is 4.30 against z's 1.96, and the plain standard error would make the multiplier's
    interval half as wide as the asymptote's own."""
    z = stats.norm.ppf(0.5 + level / 2)
    return float(stats.t.ppf(0.5 + level / 2, max(dof, 1)) / z * se)


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
            fixed_B: float | None = None) -> PowerLawFit:
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
        return PowerLawFit(A=A, B=B, E=E, floor=floor, sse=sse, x=x, y=y, w=w, cov=cov, fixed_B=True)
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
    return PowerLawFit(A=A, B=B, E=E, floor=floor, sse=sse, x=x, y=y, w=w, cov=cov)


def fit_asymptote(x, y, fixed_B: float | None = None, w=None) -> PowerLawFit:
    """Kim et al.'s least-squares fit of A/x^B + E (Kim et al. 2025, arXiv 2509.14786);
    with ``fixed_B``, A/x^fixed_B + E (A and E free). ``w``: per-point weights (a point that
    is the mean of m seeds weighs m). ``fit_kim``, which needs a residual degree of freedom;
    with as many points as parameters, the profiled interpolation (``profile_fit``) without
    a covariance."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise AnalysisInputError(
            f"need >= 3 matching (x, y) points; got shapes {x.shape}, {y.shape}"
        )
    if np.any(x <= 0) or not np.all(np.isfinite(y)):
        raise AnalysisInputError("x must be > 0 and y finite")
    n_free = 3 if fixed_B is None else 2
    if x.size <= n_free:  # interpolation: no residual degree of freedom, no covariance
        A, B, E, sse = (float(v[0]) for v in profile_fit(x, y, w))
        return PowerLawFit(A, B, E, cov=np.full((3, 3), np.nan), x=x, y=y, sse=sse)
    return fit_kim(x, y, w, fixed_B=fixed_B)


def ensemble_asymptote(K, loss) -> PowerLawFit:
    """Loss of a K-member (logit-averaged) ensemble vs K as A/K + E; E is K -> inf. B = 1:
    for iid members the loss of their average exceeds its K -> inf limit by a variance term
    proportional to 1/K, exactly for squared error (the ambiguity decomposition, Krogh &
    Vedelsby 1995) and to second order for cross-entropy of averaged logits (Wood et al.
    2023, arXiv 2301.03962). A free B is not identified from K <= 5 members (the demo's
    4-member ensemble: E's 95% CI spans 4 nats with B free, 0.06 with B = 1)."""
    return fit_asymptote(K, loss, fixed_B=1.0)


def joint_asymptote(N_billions, k_asymptotes) -> PowerLawFit:
    """Per-N ensemble asymptotes vs N as A/N^B + E; E is the N, K -> inf limit."""
    return fit_asymptote(N_billions, k_asymptotes)
