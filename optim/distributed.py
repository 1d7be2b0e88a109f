"""Distributed matrix maps for Muon and Scion: run a batched ``fn`` on every matrix once,
spread over the ranks (after Dion, arXiv 2504.05295, and Disco, rakkit/disco).

``fn`` maps a same-shape stack [B, m, n] to a stack of the same shape (Newton-Schulz, an
LMO). Three entry points:

- ``local_matrix_apply``: one process; same-shape matrices are stacked into one call.
- ``ddp_matrix_apply``: every rank holds the full (all-reduced) matrices. Each rank runs
  ``fn`` on its FLOP-balanced share (``plan_owners``), then one all_gather gives every
  rank every result. Equal to the single-process result.
- ``fsdp_matrix_apply``: FSDP2 ``Shard(0)`` row shards. Each matrix has one owner rank;
  one all_to_all sends the row shards (padded to ceil(rows/W)) to the owner, the owner
  runs ``fn`` on the full matrix, a second all_to_all returns each rank its rows, which
  are narrowed back (uneven and empty shards included; Dion #74).

Owners come from a longest-processing-time plan over the NS cost of each matrix: it is
deterministic (every rank computes the same plan without communication) and balances
FLOPs better than the round-robin "param b·W+i on rank i" of Dion/TorchTitan, with the
same communication volume.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from optim.newton_schulz import ns_flops

__all__ = [
    "ddp_matrix_apply",
    "fsdp_matrix_apply",
    "is_dtensor",
    "local_matrix_apply",
    "plan_owners",
]

MatrixFn = Callable[[Tensor], Tensor]


def is_dtensor(t: Tensor) -> bool:
    """True for a ``torch.distributed.tensor.DTensor`` (checked without importing it)."""
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def plan_owners(shapes: Sequence[Sequence[int]], world: int) -> list[int]:
    """Owner rank of each matrix, balancing Newton-Schulz FLOPs (ns_flops) over ``world``.

    Longest processing time first: matrices by cost (descending, ties by index), each to
    the least-loaded rank (ties to the lowest rank). Pure function of the shapes.
    """
    costs = [ns_flops(int(s[-2]), int(s[-1])) for s in shapes]
    order = sorted(range(len(costs)), key=lambda i: (-costs[i], i))
    load = [0] * world
    owners = [0] * len(costs)
    for i in order:
        r = min(range(world), key=lambda k: (load[k], k))
        owners[i] = r
        load[r] += costs[i]
    return owners


def local_matrix_apply(mats: Sequence[Tensor], fn: MatrixFn) -> list[Tensor]:
    """fn on every matrix, same (shape, dtype, device) matrices stacked into one [B, m, n] call."""
    out: list[Tensor | None] = [None] * len(mats)
    buckets: dict[tuple, list[int]] = {}
    for i, x in enumerate(mats):
        if x.ndim != 2:
            raise ValueError(f"matrix_apply: expected 2-D matrices, got shape {tuple(x.shape)}")
        buckets.setdefault((tuple(x.shape), x.dtype, x.device), []).append(i)
    for idx in buckets.values():
        # [B, m, n]; a single matrix as a view (no copy)
        stack = mats[idx[0]][None] if len(idx) == 1 else torch.stack([mats[i] for i in idx])
        res = fn(stack)
        if res.shape != stack.shape:
            raise ValueError(f"matrix_apply: fn changed the shape {tuple(stack.shape)} -> {tuple(res.shape)}")
        for k, i in enumerate(idx):
            out[i] = res[k]
    return out  # type: ignore[return-value]


def _world(group) -> tuple[int, int]:
    if not (dist.is_available() and dist.is_initialized()):
        return 1, 0
    return dist.get_world_size(group), dist.get_rank(group)


def ddp_matrix_apply(mats: Sequence[Tensor], fn: MatrixFn, *, group=None) -> list[Tensor]:
    """fn on replicated full matrices, each computed on one rank, results all-gathered.

    Every rank must pass the same list (same shapes, same order, one dtype), as after DDP's
    all-reduce. Returns the full list of results (in the input dtype) on every rank.
    """
    world, rank = _world(group)
    if world == 1 or not mats:
        return local_matrix_apply(mats, fn)
    if len({m.dtype for m in mats}) != 1:
        raise ValueError("ddp_matrix_apply: all matrices must share one dtype")
    owners = plan_owners([m.shape for m in mats], world)
    mine = [i for i, o in enumerate(owners) if o == rank]
    dtype = mats[0].dtype  # results travel (and come back) in the input dtype
    res = [r.to(dtype) for r in local_matrix_apply([mats[i] for i in mine], fn)]
    sizes = [sum(mats[i].numel() for i, o in enumerate(owners) if o == r) for r in range(world)]
    length = max(sizes)
    device = mats[0].device
    send = torch.zeros(length, dtype=dtype, device=device)  # padded to the largest share
    if res:
        flat = torch.cat([r.reshape(-1) for r in res])
        send[: flat.numel()] = flat
    recv = [torch.empty(length, dtype=dtype, device=device) for _ in range(world)]
    dist.all_gather(recv, send, group=group)
    out: list[Tensor | None] = [None] * len(mats)
    offsets = [0] * world
    for i, o in enumerate(owners):
        n = mats[i].numel()
        out[i] = recv[o][offsets[o] : offsets[o] + n].view(mats[i].shape)
        offsets[o] += n
    return out  # type: ignore[return-value]


def _row_counts(rows: int, world: int) -> tuple[int, list[int]]:
    """torch.chunk row split (FSDP2 / DTensor Shard(0)): chunk c = ceil(rows/W), rank s
    holds rows [s·c, min((s+1)·c, rows)), possibly none."""
    c = -(-rows // world) if rows else 0
    return c, [max(0, min(c, rows - s * c)) for s in range(world)]


def _pad_rows(x: Tensor, rows: int) -> Tensor:
    """x [r, n] -> [rows, n] (r <= rows), zero rows appended."""
    if x.shape[0] == rows:
        return x
    return torch.cat([x, x.new_zeros(rows - x.shape[0], *x.shape[1:])])


def fsdp_matrix_apply(
    shards: Sequence[Tensor],
    fn: MatrixFn,
    *,
    global_shapes: Sequence[Sequence[int]] | None = None,
    group=None,
) -> list[Tensor]:
    """fn on matrices stored as ``Shard(0)`` row shards; returns this rank's rows of each
    result (plain tensors, in the shards' dtype).

    Args:
        shards: per matrix, a 2-D DTensor (``Shard(0)`` on a 1-D mesh) or this rank's local
            rows as a plain tensor. Every rank passes the same matrices in the same order.
        global_shapes: the full [m, n] of each matrix; required for plain local tensors.
        group: process group; default the DTensor's mesh group, else the default group.
    """
    locals_: list[Tensor] = []
    shapes: list[tuple[int, int]] = []
    for k, s in enumerate(shards):
        if is_dtensor(s):
            from torch.distributed.tensor import Shard

            if s.device_mesh.ndim != 1 or tuple(s.placements) != (Shard(0),):
                raise ValueError(
                    f"fsdp_matrix_apply: matrix {k} has placements {s.placements} on a "
                    f"{s.device_mesh.ndim}-D mesh; only Shard(0) on a 1-D mesh is supported"
                )
            if group is None:
                group = s.device_mesh.get_group()
            locals_.append(s.to_local())
            shapes.append(tuple(s.shape))  # type: ignore[arg-type]
        else:
            if global_shapes is None:
                raise ValueError("fsdp_matrix_apply: global_shapes is required for plain local shards")
            locals_.append(s)
            shapes.append(tuple(int(d) for d in global_shapes[k]))  # type: ignore[arg-type]
        if len(shapes[-1]) != 2 or locals_[-1].ndim != 2:
            raise ValueError(f"fsdp_matrix_apply: matrix {k} is not 2-D: {shapes[-1]}")
    world, rank = _world(group)
    if world == 1:
        return local_matrix_apply(locals_, fn)

    splits = [_row_counts(m, world) for m, _ in shapes]  # (chunk rows c, rows per rank)
    for k, (x, (_c, rows)) in enumerate(zip(locals_, splits)):
        if x.shape != (rows[rank], shapes[k][1]):
            raise ValueError(
                f"fsdp_matrix_apply: matrix {k} local shard {tuple(x.shape)} on rank {rank} is not "
                f"the torch.chunk Shard(0) split of {shapes[k]} over {world} ranks"
            )
    owners = plan_owners(shapes, world)
    owned = [k for k, o in enumerate(owners) if o == rank]
    padded = [splits[k][0] * shapes[k][1] for k in range(len(shapes))]  # elements per padded chunk
    if not locals_:
        return []
    if len({x.dtype for x in locals_}) != 1:
        raise ValueError("fsdp_matrix_apply: all shards must share one dtype")
    device, dtype = locals_[0].device, locals_[0].dtype  # results come back in this dtype

    def exchange(chunks_for: Callable[[int], list[Tensor]], recv_sizes: list[int], dt) -> list[Tensor]:
        """all_to_all_single: chunks_for(d) go to rank d; returns what came from each rank."""
        send_parts = [chunks_for(d) for d in range(world)]
        send_sizes = [sum(t.numel() for t in parts) for parts in send_parts]
        flat = [t.reshape(-1).to(dt) for parts in send_parts for t in parts]
        send = torch.cat(flat) if flat else torch.empty(0, dtype=dt, device=device)
        recv = torch.empty(sum(recv_sizes), dtype=dt, device=device)
        dist.all_to_all_single(recv, send, recv_sizes, send_sizes, group=group)
        return list(torch.split(recv, recv_sizes))

    # 1) every rank sends its padded row shard of matrix k to owner(k)
    owned_size = sum(padded[k] for k in owned)
    got = exchange(
        lambda d: [_pad_rows(locals_[k], splits[k][0]) for k, o in enumerate(owners) if o == d],
        [owned_size] * world,
        dtype,
    )
    # 2) the owner rebuilds each full matrix [m, n] and runs fn (stacked by shape)
    fulls = []
    pos = 0
    for k in owned:
        (c, rows), n = splits[k], shapes[k][1]
        parts = [got[s][pos : pos + c * n].view(c, n)[: rows[s]] for s in range(world)]
        fulls.append(torch.cat(parts))
        pos += c * n
    results = local_matrix_apply(fulls, fn)
    # 3) the owner returns each rank its rows, padded to c; each rank narrows them back
    starts = [[s * c for s in range(world)] for c, _ in splits]
    back = exchange(
        lambda d: [
            _pad_rows(r[starts[k][d] : starts[k][d] + splits[k][1][d]], splits[k][0])
            for k, r in zip(owned, results)
        ],
        [sum(padded[k] for k, o in enumerate(owners) if o == s) for s in range(world)],
        dtype,  # every rank must agree on the dtype, also ranks that own nothing
    )
    out: list[Tensor] = []
    pos = [0] * world
    for k, o in enumerate(owners):
        (c, rows), n = splits[k], shapes[k][1]
        out.append(back[o][pos[o] : pos[o] + c * n].view(c, n)[: rows[rank]])
        pos[o] += c * n
    return out
