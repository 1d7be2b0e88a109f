"""A sweep directory's own files (``spec.yaml``, ``plan.parquet``, ``runs.parquet``,
``ensembles/evals.parquet``), read and written with their integrity.

Reads go through ``analysis.tables.safe_parquet.read_sweep_parquet`` and
``analysis.tables.sweep_manifest.read_verified`` (one bounded reader: never blocking on a
FIFO, refusing what is no regular file or is over its size limit; the bytes checked
against the file's manifest, then decoded from those bytes), their errors turned into this
package's ``UserError``: one line naming the file and what to do, exit 2.

Writes (``write_sweep_bytes``, ``write_sweep_table``) hold the sweep directory's lock, write
the file atomically, then its manifest (size and sha256 of the bytes written) last and
atomically; which files have manifests, and why the others have none, is
``analysis.tables.sweep_manifest``'s docstring.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from analysis.tables.bounded_read import Unreadable
from analysis.tables.safe_parquet import SweepFileError, read_sweep_parquet
from analysis.tables.sweep_manifest import (
    SweepManifestError,
    hint_for,
    manifest_doc,
    manifest_of,
    read_verified,
    sweep_lock,
)
from scalelab.errors import UserError
from scalelab.store.atomic import write_bytes_atomic

__all__ = ["read_sweep_file", "read_sweep_text", "sweep_lock", "table_bytes", "write_sweep_bytes",
           "write_sweep_table"]


def read_sweep_file(path: str | Path, *, required: Sequence[str] = ()) -> pl.DataFrame:
    """Every column of the sweep-level parquet file ``path``; a one-line ``UserError``
    naming it when it is missing, no regular file, over its size limit, does not match its
    manifest, is damaged, or lacks a ``required`` column."""
    try:
        return read_sweep_parquet(path, required=required)
    except SweepFileError as err:
        raise UserError(f"{err.what} ({err.reason})", file=err.path) from None


def read_sweep_text(path: str | Path) -> str | None:
    """The UTF-8 text of a sweep-level text file (the ``spec.yaml`` copy), checked against
    its manifest; None when there is no such file; a one-line ``UserError`` otherwise."""
    try:
        found = read_verified(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except SweepManifestError as err:
        hint = hint_for(path)
        raise UserError(err.reason + (f"; {hint}" if hint else ""), file=str(path)) from None
    except (Unreadable, OSError) as err:
        raise UserError(f"cannot read file ({err})", file=str(path)) from None
    try:
        return found.data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"not UTF-8 text (byte at offset {err.start} cannot be decoded)",
                        file=str(path)) from None


def _write(path: Path, data: bytes) -> None:
    write_bytes_atomic(path, data)
    doc = manifest_doc(path.name, data)
    write_bytes_atomic(manifest_of(path), (json.dumps(doc, indent=1) + "\n").encode())


def write_sweep_bytes(path: str | Path, data: bytes, *, locked: bool = False) -> Path:
    """Write ``data`` to the sweep-level file ``path`` atomically, then its manifest, under
    the sweep directory's lock (``locked``: the caller holds it already)."""
    path = Path(path)
    if locked:
        _write(path, data)
    else:
        with sweep_lock(path.parent):
            _write(path, data)
    return path


def table_bytes(frame: pl.DataFrame, path: str | Path) -> bytes:
    """``frame`` as parquet bytes, checked to decode back to ``frame`` (pyarrow) before any
    of it reaches the disk."""
    import pyarrow as pa

    from analysis.tables.safe_parquet import decode_parquet

    buf = io.BytesIO()
    frame.write_parquet(buf)
    data = buf.getvalue()
    back = decode_parquet(pa.BufferReader(data), path, error=SweepFileError)
    if not back.equals(frame, null_equal=True):
        raise SweepFileError(path, "parquet written does not read back as the table")
    return data


def write_sweep_table(path: str | Path, frame: pl.DataFrame, *, locked: bool = False) -> Path:
    """``write_sweep_bytes`` of ``frame`` as parquet (``table_bytes``)."""
    return write_sweep_bytes(path, table_bytes(frame, path), locked=locked)
