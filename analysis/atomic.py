"""Atomic file writes: write a temporary file beside the target, fsync, rename.

A reader never sees a half-written file, on local disks, NFS and Lustre alike (rename
within one directory is atomic on all three). This is the project's one implementation.
It lives in the lower layer (``analysis`` imports no ``scalelab``; docs/architecture.md),
and ``scalelab.store.atomic`` adds its typed writers (JSON, YAML, parquet) on top.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "write_bytes_atomic", "write_text_atomic"]


def write_atomic(path: str | Path, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp)`` on a temporary file in the target's directory, then rename it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent
    )
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        writer(tmp_path)
        with open(tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    return write_atomic(path, lambda p: p.write_bytes(data))


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``text`` as UTF-8, whatever the locale."""
    return write_bytes_atomic(path, text.encode())
