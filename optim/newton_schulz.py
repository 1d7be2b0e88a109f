"""Newton-Schulz orthogonalisation: G = U·S·Vᵀ  ->  approximately U·Vᵀ (KellerJordan/Muon).

Each step on X [B, m, n] (m <= n after the transpose rule):
    A = X·Xᵀ;  B = b·A + c·A²;  X <- a·X + B·X
which maps every singular value s to p(s) = a·s + b·s³ + c·s⁵ and keeps the singular
vectors. ``band`` computes, in float64, where the iteration sends singular values that
start in [lo, 1]·||X||_F: the guarantee each preset gives (tested in
optim/tests/test_newton_schulz.py of the scalelab repository).

Backends: "torch" (three batched GEMMs per step), "torch_sym" (the symmetric products
computed on the lower triangle only, in row strips, and mirrored), "triton"
(``optim.kernels``: lower-triangle tiles, fused epilogues; CUDA or the interpreter).
"auto" picks Triton on CUDA when min(m, n) >= ``TRITON_MIN_DIM``, torch elsewhere.
"""

from __future__ import annotations

import cmath
import math

import torch
from torch import Tensor

from optim.coefficients import EPS, Coefficients, resolve
from optim.workspace import Workspace

__all__ = ["BACKENDS", "TRITON_MIN_DIM", "band", "newton_schulz", "ns_flops"]

TRITON_MIN_DIM = 1024
"""On CUDA, min(m, n) at or above which "auto" uses the Triton kernels. Small matrices stay
on cuBLAS (nil0x9/flash-muon is slower at 1024 on H800). Not tuned here: no GPU."""

SYM_BLOCK = 256
"""Row-strip height of the "torch_sym" backend."""

BACKENDS = ("auto", "torch", "torch_sym", "triton")


def newton_schulz(
    G: Tensor,
    steps: int = 5,
    coefficients: Coefficients = "jordan",
    *,
    dtype: torch.dtype | None = torch.bfloat16,
    backend: str = "auto",
    out_dtype: torch.dtype | None = None,
    overwrite: bool = False,
    workspace: Workspace | None = None,
) -> Tensor:
    """Orthogonalise G [..., m, n] (batched over leading dims); returns G's shape and dtype
    (``out_dtype``: that dtype instead, e.g. the iteration's, sparing a cast the caller redoes).

    Args:
        G: a matrix or a batch of matrices. Conv filters are flattened by the caller.
        steps: number of NS steps.
        coefficients: a preset name (``optim.coefficients.PRESETS``: "jordan",
            "polar_express", "polar_express_original", "youjiacheng") or a list of (a, b, c).
        dtype: dtype the iteration runs in (bf16 as in Muon); None = G's dtype. The Frobenius
            prescale is always computed in fp32 (fp64 for fp64 input) before this cast.
        backend: one of ``BACKENDS``.
        overwrite: G is scratch the caller gives up (Muon's fresh U): the prescale then
            scales it in place instead of in a new fp32 buffer. G's values are lost.
        workspace: on the CPU, the buffers every tensor of the iteration is written into
            (``optim.workspace``: no allocation once its buffers have grown to the largest
            matrix). The result then lives in the workspace, valid until the next call that
            uses the same workspace.

    A zero matrix returns zeros, never NaN (EPS = 1e-30 in the prescale denominator).
    """
    if G.ndim < 2:
        raise ValueError(f"newton_schulz: expected a [..., m, n] tensor, got shape {tuple(G.shape)}")
    if not G.is_floating_point():
        raise ValueError(f"newton_schulz: expected a floating-point tensor, got {G.dtype}")
    if backend not in BACKENDS:
        raise ValueError(f"newton_schulz: unknown backend {backend!r}; expected one of {BACKENDS}")
    triples, prescale = resolve(coefficients, steps)
    if G.numel() == 0:
        return G.clone()
    norm_dtype = torch.promote_types(G.dtype, torch.float32)
    it_dtype = G.dtype if dtype is None else dtype

    ws = workspace if G.device.type == "cpu" else None
    # the prescale works in place on an fp32 buffer of its own: G itself when the caller gives
    # it up (``overwrite``) or when the cast copies it anyway, else a copy (the workspace's)
    if overwrite or G.dtype != norm_dtype:
        X = G.to(norm_dtype)
    elif ws is not None:
        X = ws.get("ns.prescale", tuple(G.shape), norm_dtype, G.device).copy_(G)
    else:
        X = G.clone()
    # X / (f·||X||_F + EPS), computed as Y / (f·||Y||_F + EPS) with Y = X / max|X|: the same
    # up to EPS, but ||X||_F² no longer underflows for tiny X, so the result is scale
    # invariant over the whole fp32 range; a zero matrix stays 0 (0/tiny = 0, 0/EPS = 0).
    # max|X| per matrix as max(max X, -min X): the value of vector_norm(X, inf), which on CPU
    # is ~25x slower (not vectorised; torch 2.13, one thread). All of it is transpose-
    # invariant, so it runs on X as laid out, before the transpose rule below.
    amax = torch.maximum(X.amax(dim=(-2, -1), keepdim=True), -X.amin(dim=(-2, -1), keepdim=True))  # [..., 1, 1]
    X.div_(amax.clamp_min_(torch.finfo(norm_dtype).tiny))
    norm = torch.linalg.vector_norm(X, dim=(-2, -1), keepdim=True)  # [..., 1, 1], >= 1 or 0
    X.mul_(norm.mul_(prescale).add_(EPS).reciprocal_())
    transposed = X.size(-2) > X.size(-1)
    if ws is not None:  # cast, then transpose, into the workspace: contiguous, as below
        if transposed and X.dtype != it_dtype:  # two copies: one that casts, one that transposes
            X = ws.get("ns.cast", tuple(X.shape), it_dtype, X.device).copy_(X)  # the narrow type
        if transposed:  # (one copy that does both is 3x slower: 4.6 against 1.4 ms at 1536 x 512)
            X = X.mT
        X = ws.get("ns.x0", tuple(X.shape), it_dtype, X.device).copy_(X)
    else:
        if transposed:  # rows <= cols, so the Gram matrix is min(m, n)²
            X = X.mT
        X = X.to(it_dtype)
        if transposed and X.device.type == "cpu":
            # a tall matrix's transposed view copied once into a contiguous [m, n]: oneDNN's bf16
            # X @ X.mT and addmm(X, B, X) run 1.4-1.6x slower on the view (1536 x 512, 2816 x 1024;
            # torch 2.13, one thread), so the copy saves 4-8% of such a matrix's NS time. CUDA's
            # GEMMs take the view at full speed: no copy there.
            X = X.contiguous()
    m, n = X.shape[-2:]
    lead = X.shape[:-2]
    X = X.reshape(-1, m, n)  # [B, m, n]

    backend = _pick(backend, X)
    X = _ns_torch(X, triples, ws) if backend == "torch" else _BACKEND_FNS[backend](X, triples)

    X = X.reshape(*lead, m, n)
    if transposed:
        X = X.mT
    return X.to(G.dtype if out_dtype is None else out_dtype)


