"""Tidy per-run records: metrics, evals and norms, as parquet.

Rows are buffered in memory and written as part files at each checkpoint:
``<run_dir>/<table>/part-<step:09d>.parquet`` holds the rows logged since the previous
flush, up to and including ``step``. Parts are flushed *before* the checkpoint of the
same step is written, so on resume every row with ``step`` beyond the checkpoint is
dropped (``truncate``) and re-logged by the resumed run: each step appears exactly once.
At the end, ``compact`` writes the single ``<table>.parquet`` and removes the parts.

Every table has a fixed schema (below), the same for every run and optimizer, so
``pl.scan_parquet("runs/*/metrics.parquet")`` reads a whole sweep in one call.
``run_id`` is the run's id (config.yaml's ``run_id``), which ``collect`` checks against the
plan. A finished run then hashes these files into its manifest (``records_manifest``).

A corrupt record file (junk, truncated, wrong schema: ``record_files``) makes
``read_table`` raise a one-line ``CorruptRecordError``. A resuming run (``truncate``)
and the final ``compact`` instead set it aside (renamed, never deleted), report it in one
line, go on from the readable files, and report in one more line the steps whose rows only
the corrupt file held (``record_gaps``): they stay missing, never re-created.
``records_check.check_records`` is the cheap look that ``scalelab status`` and ``collect``
take at a run directory.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.layout import record_file
from scalelab.train.records.record_files import (
    SET_ASIDE_MARK,
    CorruptRecordError,
    read_record_file,
    set_aside,
)
from scalelab.train.records.record_gaps import lost_steps

__all__ = [
    "ADDED_COLUMNS",
    "EVALS_SCHEMA",
    "KEYS",
    "METRICS_SCHEMA",
    "NORMS_SCHEMA",
    "SCHEMAS",
    "CorruptRecordError",
    "Records",
    "part_step",
    "read_table",
]

METRICS_SCHEMA = {
    "run_id": pl.String,
    "step": pl.Int64,  # optimizer updates done (1-based)
    "tokens": pl.Int64,  # training tokens consumed after this step (all ranks)
    "epoch": pl.Float64,  # passes over the unique tokens U after this step
    "lr": pl.Float64,  # peak-group lr used by this step
    "train_loss": pl.Float64,  # mean loss over the global batch of this step
    "grad_norm": pl.Float64,  # global L2 norm of the gradient before clipping
    "step_time_s": pl.Float64,  # wall time of this step (forward, backward, update)
}
EVALS_SCHEMA = {
    "run_id": pl.String,
    "step": pl.Int64,  # 0 = the initial weights
    "tokens": pl.Int64,
    "split": pl.String,  # 'val': the held-out split
    "loss": pl.Float64,  # mean token cross-entropy (nats); 'mdm': the ELBO, an upper bound
    "loss_se": pl.Float64,  # Monte Carlo SE of loss ('mdm': masking draws); null when exact
}
NORMS_SCHEMA = {
    "run_id": pl.String,
    "step": pl.Int64,
    "layer": pl.String,  # module name, e.g. 'layers.0.attn.wq'
    "param": pl.String,  # parameter name within it, e.g. 'weight'
    "kind": pl.String,  # 'weight' (after the step) | 'update' (applied step) | 'grad'
    # norm definitions: Disco (Filatov et al. 2025, arXiv 2510.03871)
    "norm": pl.String,  # rms_to_rms, l1_to_rms, rms_to_inf, frobenius, supremum
    "value": pl.Float64,
}
SCHEMAS = {"metrics": METRICS_SCHEMA, "evals": EVALS_SCHEMA, "norms": NORMS_SCHEMA}
ADDED_COLUMNS = ("loss_se",)
"""Columns added to a schema after record files were first written: a file without one
reads it as nulls (``loss_se`` is null for the exact AR loss anyway)."""
# The columns that identify a row: a row logged twice (a crash between writing the
# compacted file and removing the parts) is read once.
KEYS = {
    "metrics": ["step"],
    "evals": ["step", "split"],
    "norms": ["step", "layer", "param", "kind", "norm"],
}
_PART_RE = re.compile(r"^part-(\d{9})\.parquet$")


def part_step(name: str) -> int | None:
    """The step of a part file's name (``part-000000042.parquet`` -> 42), else None."""
    m = _PART_RE.match(name)
    return int(m.group(1)) if m else None


def _parts(run_dir: Path, table: str) -> list[Path]:
    folder = run_dir / table
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _PART_RE.match(p.name))


def _files(run_dir: Path, table: str) -> list[Path]:
    """The compacted file (first, when present), then the parts in step order."""
    compact = run_dir / record_file(table)
    return ([compact] if compact.is_file() else []) + _parts(run_dir, table)


