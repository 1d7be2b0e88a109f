"""Profile-likelihood intervals of one parameter, and the flat sides that reveal curved valleys.

For a free parameter p (internal coordinate t), the profile is

    F_p(t) = min over the other free coordinates of F(theta | theta_p = t)

(Venzon & Moolgavkar 1988, Appl. Stat. 37:87; Bates & Watts 1988, sec. 6.1). The interval
is {t : F_p(t) - F(theta_hat) <= threshold} with the threshold of profile_threshold.py.

The walk, on each side of the estimate t_hat separately, in internal space:

1. a step h = sqrt(2 threshold (H^-1)_pp): the distance at which a quadratic objective
   (Hessian H at the optimum, diagnostics.hessian) would cross the threshold. When H is
   not positive definite (a Huber fit whose optimum sits on the kinks of its loss), (H^-1)_pp
   means nothing and may be negative; then h = sqrt(2 threshold / H_pp), the distance with
   the others held (never beyond the profile's own, so the walk below still brackets the
   crossing), or 5% of the box's width when H_pp <= 0 too;
2. grid points at 0.5, 1, 1.5, 2 h, then geometrically spaced out to the box bound, ``n``
   per side in all (evenly spaced when the bound is nearer than h / 2); each is refitted
   (scipy L-BFGS-B over the other free coordinates) from the previous grid point's
   solution (a continuation along the valley) and from the estimate, the lower kept
   (profile_refit.py). Fixed parameters stay fixed: a two-stage DataConstrained fit is
   profiled given its stage-1 base law;
3. the walk stops at the first point where the rise reaches the threshold; the crossing
   between it and the point before is then located by Brent's method, each refit started
   from both ends of the bracket and from the estimate (warm starts from both sides), and
   verified: refitted at the end, its rise must be 0.5-2x the threshold, else the bracket
   is narrowed and Brent rerun, and an end that never passes is "not found"
   (profile_walk.py). A side that reaches the box bound below the threshold ends at the
   bound: "box" (one-sided, or on both sides unbounded, interval). A side with no room
   (the estimate at its bound) is "box" too.

Measured on a Huber fit with a non-positive-definite Hessian (Li et al. 2025, "(Mis)fitting
scaling laws", arXiv 2502.18969, 261 runs; here also on Epoch's points, subsets with
min eig H < 0): Brent refitting from the far point only, where log A had run to its bound,
put alpha's upper end and beta's lower end on the estimate (refitted rise 0.00x the
threshold). Both-side starts and the verification remove that; ``Profile.ends`` says for
each end whether the profile found it, it hit the box, or it was not found.

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

from analysis.errors import AnalysisInputError
from analysis.fit.diagnostics import hessian
from analysis.fit.profile_refit import Refitter
from analysis.fit.profile_threshold import Calibration, calibrate
from analysis.fit.profile_walk import End, EndKind, walk_side
from analysis.laws.fit_objective import Objective
from analysis.laws.laws import Law

__all__ = ["EndKind", "Fitted", "Profile", "profile_fit"]


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


@dataclass(frozen=True)
class Profile:
    """A parameter's profile: interval, curve and how each end was found (natural values)."""

    param: str
    level: float
    estimate: float
    ci: tuple[float, float]
    """(lower, upper) end; the box bound for a "box" end, nan for a "not found" one."""
    ends: tuple[EndKind, EndKind]
    """(lower, upper): "profile" (the refitted rise crosses the threshold there, verified
    0.5-2x), "box" (the rise stays below the threshold up to the parameter's bound) or
    "not found" (no end passed the verification: profile_walk.py)."""
    end_rise: tuple[float, float]
    """Refitted rise at each end over the threshold (below 1 at a "box" end)."""
    values: np.ndarray
    """Grid values of the parameter (ascending, the estimate included)."""
    rise: np.ndarray
    """Profile objective minus the fit's objective at each of ``values``."""
    calibration: Calibration
    lower_found: bool
    """A profile point beat the fit's objective: the fit is not at the global optimum."""

    @property
    def flat_lower(self) -> bool:
        """The objective rises less than the threshold all the way down to the lower bound."""
        return self.ends[0] == "box"

    @property
    def flat_upper(self) -> bool:
        return self.ends[1] == "box"

    @property
    def flat(self) -> bool:
        """One side (or both) never reaches the threshold: a one-sided or unbounded CI."""
        return self.flat_lower or self.flat_upper

    @property
    def found(self) -> bool:
        """Both ends located (by the profile or at the box)."""
        return "not found" not in self.ends

    @property
    def threshold(self) -> float:
        return self.calibration.threshold

    def describe(self, fmt: str = ".4g") -> str:
        """One line: estimate and interval with each end's kind, e.g.
        ``alpha = 0.347 (0.322 [profile], 10 [box]), 95% profile``."""

        def end(v: float, kind: EndKind) -> str:
            return f"{kind}" if kind == "not found" else f"{v:{fmt}} [{kind}]"

        lo, hi = (end(v, kind) for v, kind in zip(self.ci, self.ends))
        return f"{self.param} = {self.estimate:{fmt}} ({lo}, {hi}), {self.level:.0%} profile"


