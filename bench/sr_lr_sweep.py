"""The stochastic-rounding lr sweep as a table (optim/README.md, "SR in practice").

    scalelab sweep sweeps/sr_precision.yaml
    python bench/sr_lr_sweep.py runs/sr_precision [--markdown]

Reads the sweep's runs (``scalelab.sweep.view.collect``), averages the final held-out loss over
seeds per (size, precision, lr), and prints one row per size and precision: the loss at
every lr of the grid, the best lr and its loss, and the best loss's gap to fp32's own best
at that size. "Closes the gap" means SR's gap to fp32 as a share of round-to-nearest's:
1 - gap(SR) / gap(RTN). The seed spread (max - min over seeds, at each row's best lr) says
how much of a gap is noise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from scalelab.sweep.view.collect import collect

LABELS = {"fp32": "fp32 AdamW", "bf16-sr": "bf16 SR-AdamW", "bf16-rtn": "bf16 round-to-nearest"}


def lr_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Per (N, block, lr): the mean and spread of the final loss over seeds."""
    done = runs.filter(pl.col("state") == "COMPLETED")
    return (done.group_by("N", "block", "optim.lr")
            .agg(loss=pl.col("final_loss").mean(), spread=pl.col("final_loss").max() - pl.col("final_loss").min(),
                 seeds=pl.len())
            .sort("N", "block", "optim.lr"))


def summary(table: pl.DataFrame) -> list[str]:
    lrs = sorted(table["optim.lr"].unique().to_list())
    head = ("| N | precision | " + " | ".join(f"lr {lr:g}" for lr in lrs)
            + " | best lr | best loss | gap to fp32 | seed spread |")
    lines = [head, "|" + "---|" * (len(lrs) + 6)]
    for n in sorted(table["N"].unique().to_list()):
        rows = table.filter(pl.col("N") == n)
        best = {b: rows.filter(pl.col("block") == b).sort("loss").row(0, named=True) for b in LABELS
                if rows.filter(pl.col("block") == b).height}
        fp32 = best["fp32"]["loss"]
        for block, label in LABELS.items():
            if block not in best:
                continue
            by_lr = dict(rows.filter(pl.col("block") == block).select("optim.lr", "loss").iter_rows())
            cells = [f"{by_lr[lr]:.4f}" if lr in by_lr else "" for lr in lrs]
            b = best[block]
            lines.append(f"| {n:,} | {label} | " + " | ".join(cells) + f" | {b['optim.lr']:g} | **{b['loss']:.4f}** | "
                         f"{b['loss'] - fp32:+.4f} | {b['spread']:.4f} |")
        if "bf16-sr" in best and "bf16-rtn" in best:
            gap_sr, gap_rtn = best["bf16-sr"]["loss"] - fp32, best["bf16-rtn"]["loss"] - fp32
            share = 1 - gap_sr / gap_rtn if gap_rtn > 0 else float("nan")
            lines.append(f"| {n:,} | SR closes | {share:.0%} of round-to-nearest's gap at the best lr of each |"
                         + " |" * (len(lrs) + 3))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="the sweep's directory (runs/sr_precision)")
    args = parser.parse_args()
    print("\n".join(summary(lr_table(collect(args.sweep_dir)))))


if __name__ == "__main__":
    main()
