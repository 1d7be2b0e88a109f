"""Model FLOP utilisation: achieved model FLOP/s over the devices' peak (Chowdhery et al.
2022, PaLM, App. B), for the train loop's progress lines. CUDA only: a CPU run, or a GPU
missing from the table, has no MFU (never a made-up one).

Peak dense bf16 tensor-core FLOP/s per GPU (no 2:4 sparsity), from NVIDIA's datasheets:
H100 SXM 989.4 TFLOP/s, H100 PCIe 756 TFLOP/s and H100 NVL 835 TFLOP/s (H100 datasheet,
2023), H200 the same 989 as H100 SXM (H200 datasheet, 2024: same GH100 compute), A100 312
TFLOP/s (A100 datasheet, 2020). A run in fp32 is still measured against the bf16 peak, and
so is one in fp8, mxfp8, mxfp4 or nvfp4: their GEMMs are emulated in fp32
(``scalelab.quant``), so no FP8/FP4 tensor-core peak applies (dense FP8 is 2x the bf16 peak
on H100, FP4 4x on B200, NVIDIA datasheets), and the quantization passes are not model FLOPs.
The model FLOPs are ``Derived.flops_per_token`` (``scalelab.model.counts``: 6·N_matmul plus
attention), so activation recomputation does not count as useful work.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PEAK_BF16_TFLOPS", "device_peak_flops", "mfu", "peak_tflops"]

PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),  # checked before the generic H100 (the SXM part)
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # H100 SXM ("NVIDIA H100 80GB HBM3")
    ("H200", 989.0),
    ("A100", 312.0),
)
"""(substring of ``torch.cuda.get_device_name``, dense bf16 TFLOP/s), first match wins."""


def peak_tflops(name: str) -> float | None:
    """Dense bf16 peak of the GPU called ``name`` (TFLOP/s), or None when unknown."""
    for key, value in PEAK_BF16_TFLOPS:
        if key.lower() in name.lower():
            return value
    return None


def device_peak_flops(device: Any, world_size: int = 1) -> float | None:
    """Peak FLOP/s of ``world_size`` GPUs like ``device`` (a ``torch.device``); None on
    anything but CUDA, or on a GPU not in ``PEAK_BF16_TFLOPS``."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch

    peak = peak_tflops(torch.cuda.get_device_name(device))
    return None if peak is None else peak * 1e12 * world_size


def mfu(tokens_per_s: float | None, flops_per_token: float, peak_flops: float | None) -> float | None:
    """``tokens_per_s · flops_per_token / peak_flops`` (0..1); None when either is unknown."""
    if tokens_per_s is None or not peak_flops:
        return None
    return tokens_per_s * flops_per_token / peak_flops
