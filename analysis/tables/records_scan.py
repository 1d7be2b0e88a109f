"""Lazy scans of every run's tidy records in a sweep: ``<sweep>/runs/*/evals.parquet`` and
``norms.parquet`` (or ``metrics``), plus the part files of runs still in progress
(``<run>/<table>/part-*.parquet``, written at checkpoints and compacted at the end).

The schemas mirror ``scalelab.train.records.records`` (analysis does not import scalelab): evals
run_id, step, tokens, split, loss; norms run_id, step, layer, param, kind, norm, value;
metrics run_id, step, tokens, epoch, lr, train_loss, grad_norm, step_time_s. A row found
both in a compacted file and a part (a crash between compaction and cleanup) is read once.

Each file is read through ``safe_parquet.read_parquet_checked`` (opened once without
blocking, refused when it is no regular file or over the records' size limit, decoded by
pyarrow from the descriptor it checked), so a FIFO, a device, a sparse giant or damaged
bytes is one line naming the file (``CorruptParquetError``), never a hang or a polars abort.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.tables.layout import record_file, run_dirs_folder
from analysis.tables.safe_parquet import read_parquet_checked

__all__ = ["KEYS", "record_files", "scan_records"]

KEYS = {"evals": ["step", "split"], "norms": ["step", "layer", "param", "kind", "norm"], "metrics": ["step"]}
_SCHEMAS = {
    "evals": {"run_id": pl.String, "step": pl.Int64, "tokens": pl.Int64, "split": pl.String, "loss": pl.Float64},
    "norms": {"run_id": pl.String, "step": pl.Int64, "layer": pl.String, "param": pl.String, "kind": pl.String,
              "norm": pl.String, "value": pl.Float64},
    "metrics": {"run_id": pl.String, "step": pl.Int64, "tokens": pl.Int64, "epoch": pl.Float64, "lr": pl.Float64,
                "train_loss": pl.Float64, "grad_norm": pl.Float64, "step_time_s": pl.Float64},
}


def record_files(sweep_dir: str | Path, table: str) -> list[Path]:
    """Every run's compacted ``table`` file, then the part files of unfinished runs."""
    if table not in _SCHEMAS:
        raise AnalysisInputError(f"unknown records table '{table}'; one of {sorted(_SCHEMAS)}")
    runs = run_dirs_folder(sweep_dir)
    return sorted(runs.glob(f"*/{record_file(table)}")) + sorted(runs.glob(f"*/{table}/part-*.parquet"))


def scan_records(sweep_dir: str | Path, table: str) -> pl.LazyFrame:
    """One lazy frame of ``table`` over the whole sweep (empty, typed, when no run has any)."""
    files = record_files(sweep_dir, table)
    schema = _SCHEMAS[table]
    if not files:
        return pl.LazyFrame(schema=schema)
    frames = [read_parquet_checked(path, schema) for path in files]
    scan = pl.concat(frames, how="vertical").lazy()
    return scan.unique(subset=["run_id", *KEYS[table]], keep="last", maintain_order=True)
