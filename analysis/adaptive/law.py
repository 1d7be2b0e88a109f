"""The recipe law of an adaptive study, its weighted fit and its Jacobian.

    L(x) = A / x^B + E,   x = N / SCALE (millions of parameters, ``infinite_compute.SCALE``)

Kim et al.'s recipe law (arXiv 2509.14786), fitted as ``recipes.fit_asymptote`` fits it
(least squares on the loss itself) but with per-point weights: a size's point is the mean
of m seed replicates, whose variance is sigma^2 / m, so it weighs m. The fit is
``fit_law(PowerLaw(), loss="mse", space="linear", weights=m)`` (PowerLaw names B "alpha")
from one start found by profiling B (``start``), not fit_law's 336-point grid: a loop
refits after every round, and the profiled start lies in the optimum's basin.

The Jacobian of L in the natural parameters theta = (A, B, E), one row per x (the one
``recipes.AsymptoteFit.band`` uses):

    dL/dA = x^-B,   dL/dB = -A ln(x) x^-B,   dL/dE = 1.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np

from analysis.fit.fit import fit_law
from analysis.laws.laws import PowerLaw

__all__ = ["MIN_SIZES", "SCALE", "fit_points", "jacobian"]

SCALE = 1e6
START_B = tuple(float(b) for b in np.geomspace(0.02, 4.0, 60))
"""Exponents the start of a fit is profiled over (``start``)."""
MIN_SIZES = 5
"""Sizes a fit needs before its asymptote has an interval: two residual degrees of freedom.
With 3 the three parameters interpolate; with 4 (``infinite_compute.MIN_POINTS``, the
report's rule) the Wald interval rests on one residual degree of freedom and was not to be
trusted here: on the CPU twin's real runs, the adaptive (ridge) loop's first intervals on 4
sizes (0.29-0.37 nats wide) missed the whole cache's E in 5 of 10 arms, and a ranking
decided on 4 sizes per recipe was wrong in 3 of 12 synthetic seeds (docs/adaptive.md).
With 5: its first intervals covered E in 8 of 8 arms, and no decision was wrong."""


def jacobian(A: float, B: float, x: np.ndarray) -> np.ndarray:
    """dL/d(A, B, E) at x (n,) -> (n, 3)."""
    x = np.asarray(x, dtype=float)
    p = x ** -B
    return np.stack([p, -A * np.log(x) * p, np.ones_like(x)], axis=1)


def fit_points(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """Weighted least-squares (A, B, E) of A/x^B + E on >= 4 points (x, y, weights w).
    Memoised on the points (a loop refits the same points while they do not change)."""
    key = tuple(np.asarray(v, dtype=float).tobytes() for v in (x, y, w))
    return _fit_cached(key)


def start(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> dict[str, float]:
    """The fit's start: for each B on a grid, (A, E) by weighted linear least squares (the
    law is linear in them at fixed B: variable projection, Golub & Pereyra 1973); the B
    with the least weighted squared error and A, E > 0 wins."""
    sw = np.sqrt(w)
    best = (np.inf, {"A": 1.0, "alpha": 0.5, "E": float(np.min(y)) / 2})
    for B in START_B:
        X = np.stack([x**-B, np.ones_like(x)], axis=1) * sw[:, None]  # (n, 2)
        (A, E), *_ = np.linalg.lstsq(X, y * sw, rcond=None)
        sse = float(np.sum((X @ np.array([A, E]) - y * sw) ** 2))
        if A > 0 and E > 0 and sse < best[0]:
            best = (sse, {"A": float(A), "alpha": float(B), "E": float(E)})
    return best[1]


@lru_cache(maxsize=4096)
def _fit_cached(key: tuple[bytes, bytes, bytes]) -> tuple[float, float, float]:
    x, y, w = (np.frombuffer(b, dtype=float) for b in key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_law(PowerLaw(), {"N": x, "loss": y}, loss="mse", space="linear", weights=w,
                      starts=[start(x, y, w)], warn=False)
    return fit.params["A"], fit.params["alpha"], fit.params["E"]
