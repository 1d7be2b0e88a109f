"""When the asymptote E of a fit L(x) = A/x^B + E (``power_law.PowerLawFit``) may be
written: the sizes it needs (``MIN_SIZES``, ``MIN_SIZES_E``), the flag of an interval on one
residual degree of freedom (``one_dof_flag``), and whether E is a limit the data identify
(``why_not_identified``; ``unidentified`` for a fit). The texts call the asymptote "C".

Pure numpy. The ways E is not identified (each gives the reason, in words):
- B ~ 0 (or A = 0, a flat fitted curve): the loss does not fall with x (flat or
  non-monotone), C + A is its mean level;
- C at its bound 0: the points do not bend over the range, nothing pins an asymptote;
- the fitted fall across the data, L(x_min) - L(x_max), is within twice the residual
  scatter: the curve's shape is noise (typically a huge B with a tiny A), C is again a
  mean level;
- some point lies above the best loss at a smaller x by more than the residual scatter: the
  loss rises again with x (overfitting, as the standard recipe does in Kim et al. 2025), and
  a monotone A/x^B + C through such points extrapolates nothing;
- the half-width of C's confidence interval exceeds the fitted fall across the data: the
  asymptote is less certain than everything the points show (e.g. C = 1.1 +- 36 nats), so
  any number derived from it (a data multiplier) is noise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from analysis.fit.power_law import PowerLawFit

__all__ = ["MIN_SIZES", "MIN_SIZES_E", "min_sizes", "min_sizes_e", "one_dof_flag", "unidentified",
           "why_not_identified"]

MIN_SIZES = 5
"""Sizes (distinct x) before a decision rests on a 3-parameter fit's asymptote: two residual
degrees of freedom (``min_sizes(3)``). On 4 sizes, decisions measured wrong too often (the
numbers: docs/adaptive.md, "Other targets" and "CPU twin comparison"). The one rule of the
report, ``compare``, ``next`` and the adaptive loop."""


MIN_SIZES_E = 4
"""Sizes before a recipe's asymptote E is *written* with its interval: one residual degree of
freedom (``min_sizes_e(3)``), printed flagged (``one_dof_flag``): honest but wide (t_0.975 =
12.7). On Kim et al.'s 4 sizes it gives their E = 3.17 to the digit (docs/concepts.md,
"Recipes and verdicts")."""


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



def why_not_identified(B: float, C: float, x, y, fitted, c_halfwidth: float | None = None,
                       n_free: int = 3) -> str | None:
    """The reason C is not identified (no parameter of an unidentified fit is written; a
    rise is given in the data's numbers: where, how far, against the scatter), or None. ``fitted``: the fit's values at
    ``x``; ``c_halfwidth``: the half-width of C's interval, where the fit has one (nan or inf: no finite interval);
    ``n_free``: the fit's free parameters (2 when B is fixed), for the residual scatter."""
    x, y, fitted = (np.asarray(v, dtype=float) for v in (x, y, fitted))
    if B < 1e-3 or float(np.ptp(fitted)) == 0.0:  # B ~ 0, or A = 0: a flat fitted curve
        return "B ~ 0: the loss does not fall with x, C is a mean level, not a limit"
    if C < 1e-2 * float(np.min(y)):  # within 1% of the bound
        return "C at its bound 0: the points do not bend, no asymptote is identified"
    scatter = float(np.sqrt(np.sum((y - fitted) ** 2) / max(y.size - n_free, 1)))
    order = np.argsort(x, kind="stable")
    by_x = y[order]
    above = by_x - np.minimum.accumulate(by_x)  # above the best at a smaller x
    if (rise := float(np.max(above))) > max(scatter, 1e-12):
        at = float(x[order][int(np.argmax(above))])
        return (f"the loss rises again with x (the point at x = {at:.4g} lies {rise:.4f} above the "
                f"best loss at a smaller x, more than the residual scatter {scatter:.4f}: "
                "overfitting), so the points are not a falling curve and no asymptote is identified")
    drop = float(fitted[np.argmin(x)] - fitted[np.argmax(x)])
    if drop <= 2.0 * scatter:
        return ("the fitted fall across the data is within twice the residual scatter: the loss "
                "does not resolvably fall with x, C is a mean level")
    if c_halfwidth is not None and not c_halfwidth <= drop:
        return ("the CI half-width of C exceeds the fitted fall across the data: the asymptote is "
                "less certain than the whole observed fall, nothing pins it")
    return None


def unidentified(fit: PowerLawFit | None) -> str | None:
    """Why E of a fit is not a limit of the data (``why_not_identified``), or None."""
    if fit is None:
        return "not fitted"
    half = None
    if fit.x.size > fit.n_free:  # else there is no interval
        lo, hi = fit.ci()
        half = (hi - lo) / 2 if np.isfinite(hi - lo) else math.inf
    return why_not_identified(fit.B, fit.E, fit.x, fit.y, fit(fit.x), c_halfwidth=half,
                              n_free=fit.n_free)
