"""Identifiability checks on a finished fit: can the data pin each parameter down?

Two checks, each returning human-readable warnings (the fitter emits them as
``IdentifiabilityWarning``):

1. Too few points per free parameter: n < ``MIN_POINTS_PER_PARAM`` * P_free. With 4 points
   and 3 parameters a power law nearly interpolates and its asymptote is fragile
   (Kim et al. 2025, arXiv 2509.14786).
2. A flat valley: the Hessian of the objective at the optimum (internal parametrisation,
   central differences of the analytic gradient, step 1e-5) is brought to correlation
   form Hc = H / sqrt(diag H diag H^T), whose eigenvalues are scale-free and sum to P
   (at a smooth minimum all are >= 0; Huber's kinks can make the smallest slightly
   negative, which counts as flat too). An eigenvalue below ``FLAT_EIGENVALUE`` means
   some combination of parameters changes the objective about 10^4 times less than
   each parameter alone: a valley along which the data cannot choose (Epoch's A, B
   valley: Besiroglu et al. 2024, arXiv 2404.10102). The warning names the parameters
   with weight >= 0.3 in that eigenvector. A parameter with no curvature at all
   (diag H <= 0) is reported as not identified.

``at_bounds`` finds the free parameters a fit left at their box bound (``fit._box``): the
box, not the data, chose those values, so they are reported as not identified, never as
bare numbers. ``bound_warnings`` words the same finding for ``FitResult.warnings`` (the
fitter also raises each as an ``IdentifiabilityWarning``), e.g. "R_N at its upper bound
e^14 ...".

Neither check sees a curved valley: an objective that has curvature at the optimum but
rises by less than a confidence threshold all the way to a bound (Muennighoff et al.'s R_D*,
whose D' saturates as R_D* grows). ``FitResult.profile`` (profile.py) finds those.

Sides a parameter is left open on (``open_side_warnings``). A cheap test, run on every fit, for a parameter the data
leave open towards a box bound.

For each free coordinate k and each bound b of its box, the objective is evaluated at the
optimum with z_k moved to b and every other coordinate held. If the rise is below the 95%
profile threshold (profile_threshold.py), the profile rise at b, which re-optimises the others
and so can only be lower, is below it too: b lies inside the profile interval, the data do
not bound the parameter on that side. This catches what the Hessian check
(diagnostics.py) cannot: a parameter whose objective curves at the optimum but levels off
further out (a curved valley, e.g. Muennighoff et al.'s R_D* when few runs repeat data
often), or one the optimiser left short of the bound it was drifting to. It is sufficient,
not necessary: a side it does not flag can still be flat along a valley that moves the
other parameters too; ``FitResult.profile`` (profile.py) settles that. 2 evaluations of the
objective per free parameter.
"""

from __future__ import annotations

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.fit.profile_threshold import calibrate
from analysis.laws.fit_objective import Objective
from analysis.laws.laws import Law

__all__ = ["BOUND_RTOL", "FLAT_EIGENVALUE", "MIN_POINTS_PER_PARAM", "OPEN_LEVEL", "at_bounds", "bound_side",
           "bound_warnings", "hessian", "identifiability_warnings", "internal_bound_side", "open_side_warnings"]

MIN_POINTS_PER_PARAM = 3
FLAT_EIGENVALUE = 1e-4
_STEP = 1e-5


def hessian(obj: Objective, z: np.ndarray) -> np.ndarray:
    """d^2 F / dz^2 (P_free, P_free) at z by central differences of the analytic gradient."""
    P = z.size
    pts = np.repeat(z[None, :], 2 * P, axis=0)
    for i in range(P):
        pts[2 * i, i] += _STEP
        pts[2 * i + 1, i] -= _STEP
    _, g = obj.value_and_grad(pts)
    H = (g[0::2] - g[1::2]) / (2 * _STEP)  # row i: d grad / d z_i
    return 0.5 * (H + H.T)


def identifiability_warnings(obj: Objective, z: np.ndarray, names: list[str]) -> list[str]:
    """Warnings for the fit at internal free vector ``z`` (names: the free parameters)."""
    out: list[str] = []
    w = obj.point_weights
    n, P = (obj.logy.size if w is None else int(np.count_nonzero(w))), z.size
    if n < MIN_POINTS_PER_PARAM * P:
        out.append(
            f"{n} points for {P} free parameters (< {MIN_POINTS_PER_PARAM} per parameter): "
            "the fit nearly interpolates and its parameters are fragile"
        )
    if P == 0:
        return out
    H = hessian(obj, z)
    diag = np.diag(H)
    # a parameter whose term is negligible at every point (e.g. A/N^alpha ~ 1e-17) has a
    # Hessian diagonal ~1e-30 of the others': as undetermined as an exact zero
    dead = [names[i] for i in range(P) if not diag[i] > DEAD_RTOL * max(float(diag.max()), 0.0)]
    if dead:
        out.append(f"no curvature in {dead}: the data do not determine these parameters")
        return out
    scale = 1.0 / np.sqrt(diag)
    Hc = H * scale[:, None] * scale[None, :]
    evals, evecs = np.linalg.eigh(Hc)
    if evals[0] < FLAT_EIGENVALUE:
        v = evecs[:, 0] / np.max(np.abs(evecs[:, 0]))
        involved = [names[i] for i in range(P) if abs(v[i]) >= 0.3]
        out.append(
            f"flat valley along {involved} (smallest correlation-Hessian eigenvalue "
            f"{evals[0]:.1e} < {FLAT_EIGENVALUE:.0e}): these parameters trade off with "
            "almost no change in the objective; trust predictions, not their individual values"
        )
    return out


