"""Per recipe, the seed replicates of each model size's best cell: the rows
``analysis.recipes.compare.compare_recipes`` compares (N, loss, seed, flops).

From a sweep's runs table (``scalelab collect``):

1. the runs of earlier specs are left out (``analysis.tables.runs.drop_stale``) and each recipe's
   runs are found as ``scalelab report`` finds them (``analysis.recipes.rows.find_recipes``:
   ``--recipe NAME=key=value`` filters, else the ``recipe`` column, else Kim's ``tuned``
   blocks with "standard" at the reference weight decay and "regularized" over every wd);
2. only COMPLETED runs with a finite, positive loss count, at one unique-token budget U:
   the one most of the two recipes' runs share (the largest on a tie), as
   ``analysis.recipes.infinite_compute`` takes its base budget U0;
3. a *cell* is a run's config apart from its seed: its block and every config column of the
   runs table (the dotted axis columns, e.g. ``data.epochs``, ``optim.weight_decay``)
   except the seed keys (``seed``, ``train.init_seed``, ``data.seed``,
   ``data.subset_seed``, ``member``), with N and D;
4. at each N the best cell (``analysis.tables.cells.best_cells``, the rule the report uses
   too) is the one with the lowest *mean loss over its seeds* (ties: the
   cell with more seeds, then the first in run order). Its runs are the rows, each labelled
   by its seed (the ``seed`` column, else ``train.init_seed``, ``data.seed``, ``member``,
   else the run id or row), so that recipes that ran the same seeds at N are paired.

Taking the mean over seeds (not ``analysis.adaptive.target_fits``'s first replicate) is what the
comparison needs: both recipes' best cells are chosen by the same rule, from all their
seeds, and the bootstrap then resamples those seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.names import REF_WD, base_budget
from analysis.recipes.rows import find_recipes
from analysis.tables.cells import SEED_COLUMNS, best_cells, cell_columns
from analysis.tables.runs import drop_stale
from scalelab.errors import UserError, did_you_mean

__all__ = ["SEED_COLUMNS", "RecipeCells", "recipe_cells"]



@dataclass(frozen=True)
class RecipeCells:
    """The compared rows of each recipe, and the cells they come from."""

    rows: dict[str, pl.DataFrame]
    """Recipe -> N, loss, seed (text), flops: the runs of each size's best cell."""
    cells: dict[str, pl.DataFrame]
    """Recipe -> per N: the best cell's columns, its mean loss and seed count."""
    U: float | None
    """The unique-token budget compared at (None: the runs table has no D_unique)."""
    source: str
    """Where the recipes came from (``find_recipes``)."""
    notes: tuple[str, ...] = ()


def recipe_cells(runs: pl.DataFrame, names: Sequence[str], *,
                 filters: Mapping[str, Sequence[str]] | None = None,
                 loss: str = "final_loss", ref_wd: float = REF_WD) -> RecipeCells:
    """The rows of the recipes ``names`` (module docstring); an unknown recipe, column or
    an empty recipe is a one-line UserError."""
    if loss not in runs.columns:
        raise UserError(f"the runs table has no loss column '{loss}'"
                        f"{did_you_mean(loss, runs.columns)}", key="--loss-column")
    if missing := {"N", "state"} - set(runs.columns):
        raise UserError(f"the runs table lacks {sorted(missing)} (run `scalelab collect SWEEP`)")
    runs, stale = drop_stale(runs)
    try:
        found = find_recipes(runs, filters, ref_wd=ref_wd)
    except AnalysisInputError as err:
        raise UserError(str(err)) from None
    for name in names:
        if name not in found.predicates:
            raise UserError(f"no recipe '{name}'{did_you_mean(name, found.predicates)}; "
                            f"recipes here: {', '.join(found.predicates)} (from {found.source})")
    ok = (pl.col("state") == "COMPLETED") & pl.col(loss).is_finite() & (pl.col(loss) > 0)
    done = runs.filter(ok).with_columns(pl.col(loss).cast(pl.Float64).alias("loss"),
                                        pl.col("N").cast(pl.Float64))
    tagged = {n: done.filter(found.predicates[n]) for n in names}
    U = None
    if "D_unique" in done.columns:
        every = pl.concat([t.select(pl.col("D_unique").cast(pl.Float64)) for t in tagged.values()])
        if every.height:
            U = base_budget(every["D_unique"])
            at_u = pl.col("D_unique").cast(pl.Float64) == U
            tagged = {n: t.filter(at_u) for n, t in tagged.items()}
    for name, frame in tagged.items():
        if frame.height == 0:
            raise UserError(f"recipe '{name}' has no COMPLETED run with a finite {loss}"
                            + (f" at U = {U:,.0f}" if U is not None else ""))
    cols = cell_columns(done)
    rows, cells = {}, {}
    for name, frame in tagged.items():
        try:  # the one rule of the report, compare and next (analysis.tables.cells)
            rows[name], cells[name] = best_cells(frame, cols)
        except AnalysisInputError as err:
            raise UserError(str(err)) from None
    return RecipeCells(rows, cells, U, found.source, (stale,) if stale else ())
