"""What ``scalelab train`` prints, as pure functions from numbers to one line (no I/O).

Three kinds of line, each in two formats (``LogSettings.format``):

- progress, every ``train.log_every`` steps and at the last step (``ProgressLine``):
  ``[run] step 120/1000 loss 3.2145 | 45.2k tok/s | mfu 38.5% | elapsed 1m02s | eta 7m40s``;
  tokens/s over the training steps since the previous line (evals and checkpoints left out),
  MFU only on a CUDA device whose peak is known (``scalelab.train.console.mfu``), never on CPU;
- eval, at every held-out eval (``EvalLine``): ``[run] step 120/1000 train 3.2145 val 3.3012
  (62.0s)``;
- message: anything else the run says once (resumed, preempted, a corrupt file set aside).

``--log-format json`` (or ``SCALELAB_LOG_FORMAT=json``) prints one JSON object per line
instead, for cluster logs: ``event`` is ``"progress"`` (keys ``step``, ``total_steps``,
``loss``, ``tokens_per_s``, ``mfu`` (null off-GPU), ``eta_s``, ``elapsed_s``), ``"eval"``
(``step``, ``total_steps``, ``train_loss``, ``val_loss``, ``elapsed_s``) or ``"message"``
(``message``); every object also has ``run_id``. Non-finite numbers become null (strict JSON).

``-q`` / ``--quiet`` (or ``SCALELAB_QUIET=1``) silences the progress and eval lines; messages
(resume, preemption, divergence, corrupt files) are still printed, and errors always are.
Runs a sweep launches read the same two variables (``LogSettings.from_env``): set them in
the environment of ``scalelab sweep`` (local jobs and Slurm jobs inherit it).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalelab.errors import UserError

__all__ = [
    "LOG_FORMATS",
    "LOG_FORMAT_ENV",
    "QUIET_ENV",
    "EvalLine",
    "LogSettings",
    "ProgressLine",
    "eval_line",
    "format_duration",
    "format_rate",
    "message_line",
    "progress_line",
]

LOG_FORMATS = ("text", "json")
LOG_FORMAT_ENV = "SCALELAB_LOG_FORMAT"
"""``text`` (default) or ``json``: the format of every line a run prints."""
QUIET_ENV = "SCALELAB_QUIET"
"""``1``/``true``/``yes``: no progress or eval lines (``0``/``false``/``no``/empty: print them)."""
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class LogSettings:
    """How a run prints: ``format`` (``text`` | ``json``) and ``quiet``."""

    format: str = "text"
    quiet: bool = False

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS:
            raise UserError(f"must be one of {', '.join(LOG_FORMATS)}, got {self.format!r}",
                            key="--log-format")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LogSettings:
        """The settings of ``SCALELAB_LOG_FORMAT`` and ``SCALELAB_QUIET`` (defaults: text,
        not quiet); a bad value is a UserError naming the variable."""
        env = os.environ if environ is None else environ
        fmt = env.get(LOG_FORMAT_ENV, "").strip().lower() or "text"
        if fmt not in LOG_FORMATS:
            raise UserError(f"must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}",
                            key=LOG_FORMAT_ENV)
        quiet = env.get(QUIET_ENV, "").strip().lower()
        if quiet not in _TRUE + _FALSE:
            raise UserError(f"must be 1 or 0 (true/false), got {quiet!r}", key=QUIET_ENV)
        return cls(format=fmt, quiet=quiet in _TRUE)

    def overridden(self, *, fmt: str | None = None, quiet: bool | None = None) -> LogSettings:
        """These settings with the command line's flags (None: not given) taking precedence."""
        return LogSettings(format=self.format if fmt is None else fmt.strip().lower(),
                           quiet=self.quiet if quiet is None else quiet)


@dataclass(frozen=True)
class ProgressLine:
    """One progress report: numbers only (``None``: unknown or not applicable)."""

    step: int
    total_steps: int
    loss: float
    tokens_per_s: float | None
    """Training tokens per second (all ranks) over the steps since the previous line."""
    mfu: float | None
    """Model FLOP utilisation, 0..1 (None off-GPU or on a device of unknown peak)."""
    eta_s: float | None
    """Seconds to the last step at this attempt's pace so far."""
    elapsed_s: float
    """Wall seconds of the run so far, earlier attempts included."""


@dataclass(frozen=True)
class EvalLine:
    """One held-out eval: the val loss, and the step's train loss (None at step 0)."""

    step: int
    total_steps: int
    val_loss: float
    train_loss: float | None
    elapsed_s: float


def format_duration(seconds: float | None) -> str:
    """``'42s'``, ``'7m05s'``, ``'3h02m'``, ``'2d04h'``; ``'?'`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_rate(value: float | None) -> str:
    """A rate with an SI suffix, three significant digits: ``'812'``, ``'45.2k'``, ``'1.31M'``."""
    if value is None or not math.isfinite(value):
        return "?"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _json(event: str, run_id: str, fields: dict[str, Any]) -> str:
    doc = {"event": event, "run_id": run_id}
    doc.update({k: _finite(v) if isinstance(v, float) else v for k, v in fields.items()})
    return json.dumps(doc, allow_nan=False)


def progress_line(p: ProgressLine, fmt: str, run_id: str) -> str:
    """The progress report ``p`` as one line of ``fmt`` (``text`` | ``json``)."""
    if fmt == "json":
        return _json("progress", run_id, {
            "step": p.step, "total_steps": p.total_steps, "loss": float(p.loss),
            "tokens_per_s": p.tokens_per_s, "mfu": p.mfu, "eta_s": p.eta_s,
            "elapsed_s": p.elapsed_s})
    parts = [f"step {p.step}/{p.total_steps} loss {p.loss:.4f}",
             f"{format_rate(p.tokens_per_s)} tok/s"]
    if p.mfu is not None:
        parts.append(f"mfu {100 * p.mfu:.1f}%")
    parts += [f"elapsed {format_duration(p.elapsed_s)}", f"eta {format_duration(p.eta_s)}"]
    return f"[{run_id}] " + " | ".join(parts)


def eval_line(e: EvalLine, fmt: str, run_id: str) -> str:
    """The eval ``e`` as one line of ``fmt``."""
    if fmt == "json":
        return _json("eval", run_id, {
            "step": e.step, "total_steps": e.total_steps, "train_loss": e.train_loss,
            "val_loss": float(e.val_loss), "elapsed_s": e.elapsed_s})
    shown = f"train {e.train_loss:.4f} " if e.train_loss is not None else ""
    return (f"[{run_id}] step {e.step}/{e.total_steps} {shown}val {e.val_loss:.4f} "
            f"({e.elapsed_s:.1f}s)")


def message_line(message: str, fmt: str, run_id: str) -> str:
    """A one-off message as one line of ``fmt``."""
    if fmt == "json":
        return _json("message", run_id, {"message": message})
    return f"[{run_id}] {message}"
