"""analysis.recipes.rows: which runs belong to which recipe (filters, the recipe column, Kim's
block layout), on small hand-made runs tables."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.errors import AnalysisInputError
from analysis.recipes.rows import find_recipes


def _runs(recipe: list[str | None] | None = None) -> pl.DataFrame:
    frame = pl.DataFrame({
        "name": ["t_a", "t_b", "best_a", "ens_1", "student"],
        "block": ["tuned", "tuned", "tuned-best", "ensemble", "distill-ensemble"],
        "optim.weight_decay": [0.1, 1.0, 3.0, 3.0, 0.1],
        "N": [1000, 1000, 2000, 2000, 2000],
    })
    return frame if recipe is None else frame.with_columns(pl.Series("recipe", recipe, dtype=pl.String))


def _names(runs: pl.DataFrame, rows) -> dict[str, list[str]]:
    return {k: runs.filter(p)["name"].to_list() for k, p in rows.predicates.items()}


def test_block_layout_counts_every_tuned_block():
    runs = _runs()
    rows = find_recipes(runs)
    assert _names(runs, rows) == {"standard": ["t_a"], "regularized": ["t_a", "t_b", "best_a"]}
    assert "tuned-*" in rows.source


def test_tagged_students_do_not_hide_the_block_layout():
    # sweeps/tiny_infinite_compute.yaml tags only its students (extra.recipe): the standard
    # and regularized recipes still come from the tuned blocks.
    runs = _runs([None, None, None, None, "distill-ensemble"])
    assert _names(runs, find_recipes(runs)) == {"standard": ["t_a"], "regularized": ["t_a", "t_b", "best_a"]}


def test_a_tagged_sweep_uses_its_recipe_column():
    runs = _runs(["standard", "wide", "wide", None, "distill-ensemble"])
    rows = find_recipes(runs)
    assert _names(runs, rows) == {"standard": ["t_a"], "distill-ensemble": ["student"], "wide": ["t_b", "best_a"]}
    assert next(iter(rows.predicates)) == "standard"


def test_filters_win_and_nothing_found_says_what_is_missing():
    runs = _runs()
    rows = find_recipes(runs, {"low": {"optim.weight_decay": "0.1"}})
    assert _names(runs, rows) == {"low": ["t_a", "student"]}
    with pytest.raises(AnalysisInputError, match="no recipes found.*no blocks"):
        find_recipes(runs.drop("block"))
