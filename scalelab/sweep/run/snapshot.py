"""Code snapshot at submit: queued Slurm jobs run the code as it was when submitted.

The import packages' source files (``.py``/``.yaml``: the files git tracks or would
track, i.e. not ignored) are copied into ``<sweep>/code/<hash>/``; jobs put that folder
first on ``PYTHONPATH``, ahead of the editable install, so later edits to the working
tree do not change queued or requeued runs. The hash covers every file's path and
bytes; identical code reuses one snapshot. The folder is named by the whole sha256 (64
hex): the name decides reuse, and code that shared a prefix with an earlier snapshot
would otherwise run the earlier code. Snapshots are built in a temporary folder
and renamed into place, so a half-copied snapshot is never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

__all__ = ["PACKAGES", "code_hash", "snapshot_code", "source_files"]

PACKAGES = ("scalelab", "optim", "analysis")
_SUFFIXES = (".py", ".yaml", ".yml", ".typed")


def _default_root() -> Path:
    import scalelab

    return Path(scalelab.__file__).resolve().parent.parent


def source_files(root: str | Path | None = None) -> list[str]:
    """Relative paths of the package sources under ``root`` (sorted)."""
    root = Path(root) if root else _default_root()
    packages = [p for p in PACKAGES if (root / p).is_dir()]
    files: list[str] | None = None
    if (root / ".git").exists():
        try:
            out = subprocess.run(
                ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                 "--exclude-standard", "--", *packages],
                capture_output=True, check=True, timeout=60,
            ).stdout.decode()
            files = [f for f in out.split("\0") if f]
        except (OSError, subprocess.SubprocessError):
            files = None
    if files is None:  # not a checkout (e.g. an installed wheel): walk the packages
        files = [
            str(p.relative_to(root))
            for pkg in packages
            for p in (root / pkg).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
    return sorted(f for f in set(files) if f.endswith(_SUFFIXES) and (root / f).is_file())


def code_hash(root: str | Path | None = None, files: list[str] | None = None) -> str:
    """sha256 (64 hex) over every source file's path and bytes: the snapshot's name."""
    root = Path(root) if root else _default_root()
    files = source_files(root) if files is None else files
    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def snapshot_code(dest_root: str | Path, root: str | Path | None = None) -> Path:
    """Copy the package sources into ``dest_root/<hash>/`` (once) and return that folder."""
    root = Path(root) if root else _default_root()
    files = source_files(root)
    dest = Path(dest_root) / code_hash(root, files)
    if dest.is_dir():
        return dest
    tmp = Path(dest_root) / f".tmp-{uuid.uuid4().hex}"
    try:
        for rel in files:
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, target)
        (tmp / "MANIFEST").write_text("\n".join(files) + "\n")
        try:
            os.rename(tmp, dest)
        except OSError:  # a concurrent launch made the same snapshot first
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
