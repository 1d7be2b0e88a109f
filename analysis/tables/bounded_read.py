"""The one reader of a file in a run or sweep directory: bounded, never blocking, from the
file it checked.

Anyone may have replaced such a file: with a directory, a FIFO (whose ``open`` blocks
until a writer comes), a device (a symlink to ``/dev/zero``: endless bytes), a socket, or
gigabytes (a sparse file costs no disk). ``open_checked`` opens with ``O_NONBLOCK`` (a FIFO
opens at once), ``fstat``'s the descriptor it opened, refuses whatever is no regular file
or is over its kind's limit, and hands back that descriptor: the bytes read, hashed or
decoded are those of the file checked, never of a path opened again (no check-then-use
race). ``read_bounded`` reads a whole file that way; ``analysis.tables.safe_parquet`` gives
pyarrow the checked descriptor; ``scalelab.store.small_file`` and ``scalelab.yamlsafe``
read state files and YAML through it.

The limits (``LIMITS``, bytes) follow from what each kind of file can legitimately hold:

- ``state`` 1 MiB: ``status.json``, ``claim.json``, a sweep file's manifest (a few hundred
  bytes of JSON).
- ``json`` 16 MiB: ``meta.json`` (a few kB: device and environment), a run's or a
  checkpoint's ``manifest.json`` (about 150 bytes for each file it lists; a run lists four).
- ``yaml`` 64 MiB: ``config.yaml``, ``config-input.yaml``, ``spec.yaml`` (kilobytes; a spec
  with 10^5 explicit grid values is a few MB).
- ``records`` 2 GiB: ``metrics``/``evals``/``norms.parquet`` and their part files (a
  10^6-step run logging 10^3 norms every 100 steps holds 10^7 rows, under 400 MB).
- ``table`` 512 MiB: ``plan.parquet``, ``runs.parquet``, ``ensembles/evals.parquet``
  (10^5 runs x 200 columns at under 25 bytes a cell).
- ``checkpoint`` 1 TiB: a checkpoint's state files (weights and optimizer state); they are
  hashed in 1 MiB chunks, never held whole, and only once their size equals their manifest's.

A refused file raises ``Unreadable`` (``str``: why, in a few words); a path with nothing at
it raises ``FileNotFoundError`` or ``NotADirectoryError`` as ``os.open`` does.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from analysis.atomic import file_kind

__all__ = ["LIMITS", "Bounded", "Unreadable", "kind_of", "limit_for", "open_checked", "read_bounded"]

LIMITS = {
    "state": 1 << 20,
    "json": 16 << 20,
    "yaml": 64 << 20,
    "records": 2 << 30,
    "table": 512 << 20,
    "checkpoint": 1 << 40,
}
"""The largest file of each kind read (module docstring: why each)."""

_KINDS = {
    "status.json": "state", "claim.json": "state", "meta.json": "json", "manifest.json": "json",
    "config.yaml": "yaml", "config-input.yaml": "yaml", "spec.yaml": "yaml", "study.yaml": "yaml",
    "plan.parquet": "table", "runs.parquet": "table",
}


class Unreadable(Exception):
    """The path exists but holds no regular file within its limit; ``str(err)`` says why,
    ``stamp`` identifies what was judged (``Bounded.stamp``, without the hash)."""

    def __init__(self, why: str, stamp: tuple = ()) -> None:
        super().__init__(why)
        self.stamp = stamp


@dataclass(frozen=True)
class Bounded:
    """The bytes of a regular file, and what identifies that file (device, inode, mode,
    size, mtime and the bytes' sha256): a replaced or rewritten file has another stamp."""

    data: bytes
    stamp: tuple

    @property
    def sha256(self) -> str:
        return self.stamp[-1]


def kind_of(path: str | Path) -> str:
    """The kind (``LIMITS``) of a run or sweep file, by its name: a part file or an
    ``ensembles/evals.parquet`` or an adaptive study's table by its folder, a checkpoint's file
    by its ``step-`` folder."""
    p = Path(path)
    if p.name in _KINDS:
        return _KINDS[p.name]
    if p.parent.name.startswith("step-"):
        return "checkpoint"
    if p.suffix == ".parquet":
        return "table" if p.parent.name in ("ensembles", "adaptive") else "records"
    if p.name.endswith(".manifest.json"):
        return "state"
    return "json"


def limit_for(path: str | Path) -> int:
    """The size limit of ``path``'s kind (``kind_of``)."""
    return LIMITS[kind_of(path)]


def _size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def open_checked(path: str | Path, limit: int | None = None) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file at ``path`` (symlinks followed) and its
    ``fstat``; the caller closes it. ``limit``: the largest size accepted (``limit_for``
    when None). ``Unreadable`` for anything else, FileNotFoundError/NotADirectoryError when
    nothing is there."""
    limit = limit_for(path) if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as err:
        raise Unreadable(err.strerror or type(err).__name__) from None
    try:
        st = os.fstat(fd)
        where = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(file_kind(st.st_mode), where)
        if st.st_size > limit:
            raise Unreadable(f"{_size_text(st.st_size)}, over the {_size_text(limit)} limit of "
                             f"such a file", where)
    except BaseException as err:
        os.close(fd)
        if isinstance(err, OSError):
            raise Unreadable(err.strerror or type(err).__name__) from None
        raise
    return fd, st


def read_bounded(path: str | Path, limit: int | None = None) -> Bounded:
    """The whole regular file at ``path``, at most ``limit`` bytes (``limit_for`` when
    None), read from the descriptor ``open_checked`` judged; a file that grew past the limit
    since is refused too."""
    limit = limit_for(path) if limit is None else limit
    fd, st = open_checked(path, limit)
    where = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 16 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Unreadable(f"over the {_size_text(limit)} limit of such a file", where)
        data = b"".join(chunks)
    except OSError as err:
        raise Unreadable(err.strerror or type(err).__name__) from None
    finally:
        os.close(fd)
    return Bounded(data, (*where, hashlib.sha256(data).hexdigest()))
