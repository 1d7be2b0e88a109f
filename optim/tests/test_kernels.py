"""optim.kernels (Triton) against torch, by microsoft/dion's criteria
(its tests/test_newton_shulz.py).

The interpreter checks run in a subprocess (optim/tests/_kernel_checks.py) with
TRITON_INTERPRET=1 set before triton defines the kernels; bf16 is left out there (the
interpreter mishandles bf16 arithmetic).

Tolerances, relative to the float64 reference's max |entry|:
  fp32: kernel mean error <= 5x torch's and max error <= 15x torch's (Dion), and max <= 1e-5;
  fp16: kernel mean and max error <= 1.1x torch's on the same op and dtype (Dion: <=, with
        10% slack for the sample), and max <= 5e-3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _waits import CEILING_S

from optim.kernels import HAS_TRITON

ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the optim package
OPS = ("sym_gram", "sym_gram_view", "sym_poly", "gemm_axpby", "newton_schulz")

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")


def test_interpreter_kernels_match_torch():
    """One subprocess (the interpreter pays ~0.3 s per launch): every op, fp32 and fp16."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_kernel_checks.py"))],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=CEILING_S, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = json.loads(proc.stdout)
    assert errors["sym_gram_exactly_symmetric"]["value"] == 1.0
    for op in OPS:
        e = errors[f"{op}/float32"]
        print(op, "fp32", e)
        assert e["kernel_mean"] <= 5 * e["torch_mean"], (op, e)
        assert e["kernel_max"] <= 15 * e["torch_max"], (op, e)
        assert e["kernel_max"] <= 1e-5, (op, e)
        e = errors[f"{op}/float16"]
        print(op, "fp16", e)
        assert e["kernel_mean"] <= 1.1 * e["torch_mean"], (op, e)
        assert e["kernel_max"] <= 1.1 * e["torch_max"], (op, e)
        assert e["kernel_max"] <= 5e-3, (op, e)


def test_kernel_module_imports_lazily():
    # optim.kernels itself never imports triton: the kernels are defined on first use
    code = "import sys, optim, optim.kernels; print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=CEILING_S, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_cuda_triton_path_equals_torch(dtype):
    from optim.kernels import gemm_axpby, sym_gram, sym_poly
    from optim.newton_schulz import newton_schulz

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(2, 1100, 1500, device="cuda", generator=gen).to(dtype) / 40
    x64 = x.double()
    ref = x64 @ x64.mT
    for got, same in ((sym_gram(x), x @ x.mT),):
        assert (got.double() - ref).abs().max() <= 1.1 * (same.double() - ref).abs().max() + 1e-6
    a = sym_gram(x)
    a64 = a.double()
    ref = -4.775 * a64 + 2.0315 * a64 @ a64
    same = torch.baddbmm(a, a, a, beta=-4.775, alpha=2.0315)
    assert (sym_poly(a, -4.775, 2.0315).double() - ref).abs().max() <= 1.1 * (same.double() - ref).abs().max() + 1e-6
    b = (a / a.norm()).to(dtype)
    ref = 3.4445 * x64 + b.double() @ x64
    same = torch.baddbmm(x, b, x, beta=3.4445)
    assert (gemm_axpby(b, x, 3.4445).double() - ref).abs().max() <= 1.1 * (same.double() - ref).abs().max() + 1e-6
    g = torch.randn(1200, 1536, device="cuda", generator=gen)
    exact = newton_schulz(g.double(), dtype=torch.float64)
    tri = newton_schulz(g, dtype=dtype, backend="triton").double()
    plain = newton_schulz(g, dtype=dtype, backend="torch").double()
    assert (tri - exact).norm() <= 1.1 * (plain - exact).norm() + 1e-6
