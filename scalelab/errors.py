"""Errors the CLI turns into one line and an exit code (0 ok, 1 failure, 2 bad input)."""

from __future__ import annotations

import difflib
import errno
import os
import re
from collections.abc import Iterable

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3
EXIT_PREEMPTED = 75
"""Stopped on SIGTERM/SIGUSR1 after a checkpoint; resumable (sysexits EX_TEMPFAIL)."""


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})
"""Every character ``str.splitlines`` breaks at -> its escape (``\\n``, ``\\x85``, ...)."""


class UserError(Exception):
    """Bad input: the CLI prints ``str(err)`` on one line and exits with code 2.

    ``str(err)`` is ``file: key: message`` and always one line: line breaks that come in
    with the input (a YAML key or an override holding a newline) are shown escaped."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        where = ": ".join(p for p in (file, key) if p)
        text = f"{where}: {message}" if where else message
        super().__init__(text.translate(_LINE_BREAKS))
        self.file, self.key, self.detail = file, key, message


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or ``''`` when nothing is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


_OS_HINTS = {
    errno.EACCES: "not writable by this user; choose another path",
    errno.EPERM: "not permitted; choose another path",
    errno.EROFS: "read-only file system; choose another path",
    errno.ENOSPC: "disk full: free space and rerun (finished work is kept)",
    errno.EDQUOT: "disk full (quota exceeded): free space or raise the quota and rerun "
                  "(finished work is kept)",
    errno.ENOTDIR: "a part of this path is a file, not a directory",
    errno.EISDIR: "is a directory; a file was expected",
    errno.EEXIST: "already exists and is not a directory",
    errno.ENOENT: "no such file or directory",
    errno.ENAMETOOLONG: "file name too long",
    errno.ELOOP: "too many levels of symbolic links",
}
"""errno -> what to do, for the errors a user's paths and disks cause."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
"""The errnos of a full disk."""
_QUOTED_ERRNO = re.compile(r"(?:os error|errno) (\d+)\b", re.IGNORECASE)
"""How libraries quote a system error in their own exceptions' text: polars and other
Rust code "(os error 28)", pyarrow "[errno 28]"."""


def disk_full_error(err: BaseException) -> OSError | None:
    """``err`` as an ``OSError`` when a full disk caused it (``DISK_FULL``): an ``OSError``
    with that errno, or another library's error quoting it in its text; else None."""
    if isinstance(err, OSError) and err.errno in DISK_FULL:
        return err
    if not isinstance(err, Exception):
        return None
    found = _QUOTED_ERRNO.search(str(err))
    code = int(found.group(1)) if found else None
    return OSError(code, os.strerror(code)) if code in DISK_FULL else None


_ALLOCATOR = re.compile(r"can't allocate memory|out of memory", re.IGNORECASE)
"""How torch says an allocation failed (CPU: "DefaultCPUAllocator: can't allocate memory";
CUDA: ``torch.OutOfMemoryError``, "CUDA out of memory")."""


def out_of_memory_message(err: BaseException) -> str | None:
    """One line for an allocation that failed (``MemoryError``, torch's allocator errors),
    or None for any other error: the sizes in the input multiplied past this machine's
    memory (a model shape, a batch, a sequence length), which no bound on a single field
    can know."""
    if isinstance(err, MemoryError):
        detail = str(err) or "MemoryError"
    elif isinstance(err, RuntimeError) and _ALLOCATOR.search(str(err)):
        detail = next((line.strip() for line in str(err).splitlines() if _ALLOCATOR.search(line)),
                      type(err).__name__)
    else:
        return None
    return (f"out of memory ({detail[:300]}): lower the sizes that multiply into it (model "
            "shape, batch, sequence length) or use a machine with more memory").translate(_LINE_BREAKS)


def os_error_message(err: OSError) -> str:
    """One line for an ``OSError`` a command met on a path: ``PATH: what is wrong (strerror)``.

    The path is the one the system call named (``err.filename``; for a rename or a link,
    also ``err.filename2``). Line breaks in a path are escaped, as in ``UserError``."""
    paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
    where = " -> ".join(paths)
    reason = err.strerror or str(err) or type(err).__name__
    hint = _OS_HINTS.get(err.errno or -1)
    text = f"{hint} ({reason})" if hint else reason
    return (f"{where}: {text}" if where else text).translate(_LINE_BREAKS)
