"""Triton kernel for ``optim.stochastic_round_`` on CUDA: one fused pass instead of the
~20 small int32 torch ops of the reference path, with bit-identical output.

Element i (global index) takes 16-bit half (i mod 2) of h = lowbias32(c XOR k_p), c the pair
counter i // 2 mod 2^31 and k_p the 32-bit key of its piece p = (i // 2) >> 31, exactly like
``optim.stochastic_rounding.random16`` (whose docstring defines it); the hash runs in uint32
(logical shifts, products mod 2^32). The host splits a launch at piece boundaries, so one
launch has one key. Then the same bit trick: the bf16 result is stored as its int16 bit
pattern (upper half of x + r), so no bf16 arithmetic happens in the kernel; NaN is stored as
0x7FC0. Importing this module needs triton; a process that wants the CPU interpreter must
set ``TRITON_INTERPRET=1`` before triton's first import.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._sr_pieces import PIECE_BITS, piece_key

__all__ = ["stochastic_round_triton_"]

BLOCK = 1024


@triton.jit
def _sr_kernel(src_ptr, dst_ptr, n, key32, start, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)  # [BLOCK]
    mask = offs < n
    x = tl.load(src_ptr + offs, mask=mask, other=0.0)
    gidx = start + offs  # global element index
    c = ((gidx >> 1) & 0x7FFFFFFF).to(tl.uint32)  # pair counter within the piece
    h = c ^ key32.to(tl.uint32, bitcast=True)
    # lowbias32 (C. Wellons): the constants as uint32 so every product wraps mod 2^32
    h = (h ^ (h >> 16)) * tl.full(h.shape, 0x7FEB352D, tl.uint32)
    h = (h ^ (h >> 15)) * tl.full(h.shape, 0x846CA68B, tl.uint32)
    h = h ^ (h >> 16)
    r = (h >> ((gidx & 1) * 16).to(tl.uint32)) & 0xFFFF
    bits = x.to(tl.int32, bitcast=True) + r.to(tl.int32)
    top = (bits >> 16).to(tl.int16)  # the upper 16 bits: the bf16 bit pattern
    top = tl.where(x != x, tl.full(top.shape, 0x7FC0, tl.int16), top)  # noqa: PLR0124 (NaN test)
    tl.store(dst_ptr + offs, top, mask=mask)


def stochastic_round_triton_(dst_bf16: torch.Tensor, src_fp32: torch.Tensor, key: int, start: int) -> torch.Tensor:
    """SR of fp32 ``src`` (global indices start ..) into bf16 ``dst`` with the 64-bit key
    ``key`` (``optim.stochastic_rounding.sr_key``)."""
    src = src_fp32.detach().to(torch.float32).contiguous().view(-1)
    out = dst_bf16 if dst_bf16.is_contiguous() else torch.empty_like(dst_bf16, memory_format=torch.contiguous_format)
    n = src.numel()
    flat = out.view(-1).view(torch.int16)
    done = 0
    while done < n:  # one launch per piece (one piece below 2^32 elements)
        gidx = start + done
        piece = gidx >> (PIECE_BITS + 1)
        m = min(n - done, ((piece + 1) << (PIECE_BITS + 1)) - gidx)
        grid = (triton.cdiv(m, BLOCK),)
        _sr_kernel[grid](src[done:], flat[done:], m, piece_key(key, piece), gidx, BLOCK=BLOCK)
        done += m
    if out is not dst_bf16:
        dst_bf16.copy_(out)
    return dst_bf16
