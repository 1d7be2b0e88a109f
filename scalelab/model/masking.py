"""Masking draws of the masked-diffusion objective ('mdm') and the ELBO weights they carry.

The model. A clean sequence x of T tokens is corrupted by the absorbing ("masking") forward
process with the linear schedule alpha_t = 1 - t: at time t in (0, 1] each token is
replaced by [MASK] independently with probability t (z_t). The denoiser sees z_t through
bidirectional attention and predicts every masked token. The continuous-time ELBO (Sahoo
et al. 2024, MDLM, arXiv 2406.07524, eq. 10; Shi et al. 2024, MD4, arXiv 2406.04329,
eq. 5) bounds the NLL of x:

    -log p(x) <= ELBO(x) = integral_0^1 (1/t) E_{z_t}[ sum_{i masked} -log p(x_i | z_t) ] dt

(nats per sequence; scalelab reports it per token, divided by T).

The estimator. Given that k of the T tokens are masked, the masked set is uniform over the
k-subsets, and P(k | t) = C(T, k) t^k (1 - t)^(T - k), whose integral against 1/t is
C(T, k) B(k, T - k + 1) = 1/k. So t integrates out exactly:

    ELBO(x) / T = E_{k ~ U{1..T}} E_{M: |M| = k}[ (1/k) sum_{i in M} -log p(x_i | x with M masked) ]

the same bound written over the number of masked tokens (the "any-order autoregressive"
form; Ou et al. 2024, RADD, arXiv 2406.03736, Theorem 2). scalelab draws the masking ratio
per sequence as k/T with k uniform on 1..T and masks exactly k tokens: a token's weight is
T/k, the inverse of its sequence's masking ratio. It is the 1/t-weighted estimator with t
integrated out given k (Rao-Blackwellised), so its expectation is the same ELBO and its
weights are bounded by T: the 1/t form has weights up to 1/t_min, and a sequence drawn at
t = 1e-4 with one masked token adds ~50 nats to a step's loss, a spike that would end a run
as DIVERGED. tests/scalelab/test_mdm.py checks the identity on a 2-token vocabulary by
enumerating every mask, and against the t-integral in closed form.

Determinism. Every draw comes from a CPU ``torch.Generator`` seeded with a 64-bit key of
integers (``optim.stochastic_rounding.sr_key``, SplitMix64), for the whole *global* batch,
then sliced to this rank's rows: masks are the same on every device, rank count and
resume.

- training step ``i``: key (seed, TRAIN, i), seed the run's init seed (members differ);
- validation batch ``b``: key (EVAL_SEED, EVAL, b), the same at every eval of every run
  (common random numbers: two runs, or two evals of one run, are compared on identical
  masked inputs). Its K draws are stratified per sequence: draw j of a row takes the ratio
  q = (s_j + u_j) / K with s a random permutation of 0..K-1, so every row covers the whole
  range of ratios, and each draw alone is still an unbiased estimate.

A draw returns (z, weights): z [b, T] int64 with the masked positions set to ``mask_id``,
weights [b, T] fp32 = (T / k) on masked positions and 0 elsewhere; the loss is the mean of
weight × cross-entropy over the b·T positions (``Llama.forward(z, targets=x, weights=w)``).
"""

from __future__ import annotations

import torch

from optim.stochastic_rounding import sr_key

__all__ = ["EVAL_SEED", "MaskDraw", "eval_draws", "mask_positions", "train_draw"]

TRAIN, EVAL = 1, 2  # key purposes
EVAL_SEED = 0
"""The seed of the validation draws: one set for every run (common random numbers)."""

MaskDraw = tuple[torch.Tensor, torch.Tensor]
"""(z [b, T] int64 masked input, weights [b, T] fp32)."""


def _generator(seed: int, purpose: int, index: int) -> torch.Generator:
    key = sr_key(seed, purpose, index) & (2**63 - 1)
    return torch.Generator(device="cpu").manual_seed(key)


def mask_positions(counts: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Boolean masks with exactly ``counts[...]`` True per row: the positions of the
    ``counts`` smallest ``scores`` (uniform random scores give a uniform k-subset).

    counts: int64 [...]; scores: float [..., T] -> bool [..., T]."""
    ranks = scores.argsort(dim=-1).argsort(dim=-1)  # [..., T]: each position's rank
    return ranks < counts[..., None]


def _apply(clean: torch.Tensor, masked: torch.Tensor, counts: torch.Tensor,
           mask_id: int) -> MaskDraw:
    """clean [b, T], masked bool [b, T] (on CPU), counts [b] -> (z, weights) on clean's device."""
    T = clean.shape[1]
    masked = masked.to(clean.device)
    z = torch.where(masked, torch.full_like(clean, mask_id), clean)  # [b, T]
    scale = (T / counts.to(torch.float64)).to(torch.float32).to(clean.device)  # [b]
    weights = masked.to(torch.float32) * scale[:, None]  # [b, T]
    return z, weights


def train_draw(clean: torch.Tensor, *, seed: int, step: int, rows: slice, global_rows: int,
               mask_id: int) -> MaskDraw:
    """The masking of training step ``step`` for this rank's ``rows`` of the global batch
    (``global_rows`` sequences). clean: int64 [b, T], b = the rows' count."""
    T = clean.shape[1]
    gen = _generator(seed, TRAIN, step)
    ratio = torch.rand(global_rows, generator=gen, dtype=torch.float64)  # [G] in [0, 1)
    counts = (1 + (ratio * T).floor().to(torch.int64)).clamp_(max=T)  # [G] uniform on 1..T
    scores = torch.rand(global_rows, T, generator=gen)  # [G, T]
    masked = mask_positions(counts, scores)
    return _apply(clean, masked[rows], counts[rows], mask_id)


def eval_draws(clean: torch.Tensor, *, batch_index: int, n_draws: int, rows: slice,
               global_rows: int, mask_id: int) -> list[MaskDraw]:
    """The ``n_draws`` stratified maskings of validation batch ``batch_index`` for this
    rank's ``rows`` (same at every eval and in every run). clean: int64 [b, T]."""
    T, K = clean.shape[1], n_draws
    gen = _generator(EVAL_SEED, EVAL, batch_index)
    strata = torch.rand(global_rows, K, generator=gen).argsort(dim=1)  # [G, K] a permutation
    u = torch.rand(global_rows, K, generator=gen, dtype=torch.float64)  # [G, K]
    ratio = (strata.to(torch.float64) + u) / K  # [G, K] in [0, 1), stratified per row
    counts = (1 + (ratio * T).floor().to(torch.int64)).clamp_(max=T)  # [G, K] on 1..T
    scores = torch.rand(global_rows, K, T, generator=gen)  # [G, K, T]
    masked = mask_positions(counts, scores)  # [G, K, T]
    return [_apply(clean, masked[rows, j], counts[rows, j], mask_id) for j in range(K)]
