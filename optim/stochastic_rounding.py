"""bf16 stochastic rounding keyed by a counter-based hash (like karpathy/llm.c's).

The rounding of element ``i`` of a parameter at a given step depends only on
``(seed, step, param_id, global element index)``. Hence

- every data-parallel replica rounds a replicated parameter identically
  (no communication, no shared generator state),
- a shard holding global elements ``k..k+n`` rounds exactly like elements
  ``k..k+n`` of the full tensor (sharding-independent), and
- a resumed run rounds like an uninterrupted one (the key takes the integer step count).

Random bits (the same scheme as karpathy/llm.c's SR: an integer hash of a key-mixed counter,
there SquirrelNoise5, here Wellons' lowbias32). K = ``sr_key(seed, step, param_id)`` is a
64-bit SplitMix64 mix (Steele et al. 2014) of the three integers (pure Python, the same on
every host). Element i belongs to the
pair q = i // 2; with piece p = q >> 31 and counter c = q mod 2^31, the 32-bit word
``h = lowbias32(c XOR k_p)``, k_p = (K XOR p·0x9E3779B9) mod 2^32, supplies both elements of
the pair: u(i) = 16-bit half (i mod 2) of h (even i: the low half). lowbias32 is C. Wellons'
2-round integer hash (x ^= x>>16; x *= 0x7feb352d; x ^= x>>15; x *= 0x846ca68b; x ^= x>>16;
"Prospecting for Hash Functions", 2018, nullprogram.com; in the hash-prospector repository):
a bijection of 32-bit words whose avalanche bias he reports as about 0.17, below murmur3's
fmix32 finaliser (about 0.26). r(i) = u(i) are the 16 random bits added to element i. (p is 0
for every tensor under 2^32 elements; it exists so that larger ones never reuse a counter.)
``optim.sr_kernel`` (Triton, CUDA) computes the same h in uint32.

Bit trick (as in pytorch/ao): view fp32 as int32, add r in [0, 2^16) and keep the upper 16
bits: the magnitude rounds up with probability frac / 2^16, so E[SR(x)] = x when r is
uniform. Values that round past the bf16 maximum become inf (as in torchao); ±inf stay ±inf
(their low bits are 0, so nothing carries); NaNs become the bf16 quiet NaN 0x7FC0.

Why this hash and not Philox. The bits used to come from Philox-4x32-10 (Salmon et al., SC'11;
Triton's ``tl.randint4x``): ten rounds of 32x32->64-bit products written as ~200 small int64
torch ops per parameter. ``bench/sr_adamw_step.py`` in the scalelab repository (one bf16
``AdamW(stochastic_rounding=True)`` step over one fp32 AdamW step on the same shapes, one CPU
thread, process CPU time, medians of interleaved repeats; 2-core AMD EPYC shared with other
jobs, 1-min load 2.7-3.0) measured

    case (params, tensors)          Philox (before)   lowbias32 pairs (now)
    GPT d=256, 4 layers (3.5M, 52)      12.5x              1.9x - 2.1x
    GPT d=64, 2 layers (133k, 28)       13.5x              2.3x - 2.5x
    one 32x32 matrix                     4.9x              1.5x - 1.7x

(wall-clock medians agree for the large case, 2.0x; for the 133k case they read ~4x on this
loaded machine: the longer SR step is pre-empted more often, its fastest wall time is 2.4-2.9x
the fastest fp32 one). Option (b), a cheaper Philox, was not tried: by our count (not
measured), 10 rounds of two 32x32->64-bit products per 8 elements, each product split to fit
int64, plus unpacking 8 halves, needs more int64 passes than the rounding's whole budget, and
small params are bound by the per-op overhead (~2 us an op here), which only fewer ops reduce.
The hash costs 12 int32 ops on n/2 words, the rounding 4 passes over n and a sum; eager code
also slices a cached arange for the counters, passes its constants as 0-d tensors (an op with a
Python scalar costs twice as much) and looks for NaNs with one sum before paying for isnan +
masked_fill. Unbiasedness needs r uniform and independent of x, not cryptographic strength;
optim/tests/test_stochastic_rounding.py (in the scalelab repository) checks it with stated
bounds (chi-square over 256 bins of the high and low 8 bits of r, over one key and over 256
keys; joint chi-squares of the two halves of a pair and of consecutive steps; correlations ~0
between neighbouring elements, steps and params; each element's mean rounding error over 512
steps), and those checks fail for a multiply-only hash or a step-blind key. k_p has 32 bits:
two (step, param, piece) keys collide with probability 2^-32 a pair, which only makes two
roundings share one noise pattern.

Under ``torch.compile`` the step is a symbolic int; SplitMix64 on it made index expressions
with 64-bit constants that Inductor could not print (int64 overflow at code generation), so
traced code computes the same key as int64 tensor math (``sr_key_tensor``) and runs the torch
path on every device (Inductor fuses it; eager CUDA uses ``optim.sr_kernel``).
"""

