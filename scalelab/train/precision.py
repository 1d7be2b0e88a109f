"""Numeric precision of a run (``train.precision``).

- ``fp32``: fp32 parameters, optimizer state and compute.
- ``bf16-autocast``: fp32 parameters and optimizer state; matmuls run in bf16 under
  ``torch.autocast`` (logits and the loss stay fp32: the model returns fp32 logits).
- ``bf16-pure``: parameters stored in bf16 (half the memory). Pair it with ``sr-adamw``
  (``optim.AdamW(stochastic_rounding=True)``: fp32 update math, stochastic rounding back
  to bf16, as torchao's SR-AdamW); with plain AdamW, updates below half a bf16 ulp are lost
  (Zamirai et al. 2020, "Revisiting BFloat16 Training", arXiv 2010.06192).
- ``fp8``, ``mxfp8``, ``mxfp4``, ``nvfp4``: fp32 master weights, optimizer state and
  non-GEMM compute; the transformer blocks' Linear GEMMs (forward and both backward ones)
  run on quantized operands (``scalelab.quant``: formats, scalings, roundings; emulated).
  The embedding, norms, attention's softmax, the head and the loss stay fp32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from torch import nn

from scalelab.quant import QUANT_PRECISIONS, quantize_linears, set_quant_step

__all__ = ["PRECISIONS", "autocast_context", "param_dtype", "prepare_model", "set_quant_step"]

PRECISIONS = ("fp32", "bf16-autocast", "bf16-pure", *QUANT_PRECISIONS)


def param_dtype(precision: str) -> torch.dtype:
    """dtype the parameters are stored in (fp32 master weights for the quantized GEMMs)."""
    return torch.bfloat16 if precision == "bf16-pure" else torch.float32


def autocast_context(precision: str, device: torch.device) -> Callable[[], AbstractContextManager]:
    """A factory of the forward-pass context (autocast for bf16-autocast, else a no-op)."""
    if precision == "bf16-autocast":
        return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def prepare_model(model: nn.Module, precision: str, device: torch.device) -> nn.Module:
    """Move the model to ``device`` and its parameter dtype; for a quantized precision, swap
    the blocks' Linears for ``QuantLinear`` (the loop keys their SR with ``set_quant_step``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
    model = model.to(device=device, dtype=param_dtype(precision))
    if precision in QUANT_PRECISIONS:
        quantize_linears(model, precision)
    return model
