"""Adaptive vs grid vs random on synthetic trainers: the numbers of docs/adaptive.md.

For each seed s, ``trainer(s)`` is one synthetic study (its own noise; trainer.py) and the
three designs run on it with the same budget (default: the full grid's FLOPs) and the
same target (target_fits.py):

- "grid": ``baselines.grid_order``, read as if stopped at the target (flatters the grid);
- "random": ``baselines.random_order`` with seed s;
- "adaptive": ``loop.run_adaptive`` from ``loop.seed_design``.

One row per (seed, design, target width): reached (the target width within the budget), runs and
flops (fraction of the budget) at the first step that reached it (not reached: the runs
and flops the design spent, a lower bound on what it needs), E, lo, hi, width at that
step (or at the end), covers (lo <= truth <= hi). With ``at_budget`` the designs run
on to the end of the budget (target width 0) and ``width_at_half``/``width_at_budget``
report E's CI width after half / all of the budget.

``decision_study`` does the same for a ranking target (objective.Ranking) with a known
order: whether each design decides the ranking within the budget, whether it decides it
right, and what it spent by then.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import polars as pl

from analysis.adaptive.baselines import grid_order, random_order, run_fixed
from analysis.adaptive.loop import run_adaptive, seed_design
from analysis.adaptive.space import CandidateSpace
from analysis.adaptive.targets import Ranking, Target
from analysis.adaptive.trainer import SyntheticTrainer
from analysis.adaptive.trajectory import reached, width_at
from analysis.errors import AnalysisInputError

__all__ = ["DESIGNS", "decision_study", "design_study", "summarise", "summarise_decisions"]

DESIGNS = ("grid", "random", "adaptive")


def _row(seed: int, design: str, traj: pl.DataFrame, budget: float, target: float,
         truth: float) -> dict:
    hit = reached(traj, target)
    last = hit if hit is not None else traj.row(-1, named=True)
    lo, hi = last["lo"], last["hi"]
    return {"seed": seed, "design": design, "reached": hit is not None, "runs": last["runs"],
            "flops": last["flops"] / budget, "E": last["value"], "lo": lo, "hi": hi,
            "width": last["width"],
            "covers": bool(lo <= truth <= hi) if math.isfinite(last["width"]) else None}


def design_study(space: CandidateSpace, trainer: Callable[[int], SyntheticTrainer],
                 seeds: Iterable[int], target_width: float | Sequence[float], *,
                 budget: float | None = None, batch: int = 4, level: float = 0.95,
                 at_budget: bool = False, designs: tuple[str, ...] = DESIGNS) -> pl.DataFrame:
    """One row per (seed, design, target) (module docstring). Several targets need
    ``at_budget`` (each design must run past the loosest one) unless there is one."""
    targets = [float(target_width)] if isinstance(target_width, (int, float)) else list(target_width)
    if len(targets) > 1 and not at_budget:
        raise AnalysisInputError("several target widths need at_budget=True")
    rows = []
    for s in seeds:
        tr = trainer(s)
        B = float(grid_order(space, tr.flops)["flops"].sum()) if budget is None else float(budget)
        for d in designs:
            traj = _trajectory(d, tr, space, s, B, 0.0 if at_budget else targets[0], batch, level)
            for t in targets:
                row = {"target": t, **_row(s, d, traj, B, t, tr.truth)}
                if at_budget:
                    row |= {"width_at_half": width_at(traj, B / 2),
                            "width_at_budget": width_at(traj, B)}
                rows.append(row)
    return pl.DataFrame(rows)


def _trajectory(design: str, tr, space: CandidateSpace, seed: int, budget: float, stop: float,
                batch: int, level: float, target: Target | None = None) -> pl.DataFrame:
    """One design's trajectory on one trainer."""
    if design == "adaptive":
        return run_adaptive(tr, space, seed_design(space, tr.flops), budget, stop, batch=batch,
                            level=level, target=target).trajectory
    if design not in DESIGNS:
        raise AnalysisInputError(f"unknown design {design!r}; choose from {DESIGNS}")
    order = (grid_order(space, tr.flops) if design == "grid"
             else random_order(space, tr.flops, seed))
    return run_fixed(tr, space, order, budget, stop, level=level, target=target).trajectory


def decision_study(space: CandidateSpace, trainer: Callable[[int], object], seeds: Iterable[int],
                   target: Ranking, truth: Sequence[str], *, budget: float | None = None,
                   batch: int = 4, designs: tuple[str, ...] = DESIGNS) -> pl.DataFrame:
    """Ranking designs (objective.Ranking) against a known order ``truth`` (best first).
    One row per (seed, design): decided (within the budget), right (the order at the first
    decided step is ``truth``; None when never decided), runs and flops (fraction of the
    budget) at that step (else what was spent), and the order at the end of the budget."""
    rows = []
    want = " < ".join(truth)
    for s in seeds:
        tr = trainer(s)
        B = float(grid_order(space, tr.flops)["flops"].sum()) if budget is None else float(budget)
        for d in designs:
            traj = _trajectory(d, tr, space, s, B, 0.0, batch, target.level, target)
            hit = traj.filter(pl.col("decided"))
            at = hit.row(0, named=True) if hit.height else traj.row(-1, named=True)
            rows.append({"seed": s, "design": d, "decided": bool(hit.height),
                         "right": (at["order"] == want) if hit.height else None,
                         "runs": at["runs"], "flops": at["flops"] / B,
                         "end_order": traj["order"][-1]})
    return pl.DataFrame(rows, schema_overrides={"right": pl.Boolean})


def summarise_decisions(study: pl.DataFrame) -> pl.DataFrame:
    """Per design: seeds, decided right / wrong / never, and the median runs and flops of the
    seeds that decided (right or wrong)."""
    order = {d: i for i, d in enumerate(DESIGNS)}
    decided = pl.col("decided")
    return (study.group_by("design").agg(
        pl.len().alias("seeds"), pl.col("right").eq(True).sum().alias("right"),
        pl.col("right").eq(False).sum().alias("wrong"),
        (~decided).sum().alias("undecided"),
        pl.col("runs").filter(decided).median().alias("runs_median"),
        pl.col("flops").filter(decided).median().alias("flops_median"))
        .sort(pl.col("design").replace_strict(order, default=len(order))))


def summarise(study: pl.DataFrame) -> pl.DataFrame:
    """Per target and design: seeds, reached (share), median/mean runs and flops to the target
    (censored at what was spent where not reached), coverage of the truth, and with
    ``at_budget`` the median widths at half and all of the budget."""
    aggs = [pl.len().alias("seeds"), pl.col("reached").mean().alias("reached"),
            pl.col("runs").median().alias("runs_median"), pl.col("runs").mean().alias("runs_mean"),
            pl.col("flops").median().alias("flops_median"), pl.col("flops").mean().alias("flops_mean"),
            pl.col("covers").mean().alias("covers")]
    if "width_at_budget" in study.columns:
        aggs += [pl.col("width_at_half").median(), pl.col("width_at_budget").median()]
    order = {d: i for i, d in enumerate(DESIGNS)}
    return (study.group_by("target", "design").agg(aggs)
            .sort(pl.col("target"), pl.col("design").replace_strict(order, default=len(order))))
