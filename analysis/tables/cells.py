"""The one rule that picks a runs table's best cell: per point (N for a recipe's law in N;
(N, D, U) for a joint law; (precision, N, D, U) for the precision law), the cell with the
lowest mean loss over its seeds. ``analysis.recipes`` (the recipe laws, ``compare``,
``next``), ``analysis.recipes.law_groups`` and ``analysis.fit.precision`` use it.

A *cell* is a run's config apart from its seed: its block and every config column of the
runs table (the dotted axis columns, e.g. ``data.epochs``, ``optim.weight_decay``) except
the seed keys (``SEED_COLUMNS``), with N and D. At each point the best cell is the one with
the lowest mean loss over its seeds (ties: the cell with more seeds, then the first in run
order); its runs are that point's rows, each labelled by its seed (the first set of
``LABELS``, else the row), so that recipes that ran the same seeds at N are paired. A
point's seeds are all kept, never their minimum (which would be biased low).

Pure polars: errors are ``AnalysisInputError``.
"""

from __future__ import annotations

import polars as pl

from analysis.errors import AnalysisInputError

__all__ = ["LABELS", "NOT_SETTINGS", "SEED_COLUMNS", "best_cell_runs", "best_cells", "cell_columns",
           "differing_settings", "setting_columns"]

SEED_COLUMNS = ("seed", "train.init_seed", "data.seed", "data.subset_seed", "member")
"""Columns that tell seed replicates of one cell apart (never part of the cell)."""
LABELS = ("seed", "train.init_seed", "data.seed", "member", "run_id")
"""Columns a row's seed label is taken from, the first that is set."""


def cell_columns(runs: pl.DataFrame) -> list[str]:
    """The block, the config columns but the seed keys, N and D (module docstring)."""
    config = [c for c in runs.columns if "." in c and c not in SEED_COLUMNS]
    return [c for c in ("block", *config, "N", "D_unique", "D_total") if c in runs.columns]


def _ranked(frame: pl.DataFrame, cols: list[str], by: tuple[str, ...]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``frame`` with ``_order``, ``seed_label`` and ``_cell`` added; per ``by`` group the best
    cell: ``_cell``, ``by``, mean, seeds, ``_order`` and ``cols``[, name]): the one ranking
    (lowest mean, then more seeds, then first in run order)."""
    labels = [c for c in LABELS if c in frame.columns]
    ids: dict[tuple, int] = {}
    cell = [ids.setdefault(tuple(tuple(v) if isinstance(v, list) else v for v in key), len(ids))
            for key in frame.select(cols).rows()]
    frame = frame.with_row_index("_order").with_columns(
        pl.coalesce([pl.col(c).cast(pl.String) for c in (*labels, "_order")]).alias("seed_label"),
        pl.Series("_cell", cell, dtype=pl.Int64))
    named = ["name"] if "name" in frame.columns and "name" not in cols else []
    keys = [*by]
    stats = (frame.group_by("_cell")
             .agg(pl.col("loss").mean().alias("mean"), pl.len().alias("seeds"),
                  pl.col("_order").min(), *[pl.col(c).first() for c in keys],
                  *[pl.col(c).sort_by("_order").first() for c in (*cols, *named) if c not in keys])
             .sort(*keys, "mean", pl.col("seeds"), "_order",
                   descending=[False] * len(keys) + [False, True, False])
             .group_by(keys, maintain_order=True).first())
    return frame, stats


def best_cells(frame: pl.DataFrame, cols: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the best cell's runs per N: N, loss, seed, flops; the best cell per N: its
    ``cols``, mean, seeds[, name of its first run]) of one recipe's runs (N, loss and
    ``cols``)."""
    if missing := {"N", "loss"} - set(frame.columns):
        raise AnalysisInputError(f"runs need columns N and loss; missing {sorted(missing)}")
    frame, stats = _ranked(frame, cols, ("N",))
    flops = (pl.col("flops").cast(pl.Float64) if "flops" in frame.columns
             else pl.lit(None, dtype=pl.Float64))
    rows = (frame.join(stats.select("_cell"), on="_cell")
            .select("N", "loss", pl.col("seed_label").alias("seed"), flops.alias("flops"))
            .sort("N", "seed"))
    return rows, stats.drop("_cell", "_order").sort("N")


def best_cell_runs(frame: pl.DataFrame, cols: list[str], by: tuple[str, ...]) -> pl.DataFrame:
    """Every column of the runs of each ``by`` group's best cell (the rule of ``best_cells``,
    grouped by ``by`` in place of N alone), in run order: a joint law over (N, D, U) sees, per
    point, the recipe's best hyperparameters with all their seeds, as the law in N does per N."""
    if missing := {*by, "loss"} - set(frame.columns):
        raise AnalysisInputError(f"runs need columns {sorted({*by, 'loss'})}; missing {sorted(missing)}")
    ranked, stats = _ranked(frame, cols, by)
    return (ranked.join(stats.select("_cell"), on="_cell").sort("_order")
            .drop("_order", "seed_label", "_cell"))


NOT_SETTINGS = {"loss", "final_loss", "best_loss", "val_loss", "run_id", "name", "state",
                 "run_dir", "N_non_embedding", "epochs", "steps", "gpu_hours", "gpu_gib",
                 "micro_batch", "flops", *SEED_COLUMNS}
"""Numeric runs-table columns that are outcomes, labels or functions of the settings (their
variation within a cell is named through the settings that cause it)."""


def setting_columns(frame: pl.DataFrame, skip: set[str]) -> list[str]:
    """The columns that can tell runs of one cell apart, read from the table itself: the
    recipes' cell columns (``cell_columns``: the config columns, N, D_unique, D_total) and
    every other numeric column that is not a metric (a name starting with ``_`` or holding
    ``/`` or ``loss``), a label, a seed or an outcome of a sweep's runs table
    (``NOT_SETTINGS``), and whose values repeat (fewer distinct values than half the rows:
    a setting is shared by many runs, a measured outcome almost never is). D, U, a second
    hp of an external CSV (``lr``, ``bs``) are settings."""
    half = frame.height / 2
    aliases = {"D": "D_total", "U": "D_unique", "C": "flops"}  # prepare_runs' copies
    skip = skip | {a for a, src in aliases.items() if src in frame.columns}
    out = [c for c in cell_columns(frame) if c not in skip]
    for c, t in frame.schema.items():
        if (c in out or c in skip or c in NOT_SETTINGS or not t.is_numeric()
                or c.startswith("_") or "/" in c or "loss" in c.lower()):
            continue
        if frame[c].n_unique() < half:
            out.append(c)
    return out


def differing_settings(frame: pl.DataFrame, keys: list[str], other: list[str]) -> tuple[list[str], int, int]:
    """(the columns of ``other`` that take more than one value at some point of ``keys``, how
    many points hold such runs, how many points there are): the count behind the notes that
    runs of one point were averaged across settings (``fit``'s and ``transfer``'s)."""
    distinct = frame.group_by(keys).agg(pl.col(c).n_unique() for c in other)  # per point
    differ = [c for c in other if distinct[c].max() > 1]
    mixed = distinct.filter(pl.any_horizontal(pl.col(c) > 1 for c in differ)).height if differ else 0
    return differ, mixed, distinct.height

