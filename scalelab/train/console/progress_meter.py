"""Throughput, MFU and ETA for the progress lines, from times handed in (no clock of its own).

The loop tells the meter how long each training step took (``add_step``: batch, forward,
backward, update; evals and checkpoints are not steps) and, every ``log_every`` steps, asks
for a ``ProgressLine`` at the current time (``line``):

- tokens/s: tokens of the steps since the previous line / their step seconds;
- MFU: tokens/s · model FLOPs per token / the devices' peak (``scalelab.train.console.mfu``; None
  when the peak is unknown, e.g. on CPU);
- ETA: the remaining steps at this attempt's pace so far (wall time since the attempt's
  first step, evals and checkpoints included, per step done in this attempt).

Taking every time as an argument keeps it exact to test: no sleeps, no wall clock.
"""

from __future__ import annotations

from scalelab.train.console.mfu import mfu
from scalelab.train.console.progress_log import ProgressLine

__all__ = ["ProgressMeter"]


class ProgressMeter:
    """Window throughput and attempt-pace ETA of one training attempt."""

    def __init__(self, *, total_steps: int, tokens_per_step: int, flops_per_token: float,
                 peak_flops: float | None, start_step: int, start_time: float):
        self.total_steps, self.tokens_per_step = total_steps, tokens_per_step
        self.flops_per_token, self.peak_flops = flops_per_token, peak_flops
        self.start_step, self.start_time = start_step, start_time
        self._tokens = 0
        self._seconds = 0.0

    def add_step(self, seconds: float) -> None:
        """One training step of ``tokens_per_step`` tokens took ``seconds``."""
        self._tokens += self.tokens_per_step
        self._seconds += seconds

    def line(self, step: int, loss: float, now: float, elapsed_s: float) -> ProgressLine:
        """The report after ``step`` at time ``now`` (the clock of ``start_time``); starts a
        new throughput window."""
        rate = self._tokens / self._seconds if self._seconds > 0 else None
        done, spent = step - self.start_step, now - self.start_time
        eta = spent / done * (self.total_steps - step) if done > 0 and spent >= 0 else None
        self._tokens, self._seconds = 0, 0.0
        return ProgressLine(step=step, total_steps=self.total_steps, loss=loss,
                            tokens_per_s=rate, mfu=mfu(rate, self.flops_per_token, self.peak_flops),
                            eta_s=eta, elapsed_s=elapsed_s)
