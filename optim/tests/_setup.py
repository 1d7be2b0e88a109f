"""pytest setup shared by optim's own suite (optim/tests/conftest.py) and scalelab's
(tests/conftest.py, which puts this folder on sys.path): CPU-only by default, one torch
thread per worker, and tests marked ``cuda`` skipped with a reason where there is no GPU."""

from __future__ import annotations

import os

import pytest
import torch


def set_threads() -> None:
    """One intra-op thread per pytest worker (OMP_NUM_THREADS overrides): workers do not
    oversubscribe the cores, and reductions run in one deterministic order."""
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


def pytest_collection_modifyitems(config, items):
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU (none present)")
    for item in items:
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_cuda)