def _pick(backend: str, X: Tensor) -> str:
    if backend != "auto":
        return backend
    if X.is_cuda and min(X.shape[-2:]) >= TRITON_MIN_DIM:
        from optim.kernels import HAS_TRITON

        if HAS_TRITON:
            return "triton"
    return "torch"


def _ns_torch(X: Tensor, triples, ws: Workspace | None = None) -> Tensor:
    if not X.is_cuda:  # CPU: one chain of 2-D GEMMs per matrix (``_ns_matrix``)
        if X.size(0) == 1:
            return _ns_matrix(X[0], triples, ws)[None]
        if ws is not None:  # each result back into X's own workspace rows
            for x in X.unbind(0):
                x.copy_(_ns_matrix(x, triples, ws))
            return X
        return torch.stack([_ns_matrix(x, triples) for x in X.unbind(0)])
    for a, b, c in triples:
        A = X @ X.mT  # [B, m, m]
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)  # b·A + c·A²
        X = torch.baddbmm(X, B, X, beta=a)  # a·X + B·X
    return X


def _ns_matrix(X: Tensor, triples, ws: Workspace | None = None) -> Tensor:
    """The NS steps on one matrix X [m, n] with 2-D GEMMs (mm, addmm). On CPU these are
    1.3-2.5x faster than the same products as baddbmm over a batch, even a batch of one
    (bf16, torch 2.13, one thread; the Muon rows of ``bench/optim_step.py`` in the scalelab
    repository). With a workspace every product goes into a buffer kept across calls (A, B
    [m, m]; X ping-pongs between two [m, n]), the same bits as the fresh tensors."""
    if ws is None:
        for a, b, c in triples:
            A = X @ X.mT  # [m, m]
            B = torch.addmm(A, A, A, beta=b, alpha=c)  # b·A + c·A²
            X = torch.addmm(X, B, X, beta=a)  # a·X + B·X
        return X
    m, n = X.shape
    A = ws.get("ns.a", (m, m), X.dtype, X.device)
    B = ws.get("ns.b", (m, m), X.dtype, X.device)
    Y = ws.get("ns.x1", (m, n), X.dtype, X.device)
    for a, b, c in triples:
        torch.mm(X, X.mT, out=A)
        torch.addmm(A, A, A, beta=b, alpha=c, out=B)
        torch.addmm(X, B, X, beta=a, out=Y)
        X, Y = Y, X
    return X


