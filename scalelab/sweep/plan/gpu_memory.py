"""The plan's memory columns: each run's micro-batch and predicted peak GiB per GPU.

A run trains on ``launcher.nodes · launcher.tasks_per_node`` processes, one GPU each.
``scalelab.model.micro_batch`` resolves ``train.micro_batch_size`` ('auto': the largest
divisor of the per-GPU batch that fits) against ``launcher.gpu_mem_gb`` and
``scalelab.model.memory`` predicts the peak. A run that does not fit 90% of
``gpu_mem_gb`` is refused (``UserError``: one line, exit 2). Without ``gpu_mem_gb`` the
peak is shown and nothing is refused. Pure; no torch.
"""

from __future__ import annotations

from typing import Any

from scalelab.config import RunConfig
from scalelab.errors import UserError
from scalelab.model.memory import FIT_FRACTION
from scalelab.model.micro_batch import micro_batch
from scalelab.sweep.spec.sections import LauncherConfig

__all__ = ["MEMORY_COLUMNS", "MemoryColumns"]

MEMORY_COLUMNS = ("micro_batch", "gpu_gib")
"""Plan table columns: sequences per forward pass per GPU; predicted peak GiB per GPU."""


class MemoryColumns:
    """``(micro_batch, gpu_gib)`` of a plan row, cached over the runs that share them (a
    grid repeats model/train sections, the optimizer and the launcher)."""

    def __init__(self) -> None:
        self.cache: dict[Any, tuple[int, float]] = {}

    def __call__(self, cfg: RunConfig, vocab: int, launcher: LauncherConfig) -> tuple[int, float]:
        world = launcher.nodes * launcher.tasks_per_node
        key = (cfg.model, cfg.train, cfg.optim.name, cfg.distill.kd_weight > 0,
               cfg.data.seq_len, vocab, world, launcher.gpu_mem_gb)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = _columns(cfg, vocab, world, launcher.gpu_mem_gb)
        return hit


def _columns(cfg: RunConfig, vocab: int, world: int, gpu_mem_gb: float | None) -> tuple[int, float]:
    choice = micro_batch(cfg, vocab, world, gpu_mem_gb)
    peak = choice.estimate.peak_gib
    if choice.fits is False:
        auto = cfg.train.micro_batch_size == "auto"
        how = "even at micro-batch 1" if auto else f"at micro-batch {choice.size}"
        fixes = "" if auto else "micro_batch_size: auto, "
        raise UserError(
            f"needs {peak:.1f} GiB per GPU {how}, over {FIT_FRACTION:.0%} of "
            f"launcher.gpu_mem_gb={gpu_mem_gb:g} (train.{fixes}parallelism: fsdp, "
            "activation_checkpointing or more GPUs would lower it)",
            key="train.micro_batch_size",
        )
    return choice.size, round(peak, 2)
