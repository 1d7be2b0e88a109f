"""A fit's search space: its box, its start points, and how many starts reached the optimum.

- ``box``: the law's internal box per free coordinate, narrowed by the user's natural-value
  ``bounds``; a coordinate shared by tied parameters gets the intersection of their boxes.
- ``start_points``: "grid" (the Cartesian product of the law's per-parameter grids; above
  ``MAX_GRID`` starts, a ``seed``-ed subsample), an int (that many ``seed``-ed uniform
  starts over the grid's range), or natural-value start mapping(s); clipped into the box.
- ``share_converged``: the share of the starts run to convergence whose final objective
  lies within ``STARTS_RTOL`` (relative) + ``STARTS_ATOL`` (absolute, for exact fits) of
  the best. fit/fit.py runs only the ``keep`` (64) best screened starts to convergence; the
  others stopped in the screen, which is no evidence either way (on Epoch's data 26 of
  the 4,500 screened starts are then within 1% of the optimum and none within 1e-6, yet
  all 64 continued ones reach it). So with up to ``keep`` starts (an int ``starts``
  of 10, say) the share is over all starts; with more it is the share of the ``keep``
  most promising ones: a low value means the optimum is hard to reach even from the best
  starts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws.laws import Law
from analysis.laws.tie import Coordinates

__all__ = ["MAX_GRID", "STARTS_ATOL", "STARTS_RTOL", "box", "share_converged", "start_points"]

MAX_GRID = 50_000  # a larger product grid is subsampled (seeded) to this many starts
STARTS_RTOL = 1e-6
STARTS_ATOL = 1e-14


def _internal(law: Law, p: str, v: float) -> float:
    return law.param_to_internal(p, v) if p in law.log_params else float(v)


def box(
    law: Law, coords: Coordinates, bounds: Mapping[str, tuple[float | None, float | None]] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Internal (lo, hi) per free coordinate, each (P_free,)."""
    law.check_names(bounds)
    lo = np.array([max(law.bounds[q][0] for q in coords.members(p)) for p in coords.names])
    hi = np.array([min(law.bounds[q][1] for q in coords.members(p)) for p in coords.names])
    for p, (b_lo, b_hi) in (bounds or {}).items():
        if p in coords.tied:
            raise AnalysisInputError(
                f"bounds given for '{p}', which is tied to '{coords.tied[p]}': bound that one"
            )
        if p not in coords.names:
            raise AnalysisInputError(f"bounds given for '{p}', which is fixed")
        i = coords.names.index(p)
        if b_lo is not None:
            lo[i] = _internal(law, p, b_lo)
        if b_hi is not None:
            hi[i] = _internal(law, p, b_hi)
        if not lo[i] < hi[i]:
            raise AnalysisInputError(f"bounds for '{p}' are empty: {(b_lo, b_hi)}")
    return lo, hi


def start_points(
    law: Law, names: tuple[str, ...], starts: Any, lo: np.ndarray, hi: np.ndarray, seed: int = 0
) -> np.ndarray:
    """Start points (S, P_free) in internal space for the free coordinates ``names``."""
    if isinstance(starts, str):
        if starts != "grid":
            raise AnalysisInputError(
                f"starts must be 'grid', an int, or start points; got '{starts}'"
            )
        z = np.array(list(itertools.product(*[law.grid[p] for p in names])), dtype=float)
        if z.shape[0] > MAX_GRID:
            keep = np.random.default_rng(seed).choice(z.shape[0], MAX_GRID, replace=False)
            z = z[np.sort(keep)]
    elif isinstance(starts, (int, np.integer)):
        rng = np.random.default_rng(seed)
        g_lo = np.array([min(law.grid[p]) for p in names])
        g_hi = np.array([max(law.grid[p]) for p in names])
        z = g_lo + (g_hi - g_lo) * rng.random((int(starts), len(names)))
    else:  # a mapping or a sequence of mappings of natural values
        rows = [starts] if isinstance(starts, Mapping) else list(starts)
        z = np.array([[_internal(law, p, r[p]) for p in names] for r in rows], dtype=float)
    if z.size == 0:
        raise AnalysisInputError("no start points")
    return np.clip(z.reshape(-1, len(names)), lo, hi)


def share_converged(f_final: np.ndarray, f_best: float) -> float:
    """Share of ``f_final`` (the final objectives of the starts run to convergence) within
    STARTS_RTOL |f_best| + STARTS_ATOL of ``f_best``."""
    if f_final.size == 0:
        return 1.0
    tol = STARTS_RTOL * abs(f_best) + STARTS_ATOL
    return float(np.mean(np.isfinite(f_final) & (f_final <= f_best + tol)))
