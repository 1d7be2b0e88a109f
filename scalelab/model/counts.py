"""Parameter and FLOP counts of the Llama decoder, as pure functions of its shape.

Parameters (exactly ``sum(p.numel() for p in Llama(shape, V).parameters())``):

    per layer   = d·(H·hd) [wq] + 2·d·(KV·hd) [wk, wv] + (H·hd)·d [wo]
                + 3·d·d_ff [w_gate, w_up, w_down] + 2·d [norm_attn, norm_mlp]
    embedding   = V·d [tok_emb] (+ V·d [lm_head] when untied); the masked-diffusion
                  objective adds the [MASK] row to tok_emb: (V + 1)·d
    total       = n_layers·per_layer + d [norm_out] + embedding
    non_embedding = total - embedding  (Kaplan et al. 2020: blocks + final norm; the
                    untied head counts as embedding)

Kim et al. 2025 (arXiv 2509.14786) name their shapes by the **total, untied** count at the
Llama-3 vocabulary (128,256): 150M -> 154.1M, 300M -> 299.6M, 600M -> 602.5M,
1.4B -> 1.43B. Tied or non-embedding counts do not fit the names (88M/23M for "150M").

Training FLOPs per token (PaLM, Chowdhery et al. 2022, App. B; the same terms as
Chinchilla, Hoffmann et al. 2022, App. F, without the softmax/norm terms):

    flops_per_token = 6·N_matmul + 12·n_layers·n_heads·head_dim·seq_len

    N_matmul = every weight that enters a matmul: the non-embedding matrices plus the
               V·d output head (counted even when tied; the embedding lookup is free).
    6        = 2 FLOPs per multiply-add × (1 forward + 2 backward) passes.
    12·L·H·hd·T = QKᵀ and A·V, 2·T·H·hd multiply-adds each per token per layer, × 2 FLOPs
               × 3 passes. Counted over the full T×T score matrix, as PaLM and
               ``torch.utils.flop_counter`` do; a causal kernel does about half of it.

RMSNorm, RoPE, SwiGLU gating, softmax and the loss are elementwise (O(d) or O(V) per
token, not O(d²)) and omitted, as in PaLM and in ``torch.utils.flop_counter``, which
tests/scalelab/test_counts.py matches exactly.
"""

from __future__ import annotations

from typing import NamedTuple

from scalelab.model.shape import ModelShape

__all__ = ["ParamCounts", "flops_per_token", "matmul_params", "param_counts"]


class ParamCounts(NamedTuple):
    total: int
    """Every trainable parameter, each shared tensor once."""
    non_embedding: int
    """total - embedding: blocks plus the final norm."""
    embedding: int
    """tok_emb (V·d), plus lm_head (V·d) when untied."""


def _layer_params(shape: ModelShape) -> int:
    d, hd = shape.d_model, shape.head_dim
    attn = d * shape.n_heads * hd + 2 * d * shape.n_kv_heads * hd + shape.n_heads * hd * d
    mlp = 3 * d * shape.d_ff
    return attn + mlp + 2 * d


def param_counts(shape: ModelShape, vocab_size: int, *, mask_token: bool = False) -> ParamCounts:
    """Exact parameter counts of ``Llama(shape, vocab_size, objective)``; ``mask_token`` for
    the 'mdm' objective (its embedding has the [MASK] row; a tied head is its first V rows)."""
    non_embedding = shape.n_layers * _layer_params(shape) + shape.d_model
    head = 0 if shape.tie_embeddings else vocab_size * shape.d_model
    embedding = (vocab_size + int(mask_token)) * shape.d_model + head
    return ParamCounts(non_embedding + embedding, non_embedding, embedding)


def matmul_params(shape: ModelShape, vocab_size: int) -> int:
    """Weights used in a matmul per token: block matrices plus the V·d head."""
    d = shape.d_model
    blocks = shape.n_layers * (_layer_params(shape) - 2 * d)
    return blocks + vocab_size * d


def flops_per_token(shape: ModelShape, vocab_size: int, seq_len: int) -> float:
    """Training (forward + backward) FLOPs per token at context ``seq_len`` (PaLM App. B)."""
    attention = 12 * shape.n_layers * shape.n_heads * shape.head_dim * seq_len
    return float(6 * matmul_params(shape, vocab_size) + attention)
