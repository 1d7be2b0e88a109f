"""Recipes across epochs, whole: the curves (``epoch_curves``), the crossover of every pair of
recipes at every size (``crossover``), each recipe's data-constrained law with R_D* and its
interval, the verdict at infinite compute under the report's one rule, and the caveat of a
loss that is a bound.

The law per recipe (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models",
arXiv 2305.16264): L = E + A/N'^alpha + B/D'^beta, D' = U (1 + R_D* (1 - exp(-R_D/R_D*))),
on the recipe's curve points (one per (N, epochs), D = epochs U).

- Runs at >= 2 budgets U: Muennighoff's two-stage fit, ``fit.constrained.fit_data_constrained``.
- One U (an epoch sweep): stage 1 would fit the base law on one D, where B/D^beta and E are one
  constant, or (``stage1`` up to 4 epochs) treat repeated tokens as fresh, which biases the base
  and, through it, R_D*: on curves drawn with R_D* = 15 it gave 26.9 with a 95% interval of
  25.7-28.6. So the law is fitted in one stage (``fit.fit.fit_law``, every base parameter free
  with R_D*), R_N* held at its upper bound (N' = N: one U does not probe excess parameters), and
  R_N* is said to be not identified. Least squares (MSE in log loss), not the Huber loss of
  the other fits: the profile interval is then the likelihood interval of Gaussian noise. On
  5 seeded studies of curves with R_D* = 15 (noise 0.01) the Huber fit's interval held 15 in
  3, the least-squares one in 5.

The law has no term for a loss that rises with repetition, so points past their size's
best epoch count by more than 2 of their SDs (overfitting: AR at 128 epochs of the CPU twin,
4-7 nats against 2.6 at 32) are left out of its fit and counted in its line (``OVERFIT_SDS``);
on the twin that takes AR's R_D* from "flat profile" to 6.4 (95% 4.1-10.3).

R_D* is written as a number only when ``fit.saturation_identified.not_identified`` leaves it
identified, with its 95% profile interval (``FitResult.profile``). When the data bound it
only from below (it ends on, or its profile runs to, the upper bound while the profile's
lower end is found: a recipe still improving at its last epoch count, as MDM on the twin),
the line gives that one-sided bound, "at least X"; otherwise "not identified" and why. The
law needs >= ``MIN_SIZES`` sizes (fewer: E and A/N^alpha are one constant).

The verdict is ``verdicts.pair_verdict`` on each recipe's best cell per size at U (over epochs
and every other axis, ``cells.best_cells``), with the sweep's replicate sigma: the line
``scalelab report``'s infinite_compute.md, ``compare`` and ``next`` print for the pair. When a
recipe's loss is an upper bound on the NLL (``epoch_curves.BOUND``, e.g. an ELBO), a caveat
follows: a win for it is conservative, a loss may be the bound's gap.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError, IdentifiabilityWarning
from analysis.fit.constrained import fit_data_constrained
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.saturation_identified import not_identified
from analysis.laws.laws import DataConstrained
from analysis.recipes.crossover import N_BOOT, Crossover, crossover
from analysis.recipes.epoch_curves import EpochCurves, epoch_curves
from analysis.recipes.replicates import find_replicates
from analysis.recipes.rows import find_recipes
from analysis.recipes.verdicts import pair_verdict
from analysis.tables.cells import best_cells, cell_columns

__all__ = ["MIN_SIZES", "EpochStudy", "RecipeLaw", "bound_caveat", "epoch_study", "recipe_law"]

MIN_SIZES = 3
"""Sizes a recipe's law needs: with two, E and A/N^alpha are not separable."""
_R_N_HELD = "R_N"
PROFILE_POINTS = 10
"""Grid points per side of R_D*'s profile (the crossing is then found by Brent's method)."""


@dataclass(frozen=True)
class RecipeLaw:
    """One recipe's data-constrained law: R_D* with its interval, or why there is none."""

    recipe: str
    points: int
    fit: FitResult | None
    r_d: tuple[float, float, float] | None
    """(R_D*, 95% profile lower, upper) when identified."""
    why: str | None
    """Why R_D* is not written (None when it is)."""
    r_n: str
    """R_N* in words (usually why it is not identified)."""
    method: str
    r_d_at_least: float | None = None
    """The 95% profile's lower end of R_D* when only that end is bounded by the data."""
    overfit: int = 0
    """Points left out as past their size's best epochs (``OVERFIT_SDS``)."""

    def line(self) -> str:
        left = (f"; {self.overfit} point(s) past their size's best epochs left out (overfitting, "
                "which the law does not model)") if self.overfit else ""
        if self.r_d is not None:
            v, lo, hi = self.r_d
            return f"R_D* = {v:.3g} (95% profile interval {lo:.3g}-{hi:.3g}); R_N*: {self.r_n}{left}"
        if self.r_d_at_least is not None:
            return (f"R_D* at least {self.r_d_at_least:.3g} (the 95% profile's lower end; the data do "
                    f"not bound it above: {self.why}); R_N*: {self.r_n}{left}")
        return f"R_D*: {self.why}; R_N*: {self.r_n}{left}"


@dataclass(frozen=True)
class EpochStudy:
    curves: EpochCurves
    crossovers: list[Crossover]
    laws: dict[str, RecipeLaw]
    verdicts: list[str]
    caveats: list[str]


def bound_caveat(recipe: str) -> str:
    return (f"{recipe}'s loss is an upper bound (ELBO): a win for it is conservative; a loss for it "
            "may be the bound's gap")


