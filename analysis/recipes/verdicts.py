"""Which recipe is better at infinite compute, said only where the data can say it.

For every pair of recipes whose laws vs N are both identified (``infinite_compute``:
``unidentified`` is None) and that share >= ``compare.MIN_SIZES`` model sizes, the paired
bootstrap of ``compare.compare_recipes`` over the best run per size gives E_A - E_B with
its CI and p-value. Its ``line`` says "A beats B at infinite compute" only when the CI
excludes 0; a pair that cannot be compared gets one line saying why.
"""

from __future__ import annotations

import itertools

import polars as pl

from analysis.recipes.compare import MIN_SIZES, compare_recipes
from analysis.errors import AnalysisInputError
from analysis.recipes.infinite_compute import SEED_MEAN, RecipeAnalysis, unidentified

__all__ = ["N_BOOT", "verdict_lines"]

N_BOOT = 1000
"""Paired resamples per comparison."""
_NOT_RECIPES = (SEED_MEAN, "ensemble (N,K->inf)", "ensemble (K->inf)")
"""Fits that are no recipe of their own: a re-estimate of the regularized points, and the
ensembles' fitted K -> inf limits (not runs)."""


def verdict_lines(res: RecipeAnalysis, *, seed: int = 0) -> list[str]:
    """One line per pair of recipes (module docstring)."""
    names = [r for r in res.fits if r not in _NOT_RECIPES
             and res.best_per_n.filter(pl.col("recipe") == r).height]
    lines = []
    for a, b in itertools.combinations(names, 2):
        why = [f"{r} vs N {w}" for r in (a, b) if (w := unidentified(res.fits.get(r)))]
        if why:
            lines.append(f"{a} vs {b}: no verdict ({'; '.join(why)})")
            continue
        pa, pb = (res.best_per_n.filter(pl.col("recipe") == r).select("N", "loss") for r in (a, b))
        try:
            cmp = compare_recipes(pa, pb, names=(a, b), n_boot=N_BOOT, seed=seed)
        except AnalysisInputError as err:
            lines.append(f"{a} vs {b}: no verdict ({err}; need >= {MIN_SIZES} shared sizes)")
            continue
        lines.append(cmp.line())
    return lines
