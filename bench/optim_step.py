"""Optimizer step time: optim.AdamW and optim.Muon against torch.optim, measured side by side.

    python bench/optim_step.py [--d-model 256] [--layers 12] [--vocab 32000] [--steps 1]
                               [--reps 5] [--block all|adamw|muon] [--device cpu]
                               [--threads 1 --clock process]

The parameters are those of a Llama-style decoder (Touvron et al. 2023, arXiv 2302.13971),
built directly as fp32 tensors with fixed random grads (no model, no forward): the token
embedding [V, d]; per layer W_q, W_k, W_v, W_o [d, d], the SwiGLU MLP (Shazeer 2020, arXiv
2002.05202) w1, w3 [f, d] and w2 [d, f] with f = 8d/3 rounded up to a multiple of 256 (as
Llama), and two RMSNorm gains [d]; the final norm [d] and the head [V, d].

Rows, each timed against the torch reference of its block (ratio = ms / ms of that reference):
  AdamW  every tensor: torch.optim.AdamW(foreach=True) vs optim.AdamW with foreach=True and
         with foreach=False (its per-parameter loop). Same hyperparameters, fp32 moments on both.
  Muon   the 7·layers hidden matrices only: torch.optim.Muon takes 2-D hidden matrices and
         nothing else, so optim.Muon gets the same list (no AdamW group). Newton-Schulz runs 5
         steps in bf16 on both sides (torch's is fixed at bf16; bf16 is optim.Muon's default);
         optim.Muon with foreach=True and False.

Each optimizer has its own copy of the params and its own state; the grads are shared tensors
(no optimizer writes them). One warm-up step per optimizer, then ``--reps`` repetitions in
which the optimizers take turns (A, B, C, then C, B, A: drift hits all alike), each timing
``--steps`` steps; the table prints the median ms/step over repetitions, and the Muon lines the
quartiles of the per-repetition ratios (optim / torch within one repetition), whose spread is
the machine's noise, and the minor page faults per step of each row (fresh memory the allocator
took back from the system: its cost is system time, in the process clock). On a shared CPU,
``--threads 1 --clock process`` times CPU seconds of one thread, which other processes' load
does not inflate (their use of the same caches and memory bandwidth still does). ``--block
muon`` times only the Muon rows. Nothing is asserted: the numbers describe the machine.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import statistics
from collections.abc import Callable

import torch
from _clock import add_clock_args, device_and_clock

import optim

HIDDEN = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")


def llama_shapes(d_model: int, layers: int, vocab: int) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every parameter of the decoder in the module docstring."""
    ffn = 256 * math.ceil(int(8 * d_model / 3) / 256)
    shapes: dict[str, tuple[int, ...]] = {"embed": (vocab, d_model)}
    for i in range(layers):
        shapes |= {f"{i}.{n}": (d_model, d_model) for n in ("wq", "wk", "wv", "wo")}
        shapes |= {f"{i}.w1": (ffn, d_model), f"{i}.w3": (ffn, d_model), f"{i}.w2": (d_model, ffn)}
        shapes |= {f"{i}.attn_norm": (d_model,), f"{i}.mlp_norm": (d_model,)}
    return shapes | {"norm": (d_model,), "head": (vocab, d_model)}


def _params(shapes, grads: dict[str, torch.Tensor], device, dtype=torch.float32) -> list[torch.nn.Parameter]:
    """A fresh copy of the params (seed 0) in ``dtype``, each holding its shared grad (of that dtype)."""
    gen = torch.Generator(device=device).manual_seed(0)
    params = []
    for name, shape in shapes.items():
        p = torch.nn.Parameter((0.02 * torch.randn(shape, device=device, generator=gen)).to(dtype))
        p.grad = grads[name] if dtype == torch.float32 else grads[name].to(dtype)
        params.append(p)
    return params


