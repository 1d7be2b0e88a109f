"""Triton kernels behind the Newton-Schulz step, all batched and accumulating in fp32.

One NS step on X [B, m, n] (m <= n), as in ``optim.newton_schulz``:
    A = X·Xᵀ           sym_gram:   lower-triangle tiles, each stored with its mirror (diagonal
                                   tiles mirror their own lower triangle: exact symmetry)
    B = b·A + c·A²     sym_poly:   A is symmetric so A² = A·Aᵀ, the same kernel; b·A in the epilogue
    X = a·X + B·X      gemm_axpby: a full GEMM with beta = a in the epilogue
FLOPs per step fall from 4m²n + 2m³ to 3m²n + m³ (1.5x at most for square X).

Importing this module defines the kernels; it needs triton. ``TRITON_INTERPRET=1`` must be
set before the import for the CPU interpreter, which gets a single autotune config.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

__all__ = ["gemm_axpby", "sym_gram", "sym_poly"]

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _sym_configs() -> list[triton.Config]:
    if _INTERPRET:  # the interpreter mishandles multi-config autotune
        return [triton.Config({"BLOCK_M": 32, "BLOCK_K": 64})]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bm, bk, w, s in ((128, 64, 8, 3), (128, 32, 4, 4), (64, 64, 4, 4), (64, 32, 4, 3))
    ]


def _gemm_configs() -> list[triton.Config]:
    if _INTERPRET:
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in (
            (128, 128, 64, 8, 3),
            (128, 64, 32, 4, 4),
            (64, 128, 32, 4, 4),
            (64, 64, 32, 4, 3),
        )
    ]


@triton.autotune(configs=_sym_configs(), key=["M", "K", "HAS_C"])
@triton.jit
def _syrk_kernel(
    X, C, Out,  # X [B, M, K]; C, Out [B, M, M]
    M, K,
    sxb, sxm, sxk, scb, scm, scn, sob, som, son,
    alpha, beta,
    HAS_C: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Out = alpha·X·Xᵀ + beta·C on tile (ti, tj), ti >= tj, stored twice (C symmetric)."""
    pid = tl.program_id(0)  # linear index into the lower triangle of tiles
    bid = tl.program_id(1)  # batch index
    # row ti of the triangle: the largest ti with ti(ti+1)/2 <= pid, fixed up after fp32 sqrt
    ti = ((tl.sqrt(8.0 * pid + 1.0) - 1.0) * 0.5).to(tl.int32)
    ti = tl.where((ti + 1) * (ti + 2) // 2 <= pid, ti + 1, ti)
    ti = tl.where(ti * (ti + 1) // 2 > pid, ti - 1, ti)
    tj = pid - ti * (ti + 1) // 2
    rm = ti * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tj * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    xb = X + bid * sxb
    acc = tl.zeros((BLOCK_M, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        kmask = kk[None, :] < K
        a = tl.load(xb + rm[:, None] * sxm + kk[None, :] * sxk, mask=(rm[:, None] < M) & kmask, other=0.0)
        b = tl.load(xb + rn[:, None] * sxm + kk[None, :] * sxk, mask=(rn[:, None] < M) & kmask, other=0.0)
        acc = tl.dot(a, tl.trans(b), acc, input_precision=PRECISION)
    acc = acc * alpha
    mask = (rm[:, None] < M) & (rn[None, :] < M)
    if HAS_C:
        c = tl.load(C + bid * scb + rm[:, None] * scm + rn[None, :] * scn, mask=mask, other=0.0)
        acc += beta * c.to(tl.float32)
    out = acc.to(Out.dtype.element_ty)
    ob = Out + bid * sob
    if ti == tj:
        # A diagonal tile: its dot need not be symmetric bit for bit (the accumulation order of
        # entry (p, q) and (q, p) may differ, e.g. triton 3.9's interpreter). Keep the lower
        # triangle and mirror it, so Out is exactly symmetric by construction.
        out = tl.where(rm[:, None] >= rn[None, :], out, tl.trans(out))
        tl.store(ob + rm[:, None] * som + rn[None, :] * son, out, mask=mask)
    else:  # out[p, q] at (rm[p], rn[q]) also lands at (rn[q], rm[p])
        tl.store(ob + rm[:, None] * som + rn[None, :] * son, out, mask=mask)
        mirror = (rn[:, None] < M) & (rm[None, :] < M)
        tl.store(ob + rn[:, None] * som + rm[None, :] * son, tl.trans(out), mask=mirror)


@triton.autotune(configs=_gemm_configs(), key=["M", "N", "K"])
@triton.jit
def _gemm_kernel(
    A, X, Out,  # A [B, M, K]; X, Out [B, K=M, N]
    M, N, K,
    sab, sam, sak, sxb, sxk, sxn, sob, som, son,
    beta,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Out = A·X + beta·X (X square-compatible: its rows index both K and M)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bid = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    ab = A + bid * sab
    xb = X + bid * sxb
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(ab + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        x = tl.load(xb + kk[:, None] * sxk + rn[None, :] * sxn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, x, acc, input_precision=PRECISION)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x0 = tl.load(xb + rm[:, None] * sxk + rn[None, :] * sxn, mask=mask, other=0.0)
    acc += beta * x0.to(tl.float32)
    tl.store(Out + bid * sob + rm[:, None] * som + rn[None, :] * son, acc.to(Out.dtype.element_ty), mask=mask)


def _precision(dtype: torch.dtype) -> str:
    # fp32 operands keep full precision; fp16/bf16 operands ignore the setting
    return "ieee" if dtype == torch.float32 else "tf32"


def _check(t: torch.Tensor, name: str) -> None:
    if t.ndim != 3:
        raise ValueError(f"{name}: expected a batched [B, m, n] tensor, got shape {tuple(t.shape)}")
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"{name}: unsupported dtype {t.dtype}")


def _syrk(x: torch.Tensor, c: torch.Tensor | None, alpha: float, beta: float) -> torch.Tensor:
    batch, m, k = x.shape
    out = torch.empty(batch, m, m, device=x.device, dtype=x.dtype)
    if batch == 0 or m == 0:
        return out
    cc = out if c is None else c  # never read when HAS_C is False

    def grid(meta):
        nb = triton.cdiv(m, meta["BLOCK_M"])
        return (nb * (nb + 1) // 2, batch)

    _syrk_kernel[grid](
        x, cc, out, m, k,
        *x.stride(), *cc.stride(), *out.stride(),
        float(alpha), float(beta),
        HAS_C=c is not None, PRECISION=_precision(x.dtype),
    )
    return out


def sym_gram(x: torch.Tensor) -> torch.Tensor:
    """X·Xᵀ for X [B, m, k] -> [B, m, m], exactly symmetric."""
    _check(x, "sym_gram")
    return _syrk(x, None, 1.0, 0.0)


def sym_poly(a: torch.Tensor, b: float, c: float) -> torch.Tensor:
    """b·A + c·A² for symmetric A [B, m, m] -> [B, m, m]."""
    _check(a, "sym_poly")
    if a.size(-1) != a.size(-2):
        raise ValueError(f"sym_poly: A must be square, got shape {tuple(a.shape)}")
    return _syrk(a, a, c, b)


def gemm_axpby(bmat: torch.Tensor, x: torch.Tensor, a: float) -> torch.Tensor:
    """a·X + B·X for B [B, m, m], X [B, m, n] -> [B, m, n]."""
    _check(bmat, "gemm_axpby")
    _check(x, "gemm_axpby")
    batch, m, n = x.shape
    if bmat.shape != (batch, m, m) or bmat.dtype != x.dtype:
        raise ValueError(
            f"gemm_axpby: B {tuple(bmat.shape)} {bmat.dtype} does not fit X {tuple(x.shape)} {x.dtype}"
        )
    out = torch.empty_like(x)
    if out.numel() == 0:
        return out

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]), batch)

    _gemm_kernel[grid](
        bmat, x, out, m, n, m,
        *bmat.stride(), *x.stride(), *out.stride(),
        float(a),
        PRECISION=_precision(x.dtype),
    )
    return out
