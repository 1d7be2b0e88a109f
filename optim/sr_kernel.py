"""Triton kernel for ``optim.stochastic_round_`` on CUDA: one fused pass instead of the
~200 small int64 torch ops of the reference path, with bit-identical output.

Element i (global index) draws Philox-4x32-10 at counter i // 8 with ``tl.randint4x``
and takes 16-bit half (i mod 2) of word (i mod 8) // 2, exactly like
``optim.stochastic_rounding.random16``; then the same bit trick. The bf16 result
is stored as its int16 bit pattern (upper half of the rounded fp32), so no bf16
arithmetic happens in the kernel; NaN is stored as 0x7FC0 (what torch's fp32→bf16
cast gives). Importing this module needs triton; a process that wants the CPU
interpreter must set ``TRITON_INTERPRET=1`` before triton's first import.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["stochastic_round_triton_"]

BLOCK = 1024


@triton.jit
def _sr_kernel(src_ptr, dst_ptr, n, key, start, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)  # [BLOCK]
    mask = offs < n
    x = tl.load(src_ptr + offs, mask=mask, other=0.0)
    gidx = start + offs  # global element index
    c0, c1, c2, c3 = tl.randint4x(key, gidx // 8)
    word_id = (gidx % 8) // 2
    word = tl.where(word_id == 0, c0, tl.where(word_id == 1, c1, tl.where(word_id == 2, c2, c3)))
    r = (word.to(tl.uint32, bitcast=True) >> ((gidx % 2) * 16).to(tl.uint32)) & 0xFFFF
    bits = x.to(tl.int32, bitcast=True) + r.to(tl.int32)
    top = (bits >> 16).to(tl.int16)  # the upper 16 bits: the bf16 bit pattern
    top = tl.where(x != x, tl.full(top.shape, 0x7FC0, tl.int16), top)  # noqa: PLR0124 (NaN test)
    tl.store(dst_ptr + offs, top, mask=mask)


def stochastic_round_triton_(dst_bf16: torch.Tensor, src_fp32: torch.Tensor, key: int, start: int) -> torch.Tensor:
    """SR of fp32 ``src`` (global indices start ..) into bf16 ``dst`` with Philox key ``key``."""
    src = src_fp32.detach().to(torch.float32).contiguous().view(-1)
    out = dst_bf16 if dst_bf16.is_contiguous() else torch.empty_like(dst_bf16, memory_format=torch.contiguous_format)
    n = src.numel()
    if n:
        grid = (triton.cdiv(n, BLOCK),)
        _sr_kernel[grid](src, out.view(-1).view(torch.int16), n, key, start, BLOCK=BLOCK)
    if out is not dst_bf16:
        dst_bf16.copy_(out)
    return dst_bf16
