"""``--target`` of ``scalelab next`` on any study (``any_study``): the target over its
recipes (``analysis.recipes.rows.find_recipes`` on the candidates), each recipe the frame
of its candidate runs (``analysis.adaptive.recipe_design``).

- ``NAME.E``: the recipe's asymptote E, the report's fit (``target_fits.fit_target``);
- ``ranking``: the order of every recipe by E (two or more recipes). Each recipe's E needs
  >= ``identified.MIN_SIZES`` (5) settled sizes before it has an interval (a ranking on 4
  sizes was measured to go wrong, ``identified.MIN_SIZES``), and the order is called decided only on
  ``targets.MIN_DECISION_SIZES`` settled sizes per recipe (optional stopping);
- ``multiplier`` / ``NAME.multiplier``: the data multiplier of the recipe's E against the
  reference recipe's data law, as today (``targets._data_law``: the report's law from the
  sweep's own data block).

Without ``--target``: ``regularized.E`` where there is a regularized recipe (Kim's layout),
else ``ranking`` with two or more recipes, else the one recipe's E.
"""

from __future__ import annotations

import polars as pl

from analysis.adaptive.multiplier import Multiplier
from analysis.adaptive.recipe_design import recipe_frames
from analysis.adaptive.targets import Asymptote, Ranking, Target
from scalelab.adaptive.any_study import AnyStudy
from scalelab.adaptive.targets import REGULARIZED, _data_law, target_names
from scalelab.errors import UserError, did_you_mean

__all__ = ["any_target", "default_target"]


def default_target(study: AnyStudy) -> str:
    """The target without ``--target`` (module docstring)."""
    names = list(study.recipes)
    if REGULARIZED in names:
        return f"{REGULARIZED}.E"
    return "ranking" if len(names) > 1 else f"{names[0]}.E"


def any_target(study: AnyStudy, name: str | None, *, runs: pl.DataFrame | None = None,
               level: float = 0.95) -> Target:
    """The target ``name`` over the study's recipes (module docstring)."""
    name = default_target(study) if name is None else name
    frames = recipe_frames(study.candidates, study.recipes)
    names = target_names(list(frames))
    if name not in names:
        raise UserError(f"unknown target '{name}'{did_you_mean(name, names)}; targets here: "
                        f"{', '.join(names)} (recipes from {study.source})", key="--target")
    if name == "ranking":
        if len(frames) < 2:
            raise UserError(f"ranking needs >= 2 recipes, this study has {list(frames)} (from "
                            f"{study.source}); name them with --recipe NAME=COND, e.g. "
                            "block=a|b", key="--target")
        return Ranking(frames, level)
    recipe, _, what = name.rpartition(".") if "." in name else (REGULARIZED, "", name)
    recipe = recipe if recipe in frames else next(iter(frames))
    if what == "E":
        return Asymptote(recipe, frames[recipe], level)
    law, L_ref = _data_law(runs)
    return Multiplier(recipe, frames[recipe], law, L_ref, level)
