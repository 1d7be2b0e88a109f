"""Shared plumbing for the optimizers: local views of (DTensor) params, low-precision
write-back (stochastic or round-to-nearest), the (device, dtype) chunks of the multi-tensor
(``torch._foreach_*``) paths, the one host read of the step counts that stochastic rounding
needs, and fp32 optimizer state across ``load_state_dict`` (which otherwise casts floating
state to the param dtype)."""

from __future__ import annotations

import math
from itertools import chain

import torch

from .stochastic_rounding import stochastic_round_

__all__ = [
    "FOREACH_CHUNK_NUMEL",
    "advance_steps_",
    "foreach_chunks",
    "global_index",
    "host_steps",
    "local",
    "params_with_grads",
    "real",
    "restore_fp32_state",
    "write_param_",
    "write_params_",
]

FOREACH_CHUNK_NUMEL: dict[str, int] = {"cpu": 1 << 16, "default": 1 << 24}
"""Most elements in one multi-tensor chunk, by device type (``foreach_chunks``).

CPU: 2^16, 256 KiB per fp32 list, so the five lists of an AdamW chunk (w, m, v, g and the
denominators) stay in a core's L2 through the chunk's sweeps. torch's CPU foreach ops are a C++
loop of the per-tensor kernels, so larger chunks stream every op through memory: on the model
of bench/optim_step.py in the scalelab repository (one thread), AdamW's step took ~10% and
Muon's momentum ~40% longer with 2^20. Other devices: 2^24 or the group's largest tensor,
whichever is larger, so a chunk's fp32 temporaries (AdamW: the denominators, and for bf16
params the fp32 grads and weights) exceed the per-parameter loop's, a few copies of the largest
tensor, by at most a few 64 MiB lists."""


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def local(t: torch.Tensor) -> torch.Tensor:
    """The rank-local tensor of a DTensor (a view sharing storage), or ``t`` itself."""
    return t.to_local() if _is_dtensor(t) else t


def real(t: torch.Tensor) -> torch.Tensor:
    """``torch.view_as_real`` of a complex tensor (a [..., 2] view sharing storage), else ``t``:
    elementwise optimizers treat a complex param as its real and imaginary parts, as
    ``torch.optim.AdamW`` does."""
    return torch.view_as_real(t) if t.is_complex() else t


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
    """Store the fp32 local ``value`` into param ``p``: exact for fp32, SR or nearest for bf16
    (a complex ``p`` through its real view, ``real``)."""
    dst = real(local(p))
    if dst.dtype == torch.bfloat16 and stochastic_rounding:
        stochastic_round_(
            dst, value, seed=seed, step=step, param_id=param_id, offset=global_index(p)
        )
    elif dst.dtype != value.dtype or dst.data_ptr() != value.data_ptr():
        # the dtype test first: a bf16 param never aliases its fp32 value, and torch.compile
        # cannot trace the data-pointer comparison (an "Unsupported" graph break)
        dst.copy_(value)


def write_params_(
    ps: list[torch.Tensor],
    values: list[torch.Tensor],
    *,
    stochastic_rounding: bool,
    seed: int,
    steps: list[int] | None,
    param_ids: list[int],
    foreach: bool,
) -> None:
    """``write_param_`` for each (param, fp32 value); ``steps`` are the SR steps (None: SR off).

    With ``foreach`` the round-to-nearest writes (a bf16 param from its fp32 value) are one
    ``torch._foreach_copy_`` (the same cast as ``copy_``); SR writes stay per parameter (each has
    its own stochastic-rounding key), and a same-dtype value (the param itself, updated in place) is skipped
    by ``write_param_``'s own test.
    """
    dsts, srcs = [], []
    for i, (p, value) in enumerate(zip(ps, values)):
        dst = real(local(p))
        sr = stochastic_rounding and dst.dtype == torch.bfloat16
        if foreach and not sr and dst.dtype != value.dtype:
            dsts.append(dst)
            srcs.append(value)
            continue
        write_param_(
            p, value, stochastic_rounding=stochastic_rounding, seed=seed,
            step=steps[i] if sr and steps is not None else 0, param_id=param_ids[i],
        )  # fmt: skip
    if dsts:
        torch._foreach_copy_(dsts, srcs)


