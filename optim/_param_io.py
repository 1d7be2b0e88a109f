"""Shared plumbing for the optimizers: local views of (DTensor) params, low-precision
write-back (stochastic or round-to-nearest), and fp32 optimizer state across
``load_state_dict`` (which otherwise casts floating state to the param dtype)."""

from __future__ import annotations

import math
from itertools import chain

import torch

from .stochastic_rounding import stochastic_round_

__all__ = ["global_index", "local", "restore_fp32_state", "write_param_"]


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def local(t: torch.Tensor) -> torch.Tensor:
    """The rank-local tensor of a DTensor (a view sharing storage), or ``t`` itself."""
    return t.to_local() if _is_dtensor(t) else t


def global_index(p: torch.Tensor) -> int | torch.Tensor:
    """Global flat index of the local elements of ``p``: 0 for plain/replicated tensors,
    an int offset for a contiguous row shard (Shard(0)), else an int64 index tensor."""
    if not _is_dtensor(p):
        return 0
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    gstride = [math.prod(p.shape[d + 1 :]) for d in range(len(p.shape))]
    if all(s == g for s, g in zip(shape[1:], p.shape[1:])):  # whole rows: contiguous block
        return int(offset[0]) * gstride[0] if len(shape) else 0
    idx = torch.zeros((), dtype=torch.int64)
    for d, (n, o) in enumerate(zip(shape, offset)):
        ar = torch.arange(o, o + n, dtype=torch.int64) * gstride[d]
        idx = idx.unsqueeze(-1) + ar  # broadcast to the local shape
    return idx.to(local(p).device)


def write_param_(
    p: torch.Tensor,
    value: torch.Tensor,
    *,
    stochastic_rounding: bool,
    seed: int,
    step: int,
    param_id: int,
) -> None:
    """Store the fp32 local ``value`` into param ``p``: exact for fp32, SR or nearest for bf16."""
    dst = local(p)
    if dst.dtype == torch.bfloat16 and stochastic_rounding:
        stochastic_round_(
            dst, value, seed=seed, step=step, param_id=param_id, offset=global_index(p)
        )
    elif dst.dtype != value.dtype or dst.data_ptr() != value.data_ptr():
        # the dtype test first: a bf16 param never aliases its fp32 value, and torch.compile
        # cannot trace the data-pointer comparison (an "Unsupported" graph break)
        dst.copy_(value)


def restore_fp32_state(opt: torch.optim.Optimizer, state_dict: dict) -> None:
    """After ``Optimizer.load_state_dict``: put back the saved dtype of floating state
    (torch casts it to the param dtype, which would turn fp32 moments of bf16 params into bf16)."""
    saved_ids = chain.from_iterable(g["params"] for g in state_dict["param_groups"])
    params = chain.from_iterable(g["params"] for g in opt.param_groups)
    for pid, p in zip(saved_ids, params):
        for k, v in state_dict["state"].get(pid, {}).items():
            if k != "step" and torch.is_tensor(v) and v.is_floating_point():
                opt.state[p][k] = v.to(device=opt.state[p][k].device).clone()
