"""Which runs a joint law over (N, D, U) is fitted on: one group per recipe, each point its
best cell. The rule ``report.md``'s joint law uses (``analysis.report.joint_md``).

A joint law (Chinchilla, or Muennighoff et al. 2023's data-constrained law, arXiv
2305.16264) describes one training recipe: its loss as a function of N, D and U. Fitted over
a whole sweep it would average recipes that differ by design (Muon against AdamW, weight
decay 0.1 against 3.0, ensemble members, distilled students) and hyperparameters that were
swept to be beaten (a learning rate 3x off). So:

- the groups are the recipes of ``analysis.recipes.rows.find_recipes`` (``--recipe``
  filters, the ``recipe`` column, Kim's block layout, else one per block), the same as the
  law in N of ``recipe_asymptote.recipe_laws``. Without ``--recipe`` filters, the runs of
  the ``data`` block that carry no recipe tag (Kim's layout: the reference recipe's runs at
  other unique-token budgets, ``rows.ROLE_BLOCKS``) join the reference recipe
  (``rows.reference_recipe``: "standard", else the first), whose runs they are. A table
  without recipes is one group, less the runs of role blocks that are no recipe (ensemble
  members, distilled students: ``JOINT_LEFT_OUT``);
- within a group, each (N, D, U) point keeps the runs of its best cell (``analysis.tables.cells.best_cell_runs``:
  the lowest mean loss over seeds, every seed kept), as the law in N keeps each size's best.

Pure polars: errors are ``AnalysisInputError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.names import REF_WD
from analysis.recipes.rows import RecipeRows, recipes_or_none, reference_recipe
from analysis.tables.cells import best_cell_runs, cell_columns

__all__ = ["JOINT_LEFT_OUT", "JointGroup", "joint_groups"]

JOINT_LEFT_OUT = ("ensemble", "distill-ensemble", "self-distill")
"""Blocks whose runs are never a point of a joint law without recipes: ensemble members and
distilled students are other objectives, not the recipe's loss at (N, D, U)."""
DATA_BLOCK = "data"
"""Kim's block of the reference recipe's runs at other unique-token budgets."""
_ALL = "all runs"


@dataclass(frozen=True)
class JointGroup:
    """One recipe's joint-law points: ``name``, ``runs`` (every column; per (N, D, U) the best
    cell's runs, all seeds), ``n_input`` (the recipe's runs before the best-cell rule)."""

    name: str
    runs: pl.DataFrame
    n_input: int

    @property
    def points(self) -> int:
        """Distinct (N, D, U) points."""
        return self.runs.select("N", "D", "U").n_unique()


def joint_groups(data: pl.DataFrame, filters: Mapping[str, Sequence[str]] | None = None, *,
                 ref_wd: float = REF_WD, reference: str | None = None) -> tuple[list[JointGroup], str]:
    """(one ``JointGroup`` per recipe with runs, where the recipes came from) of fit-ready
    runs ``data`` (``analysis.tables.runs.prepare_runs``: N, D, U, loss, config columns).
    ``reference``: the recipe the untagged ``data`` block joins (``--reference``; default
    ``rows.reference_recipe``'s). A bad ``filters`` entry or an unknown ``reference`` raises
    AnalysisInputError, as in ``find_recipes``."""
    if missing := {"N", "D", "U", "loss"} - set(data.columns):
        raise AnalysisInputError(f"runs need columns N, D, U and loss; missing {sorted(missing)}")
    found = recipes_or_none(data, filters, ref_wd=ref_wd)
    if found is None:
        keep = ~pl.col("block").is_in(JOINT_LEFT_OUT) if "block" in data.columns else pl.lit(True)
        found = RecipeRows({_ALL: keep}, "the whole table (no recipes found)")
    recipes = dict(found.predicates)
    if not filters and _ALL not in recipes and "block" in data.columns:
        # the data budgets are the reference recipe's: untagged, they join it
        untagged = pl.col("recipe").is_null() if "recipe" in data.columns else pl.lit(True)
        ref = reference_recipe(found, reference)
        recipes[ref] = recipes[ref] | ((pl.col("block") == DATA_BLOCK) & untagged)
    groups = []
    for name, pred in recipes.items():
        sub = data.filter(pred)
        if sub.height:
            best = best_cell_runs(sub, cell_columns(sub), ("N", "D", "U"))
            groups.append(JointGroup(name, best, sub.height))
    return groups, found.source
