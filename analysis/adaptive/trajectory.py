"""How a design's target evolves with the compute it spent: one row per step.

A step is a round of the adaptive loop (loop.py) or one run of a fixed order
(baselines.py). Columns: step, runs (finished so far), flops (spent so far), sizes
(settled sizes in the fit), E, lo, hi, width (inf while there is no interval; target.py).
Compared designs are read at the same target (``reached``: the first step whose width is
<= the target) or the same budget (``width_at``: the last step within a FLOP budget).
"""

from __future__ import annotations

import math

import polars as pl

from analysis.adaptive.target import TargetFit

__all__ = ["SCHEMA", "reached", "row", "width_at"]

SCHEMA = {"step": pl.Int64, "runs": pl.Int64, "flops": pl.Float64, "sizes": pl.Int64,
          "E": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "width": pl.Float64}


def row(step: int, runs: int, flops: float, fit: TargetFit) -> dict:
    lo, hi = fit.ci if fit.theta is not None else (math.nan, math.nan)
    return {"step": step, "runs": runs, "flops": float(flops), "sizes": fit.n_sizes,
            "E": fit.E, "lo": lo, "hi": hi, "width": fit.width}


def reached(trajectory: pl.DataFrame, target_width: float) -> dict | None:
    """The first row whose width is <= ``target_width`` (None: never)."""
    hit = trajectory.filter(pl.col("width") <= target_width)
    return hit.row(0, named=True) if hit.height else None


def width_at(trajectory: pl.DataFrame, flops: float) -> float:
    """The width at the last row that spent <= ``flops`` (inf: none did)."""
    within = trajectory.filter(pl.col("flops") <= flops)
    return float(within["width"][-1]) if within.height else math.inf
