"""Launcher keys in a spec: which ``launcher.*`` keys rules may derive, and their range checks.

Parsing side of ``scalelab.sweep.plan.resources`` (which evaluates the rules per run): the
spec loader and blocks call ``check_target`` / ``check_launcher`` on what they read.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import get_type_hints

from scalelab.errors import UserError, did_you_mean
from scalelab.sweep.spec.keys import is_numeric_type
from scalelab.sweep.spec.sections import LauncherConfig

__all__ = ["NOT_SUBMITTED", "PREFIX", "RUN_NAMES", "SHOWN", "SWEEP_WIDE", "check_launcher",
           "check_target", "numeric_keys"]

PREFIX = "launcher."
RUN_NAMES = ("FLOPs", "D", "steps")
"""Names only launcher rules read: the run's training FLOPs, tokens and steps."""
SWEEP_WIDE = ("executor", "root", "max_parallel")
"""Launcher keys of the whole sweep (where and how it is launched): top level only."""
NOT_SUBMITTED = (*SWEEP_WIDE, "throughput_tokens_per_gpu_s", "flops_per_gpu_s", "gpu_mem_gb")
"""Keys that change no submission (the plan's GPU-hours and memory check only): they split
no job array."""
_POSITIVE = ("nodes", "tasks_per_node", "cpus_per_task", "time_min", "array_parallelism",
             "max_array_size", "max_parallel", "throughput_tokens_per_gpu_s", "flops_per_gpu_s",
             "mem_gb", "gpu_mem_gb")
_NON_NEGATIVE = ("gpus_per_node", "signal_delay_s")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHOWN = ("nodes", "gpus_per_node", "tasks_per_node", "cpus_per_task", "mem_gb", "time_min")
"""Keys ``describe`` shows."""


@functools.cache
def numeric_keys() -> tuple[str, ...]:
    """``launcher.<key>`` of every numeric launcher key a rule may derive or read."""
    hints = get_type_hints(LauncherConfig)
    return tuple(PREFIX + f.name for f in dataclasses.fields(LauncherConfig)
                 if f.name not in SWEEP_WIDE and is_numeric_type(hints[f.name]))


def check_target(key: str) -> None:
    """Refuse ``launcher.<key>`` as a derive target unless it is numeric and per run."""
    name = key[len(PREFIX):]
    fields = [f.name for f in dataclasses.fields(LauncherConfig)]
    if name not in fields:
        hint = did_you_mean(key, [PREFIX + f for f in fields])
        raise UserError(f"unknown launcher key '{key}'{hint}")
    if name in SWEEP_WIDE:
        raise UserError(f"'{key}' is sweep-wide: set it in the top-level launcher")
    if key not in numeric_keys():
        raise UserError("only numeric keys can be derived")


def check_launcher(launcher: LauncherConfig, prefix: str = "launcher") -> None:
    """Range checks; errors name ``<prefix>.<key>``."""
    for name in _POSITIVE:
        value = getattr(launcher, name)
        if value is not None and value <= 0:
            raise UserError(f"expected a positive number, got {value!r}", key=f"{prefix}.{name}")
    for name in _NON_NEGATIVE:
        if getattr(launcher, name) < 0:
            raise UserError("expected a number >= 0", key=f"{prefix}.{name}")
    if launcher.throughput_tokens_per_gpu_s and launcher.flops_per_gpu_s:
        raise UserError("give throughput_tokens_per_gpu_s or flops_per_gpu_s, not both",
                        key=f"{prefix}.flops_per_gpu_s")
    for name in launcher.env:
        if not _ENV_NAME.fullmatch(name):
            raise UserError("not an environment variable name (letters, digits, '_')",
                            key=f"{prefix}.env.{name}")
    for i, line in enumerate(launcher.setup):
        if not line.strip() or len(line.splitlines()) > 1:
            raise UserError("expected one non-empty shell line", key=f"{prefix}.setup[{i}]")
