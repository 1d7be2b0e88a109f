"""Atomic file writes for run directories.

``write_atomic`` (temporary file beside the target, fsync, rename) and the byte/text
writers are ``analysis.atomic``'s, the project's one implementation (the lower layer:
docs/architecture.md); the typed writers below build on them. A failed write never
replaces the target: the temporary file is removed and the target keeps its old bytes.

A full disk reads the same whichever library wrote: an ``OSError`` with errno ENOSPC
naming the target. Python's own writes say so themselves; a library that does not (polars
writing parquet to a file says "Invalid thrift: transport error", numpy's ``tofile`` "N
requested and M written", both without an errno) is caught inside ``write_atomic``'s
writer, while its partial temporary file still fills the disk, by the file system's free
space (``os.statvfs``). Parquet is encoded in memory first and written as bytes, so its
errors are Python's.
"""

from __future__ import annotations

import errno
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from analysis.atomic import write_atomic as _write_atomic
from analysis.atomic import write_bytes_atomic, write_text_atomic

__all__ = [
    "FULL_BYTES",
    "disk_full",
    "write_atomic",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "write_yaml_atomic",
    "write_parquet_atomic",
]

FULL_BYTES = 16 << 20
"""A file system with less than this free (to this user) is taken as full when a writer
fails without an errno: more than one write buffer of the libraries above, and far less
than anything a user would call free space."""


def write_atomic(path: str | Path, writer: Callable[[Path], None]) -> Path:
    """``analysis.atomic.write_atomic``; a writer's error without an errno on a full file
    system (``FULL_BYTES``) is ``OSError(ENOSPC)`` naming ``path``."""
    target = Path(path)

    def guarded(tmp: Path) -> None:
        try:
            writer(tmp)
        except Exception as err:
            if (not isinstance(err, OSError) or err.errno is None) and disk_full(tmp.parent):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target)) from err
            raise

    return _write_atomic(target, guarded)


def disk_full(folder: str | Path) -> bool:
    """Whether the file system of ``folder`` has less than ``FULL_BYTES`` free (False when
    it cannot be asked)."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < FULL_BYTES


def write_json_atomic(path: str | Path, obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_yaml_atomic(path: str | Path, obj: Any) -> Path:
    return write_text_atomic(path, yaml.safe_dump(obj, sort_keys=False))


def write_parquet_atomic(path: str | Path, frame: Any) -> Path:
    """Write a polars DataFrame to parquet atomically: encoded in memory, then written as
    bytes (a full disk is then Python's ENOSPC, not polars' "Invalid thrift")."""
    buf = io.BytesIO()
    frame.write_parquet(buf)
    return write_bytes_atomic(path, buf.getvalue())
