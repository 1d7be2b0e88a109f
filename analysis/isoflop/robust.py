"""A confidence interval that also covers the analysis choices, not only resampling.

The bootstrap over points (``analysis.isoflop.isoflop``) measures how much the optima move
when the runs are redrawn. It does not measure the model error of approach 2: the window
around each minimum and the curve fitted there (parabola vs interpolated argmin) move the
exponent by as much or more on real sweeps (Porian et al. 2024, arXiv 2406.19146, find the
fitting choices behind most of the Kaplan-Hoffmann discrepancy). So the fit is redone for
every choice in ``choices(w)``: windows w/2, w, 2w x methods "parabola" and "interp" (6
refits; with no window, the two methods on all points). Their spread about the main
estimate, s_lo = max(0, theta - min_i theta_i) and s_hi = max(0, max_i theta_i - theta),
is added in quadrature to each side of the bootstrap interval (lo, hi):

    lo' = theta - sqrt((theta - lo)^2 + s_lo^2),   hi' = theta + sqrt((hi - theta)^2 + s_hi^2)

(two independent error sources, resampling and choice; the widening is never less than
the larger of the two). Applied to a, b and ln of the coefficients.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.isoflop.estimate import METHODS

__all__ = ["choices", "widen"]


def choices(window: float | None) -> list[tuple[float | None, str]]:
    """The (window, method) refits: w/2, w, 2w x both methods (both methods alone when
    ``window`` is None)."""
    windows = [None] if window is None else [window / 2, window, window * 2]
    return [(w, m) for w in windows for m in METHODS]


def widen(theta: float, ci: tuple[float, float], alternatives: np.ndarray) -> tuple[float, float]:
    """(lo', hi'): the bootstrap interval ``ci`` widened by the spread of the finite
    ``alternatives`` (the module docstring); ``ci`` unchanged when none is finite."""
    alt = alternatives[np.isfinite(alternatives)]
    if not alt.size or not np.isfinite(theta):
        return ci
    s_lo, s_hi = max(0.0, theta - float(alt.min())), max(0.0, float(alt.max()) - theta)
    lo, hi = ci
    return (theta - math.hypot(theta - lo, s_lo), theta + math.hypot(hi - theta, s_hi))
