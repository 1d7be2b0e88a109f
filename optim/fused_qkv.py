"""Fused QKV weights: find them by name and shape, so Q, K and V are orthogonalised apart.

``nn.MultiheadAttention.in_proj_weight`` and many nanoGPT forks (``qkv``, ``c_attn``, ``Wqkv``,
``qkv_proj``) stack W_Q, W_K, W_V as one [3·d, d] matrix. Muon (Jordan's Muon blog,
kellerjordan.github.io/posts/muon) and Scion's Spectral LMO (Pethick et al. 2025, arXiv
2502.07529) would take the polar factor of the whole stack, coupling the three projections
and scaling by the stack's shape; run separately, each block of d rows gets its own polar
factor and shape factor, which is what separate ``q``/``k``/``v`` modules get.

``qkv_blocks`` says how many equal row blocks a weight has (3 for a fused QKV, 1 otherwise)
or ``None`` when the name says fused but the layout cannot be told: grouped-query stacks
[(h + 2·h_kv)·d_h, d] (unequal blocks), HF ``Conv1D`` weights stored [d, 3·d], and GPT-NeoX
``query_key_value`` (interleaved per head). ``split_fused`` sorts hidden matrices by that and
warns once per call, naming every weight it could not tell.
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["FUSED_QKV_MODES", "qkv_blocks", "split_fused"]

FUSED_QKV_MODES = ("split", "whole")
FUSED_SUFFIXES = ("in_proj_weight", "qkv.weight", "c_attn.weight", "wqkv.weight", "qkv_proj.weight")
"""Lower-cased name endings of contiguous [W_Q; W_K; W_V] stacks."""
INTERLEAVED_SUFFIXES = ("query_key_value.weight",)
"""Fused per head (GPT-NeoX): the three row blocks are not contiguous."""


def qkv_blocks(name: str, p: torch.Tensor) -> int | None:
    """3 for a fused QKV weight of shape [3·d, d], 1 for any other weight, None when the name
    says fused QKV but the blocks cannot be told from the shape (module docstring)."""
    key = name.lower()
    if key.endswith(INTERLEAVED_SUFFIXES):
        return None
    if not key.endswith(FUSED_SUFFIXES):
        return 1
    return 3 if p.ndim == 2 and p.shape[0] == 3 * p.shape[1] else None


def split_fused(
    named: list[tuple[str, torch.Tensor]], mode: str, caller: str
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(others, fused): the params of ``named`` with and without 3 splittable QKV blocks.

    mode "whole" puts everything in ``others`` (one polar factor per matrix, silently);
    "split" moves [3·d, d] QKV weights to ``fused`` and warns once about the ones it
    cannot tell, which stay whole.
    """
    if mode not in FUSED_QKV_MODES:
        raise ValueError(f"{caller}: fused_qkv must be one of {FUSED_QKV_MODES}, got {mode!r}")
    if mode == "whole":
        return [p for _, p in named], []
    others, fused, unclear = [], [], []
    for name, p in named:
        blocks = qkv_blocks(name, p)
        (fused if blocks == 3 else others).append(p)
        if blocks is None:
            unclear.append(f"{name} {tuple(p.shape)}")
    if unclear:
        warnings.warn(
            f"{caller}: {', '.join(unclear)} look like fused QKV weights but their Q/K/V blocks "
            "cannot be told from the shape; they are orthogonalised whole. Split them into "
            "separate modules, or pass fused_qkv='whole' to silence this.",
            stacklevel=3,
        )
    return others, fused
