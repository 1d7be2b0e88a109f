"""Profile-likelihood intervals of one parameter, and the flat sides that reveal curved valleys.

For a free parameter p (internal coordinate t), the profile is

    F_p(t) = min over the other free coordinates of F(theta | theta_p = t)

(Venzon & Moolgavkar 1988, Appl. Stat. 37:87; Bates & Watts 1988, sec. 6.1). The interval
is {t : F_p(t) - F(theta_hat) <= threshold} with the threshold of profile_threshold.py.

The walk, on each side of the estimate t_hat separately, in internal space:

1. a step h = sqrt(2 threshold (H^-1)_pp): the distance at which a quadratic objective
   (Hessian H at the optimum, diagnostics.hessian) would cross the threshold; when H is
   not positive definite, h = 5% of the box's width;
2. grid points at 0.5, 1, 1.5, 2 h, then geometrically spaced out to the box bound, ``n``
   per side in all (evenly spaced when the bound is nearer than h / 2); each is refitted
   (scipy L-BFGS-B over the other free coordinates, started from the previous grid
   point's solution: a continuation along the valley). Fixed parameters stay fixed: a
   two-stage DataConstrained fit is profiled given its stage-1 base law;
3. the walk stops at the first point where the rise reaches the threshold; the crossing
   between it and the point before is then located by Brent's method (more refits, which
   join the curve). A side that reaches the box bound below the threshold is ``flat``:
   its interval end is the bound itself (one-sided, or on both sides unbounded, interval).
   A side with no room (the estimate at its bound) is flat too.

The Hessian check (diagnostics.py) sees only the curvature at the optimum. In a curved
valley the objective does curve there, but levels off further out (Muennighoff et al.'s
R_D*: D' saturates as R_D* grows, so on the datablations runs R_D* = 15.39 and 95 differ
by 0.13% in objective); only the profile, which follows the valley to the bound, sees it.
A profile point below the fit's own objective means the fit missed its optimum: it sets
``lower_found``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.optimize import brentq, minimize

from analysis.fit.diagnostics import hessian
from analysis.errors import AnalysisInputError
from analysis.fit.profile_threshold import Calibration, calibrate
from analysis.laws.fit_objective import Objective
from analysis.laws.laws import Law

__all__ = ["Fitted", "Profile", "profile_fit"]


class Fitted(Protocol):
    """What a profile reads of a fit: ``analysis.fit.fit.FitResult`` has all of it. A
    protocol here, because fit.py imports this module (``FitResult.profile``)."""

    @property
    def law(self) -> Law: ...
    @property
    def objective(self) -> float: ...
    @property
    def free(self) -> tuple[str, ...]: ...
    @property
    def fixed(self) -> dict[str, float]: ...
    @property
    def tied(self) -> dict[str, str]: ...
    @property
    def problem(self) -> Objective: ...
    @property
    def z(self) -> np.ndarray: ...
    @property
    def lo(self) -> np.ndarray: ...
    @property
    def hi(self) -> np.ndarray: ...

_NEAR = (0.5, 1.0, 1.5, 2.0)  # first grid points, in units of h
_FALLBACK_STEP = 0.05  # share of the box's width when the Hessian gives no step
_BRENT_XTOL = 1e-3  # in units of h
_LOWER_RTOL = 1e-9  # a profile point this far below the optimum counts as lower


@dataclass(frozen=True)
class Profile:
    """A parameter's profile: interval, curve and flat-side flags (natural values)."""

    param: str
    level: float
    estimate: float
    ci: tuple[float, float]
    """(lower, upper) end; on a flat side, the box bound."""
    flat_lower: bool
    """The objective rises less than the threshold all the way down to the lower bound."""
    flat_upper: bool
    values: np.ndarray
    """Grid values of the parameter (ascending, the estimate included)."""
    rise: np.ndarray
    """Profile objective minus the fit's objective at each of ``values``."""
    calibration: Calibration
    lower_found: bool
    """A profile point beat the fit's objective: the fit is not at the global optimum."""

    @property
    def flat(self) -> bool:
        """One side (or both) never reaches the threshold: a one-sided or unbounded CI."""
        return self.flat_lower or self.flat_upper

    @property
    def threshold(self) -> float:
        return self.calibration.threshold


class _Profiler:
    """Refits of the other coordinates with coordinate ``k`` held at a value."""

    def __init__(self, fit: Fitted, k: int):
        self.obj, self.k, self.fit = fit.problem, k, fit
        self.others = np.array([i for i in range(fit.z.size) if i != k], dtype=int)
        self.bounds = list(zip(fit.lo[self.others], fit.hi[self.others]))

    def full(self, t: float, u: np.ndarray) -> np.ndarray:
        z = np.empty(self.fit.z.size)
        z[self.k], z[self.others] = t, u
        return z

    def refit(self, t: float, u0: np.ndarray) -> tuple[float, np.ndarray]:
        """(min over the others of F at coordinate k = t, the minimiser)."""
        if self.others.size == 0:
            f, _ = self.obj.value_and_grad(self.full(t, u0)[None, :], grad=False)
            return float(f[0]), u0

        def fun(u):
            f, g = self.obj.value_and_grad(self.full(t, u)[None, :])
            return float(f[0]), g[0, self.others]

        res = minimize(
            fun,
            u0,
            jac=True,
            method="L-BFGS-B",
            bounds=self.bounds,
            options={"ftol": 1e-13, "gtol": 1e-10, "maxiter": 5000, "maxls": 50},
        )
        return float(res.fun), res.x


