"""The Llama-style decoder (Touvron et al. 2023; the shapes of Kim et al. 2025, arXiv 2509.14786).

Pre-norm blocks ``x + attn(norm(x))``, ``x + mlp(norm(x))``; RMSNorm; RoPE; causal
``F.scaled_dot_product_attention`` with grouped-query attention; SwiGLU MLP; no biases;
untied embedding and head by default. Logits are returned in fp32; ``model(idx, targets)``
returns the mean cross-entropy without forming them (``scalelab.model.chunked_loss``).

``objective='mdm'``, the masked-diffusion LM (Sahoo et al. 2024, arXiv 2406.07524; Shi et
al. 2024, arXiv 2406.04329), changes three things and nothing else: attention is
bidirectional; ``tok_emb`` has one more row, the [MASK] token (id V = ``mask_id``); and the
head still predicts the V real tokens only (a tied head is tok_emb's first V rows), so the
[MASK] token is never predicted (MDLM's zero-masking parameterisation). Its loss weights each
position's cross-entropy (``model(z, targets=x, weights=w)``: ``scalelab.model.masking``).

Parameter names (optimizer routers and norm records rely on them):

    tok_emb.weight                    [V, d]    embedding
    layers.{i}.norm_attn.weight       [d]       RMSNorm gains (1-D; all contain 'norm')
    layers.{i}.attn.wq.weight         [H·hd, d]
    layers.{i}.attn.wk.weight         [KV·hd, d]
    layers.{i}.attn.wv.weight         [KV·hd, d]
    layers.{i}.attn.wo.weight         [d, H·hd]
    layers.{i}.norm_mlp.weight        [d]
    layers.{i}.mlp.w_gate.weight      [d_ff, d]
    layers.{i}.mlp.w_up.weight        [d_ff, d]
    layers.{i}.mlp.w_down.weight      [d, d_ff]
    norm_out.weight                   [d]
    lm_head.weight                    [V, d]    head (absent from named_parameters when tied)

('mdm': tok_emb.weight is [V + 1, d].)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from scalelab.model import memory
from scalelab.model.chunked_loss import chunked_cross_entropy, cross_entropy
from scalelab.model.layers import RMSNorm, apply_rope, rope_table
from scalelab.model.shape import ModelShape

__all__ = ["Llama"]

#: RoPE positions precomputed at construction; longer inputs compute a table on the fly.
ROPE_CACHE_LEN = 4096


class Attention(nn.Module):
    def __init__(self, shape: ModelShape, causal: bool = True):
        super().__init__()
        d, hd = shape.d_model, shape.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = shape.n_heads, shape.n_kv_heads, hd
        self.causal = causal
        self.wq = nn.Linear(d, shape.n_heads * hd, bias=False)
        self.wk = nn.Linear(d, shape.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(d, shape.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(shape.n_heads * hd, d, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape  # x: [B, T, d]
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, rope), apply_rope(k, rope)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, hd]
        if self.n_kv_heads != self.n_heads:  # GQA: each KV head serves H/KV query heads
            rep = self.n_heads // self.n_kv_heads
            k = k.repeat_interleave(rep, dim=1)  # [B, H, T, hd]
            v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # [B, H, T, hd]
        return self.wo(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class MLP(nn.Module):
    """SwiGLU (Shazeer 2020): w_down(silu(w_gate x) · w_up x)."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.w_gate = nn.Linear(shape.d_model, shape.d_ff, bias=False)
        self.w_up = nn.Linear(shape.d_model, shape.d_ff, bias=False)
        self.w_down = nn.Linear(shape.d_ff, shape.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, d] -> [B, T, d]
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class Block(nn.Module):
    def __init__(self, shape: ModelShape, causal: bool = True):
        super().__init__()
        self.norm_attn = RMSNorm(shape.d_model, shape.norm_eps)
        self.attn = Attention(shape, causal)
        self.norm_mlp = RMSNorm(shape.d_model, shape.norm_eps)
        self.mlp = MLP(shape)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm_attn(x), rope)
        return x + self.mlp(self.norm_mlp(x))