def _merge(table: str, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """One table from its files' rows (compacted first): each row once, sorted by step."""
    if not frames:
        return pl.DataFrame(schema=SCHEMAS[table])
    out = pl.concat(frames, how="vertical")
    out = out.unique(subset=KEYS[table], keep="last", maintain_order=True)
    return out.sort("step", maintain_order=True)


def read_table(run_dir: str | Path, table: str) -> pl.DataFrame:
    """The rows of ``table`` on disk (compacted file and/or parts), sorted, typed.
    Raises ``CorruptRecordError`` (one line naming the file) when a file is corrupt."""
    run_dir = Path(run_dir)
    return _merge(table, [read_record_file(p, SCHEMAS[table], ADDED_COLUMNS) for p in _files(run_dir, table)])


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Records:
    """The in-memory buffer of one run's rows. Only rank 0 writes (``enabled``); ``log``
    takes the one-line reports of corrupt files."""

    def __init__(self, run_dir: str | Path, run_id: str, *, enabled: bool = True,
                 log: Callable[[str], None] = _stderr):
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.enabled = enabled
        self.log = log
        self.flushed_step = 0
        self._rows: dict[str, list[dict[str, Any]]] = {t: [] for t in SCHEMAS}

    def add(self, table: str, **row: Any) -> None:
        """Buffer one row (``run_id`` is filled in)."""
        if self.enabled:
            self._rows[table].append({"run_id": self.run_id, **row})

    def extend(self, table: str, rows: list[dict[str, Any]]) -> None:
        if self.enabled:
            self._rows[table].extend({"run_id": self.run_id, **r} for r in rows)

    def buffered(self, table: str) -> pl.DataFrame:
        return pl.DataFrame(self._rows[table], schema=SCHEMAS[table], orient="row")

    def flush(self, step: int) -> None:
        """Write the buffered rows (all with ``step <= step``) as part files."""
        self.flushed_step = step
        if not self.enabled:
            return
        for table, rows in self._rows.items():
            if rows:
                frame = pl.DataFrame(rows, schema=SCHEMAS[table], orient="row")
                write_parquet_atomic(self.run_dir / table / f"part-{step:09d}.parquet", frame)
                rows.clear()

    def truncate(self, step: int) -> None:
        """On resume from the checkpoint of ``step``: drop every row on disk beyond it
        (corrupt files are set aside first: ``_load``)."""
        self.flushed_step = step
        for rows in self._rows.values():
            rows.clear()
        if not self.enabled:
            return
        for table in SCHEMAS:
            for path, frame in self._load(table, upto=step):
                kept = frame.filter(pl.col("step") <= step)
                if kept.height == 0:
                    path.unlink()
                elif kept.height < frame.height:
                    write_parquet_atomic(path, kept)

    def compact(self) -> None:
        """Write ``<table>.parquet`` from the parts (and any earlier compaction); drop the
        parts (files set aside stay, and with them their folder)."""
        if not self.enabled:
            return
        for table in SCHEMAS:
            frame = _merge(table, [f for _, f in self._load(table, upto=self.flushed_step)])
            write_parquet_atomic(self.run_dir / record_file(table), frame)
            folder = self.run_dir / table
            if folder.is_dir():
                for child in folder.iterdir():
                    if child.is_file() and SET_ASIDE_MARK not in child.name:
                        child.unlink()  # the parts, and temporaries of killed writes
                if not any(folder.iterdir()):
                    folder.rmdir()

    def _load(self, table: str, upto: int) -> list[tuple[Path, pl.DataFrame]]:
        """Each readable file of ``table`` with its rows. A corrupt one is set aside and
        reported in one line; then one more line names the steps in ``[0, upto]`` that no
        readable file accounts for: rows lost with the corrupt files."""
        loaded, compact_last, corrupt = [], None, False
        paths = _files(self.run_dir, table)
        for path in paths:
            try:
                frame = read_record_file(path, SCHEMAS[table], ADDED_COLUMNS)
            except CorruptRecordError as err:
                moved = set_aside(path)
                self.log(f"{err}: set aside as {moved.name}; going on from the readable files")
                corrupt = True
                continue
            loaded.append((path, frame))
            if path.name == record_file(table) and frame.height:
                compact_last = int(frame["step"].max())
        if corrupt and upto >= 0:
            parts = [s for p in paths if (s := part_step(p.name)) is not None]
            readable = {s for p, _ in loaded if (s := part_step(p.name)) is not None}
            if lost := lost_steps(compact_last, parts, readable, upto):
                self.log(f"{table}: the rows of steps {lost} were only in the corrupt "
                         f"file(s): they stay missing (not re-created)")
        return loaded
