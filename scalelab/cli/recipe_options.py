"""The ``--recipe`` and ``--target`` options that several commands share (``report``,
``compare``, ``next``, ``sweep --adaptive``): their help texts and the parsing of
``--recipe NAME=key=value[,key=value]`` into filters. Not a command: command modules
import this, never each other.
"""

from __future__ import annotations

from scalelab.errors import UserError

__all__ = ["RECIPE_HELP", "TARGET_CHOICES", "TARGET_HELP", "recipe_filters"]

TARGET_CHOICES = ("regularized.E (default: the asymptote E of the tuned grid), NAME.E, ranking "
                  "(the recipes' order by E) or multiplier (E's data multiplier against the "
                  "reference recipe's data law; needs the data block).")
TARGET_HELP = "What to pin down: " + TARGET_CHOICES
RECIPE_HELP = ("NAME=axis=v1|v2[,axis=v]: a recipe as a slice of the grid (repeatable; "
               "default: standard = weight decay 0.1, regularized = the whole grid).")


def recipe_filters(options: list[str]) -> dict[str, dict[str, str]]:
    from analysis.errors import AnalysisInputError
    from analysis.recipes.rows import parse_recipe_option

    filters: dict[str, dict[str, str]] = {}
    for text in options:
        try:
            name, conds = parse_recipe_option(text)
        except AnalysisInputError as err:
            raise UserError(str(err), key="--recipe") from None
        if name in filters:
            raise UserError(f"recipe '{name}' given twice", key="--recipe")
        filters[name] = conds
    return filters
