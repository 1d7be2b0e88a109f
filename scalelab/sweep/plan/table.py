"""The expanded sweep: ``Plan`` (one frozen RunConfig and one table row per run).

Built by ``scalelab.sweep.plan.expand``; rendered by ``scalelab.sweep.view``; launched by
``scalelab.sweep.run.launch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from scalelab.config import RunConfig
from scalelab.derive import Derived
from scalelab.sweep.plan.gpu_memory import MEMORY_COLUMNS
from scalelab.sweep.spec.sections import LauncherConfig

if TYPE_CHECKING:
    from scalelab.sweep.spec.load import Spec

__all__ = ["TABLE_COLUMNS", "Plan"]

TABLE_COLUMNS = ("member", "N", "N_non_embedding", "D_unique", "D_total", "epochs", "steps",
                 "flops", "gpu_hours", *MEMORY_COLUMNS)
"""Columns after ``run_id, name, run_dir`` and the axis columns."""


@dataclass(frozen=True)
class Plan:
    """The expanded sweep: ``configs[i]`` is the run of ``table`` row i."""

    spec: Spec
    configs: list[RunConfig]
    table: pl.DataFrame
    """run_id, name, run_dir, one column per axis (dotted key; plus ``seed``), then
    TABLE_COLUMNS."""
    derived: list[Derived]
    axes: tuple[str, ...]
    """The axis column names, in order."""
    launchers: list[LauncherConfig] = field(default_factory=list)
    """The launcher of each row: the spec's (or block's), with its launcher rules applied
    (``scalelab.sweep.spec.launcher``). Operational: never in a run id. Empty = spec.launcher."""

    def __len__(self) -> int:
        return len(self.configs)
