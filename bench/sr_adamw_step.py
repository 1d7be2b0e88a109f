"""SR-AdamW step cost: one bf16 ``optim.AdamW(stochastic_rounding=True)`` step against one fp32
``optim.AdamW`` step on params of the same shapes, side by side (the target: SR-AdamW at most
3x the fp32 step on one CPU thread, so SR is cheap enough to use in bf16 training).

    python bench/sr_adamw_step.py [--cases gpt-d256-L4,gpt-d64-L2,one-32x32] [--reps 9]
                                  [--threads 1] [--clock process] [--device cpu]

Cases (params built directly, fixed random grads, no model and no forward):
  gpt-d{d}-L{L}  a GPT-2-style decoder (Radford et al. 2019): token embedding [V, d] (V = 4d),
                 position embedding [256, d]; per layer two LayerNorm weights and biases [d],
                 the attention in-projection [3d, d] + bias, out-projection [d, d] + bias, the
                 MLP [4d, d] + bias and [d, 4d] + bias; the final LayerNorm. d = 256, L = 4:
                 about 3.5M params in 52 tensors.
  one-32x32      a single 32x32 matrix (the parameter Inductor once failed to compile).

Both optimizers use the default foreach path, lr 1e-3, weight decay 0.1, and take one
untimed warm-up step. Then ``--reps`` repetitions, each timing one fp32 step and one SR step
in alternating order (fp32 first on even repetitions, SR first on odd ones), so load drift hits
both alike; the printed ms are medians over repetitions and the ratio is median(SR) /
median(fp32). ``--clock process`` (the default) counts this process' CPU seconds, which other
jobs on a shared machine inflate less than wall time; the 1-minute load average before and
after the run is printed with the table. Nothing is asserted: the numbers describe the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
from _clock import add_clock_args, device_and_clock

import optim


def gpt_shapes(d: int, layers: int) -> list[tuple[int, ...]]:
    """Parameter shapes of a GPT-2-style decoder of width ``d`` (module docstring)."""
    shapes: list[tuple[int, ...]] = [(4 * d, d), (256, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return shapes + [(d,), (d,)]


CASES = {
    "gpt-d256-L4": lambda: gpt_shapes(256, 4),
    "gpt-d64-L2": lambda: gpt_shapes(64, 2),
    "one-32x32": lambda: [(32, 32)],
}


def _make(shapes, dtype, device, sr: bool, gen: torch.Generator):
    params = [torch.nn.Parameter(torch.randn(s, generator=gen).mul_(0.02).to(device=device, dtype=dtype))
              for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).mul_(1e-3).to(device=device, dtype=dtype)
    opt = optim.AdamW(params, lr=1e-3, weight_decay=0.1, stochastic_rounding=sr, seed=0)
    return opt


def _time(fn, clock, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = clock()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return clock() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--reps", type=int, default=9)
    add_clock_args(ap)
    ap.set_defaults(threads=1, clock="process", device="cpu")
    args = ap.parse_args()
    device, clock = device_and_clock(ap, args)
    load0 = os.getloadavg()[0]
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
          f"clock {args.clock}, reps {args.reps}, cpus {os.cpu_count()}, load avg (1 min) {load0:.2f}")
    print(f"{'case':<14}{'params':>10}{'tensors':>9}{'fp32 ms':>10}{'SR bf16 ms':>12}{'ratio':>8}")
    for name in args.cases.split(","):
        shapes = CASES[name]()
        gen = torch.Generator().manual_seed(0)
        ref = _make(shapes, torch.float32, device, False, gen)
        sr = _make(shapes, torch.bfloat16, device, True, gen)
        ref.step()
        sr.step()
        t_ref, t_sr = [], []
        for rep in range(args.reps):
            order = ((ref, t_ref), (sr, t_sr)) if rep % 2 == 0 else ((sr, t_sr), (ref, t_ref))
            for opt, out in order:
                out.append(_time(opt.step, clock, device))
        a, b = statistics.median(t_ref) * 1e3, statistics.median(t_sr) * 1e3
        n = sum(p.numel() for g in ref.param_groups for p in g["params"])
        print(f"{name:<14}{n:>10}{len(shapes):>9}{a:>10.2f}{b:>12.2f}{b / a:>8.2f}")
        sys.stdout.flush()
    print(f"load avg (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
