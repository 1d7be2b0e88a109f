"""Derived quantities of a run: N, U, E, D, steps, FLOPs, warmup. Pure: no I/O.

Computed in this one place, from the config plus two facts that come
from the dataset when it is on this machine (or from the plan when it is not):
``vocab_size`` and ``train_tokens_available`` (the size of the training split).

Token accounting (Kim et al. 2025 count U in predicted tokens: "200M" = 800 steps × 64
sequences × 4096 tokens = 209,715,200):

* a training sequence reads ``seq_len + 1`` consecutive tokens (inputs and shifted
  targets) and trains on ``seq_len`` of them; sequences are disjoint windows of the split;
* ``unique_sequences = floor(U / seq_len)``; U is rounded down to whole sequences;
* ``total_sequences = floor(unique_sequences · E)`` (E exact as written in decimal), and
  ``steps = floor(total_sequences / batch_size)``: D = U·E rounded **down to whole steps**,
  so ``total_tokens = steps · batch_size · seq_len`` and the effective
  ``epochs = total_tokens / unique_tokens`` may fall a fraction of a step short of E.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

from scalelab.config import RunConfig
from scalelab.errors import UserError
from scalelab.model.counts import flops_per_token as _flops_per_token
from scalelab.model.counts import param_counts
from scalelab.model.presets import resolve_shape

__all__ = [
    "Derived",
    "derive",
    "max_unique_sequences",
    "split_batch",
    "total_sequences",
    "unique_sequences",
]


@dataclass(frozen=True, kw_only=True)
class Derived:
    """What a run's config implies. Written into the run's config.yaml."""

    n_params: int
    """N: total trainable parameters (untied embedding and head both count)."""
    n_params_non_embedding: int
    """N without the embedding and head tables (Kaplan et al. 2020)."""
    vocab_size: int
    unique_tokens: int
    """U: unique training tokens (targets), a whole number of sequences."""
    epochs: float
    """Effective E = total_tokens / unique_tokens (≤ the configured epochs); with
    distillation, the passes over the *real* U (teacher tokens are extra)."""
    total_tokens: int
    """D = steps · tokens_per_step: U·E rounded down to whole steps."""
    tokens_per_step: int
    """batch_size · seq_len (global, all ranks and accumulation steps)."""
    steps: int
    flops_per_token: float
    """Training FLOPs per token, 6·N_matmul + 12·L·H·hd·T (scalelab.model.counts)."""
    flops: float
    """C = flops_per_token · total_tokens."""
    warmup_steps: int

    def to_dict(self) -> dict:
        return asdict(self)


def max_unique_sequences(train_tokens_available: int, seq_len: int) -> int:
    """Disjoint windows of seq_len + 1 tokens that fit in the training split."""
    return train_tokens_available // (seq_len + 1)


def unique_sequences(
    unique_tokens: int | None, seq_len: int, train_tokens_available: int | None
) -> int:
    """Sequences in the U budget: floor(U / seq_len), or every window of the split when
    U is None. Errors name ``data.unique_tokens``."""
    if seq_len < 1:
        raise UserError(f"must be >= 1, got {seq_len}", key="data.seq_len")
    available = None
    if train_tokens_available is not None:
        available = max_unique_sequences(train_tokens_available, seq_len)
    if unique_tokens is None:
        if available is None:
            raise UserError(
                "is null (use the whole training split) but the split's size is unknown here; "
                "give unique_tokens explicitly",
                key="data.unique_tokens",
            )
        n = available
    else:
        if unique_tokens < seq_len:
            raise UserError(
                f"{unique_tokens} is less than one sequence (data.seq_len={seq_len})",
                key="data.unique_tokens",
            )
        n = unique_tokens // seq_len
        if available is not None and n > available:
            raise UserError(
                f"{unique_tokens} tokens = {n} sequences of {seq_len}, but the training split "
                f"holds only {available} ({available * seq_len} tokens)",
                key="data.unique_tokens",
            )
    if n < 1:
        raise UserError(
            f"the training split holds no whole sequence of {seq_len + 1} tokens",
            key="data.seq_len",
        )
    return n


def total_sequences(n_unique: int, epochs: float) -> int:
    """floor(n_unique · E), with E taken exactly as written (0.29 is 29/100, not 0.2899…)."""
    if not (isinstance(epochs, (int, float)) and math.isfinite(epochs) and epochs > 0):
        raise UserError(f"must be a positive number, got {epochs!r}", key="data.epochs")
    return int(Decimal(n_unique) * Decimal(repr(float(epochs))))


def _warmup_steps(warmup: float, steps: int) -> int:
    """warmup < 1: a fraction of steps (rounded); warmup >= 1: a whole step count."""
    if warmup < 0:
        raise UserError(f"must be >= 0, got {warmup}", key="train.warmup")
    if warmup < 1:
        return round(warmup * steps)
    if not float(warmup).is_integer():
        raise UserError(f"a step count (>= 1) must be whole, got {warmup}", key="train.warmup")
    if warmup > steps:
        raise UserError(
            f"{int(warmup)} warmup steps exceed the run's {steps} steps", key="train.warmup"
        )
    return int(warmup)


def derive(
    cfg: RunConfig,
    *,
    vocab_size: int | None = None,
    train_tokens_available: int | None = None,
) -> Derived:
    """N, U, E, D, steps, FLOPs and warmup of ``cfg``.

    ``vocab_size``: cfg.data.vocab_size if set, else this argument (the dataset header's).
    ``train_tokens_available``: the training split's size, needed when
    cfg.data.unique_tokens is None and used to check U against the data when given.
    """
    vocab = cfg.data.vocab_size if cfg.data.vocab_size is not None else vocab_size
    if vocab is None:
        raise UserError("unknown: set it (the dataset is not read here)", key="data.vocab_size")
    if vocab < 1:
        raise UserError(f"must be >= 1, got {vocab}", key="data.vocab_size")
    shape = resolve_shape(cfg.model)
    counts = param_counts(shape, vocab, mask_token=cfg.model.objective == "mdm")

    batch, seq_len = cfg.train.batch_size, cfg.data.seq_len
    if batch < 1:
        raise UserError(f"must be >= 1, got {batch}", key="train.batch_size")
    micro = cfg.train.micro_batch_size  # 'auto' is resolved per GPU (scalelab.model.micro_batch)
    if isinstance(micro, int) and (micro < 1 or batch % micro):
        raise UserError(
            f"{micro} must be >= 1 and divide train.batch_size={batch}",
            key="train.micro_batch_size",
        )
    n_unique = unique_sequences(cfg.data.unique_tokens, seq_len, train_tokens_available)
    n_total = total_sequences(n_unique, cfg.data.epochs)
    # Distillation (scalelab.distill.mixture): only n_real rows of each batch are real
    # data, so the real U·E takes steps = floor(U·E / n_real) and D counts all rows.
    real_rows = batch
    if cfg.distill.synthetic_weight > 0:
        real_rows = split_batch(batch, cfg.distill.synthetic_weight)[0]
    steps = n_total // real_rows  # D rounded down to whole steps
    if steps < 1:
        raise UserError(
            f"U·E = {n_total} sequences is less than one step of train.batch_size={batch}",
            key="data.epochs",
        )
    tokens_per_step = batch * seq_len
    total_tokens = steps * tokens_per_step
    unique = n_unique * seq_len
    fpt = _flops_per_token(shape, vocab, seq_len)
    return Derived(
        n_params=counts.total,
        n_params_non_embedding=counts.non_embedding,
        vocab_size=vocab,
        unique_tokens=unique,
        epochs=steps * real_rows * seq_len / unique,
        total_tokens=total_tokens,
        tokens_per_step=tokens_per_step,
        steps=steps,
        flops_per_token=fpt,
        flops=fpt * total_tokens,
        warmup_steps=_warmup_steps(cfg.train.warmup, steps),
    )


def split_batch(batch_size: int, weight: float) -> tuple[int, int]:
    """(n_real, n_syn) rows of a batch of ``batch_size`` at synthetic weight ``weight``."""
    n_syn = round(weight * batch_size)
    if weight > 0 and not 0 < n_syn < batch_size:
        raise UserError(
            f"synthetic weight {weight} of a batch of {batch_size} sequences rounds to "
            f"{n_syn} synthetic rows; both parts need >= 1 row (raise train.batch_size)",
            key="distill.synthetic_weight",
        )
    return batch_size - n_syn, n_syn
