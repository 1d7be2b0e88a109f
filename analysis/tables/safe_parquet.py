"""Reading parquet files that anyone may have damaged: one engine for every such read.

Run records (``scalelab.train.records.record_files``) and sweep-level files (``runs.parquet``,
``plan.parquet``, ``ensembles/evals.parquet``: ``read_sweep_parquet``) are read here. A
file that is not whole parquet raises ``CorruptParquetError``: one line naming the file and
why, never a polars traceback or a dead process.

Two checks, for two budgets:

- ``quick_problem``: size and the ``PAR1`` magic at both ends, two tiny reads (about
  5 us a file), so ``status`` and ``collect`` check every file of a 10,000-run sweep. It
  catches junk, truncation, a directory; damage inside a file with intact ends passes it.
- ``read_parquet_checked``: the whole file, decoded by pyarrow, validated, then handed to
  polars.

Both open the file once through ``analysis.tables.bounded_read.open_checked`` (never
blocking on a FIFO, refusing what is no regular file or is over its kind's size limit) and
read only the descriptor they checked: pyarrow decodes that descriptor, never the path
opened again. A sweep-level file (``read_sweep_parquet``) is read whole, checked against its
manifest (``analysis.tables.sweep_manifest``) and decoded from those bytes. pyarrow, not
polars, decodes untrusted bytes: in a fuzz of 12,000 bit-flipped
  files polars' reader aborted the process (a Rust panic or a failed 2^61-byte allocation,
  no Python exception), even after a pyarrow footer check, while pyarrow raised for every
  bad file and the table it accepted never upset polars.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.tables.bounded_read import Unreadable, open_checked

__all__ = [
    "CorruptParquetError",
    "SweepFileError",
    "decode_parquet",
    "one_line",
    "quick_problem",
    "read_parquet_checked",
    "read_sweep_parquet",
]

_MAGIC = b"PAR1"
_MIN_SIZE = 12  # header magic + footer length + footer magic


class CorruptParquetError(AnalysisInputError):
    """A file that is not valid parquet (with the columns asked for). ``path`` and
    ``reason`` as attributes; ``str``: ``<path>: <what> (<reason>)``."""

    what = "corrupt parquet file"

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: {self.what} ({reason})")


class SweepFileError(CorruptParquetError):
    """A sweep-level file (``runs.parquet``, ``plan.parquet``, ``ensembles/evals.parquet``)
    that cannot be read: the CLI says so in one line, exit 2."""

    what = "unreadable sweep file"


def quick_problem(path: str, limit: int | None = None) -> str | None:
    """Why ``path`` cannot be a whole parquet file, judged by its kind, its size and its
    two ends; None when it may be one. ``limit``: ``bounded_read.limit_for`` when None."""
    try:
        fd, st = open_checked(path, limit)
    except Unreadable as err:
        return str(err)
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    try:
        return _ends_problem(fd, st.st_size)
    finally:
        os.close(fd)


def _ends_problem(fd: int, size: int) -> str | None:
    """``quick_problem`` of the open file ``fd`` of ``size`` bytes."""
    if size < _MIN_SIZE:
        return f"{size} bytes, too short for parquet"
    try:  # os.pread, not a file object: this runs on every file of a sweep
        head, tail = os.pread(fd, 4, 0), os.pread(fd, 4, size - 4)
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    if head != _MAGIC:
        return "not parquet: no PAR1 header"
    if tail != _MAGIC:
        return "truncated: no PAR1 footer"
    return None


def read_parquet_checked(path: str | Path, schema: Mapping[str, pl.DataType] | None = None, *,
                         required: Sequence[str] = (), optional: Sequence[str] = (),
                         error: type[CorruptParquetError] = CorruptParquetError,
                         limit: int | None = None) -> pl.DataFrame:
    """The rows of ``path``: with ``schema``, its columns in its order, cast; else every
    column. Raises ``error`` (a ``CorruptParquetError``) when the file is no regular file
    within ``limit`` bytes (``bounded_read.limit_for`` when None), is not whole parquet,
    lacks a column of ``schema`` (but those in ``optional``, read as nulls: columns added to
    a schema after files were written) or ``required``, or does not decode."""
    try:
        fd, st = open_checked(str(path), limit)
    except Unreadable as err:
        raise error(path, str(err)) from None
    except OSError as err:
        raise error(path, f"unreadable: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as fh:
        problem = _ends_problem(fd, st.st_size)
        if problem is not None:
            raise error(path, problem)
        return decode_parquet(fh, path, schema, required=required, optional=optional, error=error)


def decode_parquet(source: object, path: str | Path, schema: Mapping[str, pl.DataType] | None = None, *,
                   required: Sequence[str] = (), optional: Sequence[str] = (),
                   error: type[CorruptParquetError] = CorruptParquetError) -> pl.DataFrame:
    """``read_parquet_checked``'s decoding of ``source`` (an open binary file or a
    ``pyarrow.BufferReader`` of checked bytes), errors naming ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    want = [*(schema or {}), *(c for c in required if c not in (schema or {}))]
    try:
        with pq.ParquetFile(source) as fh:
            absent = [c for c in want if c not in fh.schema_arrow.names]
            missing = [c for c in absent if c not in optional]
            if missing:
                raise error(path, f"missing column(s) {', '.join(missing)}")
            present = [c for c in schema if c not in absent] if schema else None
            table = fh.read(columns=present, use_threads=False)
        if schema:  # polars' own arrow types; absent optional columns as nulls
            for name in absent:
                table = table.append_column(name, pa.nulls(table.num_rows))
            table = table.select(list(schema)).cast(pl.DataFrame(schema=dict(schema)).to_arrow().schema)
        table.validate(full=True)
        frame = pl.from_arrow(table)
    except (OSError, ValueError, TypeError, pa.ArrowException, pl.exceptions.PolarsError) as err:
        raise error(path, one_line(err)) from None
    return frame if isinstance(frame, pl.DataFrame) else frame.to_frame()


def read_sweep_parquet(path: str | Path, *, required: Sequence[str] = ()) -> pl.DataFrame:
    """A sweep-level parquet file, every column, read once and checked against its manifest
    (``sweep_manifest.read_verified``); ``SweepFileError`` (one line naming the file) when
    it is missing, no regular file, over its size limit, does not match its manifest,
    is damaged or lacks a ``required`` column."""
    import pyarrow as pa

    from analysis.tables.sweep_manifest import SweepManifestError, hint_for, read_verified

    try:
        found = read_verified(path)
    except (FileNotFoundError, NotADirectoryError):
        raise SweepFileError(path, "no such file") from None
    except Unreadable as err:
        raise SweepFileError(path, str(err)) from None
    except SweepManifestError as err:
        hint = hint_for(path)
        raise SweepFileError(path, err.reason + (f"; {hint}" if hint else "")) from None
    except OSError as err:
        raise SweepFileError(path, f"unreadable: {err.strerror or err}") from None
    data = found.data
    if len(data) < _MIN_SIZE:
        raise SweepFileError(path, f"{len(data)} bytes, too short for parquet")
    if data[:4] != _MAGIC or data[-4:] != _MAGIC:
        raise SweepFileError(path, "not parquet: no PAR1 header" if data[:4] != _MAGIC
                             else "truncated: no PAR1 footer")
    return decode_parquet(pa.BufferReader(data), path, required=required, error=SweepFileError)


def one_line(err: BaseException) -> str:
    """An exception's first line, at most 200 characters."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
