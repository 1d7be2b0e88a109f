"""Whether the asymptote C of a fit L(x) = A/x^B + C is a limit the data identify.

Pure numpy. Three ways it is not (each gives the reason, in words):
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

import numpy as np

__all__ = ["why_not_identified"]


def why_not_identified(B: float, C: float, x, y, fitted, c_halfwidth: float | None = None,
                       n_free: int = 3) -> str | None:
    """The reason C is not identified (no parameter of an unidentified fit is written; a
    rise is given in the data's numbers: where, how far, against the scatter), or None. ``fitted``: the fit's values at ``x``; ``c_halfwidth``: the
    half-width of C's interval, where the fit has one (nan or inf: no finite interval);
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
