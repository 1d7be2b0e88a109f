"""The masked-diffusion loss scoring only its masked positions, against scoring every one.

``Llama(z, targets=x, weights=w)`` with 'mdm' weights (T/k on the k masked positions of a
row, 0 elsewhere; k uniform on 1..T, so about half the positions) computes the output head
on the masked rows only (``scalelab.model.llama._weighted_loss``). The old path computed
all B·T rows' logits and multiplied half of them by 0. Both are timed here side by side on
one model and the same draws, forward and backward, alternating per repetition; the
per-repetition ratio's median is printed, and the two losses' agreement.

    python bench/mdm_head.py [--vocab 32768] [--d 256] [--layers 4] [--batch 8] [--seq 256]
                             [--reps 9] [--threads N] [--clock wall|process] [--device cpu|cuda]

The head's share of the step grows with the vocabulary against d and the depth: at a
128k vocabulary and d = 768 (a 150M-parameter model) it is most of the step's FLOPs.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from _clock import add_clock_args, device_and_clock

import scalelab.model.llama as llama
from scalelab.model.chunked_loss import chunked_cross_entropy
from scalelab.model.llama import Llama
from scalelab.model.masking import train_draw
from scalelab.model.shape import ModelShape


def _every_position(h, w, targets, weights):
    """The old path: the head on all n rows, weights of 0 included."""
    return chunked_cross_entropy(h, w, targets, weights=weights)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--reps", type=int, default=9)
    add_clock_args(ap)
    args = ap.parse_args()
    device, clock = device_and_clock(ap, args)
    shape = ModelShape(d_model=args.d, n_layers=args.layers, n_heads=max(args.d // 64, 1),
                       n_kv_heads=max(args.d // 64, 1), d_ff=4 * args.d)
    model = Llama(shape, args.vocab, objective="mdm").to(device)
    model.init_weights(seed=0)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(0))
    z, w = train_draw(x, seed=0, step=0, rows=slice(0, args.batch), global_rows=args.batch, mask_id=model.mask_id)
    x, z, w = x.to(device), z.to(device), w.to(device)
    masked = float((w > 0).float().mean())
    new_path = llama._weighted_loss

    def step(path) -> tuple[float, float]:
        llama._weighted_loss = path
        model.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = clock()
        loss = model(z, targets=x, weights=w)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return clock() - t0, float(loss.detach())

    step(new_path), step(_every_position)  # warm-up
    ratios, times = [], {"masked rows": [], "every row": []}
    for rep in range(args.reps):
        order = [("masked rows", new_path), ("every row", _every_position)]
        if rep % 2:
            order.reverse()
        got = {name: step(path) for name, path in order}
        for name in times:
            times[name].append(got[name][0])
        ratios.append(got["every row"][0] / got["masked rows"][0])
    llama._weighted_loss = new_path
    loss_new, loss_old = step(new_path)[1], step(_every_position)[1]
    llama._weighted_loss = new_path
    print(f"mdm d={args.d} layers={args.layers} vocab={args.vocab} batch {args.batch}x{args.seq} on {device}; "
          f"masked share {masked:.3f}")
    for name, ts in times.items():
        print(f"  {name}: median {1e3 * statistics.median(ts):.1f} ms per forward+backward")
    print(f"  speed-up (every row / masked rows), median of per-repetition ratios: {statistics.median(ratios):.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f})")
    print(f"  losses: {loss_new:.6f} and {loss_old:.6f} (|diff| {abs(loss_new - loss_old):.1e})")


if __name__ == "__main__":
    main()
