"""The next runs of a study that is no product grid: recipes as sets of candidate runs.

``planner.plan_next`` walks a product of tuned axes by coordinate search
(``space.CandidateSpace``). A study laid out as blocks, zip groups and derived values (the
demo's ``tuned``/``tuned-best`` zips; a Muon-vs-AdamW study of six blocks, one per
optimizer and lr multiplier) has no such grid: its design is the list of runs it plans.
Here a recipe is that list (``scalelab.adaptive.any_study``: the recipe's candidates, one
row per run: key, N, cell, replicate, planned, flops), and everything else is the
planner's and the report's:

1. points: per size, the best cell by its mean loss over seeds (``analysis.tables.cells.
   best_cells``, the report's rule, on ``N`` and the cell), valued at that mean with weight
   m (its seeds);
2. settled: a size is settled when every cell the spec plans for the recipe at that size
   has been tried (a run done, or ended without a loss) and its best cell has as many
   seeds as the most replicated cell there (``behind`` = 0, the winner's-curse rule of
   ``target_fits``). A fixed design has no neighbours to walk to: its cells at a size *are*
   the search. Only settled sizes enter the fit (``target_fits.fit_target``:
   ``recipe_asymptote``, the report's engine and interval, >= ``identified.MIN_SIZES`` sizes);
3. actions (``planner``): *settle N*, the planned cells of the recipe not yet tried at N
   (their first planned seed), or the best cell's missing seeds when it is behind; and,
   once ``MIN_SIZES`` sizes are settled, *replicate N*, one more seed of a settled size's
   best cell (a planned seed, or one the study adds);
4. scoring and the greedy batch: the planner's own (``planner._gains``: the expected drop of
   the target's CI width by the planning posterior, per unit of cost).

Targets are ``analysis.adaptive.targets``' and ``multiplier``'s, with each recipe's
candidate frame as its "space".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import polars as pl

from analysis.adaptive.planner import Action, Plan, _Recipe, greedy_plan
from analysis.adaptive.posterior import Design, planning_posterior
from analysis.adaptive.target_fits import SizePoints, TargetFit, estimate, fit_target
from analysis.adaptive.targets import Summary, Target
from analysis.fit.identified import MIN_SIZES
from analysis.fit.power_law import SCALE
from analysis.tables import cells

__all__ = ["judge_recipes", "plan_recipes", "recipe_points"]

_SCHEMA = {"N": pl.Float64, "cell": pl.String, "loss": pl.Float64, "m": pl.Int64,
           "behind": pl.Int64, "settled": pl.Boolean, "runs": pl.Int64}


def recipe_points(recipe: pl.DataFrame, done: pl.DataFrame, tried: set[str]) -> SizePoints:
    """Best cell per size and whether the size is settled (module docstring).
    ``recipe``: the recipe's candidates; ``done``: finished runs (key, loss); ``tried``:
    keys launched and ended (done or without a loss)."""
    rows_schema = {"N": pl.Float64, "loss": pl.Float64, "seed": pl.String, "flops": pl.Float64}
    mine = recipe.join(done.select("key", pl.col("loss").cast(pl.Float64)), on="key")
    if mine.height == 0:
        return SizePoints(pl.DataFrame(schema=_SCHEMA), pl.DataFrame(schema=rows_schema), 0.0, 0)
    frame = mine.select("N", "cell", "loss", pl.col("replicate").alias("seed"), "flops")
    rows, best = cells.best_cells(frame, ["N", "cell"])
    scatter = (frame.group_by("N", "cell", maintain_order=True)
               .agg(((pl.col("loss") - pl.col("loss").mean()) ** 2).sum().alias("ss"),
                    pl.len().alias("m")))
    most = dict(scatter.group_by("N").agg(pl.col("m").max()).iter_rows())
    planned = recipe.filter(pl.col("planned"))
    tried_cells = set(recipe.filter(pl.col("key").is_in(list(tried)))
                      .select("N", "cell").unique().iter_rows())
    runs_at = dict(frame.group_by("N").len().iter_rows())
    out = []
    for r in best.iter_rows(named=True):
        want = set(planned.filter(pl.col("N") == r["N"]).select("N", "cell").unique().iter_rows())
        behind = int(most[r["N"]] - r["seeds"])
        out.append({"N": r["N"], "cell": r["cell"], "loss": r["mean"], "m": r["seeds"],
                    "behind": behind, "settled": behind == 0 and want <= tried_cells,
                    "runs": runs_at[r["N"]]})
    return SizePoints(pl.DataFrame(out, schema=_SCHEMA), rows, float(scatter["ss"].sum()),
                      int((scatter["m"] - 1).sum()))


def judge_recipes(target: Target, done: pl.DataFrame, tried: set[str]
                  ) -> tuple[Summary, dict[str, TargetFit]]:
    """The target as reported on the finished runs: each recipe's fit (``fit_target`` of
    its settled points) and the target's summary of them."""
    fits = {name: fit_target(recipe_points(frame, done, tried), target.level)
            for name, frame in target.recipes.items()}
    return target.summary({n: estimate(f) for n, f in fits.items()}), fits


