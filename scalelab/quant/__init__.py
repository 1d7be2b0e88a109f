"""Low-precision GEMM formats for training: FP8, MXFP8, MXFP4, NVFP4 (``train.precision``).

    formats   element and scale formats (bit layouts, full grids)
    rounding  round-to-nearest-even and stochastic rounding onto a format's grid
    blocks    scaling: per-tensor (FP8), 32-element E8M0 blocks (MX), 16-element E4M3 blocks (NVFP4)
    recipes   which formats, scalings and roundings each precision uses, operand by operand
    linear    the emulated quantized GEMMs (autograd) and ``QuantLinear``
    swap      ``quantize_linears`` (the blocks' projections) and ``set_quant_step`` (SR keys)
    select    which GEMM path runs (the emulation; torchao's kernels are not wired)

Pure math: no I/O. docs/precision.md describes the formats, the roundings and the costs.
"""

from __future__ import annotations

from scalelab.quant.recipes import QUANT_PRECISIONS, RECIPES, Recipe
from scalelab.quant.select import gemm_path
from scalelab.quant.swap import quantize_linears, set_quant_step

__all__ = ["QUANT_PRECISIONS", "RECIPES", "Recipe", "gemm_path", "quantize_linears", "set_quant_step"]
