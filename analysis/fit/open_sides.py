"""A cheap test, run on every fit, for a parameter the data leave open towards a box bound.

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

from analysis.fit.diagnostics import internal_bound_side
from analysis.errors import AnalysisInputError
from analysis.laws.laws import Law
from analysis.laws.fit_objective import Objective
from analysis.fit.profile_threshold import calibrate

__all__ = ["OPEN_LEVEL", "open_side_warnings"]

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
