"""The analysis tests' small real sweep (``tests/analysis/_tiny_sweep.py``), built once per
test process and shared by the modules that only read it (each case damages a copy): the
file fuzz, the sweep-integrity tests and the bit-flip census. About 25 s a build on 2
cores, paid once instead of once per module."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _tiny_sweep import build  # noqa: E402

__all__ = ["shared_tiny_sweep"]

_BUILT: dict[str, Path] = {}


def shared_tiny_sweep(tmp_path_factory) -> Path:
    """The built sweep directory (its spec file ``tiny_report.yaml`` beside it); callers
    never change it."""
    if "sweep" not in _BUILT:
        _BUILT["sweep"] = build(tmp_path_factory.mktemp("shared_tiny_sweep"))
    return _BUILT["sweep"]
