"""Which runs of a sweep belong to which training recipe: the one owner of that question for
``scalelab report``, ``compare``, ``next``, the demo and the notebooks. A recipe is a named
set of runs, found in this order:

1. explicit filters, ``--recipe NAME=COND[,COND...]`` (``parse_recipe_option``): each COND
   is a ``--where`` condition of ``analysis.tables.select`` on runs-table columns
   (``key=value``, ``key<value``, ``pl.col(...) ...``; typed by the column's dtype, unknown
   columns with a did-you-mean) or ``key=v1|v2`` (any of the values, e.g. several blocks
   ``block=adamw-x1|adamw-x3``); conditions are ANDed;
2. the runs table's ``recipe`` column (``extra.recipe`` of the spec wherever it is set: the
   top-level ``base``, a block's ``base``, a grid or zip axis; ``scalelab collect``): one
   recipe per distinct non-null value, unless the sweep has Kim's ``tuned`` block and none
   of its runs is tagged (then only students carry a tag: the block layout applies);
3. Kim's block layout (``sweeps/demo.yaml``): in the ``tuned`` block and any block named
   ``tuned-*`` (extra tuning cells, e.g. longer training for some sizes), "standard" is the
   runs at the reference weight decay and "regularized" all of them (the best over wd);
4. else one recipe per block (its name), but the blocks of other roles (``ROLE_BLOCKS``:
   the data budgets, ensemble members, distilled students), which are no law in N;
5. else, when the runs train two or more objectives (``model.objective``: ar, mdm), one
   recipe per objective.

In rules 4 and 5 a block never mixes objectives: a block whose runs train two objectives
is one recipe per objective (``grid-ar``, ``grid-mdm``). A masked-diffusion loss is an ELBO,
an upper bound on the NLL (docs/diffusion.md), not a number to take the best of against an
autoregressive loss: without the split, each point's best cell was the AR run and the MDM
runs vanished from the laws. (Named recipes, rules 1-2, and Kim's layout are the user's:
they are kept as given.)

The predicates are polars expressions over config columns, so they select runs in
``runs.parquet`` and candidates in ``plan.parquet`` alike (they share those columns).
Pure polars; the sizes (N) of a recipe are then taken from its rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.names import REF_WD, REGULARIZED, STANDARD
from analysis.tables.select import parse_where

__all__ = ["COLUMN_SOURCE", "FILTERS_SOURCE", "OBJECTIVE", "ROLE_BLOCKS", "RecipeRows", "condition_expr",
           "find_recipes", "named_recipes", "parse_filter", "parse_recipe_option", "recipe_predicate",
           "recipes_or_none", "reference_recipe", "split_conditions"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
OBJECTIVE = "model.objective"
"""The runs-table column of the training objective (null: an older run, autoregressive)."""
FILTERS_SOURCE = "--recipe filters"
COLUMN_SOURCE = "the runs' `recipe` column (extra.recipe)"
"""``RecipeRows.source`` of the recipes a user named (rules 1 and 2; ``named_recipes``)."""


@dataclass(frozen=True)
class RecipeRows:
    """Recipe name -> a polars predicate over the runs table, and where they came from."""

    predicates: dict[str, pl.Expr]
    source: str


def split_conditions(text: str) -> tuple[str, ...]:
    """``COND[,COND...]`` -> the conditions, split at top-level commas only (a comma inside
    brackets, parentheses or quotes belongs to a ``pl.col(...)`` expression)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    conds = tuple(p.strip() for p in parts)
    if not all(conds):
        raise AnalysisInputError(f"'{text}': an empty condition between commas")
    return conds


def parse_filter(text: str) -> dict[str, str]:
    """``key=value[,key=value]`` -> {key: value} (values kept as text)."""
    out: dict[str, str] = {}
    for part in split_conditions(text):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise AnalysisInputError(f"filter '{text}': expected key=value[,key=value], got '{part}'")
        out[key.strip()] = value.strip()
    return out


