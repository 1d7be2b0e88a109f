"""Learning-rate schedules as pure functions of the step.

``lr_at`` returns a *multiplier* of the peak lr for the update with 0-based index
``step`` (update ``step`` is the ``step + 1``-th optimizer step; metrics record it as
step ``step + 1``). Conventions, shared by all schedules:

- Warmup: linear, ``(step + 1) / warmup_steps`` for ``step < warmup_steps``, so the first
  update already moves (no wasted lr-0 step) and update ``warmup_steps - 1`` runs at the
  peak. ``warmup_steps = 0`` means no warmup.
- The decay reaches ``min_lr_ratio`` at ``step == total_steps`` (one past the last
  update), as in torchtitan; the last update runs just above the floor, never at lr 0.

Schedules:

- ``cosine``: after warmup, ``min + (1 - min) * (1 + cos(pi * p)) / 2`` with
  ``p = (step - W) / (T - W)`` (Loshchilov & Hutter 2017; Kim et al. 2025 decay to 0).
- ``wsd``: warmup-stable-decay (Hu et al. 2024, MiniCPM): peak until the last
  ``decay_steps = round(decay_fraction * T)`` updates, then linear to ``min`` at ``T``.
  If warmup and decay overlap (tiny runs), the smaller multiplier wins.
- ``constant``: warmup, then the peak.
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "lr_at", "wsd_decay_steps"]

SCHEDULES = ("cosine", "wsd", "constant")


def wsd_decay_steps(total_steps: int, decay_fraction: float) -> int:
    """Length of the WSD cool-down: ``round(decay_fraction * T)``, at least 1 when > 0."""
    if decay_fraction <= 0:
        return 0
    return min(total_steps, max(1, round(decay_fraction * total_steps)))


def lr_at(
    step: int,
    total_steps: int,
    schedule: str,
    warmup_steps: int = 0,
    min_lr_ratio: float = 0.0,
    decay_fraction: float = 0.2,
) -> float:
    """The lr multiplier (peak = 1) of the update with 0-based index ``step``."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
    warmup_steps = max(0, min(int(warmup_steps), total_steps))
    step = min(step, total_steps)
    warm = (step + 1) / warmup_steps if step < warmup_steps else 1.0

    if schedule == "constant":
        return warm
    if schedule == "cosine":
        if step < warmup_steps:
            return warm
        span = total_steps - warmup_steps
        p = (step - warmup_steps) / span if span > 0 else 1.0
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * p))
    # wsd
    decay_steps = wsd_decay_steps(total_steps, decay_fraction)
    start = total_steps - decay_steps
    if decay_steps == 0 or step < start:
        return warm
    frac = (step - start) / decay_steps  # in [0, 1]; 1 at step == total_steps
    return min(warm, 1.0 - (1.0 - min_lr_ratio) * frac)
