"""Atomic file writes: write a temporary file beside the target, fsync, rename.

A reader never sees a half-written file, on local disks, NFS and Lustre alike (rename
within one directory is atomic on all three). This is the project's one implementation.
It lives in the lower layer (``analysis`` imports no ``scalelab``; docs/architecture.md),
and ``scalelab.store.atomic`` adds its typed writers (JSON, YAML, parquet) on top.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "write_bytes_atomic", "write_text_atomic"]


def write_atomic(path: str | Path, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp)`` on a temporary file in the target's directory, then rename it.

    A failed write leaves the target as it was and raises an ``OSError`` that names
    ``path``, the file the caller asked for, not the temporary file nobody knows of; a
    writer's own error that wraps a system error (polars: "... (os error 28)") becomes
    that ``OSError``, so a full disk reads the same whichever library wrote.

    Only a regular file (or a symlink, which the rename replaces, not its target) is ever
    replaced: a device, FIFO, socket or directory at ``path`` is refused with an ``OSError``
    (EEXIST) naming it, before anything is written. Without this a command run as root
    with ``--out /dev/zero`` renamed its output over the device node."""
    path = Path(path)
    _refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent
        )
    except OSError as err:
        raise _naming(err, path) from err
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        writer(tmp_path)
        with open(tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except BaseException as err:
        tmp_path.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _naming(err, path) from err
        code = _wrapped_errno(err) if isinstance(err, Exception) else None
        if code is not None:
            raise OSError(code, os.strerror(code), str(path)) from err
        raise
    return path


def file_kind(mode: int) -> str:
    """What a path that is no regular file is, from its ``st_mode``: "a directory", "a FIFO",
    "a device", "a socket", else "a special file" (the one wording of every refusal)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _refuse_special(path: Path) -> None:
    """An ``OSError`` when ``path`` is there and is no regular file or symlink."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    raise OSError(errno.EEXIST, f"{file_kind(mode)} is there, not a file: refusing to replace it; "
                  "write to a file path", str(path))  # fmt: skip


_OS_ERROR_IN_TEXT = re.compile(r"\(os error (\d+)\)")
"""How Rust-backed writers (polars, pyarrow's Rust parts) quote a system error."""


def _wrapped_errno(err: Exception) -> int | None:
    """The errno a library error quotes in its message, if any."""
    found = _OS_ERROR_IN_TEXT.search(str(err))
    return int(found.group(1)) if found else None


def _naming(err: OSError, path: Path) -> OSError:
    """``err`` as raised on ``path``: the same class and errno, the target's name in place
    of the temporary file's, the directory's, or none. Another path's error is returned
    as it is."""
    if err.errno is None or err.filename2 is not None:
        return err
    if err.filename is not None:
        named, folder = Path(os.path.abspath(os.fsdecode(err.filename))), Path(os.path.abspath(path.parent))
        ours = named == folder or (named.parent == folder and named.name.startswith(f".{path.name}."))
        if not ours:
            return err
    return type(err)(err.errno, err.strerror, str(path))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    return write_atomic(path, lambda p: p.write_bytes(data))


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``text`` as UTF-8, whatever the locale."""
    return write_bytes_atomic(path, text.encode())
