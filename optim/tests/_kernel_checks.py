"""Run optim.kernels under the Triton CPU interpreter; print one JSON object of errors.

Started by optim/tests/test_kernels.py in a fresh process, because TRITON_INTERPRET must
be set before the kernels are defined (at import). Each entry holds the relative max and
mean error, against a float64 reference, of the kernel and of torch on the same op and
dtype: {"<op>/<dtype>": {"kernel_max", "kernel_mean", "torch_max", "torch_mean"}}.
"""

from __future__ import annotations

import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch

from optim.kernels import gemm_axpby, sym_gram, sym_poly
from optim.newton_schulz import newton_schulz


def _err(x: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    d = (x.to(torch.float64) - ref).abs()
    scale = ref.abs().max().item()
    return d.max().item() / scale, d.mean().item() / scale


def _cases(dtype: torch.dtype, gen: torch.Generator) -> dict:
    """op -> (kernel, torch on the same dtype, float64 reference), each a thunk."""
    # 45 rows and 70/100 columns: partial tiles (BLOCK_M 32, BLOCK_K 64), two tile rows,
    # one mirrored off-diagonal tile; a transposed (non-contiguous) view as well.
    x = (torch.randn(3, 45, 100, generator=gen) / 10).to(dtype)
    xt = (torch.randn(2, 70, 45, generator=gen) / 10).to(dtype).mT
    b_mat = (torch.randn(3, 45, 45, generator=gen) / 45).to(dtype)
    g = torch.randn(2, 40, 72, generator=gen).to(dtype)
    a_sym = sym_gram(x)
    a64 = a_sym.double()
    return {
        "sym_gram": (lambda: sym_gram(x), lambda: x @ x.mT, lambda: x.double() @ x.double().mT),
        "sym_gram_view": (lambda: sym_gram(xt), lambda: xt @ xt.mT, lambda: xt.double() @ xt.double().mT),
        "sym_poly": (
            lambda: sym_poly(a_sym, -4.775, 2.0315),
            lambda: torch.baddbmm(a_sym, a_sym, a_sym, beta=-4.775, alpha=2.0315),
            lambda: -4.775 * a64 + 2.0315 * a64 @ a64,
        ),
        "gemm_axpby": (
            lambda: gemm_axpby(b_mat, x, 3.4445),
            lambda: torch.baddbmm(x, b_mat, x, beta=3.4445),
            lambda: 3.4445 * x.double() + b_mat.double() @ x.double(),
        ),
        # 2 steps keep the interpreter time down (~0.3 s per launch); the loop is the same
        "newton_schulz": (
            lambda: newton_schulz(g, 2, "polar_express", dtype=dtype, backend="triton"),
            lambda: newton_schulz(g, 2, "polar_express", dtype=dtype, backend="torch"),
            lambda: newton_schulz(g.double(), 2, "polar_express", dtype=torch.float64),
        ),
        # exact symmetry by construction (both triangles and the diagonal tiles), any triton
        "_symmetric": (lambda: all(
            bool(torch.equal(s, s.mT))
            for s in (a_sym, sym_gram(xt), sym_poly(a_sym, -4.775, 2.0315))
        ),),
    }


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    out: dict[str, dict[str, float]] = {}
    sym_exact = True
    for dtype in (torch.float32, torch.float16):
        cases = _cases(dtype, gen)
        sym_exact &= cases.pop("_symmetric")[0]()
        for op, (kernel, ref_same_dtype, ref64) in cases.items():
            r = ref64()
            km, ka = _err(kernel(), r)
            tm, ta = _err(ref_same_dtype(), r)
            out[f"{op}/{str(dtype)[6:]}"] = {"kernel_max": km, "kernel_mean": ka, "torch_max": tm, "torch_mean": ta}
    out["sym_gram_exactly_symmetric"] = {"value": float(sym_exact)}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
