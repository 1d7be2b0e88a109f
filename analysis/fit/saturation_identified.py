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
the fit's own SEs (``base_dependence`` below measures the base's share). Pure numpy/scipy;
2 small refits per constant, and a profile (profile.py) for each constant not yet flagged.

How far they move with the base law (``base_dependence``). How far a two-stage data-constrained fit's R_D*, R_N* move
when its base law moves.

Muennighoff et al. 2023 (arXiv 2305.16264, Section 5) fit the base law
L = E + A/N^alpha + B/D^beta first, freeze it, then fit only R_D* and R_N*. Stage 2's own
profile and SEs are conditional on that base: they say nothing about a base the stage-1 runs
leave loose. On their public 182 C4 runs the 29 single-epoch runs pin the base so weakly
that the conditional fit moves R_D* from 15 to 225 and R_N* from 5 to 2,400 with the base
(docs/fit_diagnostics.md), while each conditional profile looks tight.

This module measures that dependence directly. The stage-1 runs are resampled with
replacement ``n`` times (a case bootstrap, Efron & Tibshirani 1993, ch. 6); each resample's
base law is refitted from the stage-1 optimum and stage 2 is refitted on all runs with that
base frozen, from the stage-2 optimum. The 2.5-97.5% range of each constant over the
resamples is the part of its uncertainty that comes from stage 1. A constant whose range
spans more than a decade (``saturation_identified.FLAT_DECADE``, the rule a flat profile is
judged by), or whose refits reach its box bound, is not identified by these data whatever
stage 2's conditional profile says. Pure numpy/scipy via ``fit_law``; 2 warm-started refits
per resample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import minimize

from analysis.errors import AnalysisInputError
from analysis.fit.diagnostics import at_bounds
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.profile import profile_fit
from analysis.fit.profile_threshold import calibrate
from analysis.laws.fit_objective import Objective
from analysis.laws.laws import Chinchilla, DataConstrained

__all__ = ["BASE_RESAMPLES", "BaseDependence", "FLAT_DECADE", "FLAT_DEVIANCE", "SATURATION", "base_dependence",
           "not_identified", "profile_rise"]

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


BASE_RESAMPLES = 32
"""Default resamples: the 2.5% and 97.5% quantiles are then the 1st and 32nd order statistics
interpolated, enough to tell a decade (x10) apart from a few percent; ~0.15 s each."""


@dataclass(frozen=True)
class BaseDependence:
    """Each constant's range over refits of the base law on resampled stage-1 runs."""

    n: int  # resamples whose two refits both ran
    ranges: dict[str, tuple[float, float]]  # {R_D/R_N: (2.5%, 97.5%)} natural values
    at_bound: dict[str, int]  # {R_D/R_N: resamples whose stage-2 refit ended at a bound}

    def not_identified(self) -> dict[str, str]:
        """{constant: why} for those the base leaves open (module docstring)."""
        out: dict[str, str] = {}
        for p, (lo, hi) in self.ranges.items():
            hits = self.at_bound.get(p, 0)
            spread = hi / lo if lo > 0 else float("inf")
            if spread > FLAT_DECADE or hits:
                extra = f"; {hits} of {self.n} refits end at its bound" if hits else ""
                out[p] = (f"it depends on the stage-1 base law: refitting the base on {self.n} "
                          f"resamples of its runs moves {p}* over {lo:.3g} to {hi:.3g} "
                          f"(95%){extra}")
        return out


def base_dependence(data: pl.DataFrame, stage1_rows: pl.DataFrame, base: FitResult,
                    fit: FitResult, *, n: int = BASE_RESAMPLES, seed: int = 0,
                    tie1: Mapping[str, str] | None = None, tie2: Mapping[str, str] | None = None,
                    options: Mapping[str, Any] | None = None) -> BaseDependence:
    """Resample ``stage1_rows`` (the runs ``base`` was fitted on) ``n`` times, refit base and
    stage 2 (``fit``, on ``data``) from their optima; ``options`` are fit_law's (loss,
    delta, weights, space, ...; ``starts`` is replaced by the optima)."""
    if n < 2:
        raise AnalysisInputError(f"base_resamples must be >= 2 (or 0 to skip), got {n}")
    opts = {k: v for k, v in dict(options or {}).items() if k not in ("starts", "warn")}
    names = [p for p in SATURATION if p in fit.free]
    start2 = {p: fit.params[p] for p in names}
    rng = np.random.default_rng(seed)
    m = stage1_rows.height
    values: dict[str, list[float]] = {p: [] for p in names}
    hits = dict.fromkeys(names, 0)
    for _ in range(n):
        rows = stage1_rows[rng.integers(0, m, size=m)]
        try:
            b = fit_law(Chinchilla(), rows, starts=dict(base.params), tie=dict(tie1 or {}),
                        warn=False, **opts)
            fixed = {k: b.params[k] for k in ("A", "B", "E", "alpha", "beta")}
            s = fit_law(DataConstrained(), data, fixed=fixed, starts=start2,
                        tie=dict(tie2 or {}), warn=False, **opts)
        except AnalysisInputError:
            continue  # a degenerate resample (too few distinct runs): not a draw of the base
        bounds = at_bounds(s)
        for p in names:
            values[p].append(s.params[p])
            hits[p] += p in bounds
    done = len(values[names[0]]) if names else 0
    ranges = {p: (float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975)))
              for p, v in values.items() if v}
    return BaseDependence(n=done, ranges=ranges, at_bound={p: h for p, h in hits.items() if h})
