"""Triton kernels for Newton-Schulz that compute the symmetric Gram products on one triangle.

Importable without triton: ``HAS_TRITON`` says whether the kernels exist. The kernels
are defined when ``optim.kernels.ns_kernels`` is first imported, so a process that wants
the CPU interpreter must set ``TRITON_INTERPRET=1`` before that import.
"""

from __future__ import annotations

import importlib.util

__all__ = ["HAS_TRITON", "gemm_axpby", "sym_gram", "sym_poly"]

HAS_TRITON = importlib.util.find_spec("triton") is not None


def sym_gram(x):
    """X·Xᵀ for X [B, m, k] -> [B, m, m]; lower-triangle tiles only, mirrored."""
    from optim.kernels.ns_kernels import sym_gram as f

    return f(x)


def sym_poly(a, b: float, c: float):
    """b·A + c·A² for symmetric A [B, m, m] (A² = A·Aᵀ, one symmetric product)."""
    from optim.kernels.ns_kernels import sym_poly as f

    return f(a, b, c)


def gemm_axpby(bmat, x, a: float):
    """a·X + B·X for B [B, m, m], X [B, m, n] -> [B, m, n] (beta = a in the epilogue)."""
    from optim.kernels.ns_kernels import gemm_axpby as f

    return f(bmat, x, a)
