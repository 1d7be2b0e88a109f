"""Newton-Schulz benchmark: ratios measured side by side in one run.

    python bench/newton_schulz.py [--shapes 512x512,1024x4096] [--reps 5] [--dtype float32]
                                  [--threads 1 --clock process]

On any device it prints, per shape:
  overhead   t(newton_schulz) / t(the same 3·steps matmuls alone) - 1  (target <= 15%)
  vs SVD     t(SVD polar factor U·Vᵀ) / t(newton_schulz)              (speed-up over SVD)
  sym        t(torch) / t(torch_sym): the lower-triangle symmetric products (FLOP bound
             (4e+2)/(3e+1) for n = e·m, see ``ns_flops``: 1.5x square, 1.385x at 1:4)
and on CUDA also t(torch) / t(triton). Every timing is the median of --reps runs, the
variants interleaved within each repetition so drift hits all of them alike. On a shared
CPU, ``--threads 1 --clock process`` times CPU seconds of one thread, which other
processes' load does not inflate. Nothing is asserted: the numbers describe the machine.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
from _clock import add_clock_args, device_and_clock

from optim.coefficients import resolve
from optim.newton_schulz import newton_schulz


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _matmuls_only(x: torch.Tensor, triples) -> torch.Tensor:
    """The NS matmuls on an already-prescaled [1, m, n] input: no norm, cast or transpose."""
    for a, b, c in triples:
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x


def _svd_polar(g: torch.Tensor) -> torch.Tensor:
    u, _, vh = torch.linalg.svd(g, full_matrices=False)
    return u @ vh


def _variants(g, x, steps, dtype, triples, device) -> dict[str, Callable[[], object]]:
    fns = {
        "ns": lambda: newton_schulz(g, steps, dtype=dtype, backend="torch"),
        "mm": lambda: _matmuls_only(x, triples),
        "svd": lambda: _svd_polar(g),
        "sym": lambda: newton_schulz(g, steps, dtype=dtype, backend="torch_sym"),
    }
    if device.type == "cuda":
        fns["triton"] = lambda: newton_schulz(g, steps, dtype=dtype, backend="triton")
    return fns


def _time(
    fns: dict[str, Callable[[], object]], reps: int, device: torch.device, clock: Callable[[], float]
) -> dict[str, float]:
    for fn in fns.values():  # warm-up (and Triton autotune)
        fn()
    _sync(device)
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(reps):
        names = list(fns) if r % 2 == 0 else list(reversed(fns))
        for name in names:
            t0 = clock()
            fns[name]()
            _sync(device)
            samples[name].append(clock() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="256x256,512x512,512x2048,1024x1024")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--dtype", default=None, help="NS dtype (default: bfloat16 on CUDA, float32 on CPU)")
    add_clock_args(ap)
    args = ap.parse_args()
    device, clock = device_and_clock(ap, args)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    triples, _ = resolve("jordan", args.steps)
    print(f"device {device} ({torch.get_num_threads()} CPU threads), NS dtype {dtype}, "
          f"{args.steps} Jordan steps, median of {args.reps}, {args.clock} clock")
    if device.type != "cuda":
        print("no CUDA device: Triton vs torch is not measured here (no GPU numbers claimed)")
    head = f"{'shape':>11} {'NS ms':>9} {'matmul ms':>9} {'overhead':>9} {'SVD ms':>9} {'vs SVD':>7} {'sym':>6}"
    print(head + (f" {'triton':>7}" if device.type == "cuda" else ""))
    gen = torch.Generator(device=device).manual_seed(0)
    for spec in args.shapes.split(","):
        m, n = (int(v) for v in spec.lower().split("x"))
        g = torch.randn(m, n, device=device, generator=gen)
        x = (g.mT if m > n else g).to(dtype)[None] / g.norm()
        fns = _variants(g, x, args.steps, dtype, triples, device)
        t = _time(fns, args.reps, device, clock)
        row = (f"{spec:>11} {1e3 * t['ns']:9.2f} {1e3 * t['mm']:9.2f} {t['ns'] / t['mm'] - 1:9.1%} "
               f"{1e3 * t['svd']:9.2f} {t['svd'] / t['ns']:6.1f}x {t['ns'] / t['sym']:5.2f}x")
        if device.type == "cuda":
            row += f" {t['ns'] / t['triton']:6.2f}x"
        print(row)


if __name__ == "__main__":
    main()