def state_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in the optimizer's state (moments, momentum, masters, step counts)."""
    return sum(
        v.numel() * v.element_size() for st in opt.state.values() for v in st.values() if torch.is_tensor(v)
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(steps: dict[str, Callable[[], object]], reps: int, n: int, device, clock
          ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per step of each callable in each repetition (warm-up, then interleaved
    repetitions), and the minor page faults per step this process took meanwhile."""
    for fn in steps.values():
        fn()
    _sync(device)
    samples: dict[str, list[float]] = {k: [] for k in steps}
    faults: dict[str, list[float]] = {k: [] for k in steps}
    for r in range(reps):
        for name in list(steps) if r % 2 == 0 else reversed(list(steps)):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = clock()
            for _ in range(n):
                steps[name]()
            _sync(device)
            samples[name].append((clock() - t0) / n)
            faults[name].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / n)
    return samples, faults


def _spread(num: list[float], den: list[float]) -> str:
    """Quartiles of the per-repetition ratios num[r] / den[r] (the two timed within one
    repetition, side by side): ``q25/median/q75``, and the range."""
    r = sorted(a / b for a, b in zip(num, den))
    q = statistics.quantiles(r, n=4) if len(r) > 1 else r * 3
    return f"{q[0]:.3f}/{q[1]:.3f}/{q[2]:.3f} (range {r[0]:.3f}-{r[-1]:.3f})"


def _optimizers(shapes, grads, device, block: str = "all") -> dict[str, tuple[str, str, torch.optim.Optimizer]]:
    """Row name -> (block, reference row, optimizer) of ``block`` ("all", "adamw" or "muon");
    params built per optimizer."""
    hidden = {n: s for n, s in shapes.items() if n.split(".")[-1] in HIDDEN}
    adamw = {"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    muon = {"lr": 0.02, "momentum": 0.95, "weight_decay": 0.1, "nesterov": True, "ns_steps": 5}
    every, matrices = (lambda: _params(shapes, grads, device)), (lambda: _params(hidden, grads, device))
    made: dict[str, tuple[str, torch.optim.Optimizer]] = {} if block == "muon" else {
        "torch.optim.AdamW(foreach=True)": ("adamw", torch.optim.AdamW(every(), foreach=True, **adamw)),
        "optim.AdamW(foreach=True)": ("adamw", optim.AdamW(every(), foreach=True, **adamw)),
        "optim.AdamW(foreach=False)": ("adamw", optim.AdamW(every(), foreach=False, **adamw)),
        "optim.AdamW bf16 SR": ("adamw", optim.AdamW(_params(shapes, grads, device, torch.bfloat16),
                                                      stochastic_rounding=True, **adamw)),
        "optim.AdamW bf16 SR, bf16 moments": ("adamw", optim.AdamW(
            _params(shapes, grads, device, torch.bfloat16), stochastic_rounding=True,
            moment_dtype=torch.bfloat16, **adamw)),
    }
    try:  # torchao's bf16 SR-AdamW, only where torchao is installed (not a dependency)
        from torchao.optim import _AdamW  # type: ignore[import-not-found]

        if block != "muon":
            made["torchao _AdamW bf16 SR"] = ("adamw", _AdamW(_params(shapes, grads, device, torch.bfloat16),
                                                              bf16_stochastic_round=True, **adamw))
    except ImportError:
        pass
    if block != "adamw":
        made |= {
            "torch.optim.Muon": ("muon", torch.optim.Muon(matrices(), **muon)),
            "optim.Muon(foreach=True)": ("muon", optim.Muon(matrices(), foreach=True, **muon)),
            "optim.Muon(foreach=False)": ("muon", optim.Muon(matrices(), foreach=False, **muon)),
        }
    refs = {"adamw": "torch.optim.AdamW(foreach=True)", "muon": "torch.optim.Muon"}
    return {name: (block, refs[block], opt) for name, (block, opt) in made.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--steps", type=int, default=1, help="optimizer steps per timing")
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions (median)")
    ap.add_argument("--block", choices=("all", "adamw", "muon"), default="all",
                    help="time every row, or only the AdamW or the Muon block (fewer rows between A and B)")
    add_clock_args(ap)
    args = ap.parse_args()
    device, clock = device_and_clock(ap, args)

    shapes = llama_shapes(args.d_model, args.layers, args.vocab)
    gen = torch.Generator(device=device).manual_seed(1)
    grads = {n: torch.randn(s, device=device, generator=gen) for n, s in shapes.items()}
    hidden = [s for n, s in shapes.items() if n.split(".")[-1] in HIDDEN]
    covers = {
        "adamw": f"all {len(shapes)} tensors, {sum(math.prod(s) for s in shapes.values()) / 1e6:.2f}M",
        "muon": f"{len(hidden)} hidden matrices, {sum(math.prod(s) for s in hidden) / 1e6:.2f}M",
    }
    rows = _optimizers(shapes, grads, device, args.block)
    load0 = os.getloadavg()
    samples, faults = _time({name: opt.step for name, (_, _, opt) in rows.items()}, args.reps, args.steps, device,
                            clock)
    load1 = os.getloadavg()
    t = {k: statistics.median(v) for k, v in samples.items()}

    print(f"device {device} ({torch.get_num_threads()} CPU threads, {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}), "
          f"torch {torch.__version__}; Llama-style decoder d_model {args.d_model}, {args.layers} layers, "
          f"vocab {args.vocab}; "
          f"median of {args.reps} reps x {args.steps} steps, {args.clock} clock")
    print(f"load average (1, 5, 15 min) before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print("Muon rows: hidden matrices only on both sides (torch.optim.Muon takes nothing else); "
          "Newton-Schulz in bf16, 5 steps, Jordan's coefficients on both")
    if "torchao _AdamW bf16 SR" not in rows and args.block != "muon":
        print("torchao is not importable: its bf16 SR-AdamW row is left out")
    print("| optimizer | params | covers | ms/step | vs torch | state MB |")
    print("|---|---|---|---|---|---|")
    for name, (block, ref, opt) in rows.items():
        dtype = "bf16" if "bf16" in name else "fp32"
        print(f"| {name} | {dtype} | {covers[block]} | {1e3 * t[name]:.1f} | {t[name] / t[ref]:.2f}x "
              f"| {state_bytes(opt) / 2**20:.1f} |")
    muon = [n for n in rows if n.startswith("optim.Muon")]
    if muon:
        ref = "torch.optim.Muon"
        print("optim.Muon / torch.optim.Muon, ratio of medians: "
              + ", ".join(f"{n} {t[n] / t[ref]:.3f}" for n in muon))
        print("per-repetition ratios q25/median/q75: "
              + ", ".join(f"{n} {_spread(samples[n], samples[ref])}" for n in muon))
    print("minor page faults per step (median; memory the allocator took back from the system): "
          + ", ".join(f"{n} {statistics.median(faults[n]):,.0f}" for n in rows))

if __name__ == "__main__":
    main()
