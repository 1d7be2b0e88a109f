"""How a design's target evolves with the compute it spent: one row per step.

A step is a round of the adaptive loop (loop.py) or one run of a fixed order
(baselines.py). Columns: step, runs (finished so far), flops (spent so far), sizes
(settled sizes in the fit; with several recipes, the fewest of any), value, lo, hi, width
(the target's summary, targets.py: E for an asymptote, the deciding pair's Delta E for a
ranking, the multiplier; width inf while there is no interval), decided (a ranking whose
adjacent CIs all exclude 0), order (a ranking's recipes, best first, "a < b").
Compared designs are read at the same target (``reached``: the first step whose width is
<= the target) or the same budget (``width_at``: the last step within a FLOP budget).
"""

from __future__ import annotations

import math

import polars as pl

from analysis.adaptive.targets import Summary

__all__ = ["SCHEMA", "reached", "row", "width_at"]

SCHEMA = {"step": pl.Int64, "runs": pl.Int64, "flops": pl.Float64, "sizes": pl.Int64,
          "value": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "width": pl.Float64,
          "decided": pl.Boolean, "order": pl.String}


def row(step: int, runs: int, flops: float, summary: Summary, sizes: int) -> dict:
    return {"step": step, "runs": runs, "flops": float(flops), "sizes": sizes,
            "value": summary.value, "lo": summary.lo, "hi": summary.hi, "width": summary.width,
            "decided": summary.decided, "order": " < ".join(summary.order) or None}


def reached(trajectory: pl.DataFrame, target_width: float) -> dict | None:
    """The first row whose width is <= ``target_width`` or that is decided (None: never)."""
    hit = trajectory.filter((pl.col("width") <= target_width) | pl.col("decided"))
    return hit.row(0, named=True) if hit.height else None


def width_at(trajectory: pl.DataFrame, flops: float) -> float:
    """The width at the last row that spent <= ``flops`` (inf: none did)."""
    within = trajectory.filter(pl.col("flops") <= flops)
    return float(within["width"][-1]) if within.height else math.inf
