"""GPU memory of one training process, in bytes: pure arithmetic on the shape and setup.

    peak = params + grads + optimizer state + runtime
         + max(activations + weight copies + loss,   during forward/backward
               optimizer-step temporaries)           during clip + step (activations freed)

Symbols: P parameters (``counts.param_counts``), M the hidden matrices (``matmul_params``
minus the V·d head; Muon's share), L layers, d width, f = d_ff, H heads, hd = d/H, V
vocabulary, n = b·T tokens of one micro-batch of b sequences, c = min(chunk, n), W ranks.

**Sharded state** (ZeRO-3, Rajbhandari et al. 2020, arXiv 1910.02054): with
``parallelism: fsdp`` and W > 1, params, grads and optimizer state are divided by W;
DDP (and one process) keeps them whole, and DDP adds its gradient buckets (one more copy
of the grads: ``gradient_as_bucket_view`` is off). Bytes per parameter, s = stored bytes
(2 for 'bf16-pure', else 4):

    params s · grads s · adamw 2s (torch: moments in the param dtype) · sr-adamw 8 (fp32
    moments) · muon 4 on M (fp32 momentum) + 8 on P - M (its AdamW group) · scion 4

**Activations** (Korthikanti et al. 2022, arXiv 2205.05198, counted tensor by tensor for
``scalelab.model.llama`` as autograd saves them; a = bytes of the matmul dtype, r = bytes
of the residual stream, k_q = 3, k_m = 2 when autocast casts the fp32 norm output once
per consumer (wq, wk, wv; w_gate, w_up), else k_q = k_m = 1):

    per block  = 2 × (8·n·d + 4·n)            RMSNorm: fp32 input and normalised x, 1/rms
               + (k_q + k_m)·a·n·d            the norm outputs the projections read
               + 4·a·n·d + 4·n·H              SDPA: q, k, v (GQA-repeated to H heads), out;
                                              log-sum-exp fp32 [b, H, T] (flash/CPU kernels)
               + 4·a·n·f                      SwiGLU: gate, silu(gate), up, their product
    outside    = 8·n + 8·n·d + 4·n            token ids (int64), the final RMSNorm
                 (+ 12·n for 'mdm': its clean targets and per-token ELBO weights)
    fp32 (a = r = 4): 40·n·d + 16·n·f; bf16-autocast (a = 2, r = 4): 34·n·d + 8·n·f;
    bf16 residual (bf16-pure, or FSDP all-gathering in bf16; a = r = 2): 28·n·d + 8·n·f.

RoPE saves only its cos/sin table (a buffer): the rotated q, k are what SDPA saves.
Activation checkpointing (``scalelab.model.checkpointing``) keeps per block:

    block:     r·n·d                          the block input
    selective: r·n·d + a·n·(3d + 2·KV·hd + 2f) + a·n·d + 4·n·H
               the input, the seven projection outputs, SDPA's output and log-sum-exp

plus, during backward, one block's recomputed activations (the 'none' per-block term).
Eager autograd; torch.compile's partitioner saves less (it recomputes elementwise ops), so
with ``compile`` this is an upper bound.

**Weight copies**: under 'bf16-autocast' with fp32 compute weights, autocast's bf16 cast
of each block matrix stays in autocast's cache to the end of the forward, where the loss
runs, and without checkpointing is saved for backward (2·M). FSDP's unsharded working set (compute
bytes p): the root (embedding, head, final norm: R) stays unsharded, with its gradient,
through forward and backward; a block and the prefetched next one are all-gathered, and a
block's gradient is unsharded then cast to fp32 for the reduce-scatter:
p·(2·R + 3·Bk) + 4·Bk, Bk the parameters of one block.

**Loss** (``scalelab.model.chunked_loss``): the chunk's logits in the compute dtype and
fp32, the log-sum-exp temporary and the cast gradient, c·V·(2·a + 8); the fp32 head-gradient
accumulator with one chunk's partial (later its cast, saved) and the head's cast,
V·d·(4 + 2·a); dh (saved) and h's cast, 2·a·n·d. Saved for backward: a·(n + V)·d. Plain fp32 logits (logit KD,
``distill.kd_weight`` > 0): 16·n·V (logits, their log-softmax, and its gradient in and out); with the KD terms (teacher
log-probs, the tempered log-softmaxes) 32·n·V; the teachers' own weights are not counted.

**Step temporaries**: torch AdamW (foreach) makes one parameter-sized temporary, s·P; the
per-parameter optimizers (sr-adamw, muon, scion) about three fp32 copies of the largest
tensor, the V·d table, 12·V·d. Both /W when sharded.

**Runtime**: ``RUNTIME_GIB`` for the CUDA context, cuBLAS/cuDNN workspaces and NCCL
buffers (not measured here). Plans fit a run when peak ≤ ``FIT_FRACTION`` of the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from scalelab.model.counts import matmul_params, param_counts
from scalelab.model.shape import ModelShape

__all__ = [
    "CHUNK_TOKENS",
    "FIT_FRACTION",
    "GIB",
    "OTHER_STATE_BYTES",
    "PLAIN_LOSS_MAX_LOGITS",
    "RUNTIME_GIB",
    "MemoryEstimate",
    "Numerics",
    "Setup",
    "activation_bytes",
    "block_activation_bytes",
    "estimate",
    "loss_bytes",
    "loss_saved_bytes",
    "numerics",
    "saved_activation_bytes",
]

GIB = 2**30
CHUNK_TOKENS = 1024
"""Tokens per chunk of the chunked loss (``scalelab.model.chunked_loss`` uses this): its
[c, V] logits are the largest loss buffer (at V = 128,256: 0.26 GB in bf16, 0.5 GB per fp32
copy), and a [1024, d] x [d, V] matmul still keeps a GPU busy."""
PLAIN_LOSS_MAX_LOGITS = 2**24
"""At most this many logits (n·V; 64 MiB in fp32) the model's loss is the plain one, full
fp32 logits and ``F.cross_entropy`` (``Llama.forward``): chunking saves nothing worth having
there, and small CPU runs (the twin's n·V is 524,288) keep the exact numbers they were
calibrated with. Above it (every run of sweeps/200M_tokens.yaml) the loss is chunked."""
RUNTIME_GIB = 1.5
"""CUDA context (~0.5 GiB), cuBLAS/cuDNN workspaces and NCCL buffers, per process."""
FIT_FRACTION = 0.9
"""A run fits a GPU of G GiB when its peak is at most 0.9·G: the 10% left over is the
safety margin for allocator fragmentation and what the model leaves out."""

LossKind = Literal["chunked", "plain", "kd"]


@dataclass(frozen=True, kw_only=True)
class Setup:
    """What the memory depends on besides the shape (the run's train/optim settings)."""

    precision: Literal["fp32", "bf16-autocast", "bf16-pure", "fp8", "mxfp8", "mxfp4", "nvfp4"] = "fp32"
    """``train.precision``. 'fp8', 'mxfp8', 'mxfp4', 'nvfp4' are counted as fp32 (s = a = r = 4):
    fp32 master weights, grads and optimizer state, and the emulated GEMMs
    (``scalelab.quant.linear``) save the fp32 layer inputs for backward, as fp32 does (fp8:
    their fp32 dequantized copies instead, plus one of each block matrix, not counted), and
    transient quantized copies of one layer's operands (not counted). A real low-precision
    kernel would save its quantized operands (1 byte an element for FP8, 0.5625 for NVFP4: 4
    bits and an 8-bit scale per 16): that smaller footprint is not what this model predicts."""
    optimizer: str = "adamw"
    """``optim.name``: 'adamw', 'sr-adamw', 'muon' or 'scion' (others: ``OTHER_STATE_BYTES``)."""
    parallelism: Literal["ddp", "fsdp"] = "ddp"
    """``train.parallelism`` (only matters when world_size > 1)."""
    fsdp_param_dtype: Literal["auto", "bf16", "fp32"] = "auto"
    """``train.fsdp_param_dtype``: the dtype FSDP all-gathers parameters in."""
    activation_checkpointing: Literal["none", "block", "selective"] = "none"
    """``train.activation_checkpointing``."""
    world_size: int = 1
    """Processes (one GPU each)."""
    loss: LossKind = "chunked"
    """'chunked' (the default loss), 'plain' fp32 logits, 'kd' plain plus logit-KD terms."""
    chunk_tokens: int = CHUNK_TOKENS
    """Tokens per chunk of the chunked loss."""
    objective: Literal["ar", "mdm"] = "ar"
    """``model.objective``. 'mdm' (masked diffusion) saves what 'ar' saves: its bidirectional
    attention keeps the same SDPA tensors (q, k, v, out, lse; neither objective has a KV
    cache in training), and its loss is the chunked one with per-token weights. It adds the
    clean targets beside the masked ids (int64 [n]) and the weights (fp32 [n]): 12·n bytes.
    Its [MASK] embedding row (d parameters) is not counted."""


@dataclass(frozen=True)
class Numerics:
    """Bytes per element of the tensors the estimate counts (see ``numerics``)."""

    stored: int
    """s: stored parameters (and grads, torch AdamW moments)."""
    compute: int
    """a: matmul inputs and outputs."""
    residual: int
    """r: the residual stream (block inputs)."""
    fsdp_param: int
    """p: all-gathered parameters under FSDP (0 when not sharded)."""
    norm_copies: tuple[int, int]
    """(k_q, k_m): saved copies of the attention and MLP norm outputs."""
    autocast_weights: bool
    """Autocast's bf16 copies of fp32 block matrices are saved for backward."""
    shards: int
    """Divisor of params, grads and optimizer state (W under FSDP, else 1)."""
    ddp_buckets: bool
    """DDP's gradient buckets exist (W > 1, not sharded)."""


def numerics(setup: Setup) -> Numerics:
    """Dtypes implied by precision, parallelism and FSDP's param dtype (as the trainer runs
    them: autocast in 'bf16-autocast'; FSDP's MixedPrecisionPolicy casts parameters to p, the
    rule of ``scalelab.train.parallel.fsdp.param_dtype_for``, so a bf16 p makes the embedding output,
    hence the residual stream, bf16)."""
    stored = 2 if setup.precision == "bf16-pure" else 4
    autocast = setup.precision == "bf16-autocast"
    sharded = setup.parallelism == "fsdp" and setup.world_size > 1
    p = 0
    if sharded:
        auto = 2 if autocast else stored
        p = {"auto": auto, "bf16": 2, "fp32": 4}[setup.fsdp_param_dtype]
    weights = p or stored  # the dtype the forward's matmuls read weights in
    compute = 2 if autocast or weights == 2 else 4
    residual = weights
    per_consumer = autocast and residual == 4  # fp32 norm output cast once per projection
    return Numerics(
        stored=stored, compute=compute, residual=residual, fsdp_param=p,
        norm_copies=(3, 2) if per_consumer else (1, 1),
        autocast_weights=autocast and weights == 4,
        shards=setup.world_size if sharded else 1,
        ddp_buckets=setup.world_size > 1 and not sharded,
    )


def block_activation_bytes(shape: ModelShape, batch: int, seq_len: int, num: Numerics) -> int:
    """Bytes one block saves for backward without checkpointing (module docstring)."""
    n, d, f, H = batch * seq_len, shape.d_model, shape.d_ff, shape.n_heads
    a = num.compute
    norms = 2 * (8 * n * d + 4 * n)  # fp32 input and normalised x [n, d], 1/rms [n]
    norm_outputs = sum(num.norm_copies) * a * n * d
    attention = 4 * a * n * d + 4 * n * H  # q, k, v, out [n, d]; lse fp32 [b, H, T]
    mlp = 4 * a * n * f  # gate, silu(gate), up, product [n, f]
    return norms + norm_outputs + attention + mlp


def _kept_by_checkpoint(shape: ModelShape, batch: int, seq_len: int, num: Numerics,
                        mode: str) -> int:
    """Bytes a checkpointed block keeps from its forward ('block' or 'selective')."""
    n, d, f, H = batch * seq_len, shape.d_model, shape.d_ff, shape.n_heads
    kept = num.residual * n * d  # the block input [n, d]
    if mode == "selective":
        kv = shape.n_kv_heads * shape.head_dim
        projections = num.compute * n * (3 * d + 2 * kv + 2 * f)  # wq wo w_down, wk wv, gate up
        kept += projections + num.compute * n * d + 4 * n * H  # + SDPA out, lse
    return kept


def saved_activation_bytes(shape: ModelShape, batch: int, seq_len: int, setup: Setup) -> int:
    """Bytes the blocks, the embedding and the final norm keep for backward once the forward
    is done (the loss's own buffers are ``loss_bytes``)."""
    num = numerics(setup)
    n, d = batch * seq_len, shape.d_model
    mode = setup.activation_checkpointing
    if mode == "none":
        per_block = block_activation_bytes(shape, batch, seq_len, num)
    elif mode in ("block", "selective"):
        per_block = _kept_by_checkpoint(shape, batch, seq_len, num, mode)
    else:
        raise ValueError(f"unknown activation_checkpointing {mode!r}")
    outside = 8 * n + 8 * n * d + 4 * n  # token ids int64; final RMSNorm
    if setup.objective == "mdm":
        outside += 12 * n  # clean targets int64 and ELBO weights fp32 [n]
    return shape.n_layers * per_block + outside


def activation_bytes(shape: ModelShape, batch: int, seq_len: int, setup: Setup) -> int:
    """Peak activation bytes: the saved ones, plus with checkpointing one block's
    activations recomputed during backward."""
    saved = saved_activation_bytes(shape, batch, seq_len, setup)
    if setup.activation_checkpointing == "none":
        return saved
    return saved + block_activation_bytes(shape, batch, seq_len, numerics(setup))


def loss_saved_bytes(shape: ModelShape, vocab: int, batch: int, seq_len: int,
                     setup: Setup) -> int:
    """Bytes the chunked loss saves for backward: its gradients dh [n, d] and dw [V, d] in
    the compute dtype."""
    return numerics(setup).compute * shape.d_model * (batch * seq_len + vocab)


def loss_bytes(shape: ModelShape, vocab: int, batch: int, seq_len: int, setup: Setup) -> int:
    """Peak bytes of the loss computation (module docstring, **Loss**)."""
    n, d, a = batch * seq_len, shape.d_model, numerics(setup).compute
    if setup.loss == "plain" or n * vocab <= PLAIN_LOSS_MAX_LOGITS:
        return 16 * n * vocab
    if setup.loss == "kd":
        return 32 * n * vocab
    c = min(setup.chunk_tokens, n)
    saved = loss_saved_bytes(shape, vocab, batch, seq_len, setup)  # dh, dw
    return saved + c * vocab * (2 * a + 8) + vocab * d * (4 + a) + a * n * d


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """Bytes per GPU (per process) of one training run; ``peak`` is what must fit."""

    params: int
    grads: int
    """Gradients, plus DDP's buckets."""
    optimizer: int
    activations: int
    weight_copies: int
    """Autocast's saved bf16 weight casts and FSDP's unsharded working set."""
    loss: int
    step: int
    """Temporaries of clipping and the optimizer step (activations are freed by then)."""
    runtime: int

    @property
    def peak(self) -> int:
        forward_backward = self.activations + self.weight_copies + self.loss
        return (self.params + self.grads + self.optimizer + self.runtime
                + max(forward_backward, self.step))

    @property
    def peak_gib(self) -> float:
        return self.peak / GIB

    def gib(self) -> dict[str, float]:
        """Every term and the peak in GiB (for logs and reports)."""
        out = {f.name: getattr(self, f.name) / GIB for f in fields(self)}
        return {**out, "peak": self.peak_gib}


_STATE_BYTES = {"sr-adamw": 8, "scion": 4}
"""Optimizer state bytes per parameter that do not depend on the dtype (fp32 buffers)."""
OTHER_STATE_BYTES = 8
"""An optimizer without a rule here (a registered plug-in): two fp32 moments, as AdamW's."""


def _optimizer_bytes(shape: ModelShape, vocab: int, name: str, stored: int) -> int:
    total = param_counts(shape, vocab).total
    if name == "adamw":
        return 2 * stored * total
    if name == "muon":
        hidden = matmul_params(shape, vocab) - vocab * shape.d_model
        return 4 * hidden + 8 * (total - hidden)
    return _STATE_BYTES.get(name, OTHER_STATE_BYTES) * total


def _fsdp_working_set(shape: ModelShape, vocab: int, p: int) -> int:
    counts = param_counts(shape, vocab)
    root = counts.embedding + shape.d_model  # embedding and head tables, final norm
    block = (counts.non_embedding - shape.d_model) // shape.n_layers
    return p * (2 * root + 3 * block) + 4 * block


def estimate(shape: ModelShape, vocab: int, batch: int, seq_len: int, setup: Setup) -> MemoryEstimate:
    """Bytes per GPU of training ``shape`` on micro-batches of ``batch`` sequences."""
    num = numerics(setup)
    total = param_counts(shape, vocab).total
    s, w = num.stored, num.shards
    grads = s * total // w + (s * total if num.ddp_buckets else 0)
    copies = 0
    if num.autocast_weights:
        copies += 2 * (matmul_params(shape, vocab) - vocab * shape.d_model)
    if num.fsdp_param:
        copies += _fsdp_working_set(shape, vocab, num.fsdp_param)
    if setup.optimizer == "adamw":
        step = s * total // w
    else:
        step = 3 * 4 * vocab * shape.d_model // w
    return MemoryEstimate(
        params=s * total // w,
        grads=grads,
        optimizer=_optimizer_bytes(shape, vocab, setup.optimizer, s) // w,
        activations=activation_bytes(shape, batch, seq_len, setup),
        weight_copies=copies,
        loss=loss_bytes(shape, vocab, batch, seq_len, setup),
        step=step,
        runtime=int(RUNTIME_GIB * GIB),
    )