OVERFIT_SDS = 2.0
"""A point more than this many of its SDs above its size's best loss, at more epochs than
that best, is overfitting, outside the law (module docstring)."""


def _within_law(points: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """(the points the law may describe, how many were left out): those past their size's
    best epoch count by more than ``OVERFIT_SDS`` SDs go (with ``sigma`` and ``size``)."""
    if not {"sigma", "size"} <= set(points.columns):
        return points, 0
    best = points.sort("loss").group_by("size").first().select(
        "size", pl.col("loss").alias("_best"), pl.col("epochs").alias("_at"))
    marked = points.join(best, on="size").with_columns(
        ((pl.col("epochs") > pl.col("_at")) & (pl.col("loss") > pl.col("_best") + OVERFIT_SDS * pl.col("sigma")))
        .alias("_over"))
    kept = marked.filter(~pl.col("_over")).drop("_best", "_at", "_over")
    return kept, points.height - kept.height


def recipe_law(recipe: str, points: pl.DataFrame, *, seed: int = 0) -> RecipeLaw:
    """The law of one recipe's curve points (N, U, epochs, loss; with sigma and size, points
    past their size's best epochs are left out first; module docstring)."""
    points, overfit = _within_law(points)
    data = points.select(pl.col("N").cast(pl.Float64), (pl.col("epochs") * pl.col("U")).alias("D"),
                         pl.col("U").cast(pl.Float64), pl.col("loss").cast(pl.Float64))
    k, budgets = data["N"].n_unique(), data["U"].n_unique()
    held = "not identified (one budget U: the sizes do not probe excess parameters; held at its bound, N' = N)"
    if k < MIN_SIZES:
        why = f"not fitted: {k} size(s), the law needs >= {MIN_SIZES} (with fewer, E and A/N^alpha are one constant)"
        return RecipeLaw(recipe, data.height, None, None, why, "not fitted", "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdentifiabilityWarning)
            if budgets >= 2:
                fit, method = fit_data_constrained(data, seed=seed, warn=False), "two-stage (Muennighoff et al.)"
                ni = dict(fit.not_identified)
            else:
                law = DataConstrained()
                fit = fit_law(law, data, fixed={_R_N_HELD: float(np.exp(law.bounds[_R_N_HELD][1]))}, seed=seed,
                              loss="mse", warn=False)
                method = "one stage, R_N* held (one budget U)"
                ni = not_identified(fit)
    except AnalysisInputError as err:
        return RecipeLaw(recipe, data.height, None, None, f"not fitted: {err}", "not fitted", "")
    r_n = f"not identified ({ni['R_N']})" if "R_N" in ni else (held if budgets < 2 else f"{fit.params['R_N']:.3g}")
    prof = fit.profile("R_D", n=PROFILE_POINTS)
    one_sided = prof.ends == ("profile", "box") and not prof.lower_found
    if "R_D" in ni or prof.flat or not prof.found:
        why = (f"not identified ({ni['R_D']})" if "R_D" in ni else
               f"not identified (its 95% profile interval is not bounded by the data: {prof.describe('.3g')})")
        return RecipeLaw(recipe, data.height, fit, None, why, r_n, method,
                         r_d_at_least=float(prof.ci[0]) if one_sided else None, overfit=overfit)
    return RecipeLaw(recipe, data.height, fit, (fit.params["R_D"], *prof.ci), None, r_n, method,
                     overfit=overfit)


def _crossovers(curves: EpochCurves, n_boot: int, seed: int) -> list[Crossover]:
    out = []
    for a, b in itertools.combinations(curves.recipes, 2):
        for n in curves.sizes:
            ca, cb = curves.curve(a, n), curves.curve(b, n)
            j = ca.join(cb, on="epochs", suffix="_b").sort("epochs")
            if j.height < 2:
                continue
            out.append(crossover(j["epochs"], j["loss"], j["loss_b"], j["sigma"], j["sigma_b"], names=(a, b),
                                 n=n, n_boot=n_boot, seed=seed))
    return out


def _verdicts(data: pl.DataFrame, curves: EpochCurves, recipes) -> list[str]:
    rows = find_recipes(data, recipes)
    cols = cell_columns(data)
    at_u = data.filter(pl.col("U") == curves.U)
    cells = {r: best_cells(at_u.filter(rows.predicates[r]), cols)[0] for r in curves.recipes}
    reps = find_replicates(data, loss="loss")
    lines = []
    for a, b in itertools.combinations(curves.recipes, 2):
        try:
            lines.append(pair_verdict(cells[a], cells[b], a, b, reps)[0])
        except AnalysisInputError as err:
            lines.append(f"{a} vs {b}: no verdict ({err})")
    return lines


def epoch_study(data: pl.DataFrame, *, recipes=None, seed: int = 0, n_boot: int = N_BOOT,
                laws: bool = True) -> EpochStudy | str | None:
    """The study of ``data`` (the report's fit table: N, U, loss and the runs' columns); a
    line saying why not when fewer than two recipes span enough epochs at one U; None when
    the table is no epoch study of recipes at all (``epoch_curves``)."""
    curves = epoch_curves(data, recipes)
    if curves is None or isinstance(curves, str):
        return curves
    pts = curves.points.with_columns(pl.lit(curves.U).alias("U"))
    fitted = {r: recipe_law(r, pts.filter(pl.col("recipe") == r), seed=seed) for r in curves.recipes} if laws else {}
    caveats = [bound_caveat(r) for r in curves.recipes if curves.bound[r]]
    return EpochStudy(curves, _crossovers(curves, n_boot, seed), fitted, _verdicts(data, curves, recipes), caveats)
