"""Which formats, scalings and roundings each low-precision ``train.precision`` uses.

Every GEMM of a quantized Linear quantizes both operands along that GEMM's reduction dim:

    forward   y   = Q_f(x) @ Q_f(W)^T       blocks along in_features
    backward  dx  = Q_g(g) @ Q_f(W)         blocks along out_features
              dW  = Q_g(g)^T @ Q_f(x)       blocks along the tokens

as "FP4 All the Way" (Chmiel et al. 2025, arXiv 2505.19115) and Quartet (Castro et al.
2025, arXiv 2505.14669) quantize all three GEMMs. Q_f rounds to nearest even; Q_g rounds
stochastically in the FP4 formats (Chmiel et al.: "stochastic rounding for backward and
update passes and round-to-nearest for the forward pass"; Tseng et al. 2025, "Training LLMs
with MXFP4", arXiv 2502.20586: SR makes the MXFP4 gradient unbiased) and to nearest in the
FP8 ones (Micikevicius et al. 2022, arXiv 2209.05433, round E5M2 gradients to nearest). The
weight update itself is fp32 (the optimizer's master weights), not quantized. Quartet's
Hadamard rotations and QuEST forward clipping are not emulated (plain block scaling as
the formats define it).

- ``fp8``: E4M3 forward, E5M2 gradients, per-tensor scales (arXiv 2209.05433).
- ``mxfp8``: MX blocks of 32, E4M3 forward, E5M2 gradients (OCP MX v1.0).
- ``mxfp4``: MX blocks of 32, E2M1 everywhere, SR gradients.
- ``nvfp4``: blocks of 16 with E4M3 scales and a per-tensor fp32 scale, E2M1, SR gradients
  (arXiv 2509.25149).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from scalelab.quant.blocks import Scaling
from scalelab.quant.formats import E2M1, E4M3, E5M2

__all__ = ["QUANT_PRECISIONS", "RECIPES", "Recipe"]


@dataclass(frozen=True)
class Recipe:
    """One precision: the forward operands' (x, W) scaling, the gradients' scaling and rounding."""

    name: str
    forward: Scaling
    grad: Scaling
    grad_rounding: Literal["rtn", "sr"]


RECIPES = {r.name: r for r in (
    Recipe("fp8", Scaling("tensor", E4M3), Scaling("tensor", E5M2), "rtn"),
    Recipe("mxfp8", Scaling("mx", E4M3, 32), Scaling("mx", E5M2, 32), "rtn"),
    Recipe("mxfp4", Scaling("mx", E2M1, 32), Scaling("mx", E2M1, 32), "sr"),
    Recipe("nvfp4", Scaling("nv", E2M1, 16), Scaling("nv", E2M1, 16), "sr"),
)}
QUANT_PRECISIONS = tuple(RECIPES)
