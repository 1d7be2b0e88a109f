"""Newton-Schulz backends (``optim.newton_schulz``) for accuracy and speed, one shape at a time.

Newton-Schulz maps G = U·S·Vᵀ to about U·Vᵀ, the polar factor (Jordan et al. 2024, "Muon",
kellerjordan.github.io/posts/muon; Bernstein & Newhouse 2024, arXiv 2409.20325, the
orthogonalised update as the steepest descent under the spectral norm). Per shape m x n:

- reference: the polar factor U·Vᵀ from a float64 SVD of G (``torch.linalg.svd``), and the
  same NS iteration run in float64 (``dtype=torch.float64``), which isolates rounding;
- per backend and dtype: ``rel_err_polar`` = ||X - U·Vᵀ||_F / ||U·Vᵀ||_F (the tuned quintic
  of Jordan et al. does not converge to 1 but to a band around it: ``optim.newton_schulz.band``,
  so this is ~0.1-0.3 for every backend alike), ``rel_err_ns64`` = ||X - X₆₄||_F / ||X₆₄||_F
  (the rounding error of the backend), and the singular-value spread of X (min, median,
  max, from ``eigvalsh`` of X·Xᵀ in float64, m <= n after the transpose rule);
- the symmetric Gram kernel (``optim.kernels.sym_gram``) against torch's X·Xᵀ in the same
  dtype: ``rel_err_ns64`` there is the relative Frobenius error against the float64 Gram.

Speed: median over ``reps`` timed calls after ``warmup`` untimed ones (Triton autotunes in
the first), timed with CUDA events (``time.perf_counter`` on CPU). FLOPs, written with each
row: NS ``ns_flops(m, n, steps)`` = steps·(4m²n + 2m³) (three GEMMs per step, m <= n),
Gram 2m²n; both the dense counts for every backend, so TFLOP/s compares time directly
(the symmetric backends do ``ns_flops(..., symmetric=True)`` = steps·(3m²n + m³) of work).
Inputs: G with iid N(0, 1) entries (seeded), as in microsoft/dion's kernel tests.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from optim.newton_schulz import band, ns_flops

__all__ = ["NS_NOTES", "bench_shape", "default_shapes", "time_ms"]

NS_NOTES = [
    ("NS: Jordan et al. 2024 (Muon) quintic, 'jordan' coefficients; polar factor reference "
    "U·Vᵀ from a float64 SVD (Bernstein & Newhouse 2024, arXiv 2409.20325)"),
    ("rel_err_polar = ||X - U·Vᵀ||_F / ||U·Vᵀ||_F; rel_err_ns64 = error against the same "
    "iteration in float64 (for op 'gram': against the float64 X·Xᵀ)"),
    "sv_min/median/max: singular values of the output (eigvalsh of X·Xᵀ, float64)",
    ("FLOPs (dense counts for every backend): NS steps·(4m²n + 2m³), Gram 2m²n, m <= n; "
    "ms = median of the timed repeats after warm-up (CUDA events on GPU)"),
    "input G: iid N(0, 1) entries, seed 0",
]


def default_shapes() -> list[tuple[int, int]]:
    """Square 1024..8192, and the rectangular d x 3.5d MLP matrices at the same widths
    (Llama w_up / w_gate: 1024 x 3584 is the 600M preset's, 4096 x 14336 Llama-3 8B's)."""
    sizes = (1024, 2048, 4096, 8192)
    return [(s, s) for s in sizes] + [(s, 7 * s // 2) for s in sizes]


def time_ms(fn: Callable[[], Any], warmup: int, reps: int, device: torch.device) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    if device.type != "cuda":
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append(1e3 * (time.perf_counter() - t0))
        return statistics.median(samples)
    torch.cuda.synchronize(device)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return statistics.median(start.elapsed_time(end) for start, end in events)


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref).norm() / ref.norm()).item()


def _spread(x: torch.Tensor) -> tuple[float, float, float]:
    """(min, median, max) singular value of x [m, n], m <= n, via eigvalsh(x·xᵀ) in float64."""
    x64 = x.double()
    sv = torch.linalg.eigvalsh(x64 @ x64.mT).clamp_min(0).sqrt()
    return sv.min().item(), sv.median().item(), sv.max().item()


def bench_shape(m: int, n: int, cases: list[tuple[str, torch.dtype]], *, steps: int,
                warmup: int, reps: int, device: torch.device) -> list[dict[str, Any]]:
    """Rows for one m x n shape: each (backend, dtype) NS case, then the Gram kernel."""
    from optim.newton_schulz import newton_schulz

    gen = torch.Generator(device=device).manual_seed(0)
    g = torch.randn(min(m, n), max(m, n), device=device, generator=gen)  # m <= n
    g64 = g.double()
    u, _, vh = torch.linalg.svd(g64, full_matrices=False)
    polar = u @ vh
    del u, vh
    ns64 = newton_schulz(g64, steps, dtype=torch.float64, backend="torch")
    shape = f"{m}x{n}"
    flops = ns_flops(m, n, steps)
    lo, hi = band("jordan", steps)
    rows: list[dict[str, Any]] = [dict(
        shape=shape, op="ns", backend="float64 reference", dtype="float64",
        rel_err_polar=_rel(ns64, polar), rel_err_ns64=0.0,
        **dict(zip(("sv_min", "sv_median", "sv_max"), _spread(ns64))),
        band=[lo, hi],
    )]
    for backend, dtype in cases:
        def run(backend: str = backend, dtype: torch.dtype = dtype) -> torch.Tensor:
            return newton_schulz(g, steps, dtype=dtype, backend=backend)

        out = run()
        ms = time_ms(run, warmup, reps, device)
        rows.append(dict(
            shape=shape, op="ns", backend=backend, dtype=str(dtype).removeprefix("torch."),
            ms=ms, flops=flops, tflops=flops / (ms * 1e-3) / 1e12,
            rel_err_polar=_rel(out, polar),
            rel_err_ns64=_rel(out, ns64),
            **dict(zip(("sv_min", "sv_median", "sv_max"), _spread(out))),
        ))
    del polar, ns64, g64
    rows += _gram_rows(g, shape, cases, warmup=warmup, reps=reps, device=device)
    return rows


def _gram_rows(g: torch.Tensor, shape: str, cases: list[tuple[str, torch.dtype]], *,
               warmup: int, reps: int, device: torch.device) -> list[dict[str, Any]]:
    """The symmetric Gram kernel (Triton) against torch's X·Xᵀ, in each dtype of ``cases``."""
    from optim.kernels import sym_gram

    m, n = g.shape
    rows = []
    for dtype in dict.fromkeys(d for b, d in cases if b == "triton"):
        x = (g / g.norm()).to(dtype)[None]  # [1, m, n], the prescaled NS input
        ref = x.double() @ x.double().mT
        for backend, fn in (("torch", lambda x=x: x @ x.mT), ("triton", lambda x=x: sym_gram(x))):
            out = fn()
            ms = time_ms(fn, warmup, reps, device)
            flops = 2 * m * m * n
            rows.append({
                "shape": shape, "op": "gram", "backend": backend,
                "dtype": str(dtype).removeprefix("torch."), "ms": ms, "flops": flops,
                "tflops": flops / (ms * 1e-3) / 1e12, "rel_err_ns64": _rel(out, ref),
                "exactly_symmetric": bool(torch.equal(out, out.mT)),
            })
    return rows