def foreach_chunks(tensors: list[torch.Tensor], max_numel: int | None = None) -> list[list[int]]:
    """Indices of ``tensors`` grouped by (device, dtype), as ``torch._foreach_*`` ops need, and
    split, in order, into chunks of at most ``max_numel`` elements (default: by device type,
    ``FOREACH_CHUNK_NUMEL``); a larger tensor is a chunk of its own.

    Plain Python on static attributes (device, dtype, numel), so torch.compile traces it
    without a break (``torch.utils._foreach_utils._group_tensors_by_device_and_dtype`` is a C
    function that torch.optim skips while compiling).
    """
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    chunks: list[list[int]] = []
    for (device, _), idx in groups.items():
        cap = max_numel
        if cap is None:
            cap = FOREACH_CHUNK_NUMEL["cpu"] if device.type == "cpu" else max(
                FOREACH_CHUNK_NUMEL["default"], *(tensors[i].numel() for i in idx)
            )
        chunk, size = [], 0
        for i in idx:
            if chunk and size + tensors[i].numel() > cap:
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(i)
            size += tensors[i].numel()
        chunks.append(chunk)
    return chunks


def host_steps(steps: list[torch.Tensor]) -> list[int]:
    """The step counts as Python ints, in one read (``torch.stack(...).tolist()``).

    Only stochastic rounding needs them: its key (``optim.stochastic_rounding.sr_key``)
    is a host integer, and the Triton kernel takes it as an argument. The optimizers keep
    ``step`` as a 0-d CPU tensor (as ``torch.optim`` does when not capturable), so the read is
    not a device sync; torch.compile captures it as unbacked ints, without a graph break.
    """
    if not steps:
        return []
    return torch.stack(steps).to(torch.int64).tolist()


def params_with_grads(groups: list[dict], first_id: int = 0) -> list[tuple[dict, list[torch.Tensor], list[int]]]:
    """(group, its params that have a grad, their SR param ids) for each group with any. A
    param's SR id is ``first_id`` + its position over all ``groups``, grad or not: the same on
    every rank and across resumes."""
    work, pid = [], first_id
    for group in groups:
        ps, ids = [], []
        for p in group["params"]:
            if p.grad is not None:
                ps.append(p)
                ids.append(pid)
            pid += 1
        if ps:
            work.append((group, ps, ids))
    return work


def advance_steps_(steps: list[torch.Tensor], *, foreach: bool, sr: bool) -> list[int] | None:
    """t ← t + 1 on each 0-d step tensor (one ``_foreach_add_`` with ``foreach``); with ``sr``
    also the new counts as ints (``host_steps``), else None: nothing is read on the host."""
    if not steps:
        return [] if sr else None
    if foreach:
        torch._foreach_add_(steps, 1)
    else:
        for t in steps:
            t += 1
    return host_steps(steps) if sr else None


def restore_fp32_state(opt: torch.optim.Optimizer, state_dict: dict) -> None:
    """After ``Optimizer.load_state_dict``: put back the saved dtype of floating state
    (torch casts it to the param dtype, which would turn fp32 moments of bf16 params into bf16)."""
    saved_ids = chain.from_iterable(g["params"] for g in state_dict["param_groups"])
    params = chain.from_iterable(g["params"] for g in opt.param_groups)
    for pid, p in zip(saved_ids, params):
        for k, v in state_dict["state"].get(pid, {}).items():
            if k != "step" and torch.is_tensor(v) and v.is_floating_point():
                opt.state[p][k] = v.to(device=opt.state[p][k].device).clone()
