"""Reading a sweep directory's own parquet files (``plan.parquet``, ``runs.parquet``,
``ensembles/evals.parquet``) that anyone may have damaged: through
``analysis.tables.safe_parquet.read_sweep_parquet`` (one engine, pyarrow-validated), its error
turned into this package's ``UserError``: one line naming the file, exit 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from analysis.tables.safe_parquet import SweepFileError, read_sweep_parquet
from scalelab.errors import UserError

__all__ = ["read_sweep_file"]


def read_sweep_file(path: str | Path, *, required: Sequence[str] = ()) -> pl.DataFrame:
    """Every column of the sweep-level parquet file ``path``; a one-line ``UserError``
    naming it when it is missing, a directory, damaged, or lacks a ``required`` column."""
    try:
        return read_sweep_parquet(path, required=required)
    except SweepFileError as err:
        raise UserError(f"{err.what} ({err.reason})", file=err.path) from None
