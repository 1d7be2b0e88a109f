"""Atomic file writes for run directories.

``write_atomic`` (temporary file beside the target, fsync, rename) and the byte/text
writers are ``analysis.atomic``'s, the project's one implementation (the lower layer:
docs/architecture.md); the typed writers below build on them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from analysis.atomic import write_atomic, write_bytes_atomic, write_text_atomic

__all__ = [
    "write_atomic",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "write_yaml_atomic",
    "write_parquet_atomic",
]


def write_json_atomic(path: str | Path, obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_yaml_atomic(path: str | Path, obj: Any) -> Path:
    return write_text_atomic(path, yaml.safe_dump(obj, sort_keys=False))


def write_parquet_atomic(path: str | Path, frame: Any) -> Path:
    """Write a polars DataFrame to parquet atomically."""
    return write_atomic(path, lambda p: frame.write_parquet(p))
