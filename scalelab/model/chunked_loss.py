"""Cross-entropy through the output head, chunked over tokens: never a [B·T, V] fp32 tensor.

``chunked_cross_entropy(h, w, targets)`` equals ``F.cross_entropy((h @ w.T).float(),
targets)`` (mean over tokens) and its gradients w.r.t. ``h`` [n, d] and ``w`` [V, d]; with
``weights`` [n] (the masked-diffusion loss), the mean of weight × cross-entropy, each row of
g below scaled by its weight. The
plain loss holds fp32 logits, their log-softmax and their gradient, each [n, V]: at
n = 16·4096 tokens and V = 128,256 that is 34 GB apiece. Here the tokens go through in
chunks of ``chunk_tokens`` rows; per chunk:

    z = h_c @ w.T                    [c, V]  compute dtype (bf16 under autocast)
    z32 = float(z)                   [c, V]  fp32, for the log-sum-exp
    loss_c = lse(z32) - z32[target]  [c]
    g = (softmax(z32) - onehot) / n  [c, V]  d mean / d z, in place of z32, cast to the
                                             compute dtype as autograd would
    dh_c = g @ w                     [c, d]
    dw += float(g.T @ h_c)           [V, d]  fp32 accumulator over chunks

The gradients are computed in the forward pass, chunk by chunk (the fused
linear-cross-entropy of Liger-Kernel, Hsu et al. 2024, arXiv 2410.10989), and backward
only scales them by the incoming gradient of the scalar loss: the logits are never
recomputed, so the head costs the same three [n, d] x [d, V] matmuls as the plain loss.
Saved for backward: dh [n, d] and dw [V, d] in the compute dtype, nothing of size n·V.
Peak extra memory: about (2·a + 8)·c·V bytes for the chunk (a = compute-dtype bytes) plus
the [V, d] accumulator (``scalelab.model.memory`` counts it).

Every op is deterministic (matmuls, a gather, an index write of one element per row), so
a run resumes bit-identically. Under ``torch.autocast`` the compute dtype is the autocast
dtype (h and w are cast once, as ``nn.Linear`` under autocast would); otherwise h's. Every
target counts (no ignore_index; scalelab never pads). The loop runs eagerly, also inside
``torch.compile`` (``torch.compiler.disable``: it would unroll n / c chunks into the graph).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from scalelab.model.memory import CHUNK_TOKENS

__all__ = ["CHUNK_TOKENS", "chunked_cross_entropy", "cross_entropy"]


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                  weights: torch.Tensor | None = None) -> torch.Tensor:
    """The plain loss: mean next-token cross-entropy in fp32 of full logits [B, T, V];
    targets [B, T] (int64); with ``weights`` (fp32, B·T of them), the mean of weight ×
    cross-entropy. What ``chunked_cross_entropy`` equals without the logits."""
    flat = logits.float().reshape(-1, logits.shape[-1])  # [B·T, V]
    if weights is None:
        return F.cross_entropy(flat, targets.reshape(-1))
    per_token = F.cross_entropy(flat, targets.reshape(-1), reduction="none")  # [B·T]
    return (per_token * weights.reshape(-1).to(per_token.dtype)).mean()


@torch.compiler.disable
def chunked_cross_entropy(
    h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, chunk_tokens: int = CHUNK_TOKENS,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean cross-entropy of logits ``h @ w.T`` against ``targets``: a 0-d fp32 tensor (fp64
    for fp64 inputs); with ``weights``, the mean of weight × cross-entropy.

    h: [n, d] final hidden states; w: [V, d] output-head weight; targets: [n] int64;
    weights: [n] or None (not differentiated). Differentiable w.r.t. h and w (the gradients
    are computed here, chunk by chunk).
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    device = h.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
    h, w = h.to(dtype), w.to(dtype)  # the casts nn.Linear would make under autocast
    with torch.autocast(device, enabled=False):
        if weights is not None:
            weights = weights.detach().to(torch.promote_types(h.dtype, torch.float32))
        if torch.is_grad_enabled() and (h.requires_grad or w.requires_grad):
            return _ChunkedCrossEntropy.apply(h, w, targets, chunk_tokens, weights)
        return _chunked(h, w, targets, chunk_tokens, False, False, weights)[0]


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, targets, chunk_tokens, weights):
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        loss, dh, dw = _chunked(h, w, targets, chunk_tokens, need_h, need_w, weights)
        ctx.save_for_backward(dh, dw)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        dh, dw = ctx.saved_tensors  # the gradients of the mean loss itself
        grad_h = dh * grad_loss if dh is not None else None
        grad_w = dw * grad_loss if dw is not None else None
        return grad_h, grad_w, None, None, None


def _chunked(
    h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, chunk: int, need_h: bool,
    need_w: bool, weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(mean loss [], dh [n, d] or None, dw [V, d] or None). The loss and the sums are fp32
    (fp64 for fp64 inputs); dh and dw come back in h's and w's dtype. ``weights`` [n] (in
    the accumulation dtype) scale each row's loss and its gradient."""
    n = h.shape[0]  # h: [n, d], w: [V, d], targets: [n]
    if targets.shape != (n,):
        raise ValueError(f"targets {tuple(targets.shape)} do not match h {tuple(h.shape)}")
    if weights is not None and weights.shape != (n,):
        raise ValueError(f"weights {tuple(weights.shape)} do not match h {tuple(h.shape)}")
    acc = torch.promote_types(h.dtype, torch.float32)  # fp32 (fp64 for gradcheck)
    total = torch.zeros((), dtype=acc, device=h.device)
    dh = torch.empty_like(h) if need_h else None  # [n, d]
    dw = torch.zeros(w.shape, dtype=acc, device=w.device) if need_w else None
    for start in range(0, n, chunk):
        h_c, t_c = h[start:start + chunk], targets[start:start + chunk]  # [c, d], [c]
        z = (h_c @ w.T).to(acc)  # [c, V] fp32 (the matmul's own output when h is fp32)
        lse = torch.logsumexp(z, dim=1)  # [c]
        ce = lse - z.gather(1, t_c[:, None]).squeeze(1)  # [c]
        w_c = None if weights is None else weights[start:start + chunk]  # [c]
        total += (ce if w_c is None else ce * w_c).sum()
        if dh is None and dw is None:
            continue
        g = z.sub_(lse[:, None]).exp_()  # [c, V] softmax, in place of z
        rows = torch.arange(g.shape[0], device=g.device)
        g[rows, t_c] -= 1.0  # softmax - onehot
        g = g.mul_(1.0 / n) if w_c is None else g.mul_((w_c / n)[:, None])
        g = g.to(h.dtype)  # [c, V] d mean / d z, in the compute dtype
        if dh is not None:
            torch.mm(g, w, out=dh[start:start + chunk])  # [c, d]
        if dw is not None:
            dw += g.T @ h_c  # [V, d], summed in fp32
    return total / n, dh, (dw.to(w.dtype) if dw is not None else None)