def parse_recipe_option(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=COND[,COND...]`` -> (NAME, conditions). A condition is a ``--where`` condition
    (``key=value``, ``key<value``, ``pl.col(...) ...``; ``analysis.tables.select``),
    ``key=v1|v2|...``, any of the values (e.g. ``block=adamw-x1|adamw-x3``: several blocks
    as one recipe), or ``key!=v1|v2``, none of them."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise AnalysisInputError(f"--recipe '{text}': expected NAME=COND[,COND...] "
                                 "(COND: key=value, key=v1|v2, or pl.col(...) ...)")
    if not _NAME.fullmatch(name.strip()):
        raise AnalysisInputError(f"--recipe '{text}': a recipe name is letters, digits, "
                                 f"'_', '.', '-' (got '{name.strip()}')")
    return name.strip(), split_conditions(rest)


def condition_expr(cond: str, schema: Mapping[str, pl.DataType]) -> pl.Expr:
    """One recipe condition (``parse_recipe_option``) as a predicate over a table of
    ``schema`` (the runs table, or a plan: they share their config columns)."""
    key, sep, values = cond.partition("=")
    negate = key.endswith("!")  # key!=v1|v2: none of them
    key = key[:-1] if negate else key
    if (sep and not cond.lstrip().startswith("pl.") and "|" in values
            and not key.endswith(("<", ">")) and not values.startswith("=")):
        alts = [v.strip() for v in values.split("|")]
        if not all(alts):
            raise AnalysisInputError(f"condition '{cond}': an empty value between '|'")
        expr = pl.lit(False)
        for v in alts:
            expr = expr | parse_where(f"{key.strip()}={v}", schema)
        return ~expr if negate else expr
    return parse_where(cond, schema)


def recipe_predicate(conds: Sequence[str], schema: Mapping[str, pl.DataType]) -> pl.Expr:
    """The AND of a recipe's conditions over a table of ``schema``."""
    expr = pl.lit(True)
    for cond in conds:
        expr = expr & condition_expr(cond, schema)
    return expr


def _from_filters(runs: pl.DataFrame, filters: Mapping[str, Sequence[str]]) -> RecipeRows:
    preds = {name: recipe_predicate(_conditions(conds), runs.schema)
             for name, conds in filters.items()}
    return RecipeRows(preds, FILTERS_SOURCE)


def _conditions(conds: Sequence[str] | Mapping[str, str]) -> tuple[str, ...]:
    """Conditions as text; a {key: value} mapping (the older form) is key=value each."""
    if isinstance(conds, Mapping):
        return tuple(f"{k}={v}" for k, v in conds.items())
    return tuple(conds)


ROLE_BLOCKS = ("data", "ensemble", "distill-ensemble", "self-distill")
"""Blocks that are no recipe of their own (``infinite_compute.Blocks``' defaults): the data
budgets of the reference recipe, ensemble members, distilled students."""


def find_recipes(runs: pl.DataFrame, filters: Mapping[str, Sequence[str]] | None = None, *,
                 ref_wd: float = REF_WD, tuned_block: str = "tuned",
                 role_blocks: Sequence[str] = ROLE_BLOCKS) -> RecipeRows:
    """The recipes of ``runs`` (see the module docstring); raises AnalysisInputError with
    what is missing when none can be found."""
    if filters:
        return _from_filters(runs, filters)
    tuned = (pl.col("block") == tuned_block) | pl.col("block").str.starts_with(f"{tuned_block}-")
    in_tuned = runs.filter(tuned) if "block" in runs.columns else runs.clear()
    # Kim's layout with untagged tuned runs (only the students carry extra.recipe)?
    layout = in_tuned.height > 0 and (
        "recipe" not in runs.columns or in_tuned["recipe"].null_count() == in_tuned.height)
    if "recipe" in runs.columns and not layout:
        names = sorted((v for v in runs["recipe"].drop_nulls().unique().to_list() if v != ""),
                       key=lambda v: (v != STANDARD, v))  # the usual reference first
        if names:
            return RecipeRows({n: pl.col("recipe") == n for n in names}, COLUMN_SOURCE)
    if in_tuned.height:  # Kim's layout; students and ensembles are found by their blocks
        if "optim.weight_decay" in runs.columns:
            ref = (pl.col("optim.weight_decay").cast(pl.Float64) - ref_wd).abs() <= 1e-12 * max(ref_wd, 1.0)
        else:
            ref = pl.lit(True)
        return RecipeRows({STANDARD: tuned & ref, REGULARIZED: tuned},
                          f"blocks '{tuned_block}', '{tuned_block}-*' (standard: weight decay {ref_wd:g}; "
                          "regularized: best over wd)")
    blocks = (sorted(b for b in runs["block"].drop_nulls().unique().to_list() if b not in role_blocks)
              if "block" in runs.columns else [])
    if blocks:
        return _split_objectives(runs, {b: pl.col("block") == b for b in blocks},
                                 "the blocks (no extra.recipe set: one recipe per block)")
    if len(_objectives(runs)) > 1:
        return _split_objectives(runs, {}, f"the runs' objectives ({OBJECTIVE})")
    raise AnalysisInputError(
        "no recipes found: the runs have no `recipe` column (set extra.recipe in the spec), no "
        "blocks, and no --recipe NAME=COND filter was given")


