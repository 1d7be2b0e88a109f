"""The emulated quantized GEMMs of one Linear layer (autograd) and ``QuantLinear``.

Forward ``y = Q_f(x) @ Q_f(W)^T``; backward ``dx = Q_g(g) @ Q_f(W)`` and
``dW = Q_g(g)^T @ Q_f(x)``, each operand quantized along that GEMM's reduction dim
(``recipes``). Emulation: every operand is quantized and dequantized exactly
(``blocks.fake_quantize``: grid value times scale, in fp32), then the GEMM runs in fp32, so
the product is the fp32 GEMM of exactly the values a low-precision kernel multiplies; only
the accumulation differs (fp32 here, the kernel's accumulator there). For block scales the
layer saves the fp32 input and the weight for backward (the transposed GEMMs need blocks
along other dims, so it quantizes them again, as the papers' kernels do); per-tensor FP8
saves the quantized operands and reuses them, and one RTN Q(g) serves both backward GEMMs.

SR keys: gradient operand j (0: for dx, 1: for dW) of call c of layer ``quant_id`` at
training step s uses ``sr_key(seed, s, id)`` with id = (quant_id · 2^20 + c) · 4 + j, and
element i of the quantized [rows, cols] view gets bits r(i): nothing depends on torch's RNG,
the batch order or wall-clock, so a resumed run rounds identically. c counts the layer's
forwards with grad since ``set_quant_step`` (micro-batches, activation-checkpoint
recomputations); the forward stores its c for the backward.
"""

from __future__ import annotations

import torch
from torch import nn

from scalelab.quant.blocks import Scaling, fake_quantize, padded_numel
from scalelab.quant.recipes import Recipe
from scalelab.quant.rounding import sr_bits

__all__ = ["QuantLinear", "SrKey", "quant_matmul"]

CALL_BITS = 20
"""Bits of the call counter inside an SR tensor id (2^20 forwards of one layer per step)."""


class SrKey:
    """The SR key of one layer call: (seed, step, quant_id, call)."""

    __slots__ = ("call", "quant_id", "seed", "step")

    def __init__(self, seed: int, step: int, quant_id: int, call: int):
        self.seed, self.step, self.quant_id, self.call = int(seed), int(step), int(quant_id), int(call)

    def tensor_id(self, operand: int) -> int:
        return ((self.quant_id << CALL_BITS) + self.call) * 4 + operand


def _q(t: torch.Tensor, s: Scaling, key: SrKey | None = None, operand: int = 0) -> torch.Tensor:
    """``t`` quantized along its last dim (RTN, or SR keyed by ``key`` and ``operand``)."""
    if key is None:
        return fake_quantize(t, s)
    bits = sr_bits(key.seed, key.step, key.tensor_id(operand), padded_numel(t.shape, s), t.device)
    return fake_quantize(t, s, bits)


class _QuantMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, recipe: Recipe, key: SrKey):
        k = x.shape[-1]
        xq = _q(x.reshape(-1, k), recipe.forward)  # [M, K]
        wq = _q(weight, recipe.forward)  # [N, K]
        # one scale per tensor (fp8): Q(t^T) = Q(t)^T, so backward reuses the quantized operands
        ctx.per_tensor = recipe.forward.kind == "tensor"
        ctx.save_for_backward(*((xq, wq) if ctx.per_tensor else (x, weight)))
        ctx.recipe, ctx.key, ctx.x_meta, ctx.w_dtype = recipe, key, (x.shape, x.dtype), weight.dtype
        return (xq @ wq.t()).reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        recipe, key, (x_shape, x_dtype) = ctx.recipe, ctx.key, ctx.x_meta
        sr = key if recipe.grad_rounding == "sr" else None
        n, k = weight.shape
        g = grad.reshape(-1, n).float()  # [M, N]
        shared = ctx.per_tensor and recipe.grad.kind == "tensor" and sr is None
        g_rows = _q(g, recipe.grad, sr, 0) if shared else None  # one RTN Q(g) serves both GEMMs
        dx = dw = None
        if ctx.needs_input_grad[0]:  # dx = Q_g(g) @ Q_f(W): reduction over N
            gq = g_rows if shared else _q(g, recipe.grad, sr, 0)  # [M, N] along N
            wq = weight.t() if ctx.per_tensor else _q(weight.t(), recipe.forward)  # [K, N] along N
            dx = (gq @ wq.t()).reshape(x_shape).to(x_dtype)
        if ctx.needs_input_grad[1]:  # dW = Q_g(g)^T @ Q_f(x): reduction over the M tokens
            gq = g_rows.t() if shared else _q(g.t(), recipe.grad, sr, 1)  # [N, M] along M
            x2 = x.reshape(-1, k)
            xq = x2.t() if ctx.per_tensor else _q(x2.t(), recipe.forward)  # [K, M] along M
            dw = (gq @ xq.t()).to(ctx.w_dtype)
        return dx, dw, None, None


def quant_matmul(x: torch.Tensor, weight: torch.Tensor, recipe: Recipe, key: SrKey) -> torch.Tensor:
    """``x @ weight^T`` with ``recipe``'s quantized forward and backward GEMMs (emulated)."""
    return _QuantMatmul.apply(x, weight, recipe, key)


class QuantLinear(nn.Linear):
    """``nn.Linear`` whose GEMMs run quantized (``recipe``); the same parameters (``weight``,
    ``bias``), so checkpoints, optimizers and norm records see the same names. The bias, if
    any, is added in fp32."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, recipe: Recipe,
                 quant_id: int = 0, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.recipe, self.quant_id = recipe, int(quant_id)
        self.quant_seed, self.quant_step, self.quant_calls = 0, 0, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = SrKey(self.quant_seed, self.quant_step, self.quant_id, self.quant_calls)
        if torch.is_grad_enabled():
            self.quant_calls += 1
        y = quant_matmul(x, self.weight, self.recipe, key)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, recipe={self.recipe.name}"
