"""What a forward pass leaves alive for backward, measured two ways (CPU tests).

- ``hooked_bytes``: the bytes autograd packs through ``torch.autograd.graph.saved_tensors_hooks``
  (distinct storages). Inside a non-reentrant ``torch.utils.checkpoint`` region the
  checkpoint's own hooks take precedence, so tensors saved there never reach an outer hook:
  this counts only what is saved outside checkpointed regions.
- ``live_bytes``: the distinct storages created during the forward (seen by a
  ``TorchDispatchMode``) still alive once the forward returned and the caller dropped its
  own references but the graph: saved tensors, the inputs a checkpoint holds for its
  recomputation and a selective checkpoint's cache. The activation memory, whatever the mode.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def hooked_bytes(forward: Callable[[], torch.Tensor]) -> tuple[int, torch.Tensor]:
    """(bytes packed by saved-tensor hooks, the forward's output)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    return sum(seen.values()), out


class _Births(TorchDispatchMode):
    """Weak references to the storage of every tensor an op returns, except storages that
    were first seen as an op's input (they existed before: parameters, buffers and views of
    them such as a weight's transpose)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, tuple[StorageWeakRef, int]] = {}
        self.older: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                key = StorageWeakRef(t.untyped_storage()).cdata
                if key not in self.refs:
                    self.older.add(key)
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                ref = StorageWeakRef(t.untyped_storage())
                if ref.cdata not in self.older:
                    self.refs.setdefault(ref.cdata, (ref, t.untyped_storage().nbytes()))
        return out


def live_bytes(forward: Callable[[], torch.Tensor]) -> tuple[int, torch.Tensor]:
    """(bytes of storages born in ``forward()`` and alive after it, the forward's output).

    The output (e.g. a scalar loss) keeps the graph, hence the saved tensors, alive; its own
    storage counts too (a few bytes for a loss)."""
    births = _Births()
    with births:
        out = forward()
    return sum(n for ref, n in births.refs.values() if not ref.expired()), out