def _objectives(frame: pl.DataFrame) -> list[str]:
    """The objectives ``frame``'s runs train (autoregressive where none is recorded)."""
    if OBJECTIVE not in frame.columns:
        return []
    return sorted(frame[OBJECTIVE].cast(pl.String).fill_null("ar").unique().to_list())


def _split_objectives(runs: pl.DataFrame, recipes: dict[str, pl.Expr], source: str) -> RecipeRows:
    """``recipes`` with each recipe whose runs train two or more objectives split into one per
    objective (``NAME-OBJECTIVE``); no recipes: one per objective (module docstring)."""
    objective = pl.col(OBJECTIVE).cast(pl.String).fill_null("ar")
    if not recipes:
        return RecipeRows({o: objective == o for o in _objectives(runs)}, source)
    out: dict[str, pl.Expr] = {}
    split = False
    for name, pred in recipes.items():
        kinds = _objectives(runs.filter(pred))
        if len(kinds) < 2:
            out[name] = pred
            continue
        split = True
        for o in kinds:
            key, k = f"{name}-{o}", 2
            while key in out or key in recipes:  # a block may be named grid-ar already
                key, k = f"{name}-{o}-{k}", k + 1
            out[key] = pred & (objective == o)
    return RecipeRows(out, source + (f"; a block of two objectives split by {OBJECTIVE}" if split else ""))


def recipes_or_none(runs: pl.DataFrame, filters: Mapping[str, Sequence[str]] | None = None, *,
                    ref_wd: float = REF_WD) -> RecipeRows | None:
    """``find_recipes``, or None when the runs have no recipes and no ``filters`` were given
    (each caller's own fallback: one group, one group per D, no study); a bad filter still
    raises AnalysisInputError."""
    try:
        return find_recipes(runs, filters, ref_wd=ref_wd)
    except AnalysisInputError:
        if filters:
            raise
        return None


def named_recipes(runs: pl.DataFrame, filters: Mapping[str, Sequence[str]] | None = None) -> RecipeRows | None:
    """The recipes the user named (rules 1 and 2: ``--recipe`` filters, the runs' ``recipe``
    column), or None: Kim's block layout and one recipe per block are layouts of a sweep,
    not recipes a law of another axis (precision) should be split by. A bad filter raises
    AnalysisInputError."""
    found = recipes_or_none(runs, filters)
    return found if found is not None and found.source in (FILTERS_SOURCE, COLUMN_SOURCE) else None


def reference_recipe(rows: RecipeRows, wanted: str | None = None) -> str:
    """The recipe the data-efficiency multipliers are relative to (Kim's "1x"): ``wanted``,
    else "standard" when there is one, else the first recipe."""
    names = list(rows.predicates)
    if wanted is not None:
        if wanted not in names:
            raise AnalysisInputError(f"reference recipe '{wanted}' is not one of {names}")
        return wanted
    return STANDARD if STANDARD in names else names[0]

