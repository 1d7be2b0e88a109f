"""Names of a sweep directory's parts, shared by the sweep (which writes them) and a run
(which reads them to know its sweep: ``scalelab.train.sweep_context``):

    <sweep dir>/plan.parquet        one row per planned run (run_id, axes, block, ...)
    <sweep dir>/runs/<name>-<id>/   each run's directory
"""

from __future__ import annotations

__all__ = ["BLOCK_COLUMN", "PLAN_FILE", "RUNS_FOLDER"]

PLAN_FILE = "plan.parquet"
"""The sweep's plan, rows of every plan launched into the directory."""
RUNS_FOLDER = "runs"
"""The folder of a sweep directory that holds its run directories."""
BLOCK_COLUMN = "block"
"""The plan column naming each run's block (absent without blocks)."""
