"""Which runs of a sweep belong to which training recipe (Kim et al. 2025's "standard",
"regularized", ...), found in this order:

1. explicit filters, ``NAME=key=value[,key=value]`` on runs-table columns
   (``scalelab report --recipe``); each ``key=value`` is a ``--where`` condition of
   ``analysis.tables.select`` (typed by the column's dtype, unknown columns with a did-you-mean);
2. the runs table's ``recipe`` column (``extra.recipe`` of the spec, via ``scalelab collect``):
   one recipe per distinct non-null value, unless the sweep has Kim's ``tuned`` block and
   none of its runs is tagged (then only students carry a tag: the block layout applies);
3. Kim's block layout (``sweeps/demo.yaml``): in the ``tuned`` block and any block named
   ``tuned-*`` (extra tuning cells, e.g. longer training for some sizes), "standard" is the
   runs at the reference weight decay and "regularized" all of them (the best over wd).

Pure polars; the sizes (N) of a recipe are then taken from its rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.tables.select import parse_where

__all__ = ["RecipeRows", "find_recipes", "parse_filter", "parse_recipe_option", "reference_recipe"]


@dataclass(frozen=True)
class RecipeRows:
    """Recipe name -> a polars predicate over the runs table, and where they came from."""

    predicates: dict[str, pl.Expr]
    source: str


def parse_filter(text: str) -> dict[str, str]:
    """``key=value[,key=value]`` -> {key: value} (values kept as text)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise AnalysisInputError(f"filter '{text}': expected key=value[,key=value], got '{part}'")
        out[key.strip()] = value.strip()
    return out


def parse_recipe_option(text: str) -> tuple[str, dict[str, str]]:
    """``NAME=key=value[,key=value]`` -> (NAME, {key: value})."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip():
        raise AnalysisInputError(f"--recipe '{text}': expected NAME=key=value[,key=value]")
    return name.strip(), parse_filter(rest)


def _from_filters(runs: pl.DataFrame, filters: Mapping[str, Mapping[str, str]]) -> RecipeRows:
    preds = {}
    for name, conds in filters.items():
        expr = pl.lit(True)
        for key, value in conds.items():  # typed by the column: analysis.tables.select (--where)
            expr = expr & parse_where(f"{key}={value}", runs.schema)
        preds[name] = expr
    return RecipeRows(preds, "--recipe filters")


def find_recipes(runs: pl.DataFrame, filters: Mapping[str, Mapping[str, str]] | None = None, *,
                 ref_wd: float = 0.1, tuned_block: str = "tuned") -> RecipeRows:
    """The recipes of ``runs`` (see the module docstring); raises AnalysisInputError with
    what is missing when none can be found."""
    if filters:
        return _from_filters(runs, filters)
    tuned = (pl.col("block") == tuned_block) | pl.col("block").str.starts_with(f"{tuned_block}-")
    in_tuned = runs.filter(tuned) if "block" in runs.columns else runs.clear()
    # Kim's layout with untagged tuned runs (only the students carry extra.recipe)?
    layout = in_tuned.height > 0 and ("recipe" not in runs.columns or in_tuned["recipe"].null_count() == in_tuned.height)
    if "recipe" in runs.columns and not layout:
        names = sorted((v for v in runs["recipe"].drop_nulls().unique().to_list() if v != ""),
                       key=lambda v: (v != "standard", v))  # the usual reference first
        if names:
            return RecipeRows({n: pl.col("recipe") == n for n in names}, "the runs' `recipe` column (extra.recipe)")
    if in_tuned.height:  # Kim's layout; students and ensembles are found by their blocks
        if "optim.weight_decay" in runs.columns:
            ref = (pl.col("optim.weight_decay").cast(pl.Float64) - ref_wd).abs() <= 1e-12 * max(ref_wd, 1.0)
        else:
            ref = pl.lit(True)
        return RecipeRows({"standard": tuned & ref, "regularized": tuned},
                          f"blocks '{tuned_block}', '{tuned_block}-*' (standard: weight decay {ref_wd:g}; "
                          "regularized: best over wd)")
    raise AnalysisInputError(
        "no recipes found: the runs have no `recipe` column (set extra.recipe in the spec), no "
        f"'{tuned_block}' block, and no --recipe NAME=key=value filter was given")


def reference_recipe(rows: RecipeRows, wanted: str | None = None) -> str:
    """The recipe the data-efficiency multipliers are relative to (Kim's "1x"): ``wanted``,
    else "standard" when there is one, else the first recipe."""
    names = list(rows.predicates)
    if wanted is not None:
        if wanted not in names:
            raise AnalysisInputError(f"reference recipe '{wanted}' is not one of {names}")
        return wanted
    return "standard" if "standard" in names else names[0]

