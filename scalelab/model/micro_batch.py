"""``train.micro_batch_size``: the micro-batch a run trains with, and what it needs per GPU.

- an integer m: m sequences per forward pass;
- null: the whole per-GPU batch, batch_size / world_size;
- 'auto': the largest divisor of the per-GPU batch whose predicted peak
  (``scalelab.model.memory``) is at most ``FIT_FRACTION`` of the GPU's memory.

The planner asks with ``launcher.gpu_mem_gb`` (and refuses a run that does not fit); the
trainer asks again with the memory of the GPU it got (``device_memory_gib``), so a smaller
GPU gets a smaller micro-batch instead of running out of memory. On a CPU 'auto' is the
whole per-process batch. Pure arithmetic: torch is imported only to read a CUDA device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalelab.config import RunConfig
from scalelab.errors import UserError
from scalelab.model.memory import FIT_FRACTION, GIB, MemoryEstimate, Setup, estimate
from scalelab.model.presets import resolve_shape

__all__ = ["MicroBatch", "device_memory_gib", "memory_setup", "micro_batch"]


@dataclass(frozen=True)
class MicroBatch:
    """The chosen micro-batch and its predicted memory."""

    size: int
    """Sequences per forward pass on one GPU."""
    per_gpu: int
    """The per-GPU batch it divides (batch_size / world_size)."""
    estimate: MemoryEstimate
    """Predicted bytes per GPU at ``size``."""
    fits: bool | None
    """peak <= FIT_FRACTION · GPU memory; None when no GPU memory was given."""


def memory_setup(cfg: RunConfig, world_size: int) -> Setup:
    """The ``memory.Setup`` of a run on ``world_size`` processes."""
    tc = cfg.train
    return Setup(
        precision=tc.precision, optimizer=cfg.optim.name, parallelism=tc.parallelism,
        fsdp_param_dtype=tc.fsdp_param_dtype, activation_checkpointing=tc.activation_checkpointing,
        world_size=world_size, loss="kd" if cfg.distill.kd_weight > 0 else "chunked",
        objective=cfg.model.objective,
    )


def micro_batch(cfg: RunConfig, vocab: int, world_size: int,
                gpu_mem_gib: float | None) -> MicroBatch:
    """The micro-batch of ``cfg`` on ``world_size`` GPUs of ``gpu_mem_gib`` GiB each.

    'auto' with nothing fitting gives size 1 and ``fits`` False (the caller refuses or
    warns). Errors name ``train.batch_size`` / ``train.micro_batch_size``.
    """
    tc = cfg.train
    if tc.batch_size % world_size:
        raise UserError(f"{tc.batch_size} is not divisible by the world size {world_size} "
                        "(processes: nodes x tasks_per_node)", key="train.batch_size")
    per_gpu = tc.batch_size // world_size
    shape, setup = resolve_shape(cfg.model), memory_setup(cfg, world_size)
    limit = None if gpu_mem_gib is None else FIT_FRACTION * gpu_mem_gib * GIB

    def at(size: int) -> MicroBatch:
        est = estimate(shape, vocab, size, cfg.data.seq_len, setup)
        return MicroBatch(size, per_gpu, est, None if limit is None else est.peak <= limit)

    if tc.micro_batch_size != "auto":
        size = tc.micro_batch_size or per_gpu
        if size < 1 or per_gpu % size:
            raise UserError(f"{size} does not divide the per-GPU batch {per_gpu} (batch_size "
                            f"{tc.batch_size} / world size {world_size})",
                            key="train.micro_batch_size")
        return at(size)
    if limit is None:
        return at(per_gpu)
    for size in sorted((m for m in range(1, per_gpu + 1) if per_gpu % m == 0), reverse=True):
        choice = at(size)
        if choice.fits:
            return choice
    return at(1)


def device_memory_gib(device: Any) -> float | None:
    """Total memory of a CUDA ``device`` in GiB; None for any other device."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch

    return torch.cuda.get_device_properties(device).total_memory / GIB
