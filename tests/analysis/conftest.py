"""Fixtures of the analysis tests: one small real sweep per session (``_tiny_sweep``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _tiny_sweep import build


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory) -> Path:
    """A trained, collected sweep (debug backend); tests that change it work on a copy."""
    return build(tmp_path_factory.mktemp("tiny_sweep"))
