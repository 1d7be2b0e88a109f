"""bf16 stochastic rounding keyed by a counter-based RNG (like karpathy/llm.c's).

The rounding of element ``i`` of a parameter at a given step depends only on
``(seed, step, param_id, global element index)``: the random bits come from
Philox-4x32-10 (Salmon et al., SC'11) with counter = global index and key =
a 64-bit mix of (seed, step, param_id). Hence

- every data-parallel replica rounds a replicated parameter identically
  (no communication, no shared generator state), and
- a shard holding global elements ``k..k+n`` rounds exactly like elements
  ``k..k+n`` of the full tensor (sharding-independent).

The Philox rounds are written with int64 torch ops on 32-bit values (every
product is split into 16-bit halves so nothing overflows int64), and follow
``triton.language.randint4x(key, counter)`` bit for bit (counter words (ctr_lo, ctr_hi,
0, 0), key words (key_lo, key_hi)). One evaluation gives 128 bits, i.e. the 16 random
bits of 8 consecutive elements: element i uses counter i // 8 (``random16``).

Bit trick (as in pytorch/ao): view fp32 as int32, add a uniform r in [0, 2^16), mask
with 0xFFFF0000; the magnitude rounds up with probability frac / 2^16, so
E[SR(x)] = x and the bf16 cast afterwards is exact. Values that
round past the bf16 maximum become inf (as in torchao). NaNs become the bf16 quiet NaN
0x7FC0. On CUDA (with triton) ``optim.sr_kernel`` computes the same bits in one kernel.
"""

from __future__ import annotations

import importlib.util

import torch

__all__ = ["philox4x32", "random16", "sr_key", "stochastic_round_"]

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
# Philox-4x32 constants (Salmon et al. 2011; identical in triton.language.random).
_ROUND_A = 0xD2511F53
_ROUND_B = 0xCD9E8D57
_KEY_A = 0x9E3779B9
_KEY_B = 0xBB67AE85
_ROUNDS = 10
_HAS_TRITON = importlib.util.find_spec("triton") is not None
_BF16_NAN = 0x7FC0  # quiet NaN bit pattern written for NaN inputs (as optim.sr_kernel)


def _splitmix64(x: int) -> int:
    """One SplitMix64 output (Steele et al. 2014) on a Python int, masked to 64 bits."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def sr_key(seed: int, step: int, param_id: int) -> int:
    """64-bit Philox key for (seed, step, param_id); pure integer math, same on every host."""
    k = _splitmix64(int(seed) & _M64)
    k = _splitmix64(k ^ (int(step) & _M64))
    return _splitmix64(k ^ (int(param_id) & _M64))


def _mulhilo(a: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi32, lo32) of the 64-bit product a·x, a a 32-bit constant, x int64 holding uint32.

    a·x = a_hi·x·2^16 + a_lo·x with a_hi, a_lo < 2^16, so each partial product is < 2^48.
    """
    a_hi, a_lo = a >> 16, a & 0xFFFF
    p_lo = x * a_lo  # < 2^48
    t = x * a_hi + (p_lo >> 16)  # = floor(a·x / 2^16) < 2^49
    hi = t >> 16
    lo = ((t & 0xFFFF) << 16) | (p_lo & 0xFFFF)
    return hi, lo


def philox4x32(key: int, counter: torch.Tensor) -> torch.Tensor:
    """Philox-4x32-10 at counters (int64, >= 0): the four 32-bit output words, int64 ``[*, 4]``.

    Counter words (ctr_lo, ctr_hi, 0, 0), key words (key_lo, key_hi): equals Triton's
    ``tl.randint4x(key, counter)`` for int64 counters, word for word.
    """
    c0 = counter & _M32
    c1 = (counter >> 32) & _M32
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = key & _M32, (key >> 32) & _M32
    for _ in range(_ROUNDS):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return torch.stack((c0, c1, c2, c3), dim=-1)


def random16(key: int, index: torch.Tensor | tuple[int, int], device=None) -> torch.Tensor:
    """16 uniform random bits (int32 in [0, 2^16)) for each global element index.

    Element i takes 16-bit half (i mod 2) of word (i mod 8) // 2 of Philox at counter i // 8:
    one Philox evaluation serves 8 consecutive elements. ``index`` is an int64 tensor of
    global indices, or (start, n) for the contiguous range start .. start + n - 1.
    """
    if isinstance(index, tuple):
        start, n = index
        first, last = start // 8, (start + n - 1) // 8
        ctr = torch.arange(first, last + 1, dtype=torch.int64, device=device)
        words = philox4x32(key, ctr)  # [ctr, 4]
        halves = torch.stack((words & 0xFFFF, words >> 16), dim=-1).reshape(-1)  # [ctr·8]
        return halves[start - 8 * first : start - 8 * first + n].to(torch.int32)
    words = philox4x32(key, index // 8)  # [n, 4]
    word = words.gather(-1, ((index % 8) // 2).unsqueeze(-1)).squeeze(-1)
    return ((word >> (16 * (index % 2))) & 0xFFFF).to(torch.int32)


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

    dst_bf16: bf16 tensor with src's numel (any shape; written through ``copy_``).
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
    x = src_fp32.detach().to(torch.float32).contiguous().view(-1)  # [n]
    n = x.numel()
    if x.is_cuda and _HAS_TRITON and not isinstance(offset, torch.Tensor):
        from .sr_kernel import stochastic_round_triton_  # fused, bit-identical to the path below

        return stochastic_round_triton_(dst_bf16, x, sr_key(seed, step, param_id), int(offset))
    if isinstance(offset, torch.Tensor):
        index = offset.to(device=x.device, dtype=torch.int64).reshape(-1)
        if index.numel() != n:
            raise ValueError(f"stochastic_round_: offset index has {index.numel()} elements, src {n}")
    else:
        index = (int(offset), n)
    if n == 0:
        return dst_bf16
    r = random16(sr_key(seed, step, param_id), index, device=x.device)  # [n] uniform in [0, 2^16)
    bits = x.view(torch.int32) + r  # carries into the kept bits w.p. frac/2^16
    rounded = (bits & -65536).view(torch.float32)  # -65536 == 0xFFFF0000 as int32
    out = rounded.to(torch.bfloat16).view(torch.int16)  # exact: the low half is zero
    out = torch.where(torch.isnan(x), _BF16_NAN, out)  # one canonical NaN on every backend
    dst_bf16.copy_(out.view(torch.bfloat16).view(dst_bf16.shape))
    return dst_bf16