def _step(fit: Fitted, k: int, threshold: float) -> float:
    """Distance from the estimate at which a quadratic objective crosses the threshold: from
    (H^-1)_kk when H is positive definite, from H_kk (the others held) when only that is
    positive, else a share of the box (no square root of a negative number)."""
    H = hessian(fit.problem, fit.z)
    var = float("nan")
    if np.all(np.isfinite(H)):
        try:
            np.linalg.cholesky(H)  # positive definite, or LinAlgError
            var = float(np.linalg.inv(H)[k, k])
        except np.linalg.LinAlgError:
            var = 1.0 / H[k, k] if H[k, k] > 0 else float("nan")
    if np.isfinite(var) and var > 0:
        return float(np.sqrt(2.0 * threshold * var))
    return _FALLBACK_STEP * float(fit.hi[k] - fit.lo[k])


def _distances(h: float, room: float, n: int) -> np.ndarray:
    """``n`` grid distances from the estimate on one side, the last one ``room`` (the
    bound): 0.5, 1, 1.5, 2 h, then geometric; evenly spaced when h exceeds the room."""
    if room <= 0:
        return np.empty(0)
    near = h * np.array(_NEAR)
    near = near[near < room][: n - 1]
    if near.size == 0:
        return np.linspace(room / n, room, n)
    return np.concatenate([near, np.geomspace(near[-1], room, n - near.size + 1)[1:]])


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
    ref = Refitter(fit.problem, fit.z, fit.lo, fit.hi, k)
    h = _step(fit, k, cal.threshold)
    f_hat, t_hat, thr = fit.objective, float(fit.z[k]), cal.threshold
    sides: list[tuple[list[tuple[float, float]], End, bool]] = []
    for sign, room in ((-1, t_hat - float(fit.lo[k])), (+1, float(fit.hi[k]) - t_hat)):
        sides.append(walk_side(ref, t_hat, sign, _distances(h, room, n), f_hat, thr))
    best: dict[float, float] = {t_hat: 0.0}  # a point refitted twice (verified) once, lowest
    for tp, r in [*sides[0][0], *sides[1][0]]:
        best[tp] = min(r, best.get(tp, r))
    t = np.array(sorted(best))
    rise = np.array([best[v] for v in t])
    log = name in fit.law.log_params

    def nat(v):
        return np.exp(v) if log else v

    lo_end, hi_end = sides[0][1], sides[1][1]
    return Profile(
        param=param,
        level=level,
        estimate=float(nat(t_hat)),
        ci=(float(nat(lo_end.t)), float(nat(hi_end.t))),
        ends=(lo_end.kind, hi_end.kind),
        end_rise=(lo_end.rise_ratio, hi_end.rise_ratio),
        values=nat(t),
        rise=rise,
        calibration=cal,
        lower_found=sides[0][2] or sides[1][2],
    )
