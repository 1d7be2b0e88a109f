"""Which GEMM path a quantized run takes, as recorded in ``meta.json``.

Today every device runs the emulation (``linear``: quantize, dequantize, fp32 GEMM), so a
CPU run and a GPU run of one config compute the same quantized values. torchao has kernels
for some of these formats (float8 training on sm89+, MX formats on sm100), but they round
and scale their own way (no counter-keyed SR), and no torchao path has been run here: it is
not wired, and ``gemm_path`` says so rather than pretending. Wiring it means checking its
numbers against this emulation on a GPU first (bench/gpu.py).
"""

from __future__ import annotations

import importlib.util

__all__ = ["gemm_path"]


def gemm_path(precision: str, device_type: str) -> str | None:
    """'emulated' for a quantized precision (with why, when torchao is importable on CUDA),
    None for the others (their GEMMs are torch's own)."""
    from scalelab.quant.recipes import RECIPES

    if precision not in RECIPES:
        return None
    if device_type == "cuda" and importlib.util.find_spec("torchao") is not None:
        return "emulated (torchao present; its kernels are not wired)"
    return "emulated"
