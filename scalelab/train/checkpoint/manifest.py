"""Manifests: ``manifest.json`` lists each file of a directory, its size and sha256.

One engine for two directories: a checkpoint (``checkpoint/step-N/``, written as it is
saved) and a finished run's records (``<run>/manifest.json``: ``records_manifest``).

The writer hashes bytes as they pass to disk (``HashingWriter``), so saving never reads a
file back; ``verify`` reads each file once. The document::

    {"format": 2, "step": 128, "files": {"state.pt": {"size": 2345678, "sha256": "ab12..."}}}

``format`` 2 is the first format with a manifest (format 1, before it, pickled arbitrary
objects and had none). ``check_manifest`` is pure (a document and observed sizes in, a
problem or None out); the functions around it do the I/O.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from analysis.tables.bounded_read import Unreadable, open_checked, read_bounded
from scalelab.store import layout

__all__ = [
    "DCP_METADATA",
    "FORMAT",
    "MANIFEST_FILE",
    "FileDigest",
    "HashingWriter",
    "check_manifest",
    "file_digest",
    "Problem",
    "manifest_doc",
    "read_manifest",
    "verify",
    "write_manifest",
]

FORMAT = 2
MANIFEST_FILE = layout.MANIFEST_FILE
DCP_METADATA = ".metadata"
"""DCP's index file: the mark of a sharded checkpoint (``scalelab.train.checkpoint.dcp``)."""
_CHUNK = 1 << 22  # 4 MiB reads when verifying


@dataclass(frozen=True)
class FileDigest:
    """What the manifest records of one file."""

    size: int
    sha256: str


class HashingWriter:
    """A write-only binary stream over ``fh`` that counts and hashes every byte written.

    ``torch.save(obj, HashingWriter(fh))`` writes the same bytes as to ``fh`` itself.
    ``after_write`` (a test hook, see ``checkpoint.TEST_PAUSE_ENV``) runs after each write.
    """

    def __init__(self, fh: BinaryIO, after_write: Callable[[HashingWriter], None] | None = None):
        self._fh = fh
        self._hash = hashlib.sha256()
        self._size = 0
        self._after_write = after_write

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._hash.update(view)
        self._fh.write(view)
        self._size += view.nbytes
        if self._after_write is not None:
            self._after_write(self)
        return view.nbytes

    def flush(self) -> None:
        self._fh.flush()

    def digest(self) -> FileDigest:
        return FileDigest(self._size, self._hash.hexdigest())


def file_digest(path: Path) -> FileDigest:
    """Size and sha256 of ``path``, read once in chunks from the descriptor
    ``analysis.tables.bounded_read.open_checked`` judged (never blocking on a FIFO; a
    non-regular file or one over its kind's size limit raises ``Unreadable``)."""
    h, size = hashlib.sha256(), 0
    fd, _ = open_checked(path)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return FileDigest(size, h.hexdigest())


def manifest_doc(step: int, files: Mapping[str, FileDigest], **extra: Any) -> dict[str, Any]:
    """The document; ``extra``: more top-level keys (a run's records add ``run_id``)."""
    return {
        "format": FORMAT,
        "step": int(step),
        **extra,
        "files": {name: {"size": d.size, "sha256": d.sha256} for name, d in sorted(files.items())},
    }


def write_manifest(directory: Path, step: int, files: Mapping[str, FileDigest]) -> None:
    """Write and fsync ``directory/manifest.json`` (call it after the files are fsynced)."""
    with open(directory / MANIFEST_FILE, "w", encoding="utf-8") as fh:
        json.dump(manifest_doc(step, files), fh, indent=1)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def _files(doc: Any, step: int) -> dict[str, FileDigest] | str:
    """The files a manifest document lists, or what is wrong with it."""
    if not isinstance(doc, dict):
        return f"{MANIFEST_FILE} is not an object"
    if doc.get("format") != FORMAT:
        return f"{MANIFEST_FILE} has format {doc.get('format')!r}, this scalelab reads {FORMAT}"
    if doc.get("step") != step:
        return f"{MANIFEST_FILE} is for step {doc.get('step')!r}"
    files = doc.get("files")
    if not isinstance(files, dict) or not files:
        return f"{MANIFEST_FILE} lists no files"
    out = {}
    for name, entry in files.items():
        ok = (
            isinstance(name, str) and name == Path(name).name and name not in (".", "..")
            and isinstance(entry, dict) and type(entry.get("size")) is int
            and isinstance(entry.get("sha256"), str)
        )
        if not ok:
            return f"{MANIFEST_FILE} has a malformed entry {name!r}"
        out[name] = FileDigest(entry["size"], entry["sha256"])
    return out


def check_manifest(
    doc: Any, step: int, size_of: Callable[[str], int | None], digest_of: Callable[[str], str]
) -> str | None:
    """What is wrong with a checkpoint whose manifest is ``doc``, or None when it matches.

    ``size_of(name)`` is the file's size (None when missing); ``digest_of(name)`` its sha256,
    asked only once every size matches (a wrong size needs no hashing).
    """
    files = _files(doc, step)
    if isinstance(files, str):
        return files
    for name, want in files.items():
        size = size_of(name)
        if size is None:
            return f"{name} missing"
        if size != want.size:
            return f"{name}: {size} bytes, manifest says {want.size}"
    for name, want in files.items():
        if digest_of(name) != want.sha256:
            return f"{name}: sha256 mismatch"
    return None


def read_manifest(directory: Path) -> Any:
    """The manifest document of ``directory``, or a ``Problem`` saying why there is none
    (read through ``analysis.tables.bounded_read``: a FIFO, a device or a file over the
    16 MiB limit of a manifest is refused, never read)."""
    try:
        return json.loads(read_bounded(directory / MANIFEST_FILE).data.decode("utf-8"))
    except FileNotFoundError:
        return Problem(f"no {MANIFEST_FILE}")
    except Unreadable as err:
        return Problem(f"{MANIFEST_FILE} unreadable ({err})")
    except (OSError, ValueError) as err:
        return Problem(f"{MANIFEST_FILE} unreadable ({type(err).__name__})")


def verify(directory: Path, step: int, doc: Any = None) -> str | None:
    """What is wrong with the files in ``directory`` (a checkpoint's, a run's records), or
    None when every file matches. ``doc``: its manifest when already read."""
    doc = read_manifest(directory) if doc is None else doc
    if isinstance(doc, Problem):
        return str(doc)

    def size_of(name: str) -> int | None:
        try:
            return (directory / name).stat().st_size
        except OSError:  # missing, or a symlink loop
            return None

    def digest_of(name: str) -> str:
        try:
            return file_digest(directory / name).sha256
        except (OSError, Unreadable):  # a directory, a FIFO, or unreadable
            return ""

    return check_manifest(doc, step, size_of, digest_of)


class Problem(str):
    """What ``read_manifest`` returns instead of a document."""
