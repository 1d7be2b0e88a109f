"""Adaptive scaling studies: choose the next runs that most shrink the CI of a target per
FLOP: a recipe's asymptote E, the ranking of recipes by E, or E's data multiplier (method,
formulas and results: docs/adaptive.md).

One concept per module:

- ``space``: the candidate space, sizes x tuned axes x seed replicates; a run's key;
  recipes as slices of it;
- ``trainer``: a synthetic trainer, the recipe law + a tuning penalty + noise, known truth
  (and several recipes on one grid);
- ``targets``: the targets (E, ranking, multiplier) as functions of the recipes' E
  estimates, their CI widths and what planning minimises;
- ``law``: A/x^B + E, its weighted fit (``analysis.fit.fit.fit_law``) and Jacobian;
- ``target_fits``: best cell per size (the report's rule, ``analysis.tables.cells``),
  settled sizes, E and its interval or the reason there is none (``recipe_asymptote``, the
  report's); a target judged on the finished runs (``judge``);
- ``multiplier``: the data multiplier of E, the report's law choice and bootstrap CI;
- ``posterior``: the linearised posterior of the law and E's expected CI width after a
  run (c-optimal design, Sherman-Morrison update: no simulation);
- ``planner``: actions (settle a size, replicate a cell), scores per FLOP, greedy batches,
  the per-round candidate table;
- ``loop``: ``run_adaptive``, rounds until the target width or the budget;
- ``baselines``: the fixed grid and random search on the same budget;
- ``trajectory``: width against runs and FLOPs, read at a target or a budget.

Pure numpy/scipy/polars on top of ``analysis``' fitting; no scalelab, no file I/O, no clock.
"""

from analysis.adaptive.baselines import FixedResult, grid_order, random_order, run_fixed
from analysis.adaptive.loop import AdaptiveResult, Round, run_adaptive, seed_design
from analysis.adaptive.planner import Plan, plan_next
from analysis.adaptive.space import Axis, CandidateSpace, run_key
from analysis.adaptive.target_fits import TargetFit, evaluate, fit_target, size_points
from analysis.adaptive.trainer import SyntheticTrainer
from analysis.adaptive.trajectory import reached, width_at

__all__ = [
    "AdaptiveResult",
    "Axis",
    "CandidateSpace",
    "FixedResult",
    "Plan",
    "Round",
    "SyntheticTrainer",
    "TargetFit",
    "evaluate",
    "fit_target",
    "grid_order",
    "plan_next",
    "random_order",
    "reached",
    "run_adaptive",
    "run_fixed",
    "run_key",
    "seed_design",
    "size_points",
    "width_at",
]
