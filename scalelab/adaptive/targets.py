"""``--target`` and ``--recipe`` of ``scalelab next`` / ``scalelab sweep --adaptive``: the
quantity an adaptive study pins down (``analysis.adaptive.targets``).

Recipes are slices of the study's grid:

- by default, Kim et al.'s (arXiv 2509.14786) two: **regularized**, the whole grid (every
  epochs x weight decay cell), and **standard**, the grid at the reference weight decay
  (a grid whose weight decay is the reference value only is the standard recipe alone)
  0.1 (when ``optim.weight_decay`` is a tuned axis holding 0.1), as ``scalelab report``
  reads a ``tuned`` block;
- or ``--recipe NAME=axis=v1|v2[,axis=v]``, repeatable: the grid with each named tuned
  axis held to the listed values (e.g. ``--recipe light=optim.weight_decay=0.1|1``).
  "regularized" stays the whole grid unless a ``--recipe`` redefines it.

Targets:

- ``NAME.E`` (default ``regularized.E``): the recipe's asymptote E;
- ``ranking``: the order of every recipe by E (decided when each adjacent pair's CI
  excludes 0);
- ``multiplier`` or ``NAME.multiplier``: Kim et al.'s data multiplier of the recipe's E
  (default regularized) against the reference recipe's data law L(U), exactly as
  ``scalelab report`` reads it from the sweep's own runs (``analysis.recipes.
  infinite_compute.analyze``: the reference's best loss per budget U, the law
  ``data_multiplier.choose_data_law`` keeps, L_ref its best loss at the base budget) and
  values it (``data_multiplier.data_multiplier``, ``analysis.adaptive.multiplier``); without
  a data law (fewer than 3 budgets U) there is no multiplier target (a one-line error says
  why), and a multiplier the report refuses is one line with its reason.

E of any recipe is the report's (``analysis.adaptive.target_fits``): its value and interval,
or "not identified" with the report's reason and no number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import polars as pl

from analysis.adaptive import CandidateSpace, TargetFit
from analysis.adaptive.multiplier import Multiplier
from analysis.adaptive.targets import Asymptote, Ranking, Summary, Target
from analysis.fit.identified import MIN_SIZES
from analysis.recipes.data_multiplier import DataLaw
from analysis.recipes.names import REF_WD, REGULARIZED, STANDARD
from scalelab.adaptive.study import Study
from scalelab.errors import UserError, did_you_mean

__all__ = ["DEFAULT_TARGET", "REGULARIZED", "STANDARD", "build_target", "recipe_spaces",
           "summary_text", "target_names"]

DEFAULT_TARGET = f"{REGULARIZED}.E"
WD_AXIS = "optim.weight_decay"


def recipe_spaces(study: Study, filters: Mapping[str, Sequence[str]] | None = None
                  ) -> dict[str, CandidateSpace]:
    """Recipe name -> its slice of the study's grid (module docstring)."""
    space = study.space
    out: dict[str, CandidateSpace] = {REGULARIZED: space}
    if not filters:
        axis = next((a for a in space.axes if a.name == WD_AXIS), None)
        if axis is not None and list(axis.values) == [REF_WD]:  # every cell is the standard recipe
            return {STANDARD: space}
        if axis is not None and REF_WD in axis.values and len(axis.values) > 1:
            out[STANDARD] = space.restrict({WD_AXIS: [REF_WD]})
        return out
    for name, conds in filters.items():
        allowed = {}
        for cond in conds:
            key, _, text = cond.partition("=")
            key, text = key.strip(), text.strip()
            if key not in space.names:
                raise UserError(f"recipe '{name}': '{key}' is not a tuned axis of the study"
                                f"{did_you_mean(key, space.names)}; tuned axes: "
                                f"{', '.join(space.names)}", key="--recipe")
            try:
                values = [float(v) for v in text.split("|")]
            except ValueError:
                raise UserError(f"recipe '{name}': {key}={text}: expected numbers separated "
                                "by |", key="--recipe") from None
            grid = next(a.values for a in space.axes if a.name == key)
            if off := [v for v in values if v not in grid]:
                raise UserError(f"recipe '{name}': {key} = {off[0]:g} is not on the study's "
                                f"grid {[float(g) for g in grid]}", key="--recipe")
            allowed[key] = values
        out[name] = space.restrict(allowed)
    return out


def target_names(recipes: Sequence[str]) -> list[str]:
    """Every --target the recipes allow."""
    return ["ranking", "multiplier", *(f"{r}.E" for r in recipes),
            *(f"{r}.multiplier" for r in recipes)]