def _sym_product(X: Tensor, C: Tensor | None = None, beta: float = 0.0, alpha: float = 1.0,
                 block: int = SYM_BLOCK) -> Tensor:
    """X·Xᵀ, or alpha·X·Xᵀ + beta·C for symmetric C [B, m, m], with X [B, m, k]: each row strip multiplies
    only the columns left of and on the diagonal (about half the FLOPs, the epilogue fused by
    baddbmm); the strict upper triangle is the mirror. One strip (m <= block) is a plain GEMM."""
    if X.size(-2) <= block:
        return X @ X.mT if C is None else torch.baddbmm(C, X, X.mT, beta=beta, alpha=alpha)
    batch, m, _ = X.shape
    out = X.new_empty(batch, m, m)
    for i0 in range(0, m, block):
        i1 = min(i0 + block, m)
        if C is None:
            strip = X[:, i0:i1] @ X[:, :i1].mT  # [B, i1-i0, i1]
        else:
            strip = torch.baddbmm(C[:, i0:i1, :i1], X[:, i0:i1], X[:, :i1].mT, beta=beta, alpha=alpha)
        out[:, i0:i1, :i1] = strip
        out[:, :i0, i0:i1] = strip[:, :, :i0].mT
    return out


def _ns_torch_sym(X: Tensor, triples) -> Tensor:
    for a, b, c in triples:
        A = _sym_product(X)  # [B, m, m], exactly symmetric
        B = _sym_product(A, A, beta=b, alpha=c)  # b·A + c·A·Aᵀ
        X = torch.baddbmm(X, B, X, beta=a)
    return X


def _ns_triton(X: Tensor, triples) -> Tensor:
    from optim.kernels import HAS_TRITON, gemm_axpby, sym_gram, sym_poly

    if not HAS_TRITON:
        raise RuntimeError("newton_schulz: backend='triton' needs the triton package")
    for a, b, c in triples:
        A = sym_gram(X)
        B = sym_poly(A, b, c)
        X = gemm_axpby(B, X, a)
    return X


_BACKEND_FNS = {"torch": _ns_torch, "torch_sym": _ns_torch_sym, "triton": _ns_triton}


def ns_flops(m: int, n: int, steps: int = 5, *, symmetric: bool = False) -> int:
    """Matmul FLOPs of ``steps`` NS steps on one m x n matrix (after the transpose rule):
    4m²n + 2m³ per step, or 3m²n + m³ with the symmetric products."""
    m, n = min(m, n), max(m, n)
    per = 3 * m * m * n + m**3 if symmetric else 4 * m * m * n + 2 * m**3
    return steps * per


def _image(a: float, b: float, c: float, lo: float, hi: float) -> tuple[float, float]:
    """Exact image of [lo, hi] (0 <= lo <= hi) under p(s) = a s + b s³ + c s⁵."""
    def p(s: float) -> float:
        return a * s + b * s**3 + c * s**5

    points = [lo, hi]
    # p'(s) = a + 3b s² + 5c s⁴ = 0: a quadratic in y = s²
    if c != 0.0:
        disc = cmath.sqrt(9 * b * b - 20 * a * c)
        ys = [(-3 * b + disc) / (10 * c), (-3 * b - disc) / (10 * c)]
    elif b != 0.0:
        ys = [complex(-a / (3 * b))]
    else:
        ys = []
    for y in ys:
        if abs(y.imag) < 1e-300 and y.real > 0:
            s = math.sqrt(y.real)
            if lo < s < hi:
                points.append(s)
    values = [p(s) for s in points]
    return min(values), max(values)


def band(coefficients: Coefficients = "jordan", steps: int = 5, lo: float = 1e-3) -> tuple[float, float]:
    """Float64 image of singular values in [lo, 1]·||X||_F after the prescale and all steps.

    Every singular value σ with σ/||X||_F in [lo, 1] ends inside the returned [min, max].
    A rank-r matrix with condition number κ has
    σ_min/||X||_F >= 1/(κ·sqrt(r)), which tells which lo applies.
    """
    if not 0.0 < lo <= 1.0:
        raise ValueError(f"band: lo must lie in (0, 1], got {lo}")
    triples, prescale = resolve(coefficients, steps)
    a_lo, a_hi = lo / prescale, 1.0 / prescale
    for a, b, c in triples:
        a_lo, a_hi = _image(a, b, c, a_lo, a_hi)
    return a_lo, a_hi