class Llama(nn.Module):
    """``Llama(shape, vocab_size, objective='ar'|'mdm')``; call ``init_weights(seed, std)``
    before training."""

    def __init__(self, shape: ModelShape, vocab_size: int, objective: str = "ar"):
        super().__init__()
        if objective not in ("ar", "mdm"):
            raise ValueError(f"objective must be 'ar' or 'mdm', got {objective!r}")
        self.shape, self.vocab_size, self.objective = shape, vocab_size, objective
        mdm = objective == "mdm"
        self.mask_id = vocab_size if mdm else None  # the [MASK] token's id ('mdm' only)
        self.tok_emb = nn.Embedding(vocab_size + int(mdm), shape.d_model)
        self.layers = nn.ModuleList(Block(shape, causal=not mdm) for _ in range(shape.n_layers))
        self.norm_out = RMSNorm(shape.d_model, shape.norm_eps)
        self.lm_head = nn.Linear(shape.d_model, vocab_size, bias=False)
        if shape.tie_embeddings and not mdm:
            self.lm_head.weight = self.tok_emb.weight
        elif shape.tie_embeddings:  # 'mdm': the head is the embedding's first V rows
            del self.lm_head
            self.lm_head = None
        # Non-persistent: rebuilt from the shape, never checkpointed. fp32 always.
        self.register_buffer("rope", self._rope(ROPE_CACHE_LEN), persistent=False)

    def _rope(self, seq_len: int, device=None) -> torch.Tensor:
        return rope_table(seq_len, self.shape.head_dim, self.shape.rope_theta, device=device)

    def _apply(self, fn, recurse=True):
        """``.to(torch.bfloat16)`` casts floating buffers too; the RoPE table stays fp32
        (a bf16 cos/sin is off by up to ~4e-3), so rebuild it after any cast."""
        super()._apply(fn, recurse)
        if self.rope.dtype != torch.float32:
            self.rope = self._rope(self.rope.shape[0], device=self.rope.device)
        return self

    @torch.no_grad()
    def init_weights(self, seed: int, std: float = 0.02) -> None:
        """Deterministic init from ``torch.Generator().manual_seed(seed)`` on the CPU, so
        the weights are identical on every device, rank and dtype (values are drawn in
        fp32, then cast).

        Matrices and embeddings ~ N(0, std²); the residual output projections ``wo`` and
        ``w_down`` ~ N(0, (std/sqrt(2·n_layers))²), GPT-2's scaled init (Radford et al.
        2019; nanoGPT), so the residual stream's variance does not grow with depth.
        RMSNorm gains = 1. Draw order is ``named_parameters()`` order.
        """
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        scaled = std / math.sqrt(2 * self.shape.n_layers)
        for name, p in self.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0)
                continue
            s = scaled if name.endswith(("attn.wo.weight", "mlp.w_down.weight")) else std
            draw = torch.empty(p.shape, dtype=torch.float32).normal_(0.0, s, generator=gen)
            p.copy_(draw)
        self.rope = self._rope(ROPE_CACHE_LEN, device=self.tok_emb.weight.device)

    def head_weight(self) -> torch.Tensor:
        """The output head's weight [V, d] (tied 'mdm': the embedding's first V rows)."""
        if self.lm_head is None:
            return self.tok_emb.weight[: self.vocab_size]
        return self.lm_head.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None,
                weights: torch.Tensor | None = None) -> torch.Tensor:
        """idx: int64 [B, T] -> logits fp32 [B, T, V].

        With ``targets`` (int64 [B, T]): the mean next-token cross-entropy instead, an fp32
        0-d tensor, computed from the final hidden states chunk by chunk
        (``chunked_cross_entropy``), so no [B, T, V] logits exist; at most
        ``memory.PLAIN_LOSS_MAX_LOGITS`` logits, the plain fp32 cross-entropy of the logits. It is computed here, in
        ``forward``, so that wrappers (DDP, FSDP2's unsharded head, torch.compile) see the
        head weight used inside the module's forward.
        """
        T = idx.shape[1]
        rope = self.rope if T <= self.rope.shape[0] else self._rope(T, device=idx.device)
        x = self.tok_emb(idx)  # [B, T, d]
        for layer in self.layers:
            x = layer(x, rope)
        h = self.norm_out(x)  # [B, T, d]
        w = self.head_weight()  # [V, d]
        if targets is None:
            return F.linear(h, w).float()  # [B, T, V]
        if weights is not None:  # 'mdm': only the masked positions carry a loss
            return _weighted_loss(h.flatten(0, 1), w, targets.flatten(), weights.flatten())
        if targets.numel() * w.shape[0] <= memory.PLAIN_LOSS_MAX_LOGITS:
            return cross_entropy(F.linear(h, w), targets)  # [B, T, V] is small: the plain loss
        return chunked_cross_entropy(h.flatten(0, 1), w, targets.flatten())


@torch.compiler.disable  # a data-dependent row count: outside any compiled graph
def _weighted_loss(h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor,
                   weights: torch.Tensor) -> torch.Tensor:
    """The mean over all n positions of weight x cross-entropy, from the rows whose weight
    is nonzero only: 'mdm' weights are T/k on the k masked positions of a row and 0 on the
    rest, so about half the head's logits (k is uniform on 1..T) were computed to be
    multiplied by 0. h [n, d], w [V, d], targets [n], weights [n]; a 0-d fp32 tensor."""
    n = h.shape[0]
    rows = torch.nonzero(weights, as_tuple=True)[0]  # [m]
    if rows.numel() == 0:
        return h.sum() * 0.0  # nothing masked: a zero loss that keeps the graph
    h_m, t_m, w_m = h.index_select(0, rows), targets.index_select(0, rows), weights.index_select(0, rows)
    scale = rows.numel() / n  # the m-row mean, as a mean over all n
    if n * w.shape[0] <= memory.PLAIN_LOSS_MAX_LOGITS:  # chosen on all n rows, as the memory model
        return cross_entropy(F.linear(h_m, w), t_m, w_m) * scale  # [m, V] is small: the plain loss
    return chunked_cross_entropy(h_m, w, t_m, weights=w_m) * scale

