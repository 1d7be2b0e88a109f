"""One record file (a compacted ``<table>.parquet`` or a part): is it readable, and what
becomes of one that is not (issue 9).

A record file is corrupt when it is not parquet (junk bytes; a truncated file has no
``PAR1`` magic at its end), when its metadata or pages do not decode, or when it lacks a
column of its table or holds one that does not cast to the table's type. Reading one
raises ``CorruptRecordError`` (one line naming the file), never a polars traceback.

Two checks, for two budgets:

- ``quick_problem``: size and the ``PAR1`` magic at both ends, two tiny reads (about
  5 us a file), so ``status`` and ``collect`` check every file of a 10,000-run sweep. It
  catches junk and truncation; damage inside a file with intact ends passes it.
- ``read_record_file``: the whole file, decoded by pyarrow, validated, then handed to
  polars. pyarrow, not polars, decodes untrusted bytes: in a fuzz of 12,000 bit-flipped
  files polars' reader aborted the process (a Rust panic or a failed 2^61-byte allocation,
  no Python exception), even after a pyarrow footer check, while pyarrow raised for every
  bad file and the table it accepted never upset polars.

A corrupt file is never deleted: ``set_aside`` renames it ``<name>.corrupt-<UTC time>``
beside itself, out of every record glob (``*.parquet``, ``part-*.parquet``).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from scalelab.errors import UserError

__all__ = ["SET_ASIDE_MARK", "CorruptRecordError", "quick_problem", "read_record_file", "set_aside"]

SET_ASIDE_MARK = ".corrupt-"
"""``metrics.parquet`` -> ``metrics.parquet.corrupt-20250101T120000Z``."""
_MAGIC = b"PAR1"
_MIN_SIZE = 12  # header magic + footer length + footer magic


class CorruptRecordError(UserError):
    """A record file that is not valid parquet with its table's schema. One line:
    ``<path>: corrupt record file (<reason>)``; ``path`` and ``reason`` as attributes."""

    def __init__(self, path: str | Path, reason: str):
        super().__init__(f"corrupt record file ({reason})", file=str(path))
        self.path, self.reason = str(path), reason


def quick_problem(path: str) -> str | None:
    """Why ``path`` cannot be a whole parquet file, judged by its size and its two ends;
    None when it may be one."""
    try:  # os.pread, not open(): a third faster, and this runs on every file of a sweep
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size < _MIN_SIZE:
                return f"{size} bytes, too short for parquet"
            head, tail = os.pread(fd, 4, 0), os.pread(fd, 4, size - 4)
        finally:
            os.close(fd)
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    if head != _MAGIC:
        return "not parquet: no PAR1 header"
    if tail != _MAGIC:
        return "truncated: no PAR1 footer"
    return None


def read_record_file(path: str | Path, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """The rows of one record file as ``schema`` (its columns, in its order, cast);
    raises ``CorruptRecordError`` when the file is not that."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    problem = quick_problem(str(path))
    if problem is not None:
        raise CorruptRecordError(path, problem)
    target = pl.DataFrame(schema=dict(schema)).to_arrow().schema  # polars' own arrow types
    try:
        with pq.ParquetFile(path) as fh:
            missing = [c for c in schema if c not in fh.schema_arrow.names]
            if missing:
                raise CorruptRecordError(path, f"missing column(s) {', '.join(missing)}")
            table = fh.read(columns=list(schema), use_threads=False).cast(target)
        table.validate(full=True)
    except (OSError, ValueError, TypeError, pa.ArrowException) as err:
        raise CorruptRecordError(path, _one_line(err)) from None
    return pl.from_arrow(table)


def set_aside(path: str | Path, when: _dt.datetime | None = None) -> Path:
    """Rename ``path`` to ``<name>.corrupt-<UTC time>`` (``.1``, ``.2``, ... when taken);
    the new path."""
    path = Path(path)
    stamp = (when or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        target = path.with_name(f"{path.name}{SET_ASIDE_MARK}{stamp}" + (f".{n}" if n else ""))
        if not target.exists():
            os.rename(path, target)
            return target
    raise FileExistsError(f"{path}: 1000 files already set aside at {stamp}")


def _one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
