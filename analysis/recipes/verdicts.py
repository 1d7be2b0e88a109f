"""Which recipe is better at infinite compute: one line per pair of recipes, answered
where the data decide it (``analysis.recipes.verdict``, the rule; Kim et al. 2025, arXiv
2509.14786). ``scalelab report``, ``scalelab demo`` and ``scalelab compare`` print these
lines, built here from the same inputs, so on one sweep they print the same verdict.

Each recipe's level at infinite compute (``level_of``, from the runs of its best cell per
size, ``cells.best_cells``) is
- its asymptote E with its 95% CI, when E may be written (``recipe_asymptote``: why_not
  None); or
- its **best observed loss**, when its loss rises with N (it overfits: no asymptote exists,
  and the best it reached is what it achieves; ``verdict.rises_with_n`` decides, in numbers).
  Its noise sigma is the SD of one run's loss from the sweep's replicate seeds
  (``replicates.find_replicates``: seeds of one cell, ensemble members), else the scatter of
  the recipe's own points around a quadratic in log N (``verdict.scatter_sigma``, which errs
  large); divided by sqrt(m) for a mean of m seeds (``verdict.recipe_level``).

Two asymptotes are compared by the paired bootstrap CI of E_A - E_B (``compare_recipes``,
over the runs of the best cell per size, its seeds included); an asymptote against a best
observed loss by the asymptote's upper end against best - 2 sigma. "No verdict" comes only
with the numbers that stop it. The ensembles' K -> inf limits are judged against each
recipe by ``ensemble_verdict``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.cells import size_points
from analysis.recipes.compare import compare_recipes
from analysis.recipes.ensemble_verdict import ensemble_lines
from analysis.recipes.infinite_compute import SEED_MEAN, RecipeAnalysis
from analysis.recipes.recipe_asymptote import recipe_asymptote
from analysis.recipes.replicates import Replicates
from analysis.recipes.verdict import RecipeLevel, recipe_verdict, scatter_sigma
from analysis.recipes.verdict import recipe_level as level_rule

__all__ = ["N_BOOT", "RULE", "level_of", "pair_line", "pair_verdict", "recipe_level",
           "verdict_lines"]

RULE = ("an identified asymptote with its 95% CI, or for a recipe whose loss rises with N its "
        "best observed loss +- 2 sigma; two asymptotes by the paired bootstrap CI of E_A - E_B; "
        "an ensemble's K -> inf limit against a recipe by their intervals (unpaired); "
        "a winner only when the ends separate")
"""How the verdict lines decide, in one sentence (the demo's and the report's heading)."""

N_BOOT = 1000
"""Paired resamples per comparison (``scalelab compare``'s default --n-boot)."""
_NOT_RECIPES = (SEED_MEAN, "ensemble (N,K->inf)", "ensemble (K->inf)")
"""Fits that are no recipe of their own: a re-estimate of the regularized points, and the
ensembles' fitted K -> inf limits (not runs; ``ensemble_verdict`` judges those)."""


def level_of(name: str, rows: pl.DataFrame, replicates: Replicates, *,
             level: float = 0.95) -> RecipeLevel | str:
    """The level at infinite compute of the recipe whose best cell per size has the runs
    ``rows`` (N, loss; one row per seed), or why it has none (module docstring)."""
    pts = size_points(rows, 1.0)  # x = N here: the fit below rescales itself
    asym = recipe_asymptote(size_points(rows), level)
    if asym.why_not is None:
        return RecipeLevel.asymptote(name, asym.E, asym.lo, asym.hi, asym.fit.se["C"],
                                     flag=asym.flag)
    if replicates.found:
        sigma, source = replicates.sigma, replicates.source()
    else:
        try:
            sigma = scatter_sigma(pts.x, pts.y)
        except AnalysisInputError as err:
            return f"{name} vs N {asym.why_not}; no noise estimate for its best loss ({err})"
        source = f"scatter of its {pts.n} sizes"
    nan = float("nan")
    return level_rule(name, E=nan, lo=nan, hi=nan, se=nan, why_not=asym.why_not, n=pts.x,
                      loss=pts.y, sigma=sigma, sigma_from=source, m=pts.m)


def pair_line(la: RecipeLevel | str, lb: RecipeLevel | str, a: str, b: str,
              delta_ci: Callable[[], tuple[float, float]]) -> str:
    """The verdict line of recipes ``a`` and ``b`` with levels ``la``, ``lb``;
    ``delta_ci()``: the paired CI of E_a - E_b, asked for only when both are asymptotes.
    Where the paired bootstrap cannot run (fewer than ``MIN_SIZES`` shared sizes: its
    resamples would interpolate), two asymptotes are judged by their own intervals, a
    winner only when they separate (conservative: it ignores that they share sizes)."""
    stops = [v for v in (la, lb) if isinstance(v, str)]
    if stops:
        return f"{a} vs {b}: no verdict ({'; '.join(stops)})"
    delta, paired, why_unpaired = None, True, ""
    if la.identified and lb.identified:
        try:
            delta = delta_ci()
        except AnalysisInputError as err:
            paired, why_unpaired = False, f"{err}: judged by the two intervals alone"
    line = recipe_verdict(la, lb, delta_ci=delta, paired=paired).line()
    notes = [why_unpaired] if why_unpaired else []
    notes += [f"E_{v.name} {v.flag}" for v in (la, lb) if v.flag]
    return line + "".join(f" [{n}]" for n in notes)


def pair_verdict(rows_a: pl.DataFrame, rows_b: pl.DataFrame, a: str, b: str,
                 replicates: Replicates, *, level: float = 0.95, n_boot: int = N_BOOT,
                 seed: int = 0, resample: str = "sizes+seeds"):
    """(the verdict line of recipes ``a`` and ``b``, the paired bootstrap or None where the
    rule did not need it) from each recipe's best-cell runs (N, loss, seed): what ``scalelab
    compare`` and ``scalelab next`` print, by the report's rule (``level_of``, ``pair_line``)."""
    boot: list = []

    def delta_ci() -> tuple[float, float]:
        boot.append(compare_recipes(rows_a, rows_b, names=(a, b), n_boot=n_boot, level=level,
                                    seed=seed, resample=resample))
        return boot[-1].ci

    la, lb = (level_of(name, rows, replicates, level=level)
              for name, rows in ((a, rows_a), (b, rows_b)))
    return pair_line(la, lb, a, b, delta_ci), (boot[-1] if boot else None)


def _rows(res: RecipeAnalysis, recipe: str) -> pl.DataFrame:
    """The recipe's best-cell runs, else (a fitted re-estimate, not runs) its points."""
    if recipe in res.cell_rows:
        return res.cell_rows[recipe]
    return res.best_per_n.filter(pl.col("recipe") == recipe).select("N", "loss").sort("N")


def recipe_level(res: RecipeAnalysis, recipe: str) -> RecipeLevel | str:
    """The recipe's level at infinite compute, or why it has none (``level_of`` on its
    best-cell runs with the sweep's replicate sigma)."""
    return level_of(recipe, _rows(res, recipe), res.replicates)


def verdict_lines(res: RecipeAnalysis, *, seed: int = 0) -> list[str]:
    """One line per pair of recipes (module docstring), then the ensembles' lines."""
    names = [r for r in res.fits if r not in _NOT_RECIPES and _rows(res, r).height]
    levels = {r: recipe_level(res, r) for r in names}
    lines = []
    for a, b in itertools.combinations(names, 2):
        def delta(a=a, b=b) -> tuple[float, float]:
            return compare_recipes(_rows(res, a), _rows(res, b), names=(a, b), n_boot=N_BOOT,
                                   seed=seed).ci
        lines.append(pair_line(levels[a], levels[b], a, b, delta))
    return lines + ensemble_lines(res, levels)

