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
from analysis.recipes.verdict import (RecipeLevel, recipe_verdict, replicate_sigma, rises_with_n,
                                      scatter_sigma)

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


def run_sigma(res: RecipeAnalysis, recipe: str) -> tuple[float, str]:
    """The SD of one run's loss and where it comes from (module docstring)."""
    groups = [g["loss"].to_list() for _, g in res.members.group_by("N")] if res.members.height else []
    if any(len(g) >= 2 for g in groups):
        seeds = sum(len(g) for g in groups if len(g) >= 2)
        return replicate_sigma(groups), f"from {seeds} replicate seeds"
    pts = _points(res, recipe)
    return scatter_sigma(pts["N"], pts["loss"]), f"scatter of its {pts.height} sizes"


def recipe_level(res: RecipeAnalysis, recipe: str) -> RecipeLevel | str:
    """The recipe's level at infinite compute, or why it has none (module docstring)."""
    fit = res.fits.get(recipe)
    why = unidentified(fit)
    if why is None:
        lo, hi = fit.ci()
        return RecipeLevel.asymptote(recipe, fit.C, lo, hi, fit.se["C"])
    pts = _points(res, recipe)
    try:
        sigma, source = run_sigma(res, recipe)
    except AnalysisInputError as err:
        return f"{recipe} vs N {why}; no noise estimate for its best loss ({err})"
    rise = rises_with_n(pts["N"].to_numpy(), pts["loss"].to_numpy(), sigma)
    if not rise:
        return f"{recipe} vs N {why}; and its loss does not rise with N ({rise.line})"
    return RecipeLevel.best_observed(recipe, rise.best, sigma, at_n=rise.best_n, sigma_from=source)


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
