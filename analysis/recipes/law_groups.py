"""Which runs each per-recipe law of ``report.md`` is fitted on: the joint law over (N, D, U)
(``joint_groups``, ``analysis.report.joint_md``) and the precision law (``precision_groups``,
``analysis.report.precision_md``).

Joint laws.

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

Precision laws. The precision law reduces the runs at each (precision, N, D, U) point to that point's best
cell. Fitted over a whole table of two optimizers, that best cell is whichever optimizer
wins at each point: the multipliers are then a mixture of the optimizers' (and mostly the
stronger one's), labelled as the table's, and the question a study of "does fp8 cost Muon
more than AdamW?" asks is not answered. So:

- the groups are the recipes the user named (``rows.named_recipes``: ``--recipe`` filters,
  the runs' ``recipe`` column); each recipe with >= 2 precisions gets its own law;
- a named recipe with one precision gets none, and runs in no named recipe are in no law
  (a note says each);
- when no named recipe holds two precisions (recipes defined by the precision itself, such
  as ``muon-fp8`` and ``muon-bf16``), or no recipes are named (Kim's block layout, blocks:
  layouts of one study, not recipes), the whole table is one group, as before, with a note
  in the first case.

Pure polars: errors (a bad filter, an unknown reference) are ``AnalysisInputError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.precision import COLUMN as PRECISION_COLUMN
from analysis.recipes.names import REF_WD
from analysis.recipes.rows import RecipeRows, named_recipes, recipes_or_none, reference_recipe
from analysis.tables.cells import best_cell_runs, cell_columns

__all__ = ["JOINT_LEFT_OUT", "JointGroup", "PrecisionGroup", "joint_groups", "precision_groups"]

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


@dataclass(frozen=True)
class PrecisionGroup:
    """One precision law's runs: ``recipe`` (None: the whole table) and its ``runs``."""

    recipe: str | None
    runs: pl.DataFrame


def _precisions(frame: pl.DataFrame) -> list[str]:
    return sorted(frame[PRECISION_COLUMN].drop_nulls().unique().to_list())


def precision_groups(data: pl.DataFrame, filters: Mapping[str, Sequence[str]] | None = None
                     ) -> tuple[list[PrecisionGroup], list[str]]:
    """(the groups, notes) of runs ``data`` with a ``train.precision`` column (module
    docstring); the groups are [] when ``data`` has fewer than 2 precisions."""
    if PRECISION_COLUMN not in data.columns or len(_precisions(data)) < 2:
        return [], []
    found = named_recipes(data, filters)
    if found is None:
        return [PrecisionGroup(None, data)], []
    groups, single = [], []
    for name, pred in found.predicates.items():
        sub = data.filter(pred)
        kinds = _precisions(sub)
        if len(kinds) >= 2:
            groups.append(PrecisionGroup(name, sub))
        elif sub.height:
            single.append(f"{name} ({kinds[0] if kinds else 'no precision'})")
    if not groups:
        return [PrecisionGroup(None, data)], [
            f"Each recipe ({found.source}) ran one precision ({', '.join(single)}): one law over "
            "all their runs, each (precision, N, D, U) point its best cell across the recipes."]
    notes = [f"One precision, no precision law: {', '.join(single)}."] if single else []
    if outside := data.height - data.filter(pl.any_horizontal(list(found.predicates.values()))).height:
        notes.append(f"{outside} run(s) belong to no recipe ({found.source}): in no precision law.")
    return groups, notes
