"""The designs the adaptive loop is compared with, on the same budget and the same target.

- ``grid_order``: the fixed grid, every size x every tuned cell (replicate 0), sizes in
  ascending order and, within a size, the cells in ``itertools.product`` order of the axes:
  the order a spec's nested grid launches in;
- ``random_order``: random search, the same cells in a seeded random order.

``run_fixed`` trains such an order one run at a time and fits the target after every run
(target_fits.py; a fit is reused while the settled sizes' points are unchanged), stopping at
the target width or at the first run the budget cannot pay for. This reads a grid as if it
were stopped as early as the same rule allows, which flatters the grid: a fixed grid is
launched whole and fitted afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.adaptive import trajectory
from analysis.adaptive.loop import Trainer
from analysis.adaptive.planner import GRID
from analysis.adaptive.space import CandidateSpace
from analysis.adaptive.target_fits import TargetFit, judge, settled_sizes
from analysis.adaptive.targets import Asymptote, Summary, Target

__all__ = ["FixedResult", "grid_order", "random_order", "run_fixed"]


@dataclass(frozen=True)
class FixedResult:
    runs: pl.DataFrame
    """The runs trained, in order, with their loss."""
    trajectory: pl.DataFrame
    """One row per run (trajectory.SCHEMA; step = runs)."""
    stopped: str
    """"target", "budget" or "exhausted" (the order ran out)."""
    summary: Summary
    fits: dict[str, TargetFit]

    @property
    def fit(self) -> TargetFit:
        """The fit of the target's first recipe."""
        return next(iter(self.fits.values()))


def grid_order(space: CandidateSpace, flops) -> pl.DataFrame:
    """Every size x cell at replicate 0: sizes ascending, cells in product order."""
    return space.table(flops).filter(pl.col("replicate") == 0)


def random_order(space: CandidateSpace, flops, seed: int = 0) -> pl.DataFrame:
    """The grid's runs in a random order drawn from ``numpy.random.default_rng(seed)``."""
    grid = grid_order(space, flops)
    return grid[np.random.default_rng(seed).permutation(grid.height)]


def run_fixed(trainer: Trainer, space: CandidateSpace, order: pl.DataFrame, budget: float,
              target_width: float, *, level: float = 0.95,
              target: Target | None = None) -> FixedResult:
    """Train ``order`` run by run until the target is met (its width is <= ``target_width``,
    or a ranking is decided) or the next run would exceed ``budget`` FLOPs (module
    docstring). ``target``: targets.py (default: E of the whole space)."""
    target = target if target is not None else Asymptote(GRID, space, level)
    trained = trainer.train(order)  # losses depend on the run alone (trainer.py)
    cache: dict = {}
    rows, spent, stopped = [], 0.0, "exhausted"
    summary, fits = judge(target, trained.head(0), cache)
    n = 0
    for n in range(1, trained.height + 1):
        cost = float(trained["flops"][n - 1])
        if spent + cost > budget:
            stopped, n = "budget", n - 1
            break
        spent += cost
        summary, fits = judge(target, trained.head(n), cache)
        rows.append(trajectory.row(n, n, spent, summary, settled_sizes(fits)))
        if summary.met(target_width):
            stopped = "target"
            break
    return FixedResult(trained.head(n), pl.DataFrame(rows, schema=trajectory.SCHEMA), stopped,
                       summary, fits)
