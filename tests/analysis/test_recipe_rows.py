"""analysis.recipes.rows: which runs belong to which recipe (filters, the recipe column, Kim's
block layout), on small hand-made runs tables."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.errors import AnalysisInputError
from analysis.recipes.rows import find_recipes, parse_recipe_option, recipe_predicate


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


def _study_runs() -> pl.DataFrame:
    """A Muon/AdamW study's runs: the recipe named once per block, lr multiplier blocks."""
    blocks = ["adamw-x1", "adamw-x3", "muon-x1", "muon-x3"]
    return pl.DataFrame({
        "block": [b for b in blocks for _ in range(2)],
        "N": [1e4, 2e4] * 4,
        "optim.name": [b.split("-")[0] for b in blocks for _ in range(2)],
        "extra.recipe": [b.split("-")[0] for b in blocks for _ in range(2)],
    })


def test_recipe_conditions_join_blocks_and_take_polars_expressions():
    runs = _study_runs()
    name, conds = parse_recipe_option('fast=block=muon-x1|muon-x3,N>1e4')
    assert name == "fast" and conds == ("block=muon-x1|muon-x3", "N>1e4")
    got = runs.filter(recipe_predicate(conds, runs.schema))
    assert got["block"].to_list() == ["muon-x1", "muon-x3"] and got["N"].to_list() == [2e4, 2e4]
    _, conds = parse_recipe_option('adam=pl.col("optim.name").is_in(["adamw", "sgd"]), N<2e4')
    assert conds == ('pl.col("optim.name").is_in(["adamw", "sgd"])', "N<2e4")  # comma inside kept
    assert runs.filter(recipe_predicate(conds, runs.schema))["block"].to_list() == ["adamw-x1", "adamw-x3"]
    _, conds = parse_recipe_option("rest=block!=adamw-x1|muon-x1")
    assert set(runs.filter(recipe_predicate(conds, runs.schema))["block"]) == {"adamw-x3", "muon-x3"}


def test_recipes_named_once_per_block_and_one_recipe_per_block_without_tags():
    runs = _study_runs().rename({"extra.recipe": "recipe"})
    found = find_recipes(runs)
    assert set(found.predicates) == {"adamw", "muon"}
    assert runs.filter(found.predicates["muon"]).height == 4
    by_block = find_recipes(runs.drop("recipe"))
    assert list(by_block.predicates) == ["adamw-x1", "adamw-x3", "muon-x1", "muon-x3"]
    assert "one recipe per block" in by_block.source


@pytest.mark.parametrize("text, said", [
    ("x=", "expected NAME=COND"), ("=block=a", "expected NAME=COND"),
    ("a b=block=x", "a recipe name is"), ("a=,,", "an empty condition"),
])
def test_bad_recipe_options_say_what_is_wrong(text, said):
    with pytest.raises(AnalysisInputError, match=said):
        parse_recipe_option(text)


def test_bad_conditions_name_the_column_or_the_value():
    runs = _study_runs()
    with pytest.raises(AnalysisInputError, match="empty value between"):
        recipe_predicate(("block=a|",), runs.schema)
    with pytest.raises(AnalysisInputError, match="unknown column 'blok'.*block"):
        recipe_predicate(("blok=a|b",), runs.schema)


def test_one_recipe_per_block_leaves_out_data_ensemble_and_student_blocks():
    runs = pl.concat([_study_runs().drop("extra.recipe"),
                      pl.DataFrame({"block": ["data", "ensemble", "self-distill"],
                                    "N": [1e4] * 3, "optim.name": ["adamw"] * 3})])
    found = find_recipes(runs)
    assert list(found.predicates) == ["adamw-x1", "adamw-x3", "muon-x1", "muon-x3"]


def _objective_runs(blocks: list[str | None]) -> pl.DataFrame:
    frame = pl.DataFrame({
        "name": ["a1", "m1", "a2", "m2"],
        "model.objective": ["ar", "mdm", None, "mdm"],  # None: an older run, autoregressive
        "N": [1000, 1000, 2000, 2000],
    })
    return frame if not any(blocks) else frame.with_columns(pl.Series("block", blocks, dtype=pl.String))


def test_two_objectives_are_two_recipes_without_names():
    """An MDM loss is an ELBO (an upper bound), no number to take the best of against AR's:
    without named recipes each objective is its own recipe."""
    runs = _objective_runs([None] * 4)
    rows = find_recipes(runs)
    assert _names(runs, rows) == {"ar": ["a1", "a2"], "mdm": ["m1", "m2"]}
    assert "model.objective" in rows.source


def test_a_block_of_two_objectives_is_split_and_a_one_objective_block_kept():
    runs = _objective_runs(["grid", "grid", "solo", "solo-m"])  # solo: AR only, solo-m: MDM only
    rows = find_recipes(runs)
    assert set(rows.predicates) == {"grid-ar", "grid-mdm", "solo", "solo-m"}
    assert "split by model.objective" in rows.source


def test_a_split_never_takes_another_blocks_name():
    runs = _objective_runs(["grid", "grid", "grid-ar", "grid-ar"]).with_columns(
        pl.Series("model.objective", ["ar", "mdm", "ar", "ar"]))
    assert _names(runs, find_recipes(runs)) == {"grid-ar": ["a2", "m2"], "grid-ar-2": ["a1"], "grid-mdm": ["m1"]}


def test_named_recipes_are_never_split_by_objective():
    runs = _objective_runs([None] * 4).with_columns(pl.lit("mine").alias("recipe"))
    assert _names(runs, find_recipes(runs)) == {"mine": ["a1", "m1", "a2", "m2"]}
    assert list(find_recipes(runs, {"x": ["N=1000"]}).predicates) == ["x"]


def test_one_objective_changes_nothing():
    runs = _objective_runs(["b", "b", "b", "b"]).with_columns(pl.lit("ar").alias("model.objective"))
    rows = find_recipes(runs)
    assert list(rows.predicates) == ["b"] and "split" not in rows.source
    with pytest.raises(AnalysisInputError, match="no recipes found"):
        find_recipes(runs.drop("block"))
