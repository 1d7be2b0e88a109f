"""Expansion of a spec with ``blocks`` (``scalelab.sweep.spec.blocks``): each block is
expanded as a grid of its own, run names get the block's prefix, distillation teachers are
resolved across blocks, and a run that two blocks share (the same full id) runs once (the
first block owns it); two runs that share a run id but not their full id are refused as a
collision. The plans are concatenated, with a ``block`` column."""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

from scalelab import strict
from scalelab.errors import UserError
from scalelab.identity import IdCollision, RunIds, full_id, id_of, run_dir_name
from scalelab.store.layout import BLOCK_COLUMN, RUNS_FOLDER
from scalelab.sweep.plan.grid import expand_grid
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.spec import keys
from scalelab.sweep.spec.blocks import TOP_BLOCK

__all__ = ["expand_blocks"]


def _block_name(block: str, run_name: str, sweep_name: str) -> str:
    return block if run_name == sweep_name else f"{block}_{run_name}"


def expand_blocks(spec: Any, datasets: Any = None):
    """Concatenate the plans of ``spec.blocks`` (see the module docstring)."""
    # Here, not at the top: scalelab.distill's package imports torch, which a plan without
    # blocks never needs (3-4 s of every dry-run's start; bench/plan_scale.py).
    from scalelab.distill.resolve import resolve_teachers

    configs: list = []
    derived: list = []
    launchers: list = []
    tables: list[pl.DataFrame] = []
    axes: list[str] = []
    ledger = RunIds()
    parts = list(spec.blocks)
    if spec.grid or spec.zip:  # the top level's own axes: the first block
        parts.insert(0, (TOP_BLOCK, dataclasses.replace(spec, blocks=())))
    for name, block in parts:
        plan = expand_grid(block, datasets)
        block_cfgs = [dataclasses.replace(c, name=_block_name(name, c.name, block.name)) for c in plan.configs]
        resolved, pool = [], configs + block_cfgs  # the candidate teachers
        for c in block_cfgs:
            try:
                resolved.append(resolve_teachers(c, pool))
            except UserError as err:
                raise spec.error(f"block '{name}', run '{c.name}': {err.detail}",
                                 f"blocks.{name}.base.distill.teacher") from None
        fulls = [full_id(c) for c in resolved]
        ids = [id_of(f) for f in fulls]
        keep = _first_owned(spec, ledger, fulls, [c.name for c in resolved], name)  # shared runs run once
        table = plan.table.with_columns(
            pl.Series("run_id", ids),
            pl.Series("name", [c.name for c in resolved]),
            pl.Series("run_dir", [f"{RUNS_FOLDER}/{run_dir_name(c, rid)}" for c, rid in zip(resolved, ids)]),
            pl.lit(name).alias(BLOCK_COLUMN),
        )[keep]
        configs += [resolved[i] for i in keep]
        derived += [plan.derived[i] for i in keep]
        launchers += [plan.launchers[i] for i in keep]
        tables.append(table)
        axes += [a for a in plan.axes if a not in axes]
    table = pl.concat(tables, how="diagonal_relaxed")
    constant = [k for k in _block_constants(spec, parts) if k not in table.columns]
    if constant:  # null here; _filled writes each run's own value from its config
        table = table.with_columns(*(pl.lit(None).alias(k) for k in constant))
        axes += constant
    table = _filled(table, configs)
    if dead := [k for k in constant if table[k].null_count() == table.height]:
        table = table.drop(dead)  # not a config key (e.g. inside a teacher selector)
        axes = [a for a in axes if a not in dead]
    front = ["run_id", "name", "run_dir", BLOCK_COLUMN]
    table = table.select(front + [c for c in table.columns if c not in front])
    return Plan(spec=spec, configs=configs, table=table, derived=derived,
                axes=tuple([BLOCK_COLUMN] + axes), launchers=launchers)


def _first_owned(spec: Any, ledger: RunIds, fulls: list[str], names: list[str],
                 block: str) -> list[int]:
    """Indices of the runs of ``block`` (full ids ``fulls``) that no earlier run holds; a
    run-id collision is refused, naming both runs."""
    keep = []
    for i, (full, run) in enumerate(zip(fulls, names)):
        try:
            if ledger.owner(full, f"block '{block}', run '{run}'") is None:
                keep.append(i)
        except IdCollision as err:
            raise spec.error(str(err), f"blocks.{block}") from None
    return keep


def _block_constants(spec: Any, parts: list) -> list[str]:
    """Dotted config keys that are constant within each block but not across the sweep
    (set in a block's ``base``, e.g. ``extra.recipe: muon`` or ``optim.name: muon``), and
    every ``extra.*`` key: columns of the plan and of runs.parquet like the axes, so a
    recipe named once per block reaches the report (``analysis.recipes.rows``)."""
    seen: dict[str, set[str]] = {}
    bases = [spec.base] + [block.base for _, block in parts]
    for base in bases:
        for key, value in _leaves(strict.to_dict(base)).items():
            seen.setdefault(key, set()).add(repr(value))
    return [k for k, v in seen.items() if (len(v) > 1 or k.startswith("extra."))
            and not k.startswith("distill.teacher")]


def _leaves(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{dotted key: value} of the scalar leaves of a nested dict (lists kept whole)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out |= _leaves(value, path + ".")
        elif not isinstance(value, dict):
            out[path] = value
    return out


def _filled(table: pl.DataFrame, configs: list) -> pl.DataFrame:
    """Each block's axes as columns for every run: a run of a block that does not sweep a
    config key gets its own value of that key (from its config), never null. Otherwise the
    runs of a block that sets ``optim.weight_decay: 0.1`` in its ``base`` would read as
    having no weight decay to whoever selects on the column (``scalelab fit --where``, the
    report's recipes), and a standard recipe written that way would have no runs."""
    fills = {}
    for col in table.columns:
        if "." not in col or table[col].null_count() == 0:
            continue
        try:
            values = [keys.get_value(c, col) for c in configs]
        except AttributeError:  # not a config key (a derived or table column)
            continue
        have = table[col].to_list()
        merged = [v if v is not None else w for v, w in zip(have, values)]
        series = pl.Series(col, merged, strict=False)
        dtype = table[col].dtype  # Null: a column added above, typed by its values
        fills[col] = series if dtype == pl.Null else series.cast(dtype, strict=False)
    return table.with_columns(*fills.values()) if fills else table
