"""Scratch tensors kept across optimizer steps and reused by name, dtype and device.

On the CPU every fresh tensor of a few MB is memory that glibc's allocator took from the
system and hands back when it is freed, so the next step faults it in again page by page:
a Muon step that allocates its U, its bf16 copy and its Newton-Schulz products afresh
spends 1-4 ms of system time per 512 x 1536 matrix on minor page faults (torch 2.13, one
thread; ``bench/optim_step.py`` of the scalelab repository). A ``Workspace`` allocates each
buffer once and hands the same tensor back on every call: no allocation, no fault, after
the first step. CUDA's caching allocator already reuses freed blocks, so only the CPU paths
take one.

A buffer's contents are valid until the next ``get`` of the same name (with any shape):
callers use a result that lives in the workspace before they ask for that buffer again.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["Workspace"]


class Workspace:
    """One flat buffer per (name, dtype, device), grown to the largest shape asked for and
    viewed as each; never part of an optimizer's state_dict. Each name serves one tensor at
    a time (the matrices go through one after another): the same memory serves a model's
    [d, d], [f, d] and [d, f] matrices, so the workspace holds the largest of each buffer."""

    def __init__(self) -> None:
        self._bufs: dict[tuple, Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
        """A contiguous tensor of ``shape`` on the name's buffer (uninitialised when the buffer
        grows, else as it was last written)."""
        key = (name, dtype, torch.device(device))
        need = math.prod(shape)
        buf = self._bufs.get(key)
        if buf is None or buf.numel() < need:
            buf = self._bufs[key] = torch.empty(need, dtype=dtype, device=device)
        return buf[:need].view(shape)

    @property
    def nbytes(self) -> int:
        """Bytes held by all buffers."""
        return sum(b.untyped_storage().nbytes() for b in self._bufs.values())

    def clear(self) -> None:
        """Drop every buffer (the next ``get`` allocates again)."""
        self._bufs.clear()
