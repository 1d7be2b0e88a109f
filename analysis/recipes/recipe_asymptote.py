"""A recipe's asymptote E with its confidence interval and the one identifiability
judgement: what ``scalelab report``, ``scalelab compare`` and ``scalelab next`` print.

Kim et al. 2025 (arXiv 2509.14786): L(x) = A / x^B + E over a recipe's points (one per
size: the best cell's seed mean, weight m, ``cells.size_points``), fitted by the one engine
of this law (``analysis.fit.power_law.fit_asymptote``). The interval is the
Wald/t interval of nonlinear least squares (Seber & Wild 1989, "Nonlinear Regression",
ch. 5): E +- t_{n-3, (1+level)/2} sqrt(Cov_EE), Cov = s^2 (J'WJ)^-1. E and its interval
are written from ``identified.MIN_SIZES_E`` (4) sizes on, flagged (``flag``) while they rest on
one residual degree of freedom; decisions that went wrong on 4 sizes keep
``identified.MIN_SIZES`` (5; the reasons are written there). E is a number only when
``analysis.fit.identified.why_not_identified`` finds nothing against it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.identified import (
    MIN_SIZES,
    MIN_SIZES_E,
    min_sizes,
    min_sizes_e,
    one_dof_flag,
    unidentified,
)
from analysis.fit.power_law import PowerLawFit, fit_asymptote
from analysis.recipes.cells import SizePoints, size_points
from analysis.recipes.names import REF_WD
from analysis.recipes.rows import recipes_or_none
from analysis.tables.cells import best_cells, cell_columns, differing_settings, setting_columns

__all__ = ["NO_RECIPES", "RecipeE", "RecipeLaw", "best_over_note", "flag_of", "judge", "recipe_asymptote",
           "recipe_laws", "reportable"]


@dataclass(frozen=True)
class RecipeE:
    """Whether a recipe's fit may be written: the fit (its E, interval and parameters are the
    fit's own, ``PowerLawFit``) and the report's judgement of it."""

    fit: PowerLawFit | None
    """The fit (None: fewer than 3 sizes or the fit failed)."""
    why_not: str | None
    """Why E is not written as a number (too few sizes, no interval, not identified), or
    None: E and (lo, hi) may be reported."""
    level: float = 0.95
    flag: str | None = None
    """Said beside E when it may be written but rests on little: one residual degree of
    freedom (``identified.one_dof_flag``)."""

    @property
    def E(self) -> float:
        """The asymptote (nan without a fit)."""
        return math.nan if self.fit is None else self.fit.E

    @property
    def interval(self) -> tuple[float, float]:
        """E's interval at ``level`` (nan without one)."""
        if self.fit is None or not self.fit.has_ci:
            return (math.nan, math.nan)
        lo, hi = self.fit.ci(self.level)
        return float(lo), float(hi)

    @property
    def lo(self) -> float:
        return self.interval[0]

    @property
    def hi(self) -> float:
        return self.interval[1]

    @property
    def n(self) -> int:
        """Sizes the fit rests on (0 without a fit)."""
        return 0 if self.fit is None else int(self.fit.x.size)


def recipe_asymptote(points: SizePoints, level: float = 0.95) -> RecipeE:
    """The fit of a recipe's points and the reason its E may not be written (module
    docstring)."""
    need = min_sizes_e(3)
    if points.n < 3:
        return RecipeE(None, f"{points.n} sizes, need >= {need}", level)
    try:
        fit = fit_asymptote(points.x, points.y, w=points.m)
    except AnalysisInputError as err:
        return RecipeE(None, f"not fitted ({err})", level)
    return judge(fit, points.n, level)


def judge(fit: PowerLawFit, n: int, level: float = 0.95) -> RecipeE:
    """The report's judgement of a fit on ``n`` sizes (``reportable``: too few sizes, no finite
    interval, not identified), else written, flagged on one residual dof."""
    why = reportable(fit, "sizes", n)
    flag = one_dof_flag(n, fit.n_free, level) if why is None else None
    return RecipeE(fit, why, level, flag)


