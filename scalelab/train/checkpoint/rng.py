"""The global RNG states (python, numpy, torch CPU, CUDA) as tensors and primitives only.

A checkpoint holds ``rng_state()`` and is loaded with ``torch.load(weights_only=True)``,
which refuses arbitrary objects: python's ``random.getstate()`` tuple and numpy's legacy
``('MT19937', uint32[624], pos, has_gauss, cached_gaussian)`` are stored as dicts of
int64 tensors, ints, floats and strings; the torch and CUDA states are already uint8
tensors. ``set_rng_state(rng_state())`` restores every generator exactly.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["rng_state", "set_rng_state"]


def _python_state() -> dict[str, Any]:
    version, internal, gauss_next = random.getstate()
    return {"version": int(version), "state": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": None if gauss_next is None else float(gauss_next)}


def _numpy_state() -> dict[str, Any]:
    name, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {"bit_generator": str(name), "key": torch.from_numpy(key.astype(np.int64)),
            "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}


def rng_state() -> dict[str, Any]:
    """Every RNG the loop may touch: python, numpy, torch CPU and (if initialized) CUDA."""
    state: dict[str, Any] = {
        "python": _python_state(),
        "numpy": _numpy_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state((npy["bit_generator"], npy["key"].numpy().astype(np.uint32), npy["pos"],
                         npy["has_gauss"], npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
