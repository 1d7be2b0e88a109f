"""Scaling: how a tensor is brought into an element format's range, along its last dim.

The last dim is the GEMM's reduction dim (callers transpose), so every block's elements
meet the same scale inside one dot product, as the hardware formats require.

- ``tensor`` (FP8): one fp32 scale S = amax / max_elem for the whole tensor (current
  per-tensor scaling, as Transformer Engine's; Micikevicius et al. 2022, arXiv 2209.05433,
  scale per tensor). Per-tensor rather than per-row: a transposed operand (the backward
  GEMMs) then has the same scale, and it is the recipe the FP8 paper trains with.
- ``mx`` (MXFP8, MXFP4): blocks of 32 along the last dim, shared scale X = 2^(floor(log2
  amax_block) - emax_elem) stored as E8M0 (clamped to 2^-127 .. 2^127); elements
  Q(v / X), values past max_elem clamped (OCP Microscaling Formats (MX) v1.0, 2023,
  section 6.3).
- ``nv`` (NVFP4): blocks of 16, a per-tensor fp32 scale s_t = amax_tensor / (448·6) and a
  block scale s_b = E4M3_RTN(amax_block / 6 / s_t), so the largest block maps near 448 on
  the E4M3 scale grid; elements Q(v / S) with S = fp32(s_b·s_t) (NVIDIA, arXiv 2509.25149).
  A block whose s_b is 0 (all zeros, or amax below 2^-10·s_t·6, which rounds to 0) is all
  zeros (scale 0).

Padding: when the last dim is not a multiple of the block, it is padded with zeros to the
next multiple (zeros change no block's amax and quantize to 0), and cut off after.
An all-zero FP8 tensor or MX block gets scale 1 (its elements are 0 whatever the scale).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F

from scalelab.quant.formats import E4M3, E8M0, ElementFormat
from scalelab.quant.rounding import round_nearest, round_stochastic

__all__ = ["Quantized", "Scaling", "fake_quantize", "padded_numel", "quantize"]

ScaleKind = Literal["tensor", "mx", "nv"]


@dataclass(frozen=True)
class Scaling:
    """One operand's format: element format, scaling kind and block length (0: per tensor)."""

    kind: ScaleKind
    element: ElementFormat
    block: int = 0

    def __post_init__(self):
        if (self.kind == "tensor") != (self.block == 0) or self.block < 0:
            raise ValueError(f"scaling {self.kind!r} with block {self.block}")


class Quantized(NamedTuple):
    """A quantized [R, K] tensor: ``values`` [R, nb, B] on the element grid (fp32), ``scales``
    [R, nb, 1] (fp32; per tensor: one value broadcast), the logical shape and K."""

    values: torch.Tensor
    scales: torch.Tensor
    shape: torch.Size

    def dequantize(self) -> torch.Tensor:
        """values · scales, padding cut, in the original shape (fp32)."""
        k = self.shape[-1]
        out = (self.values * self.scales).reshape(self.values.shape[0], -1)
        return (out if out.shape[1] == k else out[:, :k]).reshape(self.shape)


def _binade(a: torch.Tensor) -> torch.Tensor:
    """2^floor(log2 a) for fp32 a >= 2^-126 (the exponent bits alone; 0 for a = 0)."""
    return a.view(torch.int32).bitwise_and(0x7F800000).view(torch.float32)


def _scales(blocks: torch.Tensor, s: Scaling) -> torch.Tensor:
    """Per-block fp32 scales [R, nb, 1] (per tensor: [1, 1, 1])."""
    one = torch.ones((), dtype=blocks.dtype, device=blocks.device)
    if s.kind == "tensor":
        amax = blocks.abs().amax().reshape(1, 1, 1)
        return torch.where(amax > 0, amax / s.element.max, one)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    if s.kind == "mx":  # 2^(floor(log2 amax) - emax_elem), within E8M0's 2^-127 .. 2^127
        x = _binade(amax).mul_(2.0**-s.element.emax).clamp_(2.0**E8M0.kmin, 2.0**E8M0.kmax)
        return torch.where(amax > 0, x, one)
    t_amax = amax.amax()
    s_t = torch.where(t_amax > 0, t_amax / (E4M3.max * s.element.max), one)
    return round_nearest(amax / s.element.max / s_t, E4M3) * s_t  # 0 for a zero block


def quantize(x: torch.Tensor, s: Scaling, bits: torch.Tensor | None = None) -> Quantized:
    """Quantize fp32 ``x`` along its last dim; ``bits``: SR bits for the padded [R, nb·B]
    elements in row-major order (``rounding.sr_bits``), or None for round-to-nearest-even."""
    shape = x.shape
    k = shape[-1]
    rows = x.reshape(-1, k).float().contiguous()  # transposed operands: one copy, then fast passes
    b = s.block or k
    pad = (-k) % b
    if pad:
        rows = F.pad(rows, (0, pad))
    blocks = rows.reshape(rows.shape[0], -1, b)
    scales = _scales(blocks, s)
    # a zero NVFP4 scale (the only zero scale) dequantizes its block to 0 whatever the values
    v = blocks / torch.where(scales > 0, scales, torch.ones((), dtype=scales.dtype, device=scales.device))
    values = round_nearest(v, s.element) if bits is None else round_stochastic(v, s.element, bits)
    return Quantized(values, scales, shape)


def fake_quantize(x: torch.Tensor, s: Scaling, bits: torch.Tensor | None = None) -> torch.Tensor:
    """``quantize(x, s, bits).dequantize()``: x's shape, fp32."""
    return quantize(x, s, bits).dequantize()


def padded_numel(shape: torch.Size, s: Scaling) -> int:
    """Elements of the padded [R, nb·B] view (how many SR bits ``quantize`` needs)."""
    k = shape[-1]
    rows = 1
    for n in shape[:-1]:
        rows *= n
    b = s.block or max(k, 1)
    return rows * (k + (-k) % b)
