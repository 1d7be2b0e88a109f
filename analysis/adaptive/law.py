"""The recipe law of an adaptive study, its weighted fit and its Jacobian.

    L(x) = A / x^B + E,   x = N / SCALE (``analysis.fit.power_law.SCALE``)

Kim et al.'s recipe law (arXiv 2509.14786), fitted by the one engine of this law
(``analysis.fit.power_law.fit_kim``: variable projection, polished by
``fit_law(PowerLaw(), loss="mse", space="linear")``) with per-point weights: a size's point
is the mean of m seed replicates, whose variance is sigma^2 / m, so it weighs m. The report,
``compare`` and ``next`` fit it there too. ``identified.MIN_SIZES`` (sizes before an interval, with its
measured reason) and ``power_law.SCALE``: the adaptive modules import them from there.

The Jacobian of L in the natural parameters theta = (A, B, E), one row per x
(``power_law.jacobian``):

    dL/dA = x^-B,   dL/dB = -A ln(x) x^-B,   dL/dE = 1.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from analysis.fit.power_law import fit_kim

__all__ = ["fit_points"]


def fit_points(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """Weighted least-squares (A, B, E) of A/x^B + E on >= 4 points (x, y, weights w)
    (``power_law.fit_kim``). Memoised on the points (a loop refits the same points while they
    do not change)."""
    key = tuple(np.asarray(v, dtype=float).tobytes() for v in (x, y, w))
    return _fit_cached(key)


@lru_cache(maxsize=4096)
def _fit_cached(key: tuple[bytes, bytes, bytes]) -> tuple[float, float, float]:
    x, y, w = (np.frombuffer(b, dtype=float) for b in key)
    fit = fit_kim(x, y, w)
    return fit.A, fit.B, fit.E
