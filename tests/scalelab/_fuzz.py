"""Helpers of the fuzz tests: damage a file the way disks, people and adversaries do, and
run the CLI in this process, reporting what escaped it.

A command passes when it exits 0 or 2 and nothing escaped ``scalelab.cli.main`` (an
exception that escapes is what a user sees as a traceback). Running in-process keeps a
case at a fraction of a second; ``tests/scalelab/test_bad_input.py`` runs the same
promise through real subprocesses.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import traceback
from dataclasses import dataclass
from pathlib import Path

MUTATIONS = ("truncate", "flip", "junk", "wrong_type", "directory", "symlink_zero")
"""Ways to damage one file: cut in half, one bit flipped in the middle, random bytes,
valid JSON of the wrong type, a directory in its place, a symlink to /dev/zero (endless
bytes). ``mutate`` also knows ``empty`` and ``symlink_loop``."""

BOUND_MUTATIONS = ("fifo", "oversize", "sparse")
"""Damage that can hang a reader or fill its memory: a FIFO in place of the file (its
``open`` blocks until a writer comes), the file grown to one byte over its kind's size
limit (``analysis.tables.bounded_read.limit_for``) with its first and last bytes kept (a
parquet file's magic intact at both ends), and a sparse ``SPARSE_BYTES`` file (the content,
then holes: gigabytes that cost no disk). Run in a subprocess with a timeout and its peak
RSS measured (``tests/scalelab/test_fuzz_files.py``)."""

SPARSE_BYTES = 3 << 30
_KEEP = 64
"""Bytes of the original kept at each end of an ``oversize`` file."""


def mutate(path: Path, how: str, *, seed: int = 0) -> None:
    """Damage ``path`` (a file that exists) in place, as ``how`` says (``MUTATIONS``)."""
    data = path.read_bytes()
    if how in ("directory", "symlink_zero", "symlink_loop", "fifo"):
        path.unlink()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        at = len(data) // 2
        path.write_bytes(data[:at] + bytes([data[at] ^ (1 << (seed % 8))]) + data[at + 1:] if data else b"\x01")
    elif how == "junk":
        path.write_bytes(os.urandom(64) + b"\xff\xfe\x00" + os.urandom(64))
    elif how == "wrong_type":
        path.write_bytes(b"[1, 2, 3]\n")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "directory":
        path.mkdir()
        (path / "inside").write_text("x")
    elif how == "symlink_zero":
        path.symlink_to("/dev/zero")
    elif how == "symlink_loop":
        path.symlink_to(path.name)
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "sparse":
        os.truncate(path, SPARSE_BYTES)
    elif how == "oversize":
        from analysis.tables.bounded_read import limit_for

        size = limit_for(path) + 1
        with open(path, "r+b") as fh:
            fh.truncate(size)
            fh.seek(size - min(_KEEP, len(data)))
            fh.write(data[-_KEEP:])
    elif how not in (*MUTATIONS, *BOUND_MUTATIONS, "empty", "symlink_loop"):
        raise ValueError(f"unknown mutation {how!r}")


@dataclass(frozen=True)
class Outcome:
    code: int | None
    escaped: str
    """The traceback of an exception that escaped ``main``, else ''."""
    stderr: str

    @property
    def ok(self) -> bool:
        return not self.escaped and self.code in (0, 2)

    def describe(self, args: list[str]) -> str:
        return f"scalelab {' '.join(args)} -> exit {self.code}\n{self.escaped or self.stderr[-1500:]}"


def run_cli(args: list[str]) -> Outcome:
    """``scalelab ARGS`` in this process: its exit code, and any exception that escaped."""
    from scalelab.cli import main

    err, out = io.StringIO(), io.StringIO()
    escaped, code = "", None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            main(args)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # noqa: BLE001 - what escaped is what the test reports
            escaped = traceback.format_exc()
    if "Traceback (most recent call last)" in err.getvalue():
        escaped = escaped or err.getvalue()
    return Outcome(code, escaped, err.getvalue())


def fresh_copy(src: Path, dst: Path) -> Path:
    """A copy of the sweep ``src`` at ``dst`` (symlinks kept as links)."""
    shutil.copytree(src, dst, symlinks=True)
    return dst
