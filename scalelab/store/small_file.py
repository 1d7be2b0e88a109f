"""Reading a small state file (``status.json``, ``claim.json``) that anyone may have
replaced: with a directory, a FIFO, a device (a symlink to ``/dev/zero``) or megabytes of
junk. ``read_small`` never blocks and never reads more than its limit; what is no small
regular file is ``Unreadable``, with the reason in a few words.

It is ``analysis.tables.bounded_read``, the one reader of run and sweep files (the lower
layer: ``analysis`` imports no ``scalelab``), under this package's names.
"""

from __future__ import annotations

from analysis.tables.bounded_read import LIMITS, Unreadable, read_bounded
from analysis.tables.bounded_read import Bounded as SmallFile

__all__ = ["DEFAULT_LIMIT", "SmallFile", "Unreadable", "read_small"]

DEFAULT_LIMIT = LIMITS["state"]


def read_small(path: str, limit: int = DEFAULT_LIMIT) -> SmallFile:
    """The file at ``path`` (symlinks followed). FileNotFoundError or NotADirectoryError
    when nothing is there; ``Unreadable`` when it is no regular file, is over ``limit``
    bytes, or cannot be read."""
    return read_bounded(path, limit)
