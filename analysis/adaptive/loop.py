"""The adaptive loop: run a seed design, then plan and run batches until the target's CI
is narrow enough or the budget is spent.

Round 0 trains ``seed_design``. Every later round r:

1. fit the target on the finished runs (``target.judge``: each recipe's fit and the
   target's summary, targets.py); stop ("target") when its width is <= ``target_width``
   or, for a ranking, when the ranking is decided;
2. plan (planner.py): score every candidate not yet run, choose up to ``batch`` runs
   within the budget left; when it chooses none, stop ("budget") if it would choose runs
   without the budget, else ("exhausted"): no action is left that would shrink the width;
3. train the chosen runs (``trainer.train``) and record the round: the candidate table
   with scores (a polars frame, ready to be written as parquet by a caller), the chosen
   runs, the fit before the round.

A run's identity is its key (space.py); the pending candidates are the candidate table
minus the keys done, so no run is proposed twice. The trainer is anything with
``flops(frame) -> (n,)`` and ``train(frame) -> frame`` plus a ``loss`` column, e.g.
trainer.SyntheticTrainer. Nothing here reads a clock: a result depends on its inputs only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl

from analysis.adaptive import trajectory
from analysis.adaptive.planner import GRID, plan_next, start_cell
from analysis.adaptive.space import CandidateSpace
from analysis.adaptive.target_fits import TargetFit, judge, settled_sizes, size_points
from analysis.adaptive.targets import Asymptote, Summary, Target
from analysis.errors import AnalysisInputError

__all__ = ["AdaptiveResult", "Round", "Trainer", "run_adaptive", "seed_design"]


class Trainer(Protocol):
    def flops(self, frame: pl.DataFrame) -> np.ndarray: ...

    def train(self, frame: pl.DataFrame) -> pl.DataFrame: ...


@dataclass(frozen=True)
class Round:
    """One planning round: the candidate table (every pending run, scored), the chosen
    runs, the target before them and the planning model's width then."""

    index: int
    table: pl.DataFrame
    chosen: pl.DataFrame
    summary: Summary
    predicted_width: float


@dataclass(frozen=True)
class AdaptiveResult:
    runs: pl.DataFrame
    """Every finished run: the candidate columns, loss, round."""
    rounds: tuple[Round, ...]
    trajectory: pl.DataFrame
    """One row per round (trajectory.SCHEMA), round 0 = the seed design."""
    stopped: str
    """"target", "budget", "exhausted" or "max_rounds"."""
    summary: Summary
    """The target on every finished run."""
    fits: dict[str, TargetFit]
    """Each recipe's fit on every finished run."""

    @property
    def fit(self) -> TargetFit:
        """The fit of the target's first recipe (the only one of an asymptote target)."""
        return next(iter(self.fits.values()))


def seed_design(space: CandidateSpace, flops, n_sizes: int = 4) -> pl.DataFrame:
    """The start cell (``Axis.start``) at ``n_sizes`` sizes spread evenly over the ladder by
    index, smallest and largest included: enough sizes for a first planning fit."""
    idx = np.unique(np.rint(np.linspace(0, len(space.sizes) - 1, n_sizes)).astype(int))
    empty = size_points(pl.DataFrame(), space)
    items = [(space.sizes[i], start_cell(space, empty, space.sizes[i]), 0) for i in idx]
    return space.rows(items, flops)


def run_adaptive(trainer: Trainer, space: CandidateSpace, seed: pl.DataFrame, budget: float,
                 target_width: float, *, batch: int = 4, level: float = 0.95,
                 noise_sd: float = 0.02, studentized: bool = True,
                 max_rounds: int = 1000, target: Target | None = None) -> AdaptiveResult:
    """The loop of the module docstring. ``seed``: the seed design (a run frame of
    ``space``, e.g. ``seed_design``); ``budget``: FLOPs, the seed design included;
    ``target_width``: the full width of the target's CI to reach; ``noise_sd``: the
    planner's prior guess of one run's noise sd; ``target``: targets.py (default: E of
    the whole space)."""
    target = target if target is not None else Asymptote(GRID, space, level)
    table = space.table(trainer.flops)
    cols = table.columns
    if missing := set(seed["key"].to_list()) - set(table["key"].to_list()):
        raise AnalysisInputError(f"seed design runs outside the candidate space: {sorted(missing)[:3]}")
    seed = table.filter(pl.col("key").is_in(seed["key"].to_list()))
    if (spent := float(seed["flops"].sum())) > budget:
        raise AnalysisInputError(f"the seed design needs {spent:.3g} FLOPs, over the budget {budget:.3g}")
    done = trainer.train(seed).select(*cols, "loss").with_columns(pl.lit(0).alias("round"))
    summary, fits = judge(target, done)
    traj = [trajectory.row(0, done.height, spent, summary, settled_sizes(fits))]
    rounds: list[Round] = []
    stopped = "max_rounds"
    for r in range(1, max_rounds + 1):
        if summary.met(target_width):
            stopped = "target"
            break
        pending = table.filter(~pl.col("key").is_in(done["key"].to_list()))
        plan = plan_next(space, done, pending, batch=batch, budget_left=budget - spent,
                         noise_sd=noise_sd, level=level, studentized=studentized, target=target)
        rounds.append(Round(r, plan.table, plan.chosen, summary, plan.width))
        if plan.chosen.height == 0:  # "budget" when, without it, the round would choose runs
            free = plan_next(space, done, pending, batch=batch, budget_left=math.inf,
                             noise_sd=noise_sd, level=level, studentized=studentized,
                             target=target)  # (the sweep loop's rule, scalelab.adaptive.loop)
            stopped = "budget" if free.chosen.height else "exhausted"
            break
        new = trainer.train(plan.chosen.select(cols)).select(*cols, "loss")
        done = pl.concat([done, new.with_columns(pl.lit(r).alias("round"))])
        spent += float(new["flops"].sum())
        summary, fits = judge(target, done)
        traj.append(trajectory.row(r, done.height, spent, summary, settled_sizes(fits)))
    else:
        stopped = "target" if summary.met(target_width) else "max_rounds"
    return AdaptiveResult(done, tuple(rounds), pl.DataFrame(traj, schema=trajectory.SCHEMA),
                          stopped, summary, fits)

