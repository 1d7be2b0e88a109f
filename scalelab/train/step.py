"""One optimizer step's forward/backward with gradient accumulation, and the eval pass.

The loss of a step is the mean token cross-entropy over the *global* batch: each rank
averages over its rows, each micro-batch contributes ``loss / n_micro`` to the gradient,
and DDP averages gradients over ranks (equal row counts), so the gradient equals the
single-process gradient of the same global batch.

The loss is ``lm_loss``: ``model(x, targets=y)``, the chunked cross-entropy from the final
hidden states (``scalelab.model.chunked_loss``: no [B, T, V] fp32 logits). A ``loss_fn``
(logit KD, ``scalelab.distill``) gets the full logits ``model(x)`` instead. A chunk of the
masked-diffusion objective carries per-token weights, (z, x, w): the loss is then
``model(z, targets=x, weights=w)``, the ELBO estimate of ``scalelab.model.masking``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

import torch
from torch import nn

from scalelab.model.chunked_loss import cross_entropy

__all__ = ["Chunk", "cross_entropy", "evaluate", "forward_backward", "lm_loss", "micro_batches"]


Chunk = tuple[torch.Tensor, ...]
"""(x, y): inputs and targets [b, T]; or (z, x, w) with per-token weights w [b, T]."""


def lm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
            weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean loss (fp32 0-d) of ``model`` on inputs x [B, T], targets y [B, T]:
    ``model(x, targets=y)``, the chunked cross-entropy (the train and eval loss); with
    ``weights`` [B, T], the mean of weight × cross-entropy (the masked-diffusion ELBO)."""
    if weights is None:
        return model(x, targets=y)
    return model(x, targets=y, weights=weights)


def micro_batches(*tensors: torch.Tensor, micro: int) -> list[Chunk]:
    """Split [b, T] rows into consecutive chunks of ``micro`` rows (b % micro == 0), each a
    tuple of the tensors' rows."""
    return list(zip(*(t.split(micro) for t in tensors)))


def forward_backward(
    model: nn.Module,
    chunks: list[Chunk],
    autocast: Callable[[], AbstractContextManager],
    loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Accumulate gradients of the mean loss over ``chunks``; returns that mean (detached).

    With DDP, only the last micro-batch synchronises gradients (``no_sync`` before it).
    ``loss_fn(logits, x, y)`` replaces ``lm_loss`` (logit KD, ``scalelab.distill``).
    """
    n = len(chunks)
    total = torch.zeros((), dtype=torch.float32, device=chunks[0][0].device)
    for i, chunk in enumerate(chunks):
        sync = i == n - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if sync else model.no_sync():
            with autocast():
                loss = lm_loss(model, *chunk) if loss_fn is None else loss_fn(model(chunk[0]), *chunk)
            (loss / n).backward()
        total += loss.detach()
    return total / n


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[Chunk],
    autocast: Callable[[], AbstractContextManager],
) -> torch.Tensor:
    """Mean loss over ``batches`` (each already on the device), as a 0-d fp32 tensor."""
    was_training = model.training
    model.eval()
    losses = []
    for chunk in batches:
        with autocast():
            losses.append(lm_loss(model, *chunk))
    model.train(was_training)
    return torch.stack(losses).mean()
