"""Rounding onto an element format's grid: round-to-nearest-even and stochastic rounding.

Both first saturate, v -> clamp(v, -max, max) (values past the format's largest finite value
become it, as NVIDIA's "satfinite" conversions and the OCP MX v1.0 spec's clamping do). With
e = max(floor(log2 |v|), emin) the grid spacing around v is ulp = 2^(e - man_bits), a power
of two, so q = v / ulp is exact and the grid points around v are floor(q)·ulp and
ceil(q)·ulp (the grid is symmetric); at a binade's top ceil(q)·ulp is the next binade's first
value, and since max is itself a multiple of its ulp, rounding never passes max.

- RTN: q rounded half to even (``torch.round``). An even q is an even code (q's parity is
  the mantissa's last bit), so ties go to the even code as IEEE 754 round-to-nearest-even.
- SR: towards +inf with probability equal to the fractional position f = q - floor(q)
  between the two neighbours, so E[SR(v)] = v within ±max. The randomness is ``optim.stochastic_rounding``'s
  counter-based bits (``random16``: 16 bits per element from lowbias32 of a key-mixed
  counter, key ``sr_key(seed, step, id)``), so the rounding of element i depends only on
  (seed, step, id, i): a resumed run rounds identically and torch's global RNG is never
  touched. Up iff 2r + 1 < f·2^17 for r uniform on [0, 2^16): P(up) = ceil(f·2^16 - 1/2)/2^16,
  within 2^-17 of f, so the bias |E[SR(v)] - v| is at most 2^-17 of the grid gap (all
  products are exact in fp32: 2r + 1 < 2^17, f·2^17 has at most 17 + 24 bits of which f's).

RTN keeps signs (−0 stays −0); NaN inputs are not expected (training has diverged by then).
Inputs are fp32 (the bit trick reads fp32 exponents).
"""

from __future__ import annotations

import torch

from optim.stochastic_rounding import random16, sr_key
from scalelab.quant.formats import ElementFormat

__all__ = ["SR_BITS", "round_nearest", "round_stochastic", "sr_bits"]

_EXP_MASK = 0x7F800000  # fp32 exponent field

SR_BITS = 16
"""Random bits per element (``random16``); the SR bias is at most 2^-(SR_BITS+1) of a gap."""


def _split(v: torch.Tensor, fmt: ElementFormat) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, ulp): fp32 ``v`` saturated at ±max, in units of its grid spacing (exact), and that
    spacing. 2^floor(log2 |v|) is v's fp32 bits with the sign and mantissa cleared (0 for
    v = 0 and for fp32 subnormals, which the clamp to 2^emin then covers): integer ops, ~30x
    faster on the CPU than ``torch.frexp``."""
    a = v.clamp(-fmt.max, fmt.max)
    binade = a.view(torch.int32).bitwise_and(_EXP_MASK).view(torch.float32)
    ulp = binade.clamp_(min=2.0**fmt.emin).mul_(2.0**-fmt.man_bits)
    return a.div_(ulp), ulp


def round_nearest(v: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """RTN-even of fp32 ``v`` onto ``fmt``'s grid (saturating at ±max); same shape, fp32."""
    q, ulp = _split(v, fmt)
    return q.round_().mul_(ulp)  # half to even, symmetric in the sign; -0 stays -0


def sr_bits(seed: int, step: int, tensor_id: int, n: int, device=None) -> torch.Tensor:
    """int32 [n] in [0, 2^16): the SR bits of elements 0..n-1 of tensor ``tensor_id`` at ``step``."""
    return random16(sr_key(seed, step, tensor_id), (0, n), device=device)


def round_stochastic(v: torch.Tensor, fmt: ElementFormat, bits: torch.Tensor) -> torch.Tensor:
    """SR of fp32 ``v`` onto ``fmt``'s grid with ``bits`` (int32 in [0, 2^16), v's numel, e.g.
    ``sr_bits``): towards +inf with probability f = q - floor(q); values past ±max saturate
    (that part is biased)."""
    q, ulp = _split(v, fmt)
    lo = torch.floor(q)
    frac = q.sub_(lo).mul_(2.0 ** (SR_BITS + 1))
    up = bits.reshape(v.shape).to(v.dtype).mul_(2).add_(1) < frac
    return lo.add_(up.to(v.dtype)).mul_(ulp)