def _next_seed(recipe: pl.DataFrame, N: float, cell: str, taken: set[str],
               cost: Callable[[list[str]], float]) -> Action | None:
    """One more seed of ``cell`` at N: its lowest replicate not in ``taken`` (None: none left)."""
    seeds = (recipe.filter((pl.col("N") == N) & (pl.col("cell") == cell)
                           & ~pl.col("key").is_in(list(taken))).sort("replicate"))
    if seeds.height == 0:
        return None
    key = seeds["key"][0]
    return Action("replicate", N, (), (key,), 1.0, cost([key]))


def _actions(recipe: pl.DataFrame, points: SizePoints, taken: set[str],
             cost: Callable[[list[str]], float]) -> list[tuple[Action, str]]:
    """Every settle and replicate action of one recipe now (module docstring), each with the
    cell it is about."""
    out = []
    by_n = {r["N"]: r for r in points.frame.iter_rows(named=True)}
    identified = points.settled.height >= MIN_SIZES
    free = recipe.filter(~pl.col("key").is_in(list(taken)))
    for N in sorted(set(recipe["N"].to_list())):
        row = by_n.get(N)
        if row is not None and row["settled"]:
            nxt = _next_seed(recipe, N, row["cell"], taken, cost)
            if nxt is not None and identified:
                out.append((nxt, row["cell"]))
            continue
        at_n = free.filter((pl.col("N") == N) & pl.col("planned"))
        tried = set(recipe.filter((pl.col("N") == N) & pl.col("key").is_in(list(taken)))["cell"])
        first = (at_n.filter(~pl.col("cell").is_in(list(tried)))
                 .sort("replicate").unique("cell", keep="first", maintain_order=True))
        keys = first["key"].to_list()
        if not keys and row is not None and row["behind"] > 0:  # level the best cell's seeds
            keys = (free.filter((pl.col("N") == N) & (pl.col("cell") == row["cell"]))
                    .sort("replicate")["key"].to_list()[:row["behind"]])
        if keys:
            weight = 1.0 if row is None else float(row["m"])
            out.append((Action("settle", N, (), tuple(keys), weight, cost(keys)),
                        "" if row is None else row["cell"]))
    return out


def plan_recipes(target: Target, done: pl.DataFrame, pending: pl.DataFrame, tried: set[str], *,
                 batch: int = 4, budget_left: float = np.inf, noise_sd: float = 0.02,
                 level: float = 0.95, studentized: bool = True) -> Plan:
    """Score every pending candidate and choose up to ``batch`` runs within ``budget_left``
    (module docstring). ``pending``: candidates never launched (key, flops); ``tried``:
    keys launched (a run in flight or ended is never proposed)."""
    flops = dict(zip(pending["key"].to_list(), pending["flops"].to_list()))
    taken = set(tried) | set(done["key"].to_list())

    def cost(keys: list[str]) -> float:
        return float(sum(flops.get(k, np.inf) for k in keys))

    ended = set(tried)
    states: dict[str, _Recipe] = {}
    acts: list[Action] = []
    cell_of: dict[int, str] = {}
    for name, frame in target.recipes.items():
        points = recipe_points(frame, done, ended)
        post = planning_posterior(points, noise_sd=noise_sd, level=level, studentized=studentized)
        s = points.settled
        design = Design(s["N"].to_numpy() / SCALE, s["m"].to_numpy().astype(float))
        states[name] = _Recipe(frame, post, design, post.cov(design))
        for a, cell in _actions(frame, points, taken, cost):
            if np.isfinite(a.cost):
                acts.append(dataclasses.replace(a, recipe=name))
                cell_of[id(acts[-1])] = cell

    def follow(a: Action, chosen: set[str]) -> Action | None:  # the cell's next seed
        nxt = _next_seed(states[a.recipe].space, a.N, cell_of[id(a)], taken | chosen, cost)
        if nxt is None:
            return None
        out = dataclasses.replace(nxt, recipe=a.recipe)
        cell_of[id(out)] = cell_of[id(a)]
        return out

    return greedy_plan(target, states, acts, pending, cost, follow, batch=batch,
                       budget_left=budget_left, studentized=studentized)


def recipe_frames(candidates: pl.DataFrame, predicates: Mapping[str, pl.Expr]
                  ) -> dict[str, pl.DataFrame]:
    """Recipe -> its candidates (key, N, cell, replicate, planned, flops)."""
    cols = ["key", "N", "cell", "replicate", "planned", "flops"]
    return {n: candidates.filter(p).select(cols) for n, p in predicates.items()}
