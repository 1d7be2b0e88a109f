"""Read back what an offline W&B run wrote (``<dir>/wandb/offline-run-*/run-<id>.wandb``).

wandb >= 0.2x writes offline runs through wandb-core and no longer ships a Python reader of
its transaction log, so this is a small one: the file is a 7-byte header (``:W&B``, magic,
version) then LevelDB-log records (32 KiB blocks; each chunk: crc32 (4), length (2), type
(1: full, 2: first, 3: middle, 4: last)) holding ``wandb_internal_pb2.Record`` protobufs.
Checksums are not verified (a test reads files wandb just wrote).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OfflineRun", "offline_runs", "read_offline_run"]

_BLOCK = 32 * 1024
_HEADER = 7
_CHUNK = 7


def _records(path: Path):
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B transaction log ({data[:7]!r})"
    pos, buf = _HEADER, b""
    while pos + _CHUNK <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK:  # the block's trailer: padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + _CHUNK])
        if length == 0 and kind == 0:  # zero padding up to the next block
            pos += left
            continue
        chunk = data[pos + _CHUNK:pos + _CHUNK + length]
        pos += _CHUNK + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(buf)
            yield record


def _key(item) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


@dataclass
class OfflineRun:
    """One offline attempt of a W&B run."""

    folder: Path
    id: str = ""
    group: str = ""
    job_type: str = ""
    name: str = ""
    tags: tuple[str, ...] = ()
    resume: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    """One dict per logged step (``_step`` included); nested keys joined by '/'
    (``norms/path`` for the table logged as ``norms``)."""
    summary: dict[str, Any] = field(default_factory=dict)

    def series(self, key: str) -> dict[int, Any]:
        """``{step: value}`` of ``key`` over the history."""
        return {row["_step"]: row[key] for row in self.history if key in row}

    def table(self, path: str) -> dict[str, Any]:
        """A logged table's JSON (``columns``, ``data``) from its ``norms/path`` value."""
        return json.loads((self.folder / "files" / path).read_text())


def read_offline_run(folder: Path) -> OfflineRun:
    """The run record, config, history and summary of one ``offline-run-*`` folder."""
    (log,) = folder.glob("run-*.wandb")
    run = OfflineRun(folder)
    for record in _records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.id, run.group, run.job_type, run.name = r.run_id, r.run_group, r.job_type, r.display_name
            run.tags, run.resume = tuple(r.tags), r.resume
            run.config.update({_key(u): json.loads(u.value_json) for u in r.config.update})
        elif kind == "config":
            run.config.update({_key(u): json.loads(u.value_json) for u in record.config.update})
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            run.summary.update({_key(u): json.loads(u.value_json) for u in record.summary.update})
    return run


def offline_runs(run_dir: Path) -> list[OfflineRun]:
    """Every offline attempt under ``run_dir/wandb``, oldest first."""
    return [read_offline_run(f) for f in sorted((run_dir / "wandb").glob("offline-run-*"))]
