"""Which sweep a run belongs to, read from the sweep's files (for W&B's group, job type, tags).

A sweep launches each run in ``<sweep dir>/runs/<label>-<id>`` and keeps its plan in
``<sweep dir>/plan.parquet`` (``scalelab.store.layout``): one row per run with ``run_id``, the axis columns (dotted
config keys, and ``seed``), and ``block`` when the spec has blocks. So a run directory knows, with nothing
passed to it, its sweep (the sweep directory's name), its block, and the axes its block
varies (those with several values among the block's rows). A run anywhere else, or one
its plan does not list, is standalone.

Only reads files: the train package does not import ``scalelab.sweep``; both take the
directory's names from ``scalelab.store.layout``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from scalelab.errors import UserError
from scalelab.store.layout import BLOCK_COLUMN, PLAN_FILE, RUNS_FOLDER
from scalelab.store.sweep_files import read_sweep_file

__all__ = ["SweepContext", "context_from_plan", "sweep_context", "tags"]

_EXTRA_AXES = ("seed",)
"""Plan columns that are axes without being dotted config keys."""
_SHORT = {"weight_decay": "wd", "preset": None}
"""Short tag names of some leaf keys (None: the section's name, e.g. model.preset -> model)."""
_TAG_LENGTH = 64
"""W&B's limit on one tag."""


@dataclass(frozen=True)
class SweepContext:
    """A run's place in a sweep; all empty for a standalone run."""

    sweep: str | None = None
    """The sweep's name (its directory's name)."""
    block: str | None = None
    """The run's block (None: the plan has no blocks, or a standalone run)."""
    axes: tuple[tuple[str, Any], ...] = ()
    """(dotted key, this run's value) of each axis that takes several values in its block."""


def context_from_plan(plan: pl.DataFrame, run_id: str, sweep: str) -> SweepContext:
    """The context of run ``run_id`` in ``plan`` (plan.parquet's rows) of sweep ``sweep``;
    standalone when the plan has no such run."""
    if "run_id" not in plan.columns:
        return SweepContext()
    mine = plan.filter(pl.col("run_id") == run_id)
    if mine.height == 0:
        return SweepContext()
    row = mine.row(0, named=True)
    block = row.get(BLOCK_COLUMN)
    peers = plan.filter(pl.col(BLOCK_COLUMN) == block) if block is not None else plan
    axes = [c for c in plan.columns if "." in c or c in _EXTRA_AXES]
    varied = tuple((c, row[c]) for c in axes
                   if peers[c].n_unique() > 1 and row[c] is not None)
    return SweepContext(sweep=sweep, block=block, axes=varied)


def sweep_context(run_dir: str | Path, run_id: str) -> SweepContext:
    """The context of the run ``run_id`` in ``run_dir`` (standalone unless the directory is
    ``<sweep>/runs/<dir>`` and ``<sweep>/plan.parquet`` lists the run)."""
    run_dir = Path(run_dir).resolve()
    sweep_dir = run_dir.parent.parent
    plan_path = sweep_dir / PLAN_FILE
    if run_dir.parent.name != RUNS_FOLDER or not plan_path.is_file():
        return SweepContext()
    try:
        plan = read_sweep_file(plan_path)
    except UserError:  # damaged: tracking never stops a run
        return SweepContext()
    return context_from_plan(plan, run_id, sweep_dir.name)


def _short_names(keys: list[str]) -> dict[str, str]:
    """Each dotted key's short name (its leaf, ``_SHORT``'s abbreviation); the full key
    where two keys would get the same one."""
    names = {}
    for key in keys:
        *sections, leaf = key.split(".")
        short = _SHORT.get(leaf, leaf)
        names[key] = short if short is not None else (sections[-1] if sections else leaf)
    taken = list(names.values())
    return {k: (v if taken.count(v) == 1 else k) for k, v in names.items()}


def _value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def tags(context: SweepContext) -> tuple[str, ...]:
    """``key=value`` per varied axis, short: ``model=twin-26k``, ``epochs=16``, ``wd=0.1``."""
    names = _short_names([k for k, _ in context.axes])
    return tuple(f"{names[k]}={_value(v)}"[:_TAG_LENGTH] for k, v in context.axes)