def build_target(study: Study, name: str, *, filters: Mapping[str, Sequence[str]] | None = None,
                 runs: pl.DataFrame | None = None, level: float = 0.95) -> Target:
    """The target ``name`` of the study (module docstring); ``runs``: the sweep's runs table
    (``multiplier`` fits the reference recipe's data law on it)."""
    spaces = recipe_spaces(study, filters)
    names = target_names(list(spaces))
    if name not in names:
        if name.startswith(f"{REGULARIZED}.") and list(spaces) == [STANDARD]:
            raise UserError(f"the study's grid holds weight decay {REF_WD:g} only: every cell is "
                            f"Kim's standard recipe, not regularized (its target is "
                            f"{STANDARD}.E); add weight decays to the grid, or name a recipe with "
                            f"--recipe", key="--target")
        raise UserError(f"unknown target '{name}'{did_you_mean(name, names)}; targets here: "
                        f"{', '.join(names)}", key="--target")
    if name == "ranking":
        if len(spaces) < 2:
            raise UserError("ranking needs >= 2 recipes: this grid has no weight decay 0.1 to "
                            "make Kim's standard recipe; name them with --recipe "
                            "NAME=axis=v1|v2", key="--target")
        return Ranking(spaces, level)
    recipe, _, what = name.rpartition(".") if "." in name else (REGULARIZED, "", name)
    recipe = recipe if recipe in spaces else next(iter(spaces))  # "multiplier" on a standard-only grid
    if what == "E":
        return Asymptote(recipe, spaces[recipe], level)
    law, L_ref = _data_law(runs)
    return Multiplier(recipe, spaces[recipe], law, L_ref, level)


def _data_law(runs: pl.DataFrame | None) -> tuple[DataLaw, float]:
    """The report's data law of the reference recipe and its L_ref (``infinite_compute.
    analyze``), or a one-line UserError saying why there is none."""
    from analysis.errors import AnalysisInputError
    from analysis.fit.power_law import SCALE
    from analysis.recipes.data_multiplier import choose_data_law
    from analysis.recipes.infinite_compute import analyze

    if runs is None or runs.height == 0:
        raise UserError("multiplier: the sweep has no runs yet to fit the reference recipe's "
                        "data law L(U) (run the spec's data block first)", key="--target")
    try:
        ra = analyze(runs)
    except AnalysisInputError as err:
        raise UserError(f"multiplier: {err}", key="--target") from None
    if ra.data_law is None:  # the report's reason: choose_data_law refused the points
        pts = ra.data_points
        try:
            choose_data_law(pts["U"].to_numpy() / SCALE, pts["loss"].to_numpy())
            why = "no data law"
        except AnalysisInputError as err:
            why = str(err)
        raise UserError(f"multiplier: the {ra.reference} recipe has no data law L(U) ({why}); "
                        f"run its data block at >= 3 budgets U", key="--target")
    if not math.isfinite(ra.ref_loss):
        raise UserError(f"multiplier: the {ra.reference} recipe has no loss at the base budget "
                        f"U0 = {ra.U0:,.0f} (its 1x)", key="--target")
    return ra.data_law, float(ra.ref_loss)


def summary_text(summary: Summary, fits: Mapping[str, TargetFit]) -> str:
    """One line: the target's value and CI, or why there is none (the report's reason)."""
    sizes = ", ".join(f"{r} {f.n_sizes}" for r, f in fits.items())
    if not math.isfinite(summary.width):
        if any(f.n_sizes < MIN_SIZES for f in fits.values()):
            why = f"; {summary.note}" if summary.note else ""
            return (f"{summary.name} has no interval yet (settled sizes: {sizes}; {MIN_SIZES} "
                    f"needed per recipe{why})")
        if summary.name.endswith(".E"):  # the report's words: "not identified: ..."
            return f"{summary.name} {summary.note} (settled sizes: {sizes})"
        return f"{summary.name}: none ({summary.note}); settled sizes: {sizes}"
    pct = f"{100 * next(iter(fits.values())).level:g}%"
    if summary.order:  # a ranking
        state = "decided" if summary.decided else "not decided"
        each = ", ".join(f"{r} {fits[r].E:.4f} +- {fits[r].half_width:.4f}" for r in summary.order)
        return (f"ranking {' < '.join(summary.order)} by E ({state}): {summary.note} = "
                f"{summary.value:.4f}, {pct} CI ({summary.lo:.4f}, {summary.hi:.4f}), width "
                f"{summary.width:.4f}; E: {each}; settled sizes: {sizes}")
    if summary.name.endswith(".multiplier"):
        return (f"{summary.name} = {summary.value:.3g}x, {pct} CI ({summary.lo:.3g}x, "
                f"{summary.hi:.3g}x), width {summary.width:.3f} in log m ({summary.note}); "
                f"settled sizes: {sizes}")
    return (f"{summary.name} = {summary.value:.4f}, {pct} CI ({summary.lo:.4f}, "
            f"{summary.hi:.4f}), width {summary.width:.4f} from {sizes.split()[-1]} settled sizes")
