"""Activation checkpointing of transformer blocks (``train.activation_checkpointing``).

Modes (the definitions the memory model in ``scalelab.model`` counts):

- ``none``: autograd saves every activation it needs.
- ``block``: each block runs under ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``:
  only its inputs (the residual stream [B, T, d] and the RoPE table, a buffer) are kept,
  and backward runs the block's forward again.
- ``selective``: the same checkpoint with an op-level policy
  (``create_selective_checkpoint_contexts``): the outputs of the ops in ``SAVED_OPS`` (the
  matmuls of the seven linear projections and the attention kernel, all of its outputs)
  are kept from the forward; every other op of the block (RMSNorm, RoPE, SiLU and the gate
  product, casts, GQA repeats, views) is recomputed in backward. No matmul runs twice.
  Unlike Korthikanti et al. 2022 (arXiv 2205.05198), whose selective mode recomputes the
  attention core: a fused attention kernel never saves the [T, T] scores, so recomputing
  it would save nothing here.

Recomputation repeats the same ops on the same inputs, so the loss and every gradient are
bitwise those of ``none`` (tests/scalelab/test_activation_checkpointing.py).

``apply_activation_checkpointing(model, mode)`` swaps each block's class for a subclass
whose ``forward`` runs the block's own ``forward`` under the checkpoint. Parameter names,
state dicts and the module tree are unchanged (optimizer routing and checkpoints are
unaffected), and FSDP2's ``fully_shard`` (applied after) wraps the checkpointed forward, so
its unshard hooks run around the recomputation.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

__all__ = ["MODES", "SAVED_OPS", "apply_activation_checkpointing"]

MODES = ("none", "block", "selective")


def _ops(*names: str) -> frozenset:
    """The aten overload packets of ``names`` that this torch build has."""
    return frozenset(getattr(torch.ops.aten, n) for n in names if hasattr(torch.ops.aten, n))


SAVED_OPS = _ops(
    "mm", "addmm", "bmm",  # nn.Linear on [B, T, d] inputs dispatches to mm
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
)
"""Ops whose outputs ``selective`` keeps; the rest of a block is recomputed."""


def _policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    packet = getattr(op, "overloadpacket", op)
    return CheckpointPolicy.MUST_SAVE if packet in SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_contexts():
    return create_selective_checkpoint_contexts(_policy)


class _Checkpointed:
    """Mixin placed before a block's class: its forward runs under the checkpoint."""

    _ac_selective: bool = False

    def forward(self, *args: Any) -> Any:
        inner = super().forward  # the block's own forward
        if self._ac_selective:
            return checkpoint(inner, *args, use_reentrant=False, context_fn=_selective_contexts)
        return checkpoint(inner, *args, use_reentrant=False)


@functools.cache
def _checkpointed_class(cls: type) -> type:
    return type(f"Checkpointed{cls.__name__}", (_Checkpointed, cls), {})


def apply_activation_checkpointing(model: nn.Module, mode: str) -> nn.Module:
    """Checkpoint every block of ``model.layers`` per ``mode`` (in place; returns ``model``).

    Call before ``fully_shard`` / DDP / torch.compile. ``none`` leaves the model as it is.
    """
    if mode not in MODES:
        raise ValueError(f"unknown activation_checkpointing {mode!r}; choose one of {MODES}")
    if mode == "none":
        return model
    if any(isinstance(block, _Checkpointed) for block in model.layers):
        raise ValueError("activation checkpointing is already applied to this model")
    for block in model.layers:
        block.__class__ = _checkpointed_class(type(block))
        block._ac_selective = mode == "selective"
    return model
