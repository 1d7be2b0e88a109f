"""Effective bits P of each training precision, the input of the precision law (laws/precision.py).

Kumar et al. 2024 ("Scaling Laws for Precision", arXiv 2411.04330) write a format's cost
through its bit count P in N_eff = N (1 - exp(-P / gamma)). For a block-scaled format the
count here is the element bits plus the scale's bits shared over its block, per element:

    P = element bits + scale bits / block size

- MXFP8 (OCP Microscaling Formats v1.0, 2023): E4M3 elements, an 8-bit E8M0 scale per 32
  elements: 8 + 8/32 = 8.25;
- MXFP4 (same spec): E2M1 elements, E8M0 scale per 32: 4 + 8/32 = 4.25;
- NVFP4 (NVIDIA, arXiv 2509.25149): E2M1 elements, an E4M3 scale per 16: 4 + 8/16 = 4.5, plus
  one fp32 scale per tensor (32 bits over a whole matrix: < 1e-4 bit per element, left out);
- FP8 (E4M3/E5M2 with a per-tensor or per-row scale: one scale per tensor or row, < 0.01
  bit per element, left out): 8;
- bf16 (the autocast and pure variants alike: the GEMMs see bf16 operands): 16; fp32: 32.

This counts storage, the quantity Kumar et al.'s P is (bits per weight/activation
element); it is a choice, not a measured fact: a scale carries range, not resolution, so a
reader may prefer P = element bits (4 for both FP4 formats). The non-parametric
multiplier (one m per format, fit/precision.py) does not depend on this choice; only the
gamma form does.
"""

from __future__ import annotations

from collections.abc import Iterable

from analysis.errors import AnalysisInputError, did_you_mean

__all__ = ["BITS", "REFERENCE_ORDER", "bits_of", "reference_format"]

BITS: dict[str, float] = {
    "fp32": 32.0,
    "bf16": 16.0,
    "bf16-autocast": 16.0,
    "bf16-pure": 16.0,
    "mxfp8": 8.0 + 8.0 / 32.0,
    "fp8": 8.0,
    "nvfp4": 4.0 + 8.0 / 16.0,
    "mxfp4": 4.0 + 8.0 / 32.0,
}
"""Effective bits per element (module docstring)."""

REFERENCE_ORDER = ("bf16", "bf16-autocast", "bf16-pure", "fp32")
"""The reference precision of the multipliers: the first of these the study has (bf16, the
reference of Kumar et al. and of the FP4 papers, before fp32)."""


def bits_of(fmt: str, *, column: str = "train.precision") -> float:
    """P of ``fmt``; an unknown format is one line naming it, the column and the choices."""
    key = str(fmt)
    if key not in BITS:
        raise AnalysisInputError(
            f"{column}: unknown precision '{key}'{did_you_mean(key, BITS)}; the precision law "
            f"knows {sorted(BITS)}"
        )
    return BITS[key]


def reference_format(formats: Iterable[str]) -> str:
    """The reference among ``formats`` (``REFERENCE_ORDER``), else the one of most bits."""
    have = list(formats)
    for ref in REFERENCE_ORDER:
        if ref in have:
            return ref
    return max(have, key=lambda f: (bits_of(f), f))
