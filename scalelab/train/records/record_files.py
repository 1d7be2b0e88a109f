"""One record file (a compacted ``<table>.parquet`` or a part): is it readable, and what
becomes of one that is not.

A record file is corrupt when it is not parquet (junk bytes; a truncated file has no
``PAR1`` magic at its end), when its metadata or pages do not decode, or when it lacks a
column of its table or holds one that does not cast to the table's type. Reading one
raises ``CorruptRecordError`` (one line naming the file), never a polars traceback.

Both checks are ``analysis.tables.safe_parquet``'s (one engine for every damaged parquet file):
``quick_problem`` (size and the ``PAR1`` magic at both ends: junk and truncation, about
5 us a file, for ``status`` and ``collect``) and the whole-file read (pyarrow decodes and
validates, polars never sees untrusted bytes).

A corrupt file is never deleted: ``set_aside`` renames it ``<name>.corrupt-<UTC time>``
beside itself, out of every record glob (``*.parquet``, ``part-*.parquet``).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from analysis.tables.safe_parquet import CorruptParquetError, quick_problem, read_parquet_checked
from scalelab.errors import UserError

__all__ = ["SET_ASIDE_MARK", "CorruptRecordError", "quick_problem", "read_record_file", "set_aside"]

SET_ASIDE_MARK = ".corrupt-"
"""``metrics.parquet`` -> ``metrics.parquet.corrupt-20250101T120000Z``."""


class CorruptRecordError(UserError):
    """A record file that is not valid parquet with its table's schema. One line:
    ``<path>: corrupt record file (<reason>)``; ``path`` and ``reason`` as attributes."""

    def __init__(self, path: str | Path, reason: str):
        super().__init__(f"corrupt record file ({reason})", file=str(path))
        self.path, self.reason = str(path), reason


def read_record_file(path: str | Path, schema: Mapping[str, pl.DataType],
                     optional: Sequence[str] = ()) -> pl.DataFrame:
    """The rows of one record file as ``schema`` (its columns, in its order, cast; columns
    of ``optional`` the file lacks read as nulls); raises ``CorruptRecordError`` when the
    file is not that."""
    try:
        return read_parquet_checked(path, schema, optional=optional)
    except CorruptParquetError as err:
        raise CorruptRecordError(path, err.reason) from None


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