def _step(fit: Fitted, k: int, threshold: float) -> float:
    try:
        cov = np.linalg.inv(hessian(fit.problem, fit.z))
        h = float(np.sqrt(2.0 * threshold * cov[k, k]))
    except np.linalg.LinAlgError:
        h = float("nan")
    if not (np.isfinite(h) and h > 0):
        h = _FALLBACK_STEP * float(fit.hi[k] - fit.lo[k])
    return h


def _distances(h: float, room: float, n: int) -> np.ndarray:
    """``n`` grid distances from the estimate on one side, the last one ``room`` (the
    bound): 0.5, 1, 1.5, 2 h, then geometric; evenly spaced when h exceeds the room."""
    near = h * np.array(_NEAR)
    near = near[near < room][: n - 1]
    if near.size == 0:
        return np.linspace(room / n, room, n)
    return np.concatenate([near, np.geomspace(near[-1], room, n - near.size + 1)[1:]])


def _side(prof: _Profiler, sign: int, h: float, n: int, f_hat: float, thr: float):
    """Walk one side; returns (points [(t, rise)], crossing t or None, lower_found)."""
    fit, k = prof.fit, prof.k
    t_hat = float(fit.z[k])
    room = float(fit.hi[k] - t_hat) if sign > 0 else float(t_hat - fit.lo[k])
    if room <= 0:
        return [], None, False
    u = fit.z[prof.others].copy()
    pts: list[tuple[float, float]] = []
    prev_t, lower = t_hat, False
    for d in _distances(h, room, n):
        t = t_hat + sign * d
        f, u = prof.refit(t, u)
        rise = f - f_hat
        lower |= rise < -_LOWER_RTOL * abs(f_hat) - 1e-15
        pts.append((t, rise))
        if rise >= thr:
            u_prev, known = u.copy(), {t_hat: 0.0, **dict(pts)}

            def excess(s, u_prev=u_prev, known=known):
                if s not in known:  # Brent starts at the bracket's ends, refitted already
                    val, _ = prof.refit(s, u_prev)
                    known[s] = val - f_hat
                    pts.append((s, known[s]))
                return known[s] - thr

            lo_t, hi_t = sorted((prev_t, t))
            try:
                cross = brentq(excess, lo_t, hi_t, xtol=_BRENT_XTOL * h)
            except ValueError:  # not bracketed (cannot happen with known ends): interpolate
                r0 = known[prev_t]
                cross = prev_t + (t - prev_t) * (thr - r0) / (rise - r0)
            return pts, float(cross), lower
        prev_t = t
    return pts, None, lower


def profile_fit(fit: Fitted, param: str, level: float = 0.95, n: int = 24) -> Profile:
    """The profile of ``param`` (a free parameter of ``fit``, or one tied to one) with its
    ``level`` interval; ``n`` grid points per side before the crossing is refined."""
    name = fit.tied.get(param, param)
    if name not in fit.free:
        why = "fixed" if param in fit.fixed else f"not a parameter of {fit.law.name}"
        raise AnalysisInputError(f"profile: '{param}' is {why}; free: {list(fit.free)}")
    if n < 2:
        raise AnalysisInputError(f"profile: n must be >= 2 grid points per side, got {n}")
    k = fit.free.index(name)
    cal = calibrate(fit.problem, fit.z, level)
    prof = _Profiler(fit, k)
    h = _step(fit, k, cal.threshold)
    f_hat, t_hat = fit.objective, float(fit.z[k])
    lo_pts, lo_cross, lo_lower = _side(prof, -1, h, n, f_hat, cal.threshold)
    hi_pts, hi_cross, hi_lower = _side(prof, +1, h, n, f_hat, cal.threshold)
    pts = sorted([*lo_pts, (t_hat, 0.0), *hi_pts])
    t, rise = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    log = name in fit.law.log_params

    def nat(v):
        return np.exp(v) if log else v

    ends = (
        float(nat(fit.lo[k] if lo_cross is None else lo_cross)),
        float(nat(fit.hi[k] if hi_cross is None else hi_cross)),
    )
    return Profile(
        param=param,
        level=level,
        estimate=float(nat(t_hat)),
        ci=ends,
        flat_lower=lo_cross is None,
        flat_upper=hi_cross is None,
        values=nat(t),
        rise=rise,
        calibration=cal,
        lower_found=lo_lower or hi_lower,
    )
