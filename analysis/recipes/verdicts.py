"""Which recipe is better at infinite compute: one line per pair of recipes, answered
where the data decide it (``analysis.recipes.verdict``, the rule; Kim et al. 2025, arXiv
2509.14786).

Each recipe's level at infinite compute is
- its asymptote E with its 95% CI, when its law vs N is identified (``infinite_compute``:
  ``unidentified`` is None); or
- its **best observed loss**, when its loss rises with N (it overfits: no asymptote exists,
  and the best it reached is what it achieves; ``verdict.rises_with_n`` decides, in numbers).
  Its noise sigma is the SD of one run's loss: pooled over replicate seeds where the sweep has
  them (the ensemble's members, seeds of one cell), else the scatter of the recipe's own
  points around a quadratic in log N (``verdict.scatter_sigma``, which errs large).

Two asymptotes are compared by the paired bootstrap CI of E_A - E_B (``compare_recipes``,
over the best run per size); an asymptote against a best observed loss by the asymptote's
upper end against best - 2 sigma. "No verdict" comes only with the numbers that stop it.
"""

from __future__ import annotations

import itertools

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.compare import MIN_SIZES, compare_recipes
from analysis.recipes.infinite_compute import SEED_MEAN, RecipeAnalysis, unidentified
from analysis.recipes.verdict import RecipeLevel, recipe_verdict, run_sigma
from analysis.recipes.verdict import recipe_level as level_rule

__all__ = ["N_BOOT", "RULE", "recipe_level", "verdict_lines"]

RULE = ("an identified asymptote with its 95% CI, or for a recipe whose loss rises with N its "
        "best observed loss +- 2 sigma; two asymptotes by the paired bootstrap CI of E_A - E_B; "
        "a winner only when the ends separate")
"""How the verdict lines decide, in one sentence (the demo's and the report's heading)."""

N_BOOT = 1000
"""Paired resamples per comparison."""
_NOT_RECIPES = (SEED_MEAN, "ensemble (N,K->inf)", "ensemble (K->inf)")
"""Fits that are no recipe of their own: a re-estimate of the regularized points, and the
ensembles' fitted K -> inf limits (not runs)."""


def _points(res: RecipeAnalysis, recipe: str) -> pl.DataFrame:
    return res.best_per_n.filter(pl.col("recipe") == recipe).select("N", "loss").sort("N")


def recipe_level(res: RecipeAnalysis, recipe: str) -> RecipeLevel | str:
    """The recipe's level at infinite compute, or why it has none (module docstring): its
    asymptote when the report writes one; else ``verdict.recipe_level`` on its points, with
    sigma from the ensemble's member seeds where the sweep has them, else from its points."""
    fit = res.fits.get(recipe)
    why = unidentified(fit)
    if why is None:
        lo, hi = fit.ci()
        return RecipeLevel.asymptote(recipe, fit.C, lo, hi, fit.se["C"])
    pts = _points(res, recipe)
    members = res.members.select("N", "loss")
    try:
        sigma, source = run_sigma(members if _has_replicates(members) else pts)
    except AnalysisInputError as err:
        return f"{recipe} vs N {why}; no noise estimate for its best loss ({err})"
    nan = float("nan")
    return level_rule(recipe, E=nan, lo=nan, hi=nan, se=nan, why_not=why,
                      n=pts["N"].to_numpy(), loss=pts["loss"].to_numpy(), sigma=sigma,
                      sigma_from=source)


def _has_replicates(rows: pl.DataFrame) -> bool:
    return bool(rows.height) and bool((rows.group_by("N").len()["len"] >= 2).any())


def verdict_lines(res: RecipeAnalysis, *, seed: int = 0) -> list[str]:
    """One line per pair of recipes (module docstring)."""
    names = [r for r in res.fits if r not in _NOT_RECIPES and _points(res, r).height]
    lines = []
    for a, b in itertools.combinations(names, 2):
        la, lb = recipe_level(res, a), recipe_level(res, b)
        stops = [v for v in (la, lb) if isinstance(v, str)]
        if stops:
            lines.append(f"{a} vs {b}: no verdict ({'; '.join(stops)})")
            continue
        delta = None
        if la.identified and lb.identified:
            try:
                cmp = compare_recipes(_points(res, a), _points(res, b), names=(a, b),
                                      n_boot=N_BOOT, seed=seed)
            except AnalysisInputError as err:
                lines.append(f"{a} vs {b}: no verdict ({err}; need >= {MIN_SIZES} shared sizes)")
                continue
            delta = cmp.ci  # the paired CI of E_a - E_b
        lines.append(recipe_verdict(la, lb, delta_ci=delta).line())
    return lines

