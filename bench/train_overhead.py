"""Overhead of ``scalelab.train`` over a bare PyTorch loop, measured side by side in one run.

Both train the same model (same preset, init, optimizer, lr schedule, clipping) on the
same batches (``TrainStream.batch(i)``) for the same number of steps:

- bare: batch gather, forward and loss (``lm_loss``, as the trainer), backward, clip,
  AdamW step, zero_grad; one ``loss.item()`` at the end;
- scalelab: ``train(cfg, run_dir)`` with a metrics row every step (``log_every=1``), norms
  every 50 steps, the step-0 and final evals and one final checkpoint.

Each timing covers only the step loop of the bare run and the whole ``train()`` call of
scalelab (its model build, dataset open, evals and checkpoint count against it). The two
alternate ``--reps`` times (order swapped every rep); the best of each is reported (the
least-disturbed run on a shared machine), by wall clock and by process CPU time (the
fairer clock on a machine shared with other jobs; one torch thread by default so the
CPU time is not inflated by spinning OpenMP workers). Target: tokens/s ratio
scalelab / bare >= 0.95.

    python bench/train_overhead.py [--preset cpu-1m] [--steps 200] [--reps 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import torch

from scalelab.config import load_run_config
from scalelab.data import TrainStream, open_dataset
from scalelab.derive import derive
from scalelab.model import build_model
from scalelab.train import train
from scalelab.train.optimizers import build_optimizer
from scalelab.train.schedules import lr_at
from scalelab.train.step import lm_loss


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def bare(cfg) -> tuple[float, float]:
    """(wall, CPU) seconds of a plain PyTorch loop over the same steps."""
    ds = open_dataset(cfg.data)
    d = derive(cfg, vocab_size=ds.vocab_size, train_tokens_available=len(ds.train))
    stream = TrainStream(ds, cfg.data, cfg.train.batch_size)
    model = build_model(cfg.model, ds.vocab_size)
    model.init_weights(seed=cfg.train.init_seed, std=cfg.train.init_std)
    opt = build_optimizer(model, cfg.optim)
    t0 = _clock()
    for i in range(d.steps):
        x, y = stream.batch(i)
        mult = lr_at(i, d.steps, cfg.train.schedule, d.warmup_steps, cfg.train.min_lr_ratio)
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * mult
        loss = lm_loss(model, x, y)  # the trainer's loss (chunked cross-entropy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    final = loss.item()
    assert math.isfinite(final)
    return _since(t0)


def scalelab_run(cfg, root: Path, rep: int) -> tuple[float, float]:
    t0 = _clock()
    train(cfg, root / f"run{rep}")
    return _since(t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu-1m")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_run_config(None, [
        f"model.preset={args.preset}", f"data.seq_len={args.seq}",
        f"data.unique_tokens={args.steps * args.batch * args.seq}", "data.epochs=1",
        f"train.batch_size={args.batch}", "train.log_every=1", "train.norms_every=50",
        "train.eval_every=0", "train.eval_batches=2", f"train.checkpoint_every={10**9}",
    ])
    tokens = args.steps * args.batch * args.seq
    times = {"bare": [], "scalelab": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):  # alternate the order: drifting load hits both
            first_bare = rep % 2 == 0
            if first_bare:
                times["bare"].append(bare(cfg))
            times["scalelab"].append(scalelab_run(cfg, Path(tmp), rep))
            if not first_bare:
                times["bare"].append(bare(cfg))
    print(f"{args.preset}, {args.steps} steps x {args.batch} x {args.seq} tokens, "
          f"{torch.get_num_threads()} threads, device cpu")
    for i, clock in enumerate(("wall", "cpu")):
        best = {k: min(t[i] for t in v) for k, v in times.items()}
        for k, v in times.items():
            print(f"  {clock:4s} {k:9s} best {best[k]:7.2f} s ({tokens / best[k]:8.0f} tok/s)"
                  "  all: " + ", ".join(f"{t[i]:.2f}" for t in v))
        print(f"  {clock:4s} ratio scalelab/bare tokens/s = {best['bare'] / best['scalelab']:.3f}"
              "  (target >= 0.95)")

if __name__ == "__main__":
    main()
