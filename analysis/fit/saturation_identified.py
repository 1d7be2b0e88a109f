"""Whether a data-constrained fit identifies its saturation constants R_D* and R_N*.

Muennighoff et al. 2023 (arXiv 2305.16264) model repeated data and excess parameters by
D' = U + U R_D* (1 - e^(-R_D/R_D*)) and the analogous N' with R_N*. When few runs repeat
data often (or few have N > N_opt), D' barely moves as R_D* grows and the objective levels
off: the optimiser then stops wherever the valley ran out (e.g. R_N* = 2404 on C4-like
runs), and that number means nothing. A constant is "not identified" when

- it sits at its box bound (diagnostics.at_bounds), or
- its profile is flat: moved a decade (x10 or /10, ``FLAT_DECADE``) from the estimate,
  clipped to the box, with the other free coordinates re-optimised, the deviance
  2 (F_p - F) / kappa rises by less than ``FLAT_DEVIANCE`` = 2 units on either side.
  kappa is the objective-to-variance scale of the 95% profile threshold
  (profile_threshold.py; for least squares kappa = s^2 and the deviance is the squared
  profile t statistic, Bates & Watts 1988 sec. 6.1), so 2 units is below the 3.84 of a
  95% interval: a decade on that side lies inside the interval, or
- its 95% profile interval (profile.py) runs to the box on a side: the profile may rise by
  2 within a decade and then level off below the 3.84 threshold, so that the data bound the
  constant on that side by nothing but the box (Muennighoff et al.'s own 182 C4 runs with a
  base fitted on their single-epoch runs: R_N* = 2404, interval 729 to the box).

The profile holds a two-stage fit's base law fixed (it is conditional on stage 1), like
the fit's own SEs (fit/base_dependence.py measures the base's share). Pure numpy/scipy;
2 small refits per constant, and a profile (profile.py) for each constant not yet flagged.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from analysis.errors import AnalysisInputError
from analysis.fit.diagnostics import at_bounds
from analysis.fit.fit import FitResult
from analysis.fit.profile import profile_fit
from analysis.fit.profile_threshold import calibrate
from analysis.laws.fit_objective import Objective

__all__ = ["FLAT_DECADE", "FLAT_DEVIANCE", "SATURATION", "not_identified", "profile_rise"]

FLAT_DEVIANCE = 2.0  # deviance units a decade must raise the profile by, on both sides
FLAT_DECADE = 10.0
SATURATION = ("R_D", "R_N")


def profile_rise(obj: Objective, z: np.ndarray, i: int, t: float, lo: np.ndarray,
                 hi: np.ndarray) -> float:
    """min over the other coordinates of F with z_i = t, minus F(z) (>= 0 up to the
    optimiser's tolerance); z (P,) is the optimum."""
    f_hat = float(obj.value_and_grad(z[None, :], grad=False)[0][0])
    others = [j for j in range(z.size) if j != i]
    x = z.copy()
    x[i] = t
    if not others:
        return float(obj.value_and_grad(x[None, :], grad=False)[0][0]) - f_hat
    scale = f_hat if f_hat > 0 else 1.0  # relative ftol (scipy divides by max(|F|, 1))

    def fun(y: np.ndarray) -> tuple[float, np.ndarray]:
        x[others] = y
        f, g = obj.value_and_grad(x[None, :])
        return float(f[0]) / scale, g[0, others] / scale

    res = minimize(fun, z[others], jac=True, method="L-BFGS-B",
                   bounds=list(zip(lo[others], hi[others])),
                   options={"ftol": 1e-12, "gtol": 1e-10, "maxiter": 2000})
    return float(res.fun) * scale - f_hat


def not_identified(fit: FitResult, names: tuple[str, ...] = SATURATION) -> dict[str, str]:
    """{parameter: why} for each of ``names`` free in ``fit`` that it does not identify
    (module docstring); words and interval ends, never the estimate itself."""
    out: dict[str, str] = {}
    bounds = at_bounds(fit)
    free = [p for p in names if p in fit.free]
    for p in free:
        if p in bounds:
            side, _ = bounds[p]
            out[p] = f"at its {side} bound"
    todo = [p for p in free if p not in out]
    if not todo:
        return out
    try:
        kappa = calibrate(fit.problem, fit.z, 0.95).kappa
    except AnalysisInputError as err:
        return {**out, **{p: f"no residual scale to judge it ({err})" for p in todo}}
    if not kappa > 0:  # an exact fit: every move is a rise
        return out
    step = math.log(FLAT_DECADE)  # R* is fitted as log R*
    for p in todo:
        i = fit.free.index(p)
        flat = []
        for side, t in (("lower", fit.z[i] - step), ("upper", fit.z[i] + step)):
            t = float(np.clip(t, fit.lo[i], fit.hi[i]))
            rise = profile_rise(fit.problem, fit.z, i, t, fit.lo, fit.hi)
            if 2.0 * rise / kappa < FLAT_DEVIANCE:
                flat.append(side)
        if flat:
            out[p] = (f"flat profile ({' and '.join(flat)}: a decade moves the deviance by "
                      f"< {FLAT_DEVIANCE:g})")
            continue
        prof = profile_fit(fit, p, level=0.95)
        open_sides = [side for side, kind in zip(("lower", "upper"), prof.ends) if kind == "box"]
        if open_sides:
            lo, hi = prof.ci
            out[p] = (f"its 95% profile interval ({lo:.3g}, {hi:.3g}) runs to the box on the "
                      f"{' and '.join(open_sides)} side: the data bound it on that side by "
                      f"nothing but the box")
    return out