def reportable(fit: PowerLawFit | None, what: str = "points", n: int | None = None, *,
               min_dof: int = 1) -> str | None:
    """Why a fit's asymptote may not be written as a number (None: it may): fewer than
    n_free + ``min_dof`` ``what`` (``n``, else the fit's own count), not fitted, no finite
    interval, or not identified. ``min_dof`` 1: E itself, flagged on one residual degree of
    freedom (``identified.one_dof_flag``); 2: what is built on E (a multiplier)."""
    count = n if n is not None else (fit.x.size if fit is not None else None)
    need = ((min_sizes_e(fit.n_free) if min_dof <= 1 else min_sizes(fit.n_free))
            if fit is not None else (MIN_SIZES_E if min_dof <= 1 else MIN_SIZES))
    if count is not None and count < need:
        noun = what[:-1] if count == 1 and what.endswith("s") else what
        return f"{count} {noun}, need >= {need}"
    if fit is None:
        return "not fitted (the fit failed; see the notes)"
    if not fit.has_ci or not np.isfinite(fit.ci()).all():
        return "no finite interval (the fit's covariance is degenerate)"
    if why := unidentified(fit):
        return f"not identified: {why}"
    return None


def flag_of(fit: PowerLawFit | None) -> str | None:
    """What to say beside a written asymptote (``identified.one_dof_flag``), or None."""
    return None if fit is None else one_dof_flag(int(fit.x.size), fit.n_free)


_ALL = "all runs"
NO_RECIPES = "the whole table (no recipes found; one group per D)"
"""``recipe_laws``' source when the runs have no recipes."""


@dataclass(frozen=True)
class RecipeLaw:
    """One recipe's law in N at one budget: its label, runs and ``recipe_asymptote``."""

    label: str
    runs: pl.DataFrame
    asymptote: RecipeE


def recipe_laws(data: pl.DataFrame, level: float = 0.95, *,
                filters: Mapping[str, Sequence[str]] | None = None,
                ref_wd: float = REF_WD) -> tuple[list[RecipeLaw], str]:
    """(each recipe's law in N at each unique-token budget U, where the recipes came from):
    the recipes of ``analysis.recipes.rows`` (``filters``: ``--recipe`` NAME=COND, ``ref_wd``:
    Kim's standard weight decay, as ``find_recipes`` takes them; a table without recipes: each
    training-token count D is a group), each size's best cell (``cells.best_cells``),
    ``recipe_asymptote``. ``data``: fit-ready runs (``analysis.tables.runs.prepare_runs``:
    N, D, U, loss, ...). What ``report.md``, ``infinite_compute.md`` and notebook 01 write of
    a recipe's E."""
    budget = "U" if "U" in data.columns else "D"
    found = recipes_or_none(data, filters, ref_wd=ref_wd)  # a bad --recipe filter raises
    if found is not None:
        recipes, source = list(found.predicates.items()), found.source
    else:  # no recipes: each training-token count D is a group
        recipes, budget = [(_ALL, pl.lit(True))], "D"
        source = NO_RECIPES
    laws = []
    for name, pred in recipes:
        sub = data.filter(pred)
        several = sub[budget].n_unique() > 1
        for (u,), part in sorted(sub.group_by(budget), key=lambda kv: kv[0][0]):
            cells, _ = best_cells(part, cell_columns(part))
            at = f"{budget}={u:.3g}"
            label = at if name == _ALL else (f"{name}, {at}" if several else name)
            laws.append(RecipeLaw(label, part, recipe_asymptote(size_points(cells), level)))
    return laws, source


def best_over_note(data: pl.DataFrame) -> str | None:
    """What each size's best cell is chosen over when the runs have no recipes (the settings
    that differ among runs of one (N, D, U) point, ``tables.cells.differing_settings``), or
    None when nothing differs. Without recipes an optimizer or a regularizer is one more
    setting to take the best of: the note says so, so that a law over two optimizers' best
    cells is not read as either's."""
    keys = [k for k in ("N", "D", "U") if k in data.columns]
    differ, mixed, total = differing_settings(data, keys, setting_columns(data, set(keys)))
    names = list(dict.fromkeys(c.removeprefix("config.") for c in differ))  # a table's aliases once
    if not names:
        return None
    return (f"each point's best cell is chosen over {', '.join(names)} ({mixed} of {total} (N, D, U) points "
            "hold runs that differ in them): a setting that is a recipe of its own (an optimizer, a "
            "regularizer) gets its own law only when named (--recipe NAME=COND, or extra.recipe in the spec)")