from __future__ import annotations

import importlib.util
import math
import sys

import torch

from ._sr_pieces import M32 as _M32
from ._sr_pieces import PIECE_BITS as _PIECE_BITS
from ._sr_pieces import PIECE_MUL as _PIECE_MUL
from ._sr_pieces import as_int32 as _as_int32
from ._sr_pieces import piece_key

__all__ = ["lowbias32", "piece_key", "random16", "sr_key", "sr_key_tensor", "stochastic_round_"]

_M64 = 0xFFFFFFFFFFFFFFFF
# lowbias32 (C. Wellons, hash-prospector): (shift, multiplier) rounds, then a final x ^= x >> 16
_LB_ROUNDS = ((16, 0x7FEB352D), (15, 0x846CA68B))
_LB_FINAL = 16
_HAS_TRITON = importlib.util.find_spec("triton") is not None
_LITTLE = sys.byteorder == "little"  # int16 view of an int32: [low half, high half]
_BF16_NAN = 0x7FC0  # quiet NaN bit pattern written for NaN inputs (as optim.sr_kernel)


def _splitmix64(x: int) -> int:
    """One SplitMix64 output (Steele et al. 2014) on a Python int, masked to 64 bits."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def sr_key(seed: int, step: int, param_id: int) -> int:
    """64-bit key for (seed, step, param_id); pure integer math, same on every host."""
    k = _splitmix64(int(seed) & _M64)
    k = _splitmix64(k ^ (int(step) & _M64))
    return _splitmix64(k ^ (int(param_id) & _M64))


def _i64(v: int) -> int:
    """A 64-bit pattern as the signed int64 value with the same bits."""
    return ((v + 2**63) & _M64) - 2**63


def _splitmix64_t(x: torch.Tensor) -> torch.Tensor:
    """``_splitmix64`` on an int64 tensor holding 64-bit patterns: sums and products wrap mod
    2^64 (two's complement), logical right shifts are arithmetic ones masked to 64 - s bits."""
    x = x + _i64(0x9E3779B97F4A7C15)
    x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * _i64(0xBF58476D1CE4E5B9)
    x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * _i64(0x94D049BB133111EB)
    return x ^ ((x >> 31) & ((1 << 33) - 1))


def sr_key_tensor(seed: int, step, param_id: int, device=None) -> torch.Tensor:
    """``sr_key`` as a 0-d int64 tensor (the same 64 bits, signed), for traced code: there the
    step is a symbolic int (read from the step tensors inside the graph), and SplitMix64 on a
    symbolic int builds an index expression with 64-bit constants that Inductor cannot print
    (an int64 overflow at code generation). As tensor math it is computed in the kernel.
    The key is then used only in tensor ops (``piece_key`` and the hash accept it)."""
    k = torch.scalar_tensor(_i64(_splitmix64(int(seed) & _M64)), dtype=torch.int64, device=device)
    k = _splitmix64_t(k ^ torch.scalar_tensor(step, dtype=torch.int64, device=device))
    return _splitmix64_t(k ^ _i64(int(param_id) & _M64))


def lowbias32(x: int) -> int:
    """Wellons' lowbias32 on a Python int (the reference the tensor code is tested against)."""
    x &= _M32
    for shift, mul in _LB_ROUNDS:
        x = ((x ^ (x >> shift)) * mul) & _M32
    return x ^ (x >> _LB_FINAL)


def _int32_consts(as_tensors: bool) -> dict:
    """The hash's shifts, masks and multipliers as int32 values: Python ints, or 0-d CPU int32
    tensors (eager: an op with a 0-d tensor costs ~2 us, with a Python scalar ~4.5 us, and
    small params are bound by per-op overhead; TensorIterator treats both as a scalar)."""
    wrap = (lambda v: torch.tensor(v, dtype=torch.int32)) if as_tensors else (lambda v: v)
    return {
        "rounds": [(wrap(s), wrap((1 << (32 - s)) - 1), wrap(_as_int32(m))) for s, m in _LB_ROUNDS],
        "final": (wrap(_LB_FINAL), wrap((1 << (32 - _LB_FINAL)) - 1)),
        "sixteen": wrap(16),
    }


_CONSTS = {False: _int32_consts(False), True: _int32_consts(True)}


def _consts() -> dict:
    return _CONSTS[not torch.compiler.is_compiling()]


def _lowbias32_(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 in place on an int32 tensor (the uint32 bits). A logical right shift is an
    arithmetic one masked to 32 - s bits; int32 products wrap mod 2^32 (two's complement),
    which keeps the low 32 bits of the uint32 product."""
    c = _consts()
    t = torch.empty_like(x)
    for shift, mask, mul in c["rounds"]:
        torch.bitwise_right_shift(x, shift, out=t).bitwise_and_(mask)
        x.bitwise_xor_(t).mul_(mul)
    shift, mask = c["final"]
    torch.bitwise_right_shift(x, shift, out=t).bitwise_and_(mask)
    return x.bitwise_xor_(t)


_IOTA: dict[torch.device, torch.Tensor] = {}  # eager only: a cached int32 0, 1, 2, ... per device
_IOTA_MAX = 1 << 22  # 16 MiB of int32 at most; longer ranges call arange


def _keyed_counters(c0: int, m: int, k: int, device: torch.device) -> torch.Tensor:
    """int32 [m]: (c0 + j) XOR k for j < m (c0 + m <= 2^31; k a signed int32 value). Eager
    code slices a cached arange (torch's CPU arange is not vectorised, and one op is one op
    less: small params are bound by per-op overhead)."""
    if c0 + m > _IOTA_MAX or torch.compiler.is_compiling():
        return torch.arange(c0, c0 + m, dtype=torch.int32, device=device).bitwise_xor_(k)
    iota = _IOTA.get(device)
    if iota is None or iota.numel() < c0 + m:
        size = min(_IOTA_MAX, max(2 * (c0 + m), 1 << 16))
        iota = _IOTA[device] = torch.arange(size, dtype=torch.int32, device=device)
    return torch.bitwise_xor(iota[c0 : c0 + m], torch.scalar_tensor(k, dtype=torch.int32))


def _halves(h: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """int32 [b - a]: the 16-bit halves a .. b - 1 of the words h in element order (2j: the
    low half of h[j], 2j + 1: its high half), zero-extended."""
    if _LITTLE and not torch.compiler.is_compiling():
        return h.view(torch.uint16)[a:b].to(torch.int32)  # one pass
    # traced code (no uint16 there) and big-endian hosts: the halves explicitly
    return torch.stack((h & 0xFFFF, (h >> 16) & 0xFFFF), dim=-1).reshape(-1)[a:b]


def _random16_range(key: int, start: int, n: int, device: torch.device) -> torch.Tensor:
    """int32 [n]: r(i) for i = start .. start + n - 1 (n >= 1), one hash per pair."""
    first, last = start >> 1, (start + n - 1) >> 1  # pair counters q
    if last >> _PIECE_BITS == 0:  # piece 0 only: every tensor under 2^32 elements
        h = _lowbias32_(_keyed_counters(first, last - first + 1, piece_key(key, 0), device))
        return _halves(h, start & 1, (start & 1) + n)
    parts = []
    for piece in range(first >> _PIECE_BITS, (last >> _PIECE_BITS) + 1):
        base = piece << _PIECE_BITS
        q0, q1 = max(first, base), min(last, base + (1 << _PIECE_BITS) - 1)
        h = _lowbias32_(_keyed_counters(q0 - base, q1 - q0 + 1, piece_key(key, piece), device))
        parts.append(_halves(h, max(start, 2 * q0) - 2 * q0, min(start + n, 2 * q1 + 2) - 2 * q0))
    return torch.cat(parts)


def _random16_index(key: int, index: torch.Tensor) -> torch.Tensor:
    """int32 [n]: r(i) for arbitrary global indices (int64 tensor)."""
    q = index >> 1
    piece = q >> _PIECE_BITS
    kp = (key & _M32) ^ ((piece * _PIECE_MUL) & _M32)  # int64, in [0, 2^32)
    x = (q & ((1 << _PIECE_BITS) - 1)) ^ kp
    h = _lowbias32_(torch.where(x >= 2**31, x - 2**32, x).to(torch.int32))
    return (h >> (16 * (index & 1)).to(torch.int32)) & 0xFFFF  # the wanted half


def random16(key: int, index: torch.Tensor | tuple[int, int], device=None) -> torch.Tensor:
    """r(i), the 16 uniform random bits (int32 in [0, 2^16)) that SR adds to element i.

    ``index`` is an int64 tensor of global indices, or (start, n) for the contiguous range
    start .. start + n - 1. r(i) = half (i mod 2) of lowbias32 at pair i // 2 (module docstring).
    """
    if isinstance(index, tuple):
        if index[1] == 0:
            return torch.zeros(0, dtype=torch.int32, device=device)
        return _random16_range(key, int(index[0]), int(index[1]), torch.device(device or "cpu"))
    return _random16_index(key, index.to(torch.int64))


def stochastic_round_(
    dst_bf16: torch.Tensor,
    src_fp32: torch.Tensor,
    *,
    seed: int,
    step: int,
    param_id: int = 0,
    offset: int | torch.Tensor = 0,
) -> torch.Tensor:
    """Write SR_bf16(src_fp32) into ``dst_bf16`` in place and return it.

    dst_bf16: bf16 tensor with src's numel (any shape and strides).
    src_fp32: fp32 values to round (not modified).
    seed, step, param_id: the RNG key; pass the same triple on every replica.
    offset: global flat index of ``src``'s first element (a contiguous shard at
        global offset k), or an int64 tensor of the global flat index of every
        element of ``src`` (non-contiguous shards).
    """
    if dst_bf16.dtype != torch.bfloat16:
        raise TypeError(f"stochastic_round_: dst must be bfloat16, got {dst_bf16.dtype}")
    if dst_bf16.numel() != src_fp32.numel():
        raise ValueError(
            f"stochastic_round_: dst has {dst_bf16.numel()} elements, src {src_fp32.numel()}"
        )
    x = src_fp32.detach()
    if x.dtype != torch.float32 or not x.is_contiguous():
        x = x.to(torch.float32).contiguous()
    x = x.view(-1)  # [n]
    n = x.numel()
    if torch.compiler.is_compiling():  # a tensor key: Inductor fuses the torch path (any device)
        key = sr_key_tensor(seed, step, param_id, x.device)
    else:
        key = sr_key(seed, step, param_id)
    if x.is_cuda and _HAS_TRITON and isinstance(key, int) and not isinstance(offset, torch.Tensor):
        from .sr_kernel import stochastic_round_triton_  # fused, bit-identical to the path below

        return stochastic_round_triton_(dst_bf16, x, key, int(offset))
    if isinstance(offset, torch.Tensor):
        index = offset.to(device=x.device, dtype=torch.int64).reshape(-1)
        if index.numel() != n:
            raise ValueError(f"stochastic_round_: offset index has {index.numel()} elements, src {n}")
        bits = _random16_index(key, index)
    elif n == 0:
        return dst_bf16
    else:
        bits = _random16_range(key, int(offset), n, x.device)  # a fresh int32 [n]: reused below
    # x + r carries into the kept upper half w.p. frac / 2^16
    bits.add_(x.view(torch.int32)).bitwise_right_shift_(_consts()["sixteen"])  # sign-extended upper half
    out = dst_bf16.view(torch.int16)
    out.copy_(bits.view(dst_bf16.shape))  # int32 -> int16 keeps the low 16 bits: the bf16 bits
    # NaN inputs (only they can carry out of their class) become one canonical NaN. Eager
    # code first asks whether there is any (a sum is NaN iff some term is NaN, or +inf and
    # -inf meet): one vectorised pass instead of isnan + masked_fill on every param; traced
    # code does the fix unconditionally (no data-dependent branch).
    if torch.compiler.is_compiling() or not math.isfinite(x.sum().item()):
        out.masked_fill_(torch.isnan(x).view(dst_bf16.shape), _BF16_NAN)
    return dst_bf16
