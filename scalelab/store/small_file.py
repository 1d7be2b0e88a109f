"""Reading a small state file (``status.json``, ``claim.json``) that anyone may have
replaced: with a directory, a FIFO, a device (a symlink to ``/dev/zero``) or megabytes of
junk. ``read_small`` never blocks and never reads more than its limit; what is no small
regular file is ``Unreadable``, with the reason in a few words.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

__all__ = ["SmallFile", "Unreadable", "read_small"]

DEFAULT_LIMIT = 1 << 20


class Unreadable(Exception):
    """The path exists but holds no small regular file; ``str(err)`` says why, ``stamp``
    identifies what was judged (``SmallFile.stamp``)."""

    def __init__(self, why: str, stamp: tuple = ()) -> None:
        super().__init__(why)
        self.stamp = stamp


@dataclass(frozen=True)
class SmallFile:
    """The bytes of a small regular file, and what identifies that file (device, inode,
    size, mtime and the bytes' sha256): a replaced or rewritten file has another stamp."""

    data: bytes
    stamp: tuple


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_small(path: str, limit: int = DEFAULT_LIMIT) -> SmallFile:
    """The file at ``path`` (symlinks followed). FileNotFoundError or NotADirectoryError
    when nothing is there; ``Unreadable`` when it is no regular file, is over ``limit``
    bytes, or cannot be read."""
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
            raise Unreadable(_kind(st.st_mode), where)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Unreadable(f"over {limit} bytes", where)
        data = b"".join(chunks)
    except OSError as err:
        raise Unreadable(err.strerror or type(err).__name__) from None
    finally:
        os.close(fd)
    return SmallFile(data, (*where, hashlib.sha256(data).hexdigest()))
