"""The plan at a glance (pure polars, no I/O): what ``scalelab sweep SPEC --dry-run`` shows.

- ``effective``: the plan table with each run's own value where a block does not set an
  axis (null there: the value comes from the base) and with ``model.preset`` always present;
- ``by_size``: one row per (block, model size N) with the run count, the model presets,
  the range of total tokens D and their sum, summed FLOPs and GPU-hours, the peak GiB per GPU and, per
  varying axis, the sorted distinct values of the group (a list column);
- ``varying_axes``: the axis columns whose value differs between runs (the plan's axes,
  and ``seed``; ``block`` and ``model.preset`` are the rows themselves);
- ``subtotal``: the sums of some ``by_size`` rows (a block's, the whole plan's);
- ``block_values``: per block, the values of each axis that takes several values within
  one (block, size) row (the legend under the table);
- ``scalar_table``: the per-run plan table without nested columns (``--format csv|json|parquet``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from scalelab.config import RunConfig
from scalelab.store.layout import BLOCK_COLUMN
from scalelab.sweep.spec import keys

__all__ = ["BLOCK", "PRESET", "SIZE", "block_values", "by_size", "effective", "scalar_table",
           "subtotal", "varying_axes"]

BLOCK = BLOCK_COLUMN
"""The plan column naming each run's block (``scalelab.sweep.spec.blocks``); absent without blocks."""
SIZE = "N"
"""Model size: total parameters."""
PRESET = "model.preset"
"""The size's name, when the model comes from a preset."""
_ROW_KEYS = (BLOCK, PRESET)
_EXTRA_AXES = ("seed",)
"""Plan columns that vary like axes without being spec axes (members show as run counts)."""


def effective(table: pl.DataFrame, configs: Sequence[RunConfig],
              axes: Sequence[str]) -> pl.DataFrame:
    """``table`` (row i is ``configs[i]``) with the nulls of its config-key axis columns
    (a block that does not set the axis) filled from the configs, and a ``model.preset``
    column (null for a model without a preset)."""
    fill = {}
    for key in dict.fromkeys((*axes, PRESET)):
        if "." not in key or (key in table.columns and not table[key].null_count()):
            continue
        dtype = table.schema.get(key)
        values = [keys.get_value(cfg, key) for cfg in configs]
        series = pl.Series(key, values, dtype=dtype, strict=False)
        fill[key] = table[key].fill_null(series) if key in table.columns else series
    return table.with_columns(**fill) if fill else table


def varying_axes(table: pl.DataFrame, axes: Sequence[str]) -> list[str]:
    """Axis columns (``axes``, then ``seed``) with more than one value in ``table`` (a
    null, where a block does not set the axis, counts as a value: fill it with
    ``effective`` first); never the row keys ``block`` and ``model.preset``."""
    candidates = [a for a in (*axes, *_EXTRA_AXES)
                  if a not in _ROW_KEYS and a in table.columns]
    return [a for a in dict.fromkeys(candidates) if table[a].n_unique() > 1]


def by_size(table: pl.DataFrame, axes: Sequence[str]) -> pl.DataFrame:
    """One row per (block, N), in plan order: ``block`` (when the plan has blocks),
    ``N``, ``presets`` (list), ``runs``, ``D_min``, ``D_max``, ``D_sum``, ``flops``, ``gpu_hours``
    (null when no run has one), ``gpu_gib`` (max; null without a memory model) and one
    list column per ``varying_axes`` column: the group's distinct non-null values, sorted."""
    group_keys = [k for k in (BLOCK, SIZE) if k in table.columns]
    aggs = [
        pl.len().alias("runs"),
        _values(PRESET).alias("presets") if PRESET in table.columns
        else pl.lit([], dtype=pl.List(pl.String)).alias("presets"),
        pl.col("D_total").min().alias("D_min"),
        pl.col("D_total").max().alias("D_max"),
        pl.col("D_total").sum().alias("D_sum"),
        pl.col("flops").sum().alias("flops"),
        _null_sum("gpu_hours").alias("gpu_hours"),
        (pl.col("gpu_gib").max() if "gpu_gib" in table.columns
         else pl.lit(None, dtype=pl.Float64)).alias("gpu_gib"),
        *(_values(a).alias(a) for a in varying_axes(table, axes)),
    ]
    return table.group_by(group_keys, maintain_order=True).agg(aggs)


def subtotal(rows: pl.DataFrame) -> dict[str, Any]:
    """``runs``, ``D_min``, ``D_max``, ``D_sum`` (the runs' tokens, summed), ``flops``,
    ``gpu_hours`` (null when no row has one) and ``gpu_gib`` (max) over ``by_size`` rows."""
    return rows.select(
        pl.col("runs").sum(), pl.col("D_min").min(), pl.col("D_max").max(), pl.col("D_sum").sum(),
        pl.col("flops").sum(),
        _null_sum("gpu_hours"), pl.col("gpu_gib").max(),
    ).row(0, named=True)


def block_values(rows: pl.DataFrame, axes: Sequence[str]) -> list[tuple[str | None, str, list]]:
    """``(block, axis, values)`` for each axis of ``axes`` that has several values within
    some ``by_size`` row of the block: the block's distinct values, sorted. ``block`` is
    None for a plan without blocks."""
    groups = rows.partition_by(BLOCK, maintain_order=True) if BLOCK in rows.columns else [rows]
    out = []
    for group in groups:
        block = group[BLOCK][0] if BLOCK in group.columns else None
        for axis in axes:
            cells = group[axis]
            if (cells.list.len() > 1).any():
                out.append((block, axis, cells.explode().drop_nulls().unique().sort().to_list()))
    return out


def scalar_table(table: pl.DataFrame) -> pl.DataFrame:
    """The plan table without its nested columns (lists, arrays, structs, objects): what
    csv, json and parquet carry, one row per run."""
    return table.select(c for c, dtype in table.schema.items() if not dtype.is_nested()
                        and dtype != pl.Object)


def _values(column: str) -> pl.Expr:
    return pl.col(column).drop_nulls().unique().sort()


def _null_sum(column: str) -> pl.Expr:
    col = pl.col(column)
    return pl.when(col.is_not_null().any()).then(col.sum()).otherwise(None)
