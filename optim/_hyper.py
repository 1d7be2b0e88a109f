"""Scheduled hyperparameters under ``torch.compile``: lr and weight decay held as 0-d tensors.

torch.compile guards on every Python float a compiled ``opt.step`` reads: a float lr that a
scheduler changes every step fails the guard ``param_groups[0]['lr'] == ...`` and recompiles
each step (Inductor and aot_eager; ``FailOnRecompileLimitHit`` at the 8th with
``fullgraph=True``). torch's advice is a 0-d tensor lr (pytorch/pytorch#130467, "tensor lr"
in the torch.compile optimizer docs): the tensor is a graph input, so its value is free to change.

What this module does, and the rules the optimizers follow:

- **lr is converted at construction** (``tensorize_group_``, also in ``add_param_group``) to a
  0-d float64 CPU tensor per group (float64: the value is the Python float, bit for bit, and
  the eager update divides it in float64 as it did a float lr, so eager bits are unchanged). A
  tensor the user passed is kept, not copied (a scheduler may hold it), except a shared
  default, which each group gets its own clone of. torch's LR schedulers write a tensor lr in
  place (``LRScheduler._update_lr`` -> ``_update_param_group_val`` -> ``fill_``), so LambdaLR,
  CosineAnnealingLR, OneCycleLR, ... add no graph; so does ``group["lr"].fill_(x)``.
- **weight_decay, momentum and betas stay as given** (Python floats by default): torch's
  schedulers that cycle momentum (OneCycleLR, CyclicLR) assign a new float
  (``group["betas"] = (m, b2)``), so a tensor there would be replaced anyway, and a 0-d tensor
  would cost eager code either a host read or different bits. Under compile the step reads
  each of these numbers, and a float written over the tensor lr (``group["lr"] = 0.1``),
  through ``as_tensor``: plain tensor arithmetic, which Dynamo makes a graph input once the
  float has changed (automatic dynamic floats and its "tensorify" pass). That costs one
  recompile, which the first step's (the lazy state) absorbs: 2 graphs in 20 steps of
  OneCycleLR, and of ``group["lr"] = x`` float writes every step
  (optim/tests/test_compile_schedules.py in the scalelab repository).
- Eager code reads no tensor on the host: a tensor lr (or a user's tensor momentum, betas,
  weight decay) enters the update as tensor arithmetic.

``state_dict()`` saves the tensors as they are (weights_only-safe); ``load_state_dict`` takes
what was saved, and resumes bit-identically.
"""

from __future__ import annotations

import torch

__all__ = ["SCHEDULED_KEYS", "as_tensor", "is_compiling", "tensorize_group_"]

SCHEDULED_KEYS: tuple[str, ...] = ("lr",)
"""Group keys held as 0-d tensors: the one torch's LR schedulers write (in place, ``fill_``)."""


def tensorize_group_(group: dict, defaults: dict, keys: tuple[str, ...] = SCHEDULED_KEYS) -> None:
    """Each of ``keys`` in ``group`` as a 0-d float64 CPU tensor: a number converted, a
    tensor kept, unless it is the optimizer-wide default object (then cloned: two groups must
    not share one tensor that a scheduler fills per group)."""
    for key in keys:
        if key not in group:
            continue
        value = group[key]
        if torch.is_tensor(value):
            if value is defaults.get(key):
                group[key] = value.detach().clone()
            continue
        group[key] = torch.tensor(float(value), dtype=torch.float64)


def is_compiling() -> bool:
    """Whether Dynamo is tracing (``torch.compiler.is_compiling``)."""
    return torch.compiler.is_compiling()


def as_tensor(value: float | torch.Tensor) -> torch.Tensor:
    """Traced code: a group number as a tensor. A float becomes ``zeros(()) + value``, an add
    that Dynamo's tensorify pass keeps as a graph input once the float changes (a ``full``,
    a foreach scalar or an ``alpha=`` would specialise it: one graph per value)."""
    if torch.is_tensor(value):
        return value
    return torch.zeros((), dtype=torch.float64) + value
