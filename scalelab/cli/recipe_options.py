"""The ``--recipe`` and ``--target`` options that several commands share (``report``,
``compare``, ``next``, ``sweep --adaptive``): their help texts and the parsing of
``--recipe NAME=COND[,COND...]`` into filters (``analysis.recipes.rows``). Not a command: command modules
import this, never each other.
"""

from __future__ import annotations

from scalelab.errors import UserError

__all__ = ["RECIPE_HELP", "REF_WD_HELP", "TARGET_CHOICES", "TARGET_HELP", "check_ref_wd", "recipe_filters"]

TARGET_CHOICES = ("regularized.E (default: the asymptote E of the tuned grid), NAME.E, ranking "
                  "(the recipes' order by E) or multiplier (E's data multiplier against the "
                  "reference recipe's data law; needs the data block).")
TARGET_HELP = "What to pin down: " + TARGET_CHOICES
RECIPE_HELP = ("NAME=COND[,COND...]: a recipe as a set of runs (repeatable). COND: key=value, "
               "key=v1|v2 (any of them, e.g. block=adamw-x1|adamw-x3), key<value or "
               "'pl.col(...) ...'; ANDed. Default: extra.recipe, else Kim's tuned blocks "
               "(standard = weight decay 0.1, regularized = the whole grid), else one per block.")


REF_WD_HELP = "Weight decay of the standard recipe (blocks): a finite number >= 0."


def check_ref_wd(value: float) -> None:
    """--ref-wd: a weight decay, finite and >= 0 (nan matches no run: every block would
    silently count as another recipe)."""
    import math

    if not (math.isfinite(value) and value >= 0):
        raise UserError(f"expected a weight decay: a finite number >= 0, got {value}", key="--ref-wd")


def recipe_filters(options: list[str]) -> dict[str, tuple[str, ...]]:
    from analysis.errors import AnalysisInputError
    from analysis.recipes.rows import parse_recipe_option

    filters: dict[str, tuple[str, ...]] = {}
    for text in options:
        try:
            name, conds = parse_recipe_option(text)
        except AnalysisInputError as err:
            raise UserError(str(err), key="--recipe") from None
        if name in filters:
            raise UserError(f"recipe '{name}' given twice", key="--recipe")
        filters[name] = conds
    return filters
