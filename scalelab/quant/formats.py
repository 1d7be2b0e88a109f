"""Element and scale formats as frozen dataclasses, each with its full grid.

A minifloat with E exponent bits, M mantissa bits and bias b encodes code (e, m) as
``m / 2^M · 2^(1-b)`` when e = 0 (subnormal) and ``(1 + m / 2^M) · 2^(e-b)`` otherwise, with a
sign bit on top. Codes above ``max`` are inf/NaN (E5M2) or NaN (E4M3) and are not on the grid.

- FP8 E4M3 (bias 7, max 448): the OCP / NVIDIA "fn" variant, no inf; S.1111.111 is NaN.
  FP8 E5M2 (bias 15, max 57344): IEEE-like, e = 31 is inf/NaN. Micikevicius et al. 2022,
  "FP8 Formats for Deep Learning", arXiv 2209.05433 (E4M3 for weights and activations,
  E5M2 for gradients).
- FP4 E2M1 (bias 1, max 6): magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no inf or NaN. The
  element type of MXFP4 (OCP Microscaling Formats (MX) Specification v1.0, 2023) and NVFP4
  (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149).
- E8M0 (MX block scale): an unsigned biased exponent, 2^(e-127) for e = 0..254 (2^-127 ..
  2^127); e = 255 is NaN (OCP MX v1.0, section 5.4).
- E4M3 as NVFP4's block scale: the positive E4M3 values (arXiv 2509.25149).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

__all__ = ["E2M1", "E4M3", "E5M2", "E8M0", "ELEMENT_FORMATS", "ElementFormat", "ScaleE8M0"]


@dataclass(frozen=True)
class ElementFormat:
    """A signed minifloat (sign, ``exp_bits``, ``man_bits``) with subnormals, saturating at ``max``."""

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max: float
    """Largest finite magnitude (codes above it are inf/NaN or absent)."""

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal (also the subnormals' exponent): 1 - bias."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest normal: floor(log2(max)) (the MX spec's emax_elem)."""
        return int(torch.tensor(self.max, dtype=torch.float64).log2().floor().item())

    def code_value(self, e: int, m: int) -> float:
        """The magnitude code (e, m) encodes."""
        frac = m / 2**self.man_bits
        return frac * 2.0 ** self.emin if e == 0 else (1 + frac) * 2.0 ** (e - self.bias)

    @cached_property
    def magnitudes(self) -> tuple[float, ...]:
        """Every finite non-negative value, ascending (enumerated from the codes)."""
        values = (self.code_value(e, m) for e in range(2**self.exp_bits) for m in range(2**self.man_bits))
        return tuple(sorted(v for v in values if v <= self.max))

    def grid(self) -> torch.Tensor:
        """The full signed grid as float64, ascending (-max .. -0 = 0 .. max, zero once)."""
        pos = torch.tensor(self.magnitudes, dtype=torch.float64)
        return torch.cat((-pos.flip(0)[:-1], pos))


@dataclass(frozen=True)
class ScaleE8M0:
    """MX's shared block scale: 2^k for k in [kmin, kmax] (OCP MX v1.0: E8M0, bias 127)."""

    name: str = "e8m0"
    kmin: int = -127
    kmax: int = 127

    def grid(self) -> torch.Tensor:
        return torch.exp2(torch.arange(self.kmin, self.kmax + 1, dtype=torch.float64))


E4M3 = ElementFormat("e4m3", exp_bits=4, man_bits=3, bias=7, max=448.0)
E5M2 = ElementFormat("e5m2", exp_bits=5, man_bits=2, bias=15, max=57344.0)
E2M1 = ElementFormat("e2m1", exp_bits=2, man_bits=1, bias=1, max=6.0)
E8M0 = ScaleE8M0()
ELEMENT_FORMATS = {f.name: f for f in (E4M3, E5M2, E2M1)}
