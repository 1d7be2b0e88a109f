"""The pieces of a Muon update that are plain tensor math: how a param splits into the
matrices Newton-Schulz orthogonalises (``piece_shape``: batched weights, conv filters,
fused QKV row blocks), the update's shape scale, and the momentum blend U.

    M <- μ·M + G;   U = G + μ·M (Nesterov) or M      (KellerJordan/Muon; ``muon_momentum_``)
    W <- W·(1 - ηλ) - η·s·NS(U),  s = ``shape_scale``(d_out, d_in)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["SHAPE_SCALES", "is_batched", "muon_momentum_", "piece_shape", "row_blocks", "shape_scale"]

SHAPE_SCALES = ("jordan", "spectral", "moonlight")


def row_blocks(group: dict) -> int:
    """Row blocks orthogonalised apart (group key ``blocks``; 1 when absent, as in state_dicts
    saved before the key existed)."""
    return int(group.get("blocks", 1))


def is_batched(group: dict) -> bool:
    """Whether the group's ≥3-D weights are batches of matrices over their leading dims (group
    key ``batched``; False when absent: flattened to [d_out, d_in·k·k] like a conv filter)."""
    return bool(group.get("batched", False))


def piece_shape(group: dict, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(count, rows, cols) of the matrices a param (or its update) of ``shape`` splits into:
    ``batched``: prod(leading dims) matrices [d_out, d_in]; else one [shape[0], prod(rest)]
    matrix (conv filters flattened); either way each cut into ``blocks`` row blocks."""
    k = row_blocks(group)
    if is_batched(group):
        lead, rows, cols = math.prod(shape[:-2]), shape[-2], shape[-1]
    else:
        lead, rows, cols = 1, shape[0], math.prod(shape[1:])
    return lead * k, rows // k, cols


def shape_scale(mode: str, d_out: int, d_in: int) -> float:
    """Update multiplier s for a [d_out, d_in] matrix.

    "jordan": max(1, d_out/d_in)^0.5 (KellerJordan; torch "original");
    "spectral": sqrt(d_out/d_in) (Scion, Dion "spectral_norm");
    "moonlight": 0.2·sqrt(max(d_out, d_in)) (Moonlight; torch "match_rms_adamw"): the
    update RMS is then about 0.2, like AdamW's, so both can share lr and wd.
    """
    if mode == "jordan":
        return math.sqrt(max(1.0, d_out / d_in))
    if mode == "spectral":
        return math.sqrt(d_out / d_in)
    if mode == "moonlight":
        return 0.2 * math.sqrt(max(d_out, d_in))
    raise ValueError(f"Muon: unknown shape_scale {mode!r}; expected one of {SHAPE_SCALES}")


def muon_momentum_(bufs: list[Tensor], grads: list[Tensor], mu: float | Tensor, *, nesterov: bool,
                   foreach: bool, outs: list[Tensor] | None = None) -> list[Tensor]:
    """M <- μM + G in place on the fp32 momentum buffers; returns U = G + μM (Nesterov) or M.

    bufs, grads: fp32 tensors of matching shapes ([rows, ...] local rows under FSDP).
    foreach: ``torch._foreach_*`` ops (all tensors on one device), else a per-tensor loop;
        bitwise equal (the same ops, tensor by tensor). M is updated in place by one
        ``_axpy`` per tensor (no foreach op writes G + μM into M), so M and U cost one pass
        each, as torch.optim.Muon's two ``lerp``.
    outs: tensors to write each Nesterov U into (a workspace's; the same bits as fresh ones).
    """
    for buf, g in zip(bufs, grads):  # M <- G + μM in place, one pass per tensor
        _axpy(g, buf, mu, out=buf)
    if not nesterov:
        return list(bufs)
    if outs is not None:
        return [_axpy(g, buf, mu, out=o) for buf, g, o in zip(bufs, grads, outs)]
    if not foreach:
        return [_axpy(g, buf, mu) for buf, g in zip(bufs, grads)]
    if torch.is_tensor(mu):
        return list(torch._foreach_addcmul(grads, bufs, [mu] * len(bufs)))
    return list(torch._foreach_add(grads, bufs, alpha=mu))


def _axpy(g: Tensor, m: Tensor, mu: float | Tensor, out: Tensor | None = None) -> Tensor:
    """G + μ·M in one pass: ``add`` with alpha for a number μ, ``addcmul`` for a 0-d tensor
    (the same bits: both round μ·M + G once, checked by the tests)."""
    if torch.is_tensor(mu):
        return torch.addcmul(g, m, mu, out=out)
    return torch.add(g, m, alpha=mu, out=out)