DEAD_RTOL = 1e-12
"""A Hessian diagonal entry at most DEAD_RTOL x the largest one: the data do not determine it."""

BOUND_RTOL = 1e-3
"""A value within BOUND_RTOL * max(1, |bound|) of a box bound (internal space) is at it."""


def bound_side(
    law: Law, name: str, value: float, lo: float, hi: float, rtol: float = BOUND_RTOL
) -> tuple[str, float] | None:
    """("lower" | "upper", the bound's natural value) when the natural ``value`` of
    parameter ``name`` sits at (or within ``rtol`` of) the internal box [lo, hi], else None.
    A parameter at its bound is not identified by the data: the box, not the data, set it."""
    log = name in law.log_params
    if log and not value > 0:
        return ("lower", float(np.exp(lo)))
    side = internal_bound_side(float(np.log(value)) if log else float(value), lo, hi, rtol)
    if side is None:
        return None
    b = lo if side == "lower" else hi
    return (side, float(np.exp(b)) if log else float(b))


def internal_bound_side(z: float, lo: float, hi: float, rtol: float = BOUND_RTOL) -> str | None:
    """ "lower" | "upper" when the internal value ``z`` is within ``rtol`` of that bound."""
    for side, b in (("lower", lo), ("upper", hi)):
        if abs(z - b) <= rtol * max(1.0, abs(b)):
            return side
    return None


def bound_warnings(
    law: Law,
    names: tuple[str, ...] | list[str],
    z: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    tied: dict[str, str] | None = None,
    rtol: float = BOUND_RTOL,
) -> list[str]:
    """One warning per free coordinate ``names[i]`` whose internal value ``z[i]`` sits at
    (within ``rtol`` of) its box bound, naming the bound (``e^14`` for a log parameter)."""
    out = []
    for i, p in enumerate(names):
        side = internal_bound_side(float(z[i]), float(lo[i]), float(hi[i]), rtol)
        if side is None:
            continue
        b = float(lo[i] if side == "lower" else hi[i])
        shown = f"e^{b:g} (= {np.exp(b):.4g})" if p in law.log_params else f"{b:g}"
        also = [q for q, t in (tied or {}).items() if t == p]
        label = p + (f" (and {', '.join(also)}, tied to it)" if also else "")
        out.append(
            f"{label} at its {side} bound {shown}: the box, not the data, set it "
            "(not identified; widen the bound, fix it, or add data that constrain it)"
        )
    return out


def at_bounds(fit, rtol: float = BOUND_RTOL) -> dict[str, tuple[str, float]]:
    """{free parameter: (side, natural bound)} for each free parameter of the FitResult
    ``fit`` that ended at its box bound (see ``bound_side``)."""
    out = {}
    for i, p in enumerate(fit.free):
        hit = bound_side(fit.law, p, fit.params[p], fit.lo[i], fit.hi[i], rtol)
        if hit is not None:
            out[p] = hit
    return out


OPEN_LEVEL = 0.95


def open_side_warnings(
    obj: Objective,
    z: np.ndarray,
    f_hat: float,
    names: tuple[str, ...] | list[str],
    lo: np.ndarray,
    hi: np.ndarray,
    law: Law,
) -> list[str]:
    """One warning naming the free coordinates ``names`` whose objective, moved alone to a
    bound (not already at it), rises less than the OPEN_LEVEL profile threshold; [] if none."""
    if z.size == 0:
        return []
    try:
        thr = calibrate(obj, z, OPEN_LEVEL).threshold
    except AnalysisInputError:  # too few points or no Huber scale: the profile says why
        return []
    if not thr > 0:
        return []
    pts, where = [], []
    for i in range(z.size):
        for side, b in (("lower", lo[i]), ("upper", hi[i])):
            if internal_bound_side(float(z[i]), float(lo[i]), float(hi[i])) != side:
                moved = z.copy()
                moved[i] = b
                pts.append(moved)
                where.append((i, side, float(b)))
    if not pts:
        return []
    f, _ = obj.value_and_grad(np.array(pts), grad=False)
    open_: dict[str, list[str]] = {}
    for (i, side, b), fi in zip(where, f):
        if np.isfinite(fi) and fi - f_hat < thr:
            p = names[i]
            open_.setdefault(p, []).append(
                f"{side} e^{b:g}" if p in law.log_params else f"{side} {b:g}"
            )
    if not open_:
        return []
    listed = "; ".join(f"{p} ({', '.join(sides)})" for p, sides in open_.items())
    msg = (
        f"open towards a bound (moved there alone, the objective rises less than the "
        f"{OPEN_LEVEL:.0%} profile threshold {thr:.3g}): {listed}; the data do not bound "
        "these parameters on that side (a flat or curved valley: see result.profile(name))"
    )
    return [msg]
