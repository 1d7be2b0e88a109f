"""The CPU-twin design comparison of docs/adaptive.md: grid vs random vs adaptive on real runs.

    scalelab sweep sweeps/adaptive_twin_reference.yaml      # the reference grid, run once
    scalelab collect runs/adaptive_twin_reference
    python bench/adaptive_twin.py runs/adaptive_twin_reference [--random-seeds 10] [--out docs]

The reference grid (every size x epochs x weight-decay cell, trained once) is the cache:
a design "trains" a run by reading that run's real final loss, and pays that run's
measured wall time (1 CPU core per run) as its cost, so the x axis is CPU-hours, this
machine's GPU-hours. The truth is the target fitted on the whole grid (E of the
regularized recipe, ``analysis.adaptive.target``). Each design gets the whole grid's cost
as its budget:

- grid: the sizes ascending, each size's cells in the spec's order (deterministic);
- random: the same cells in ``--random-seeds`` random orders;
- adaptive: ``analysis.adaptive.run_adaptive`` from its seed design (deterministic on a
  cache: one seed per cell, so no two arms of it differ), settling each size by one-axis
  steps (Kim et al.'s coordinate search);
- adaptive (ridge): the same, with the all-up / all-down diagonal cells as neighbours too
  (``CandidateSpace.ridge``).

Prints a markdown table (width of E's CI at 25/50/100% of the budget, CPU-hours to reach
multiples of the whole grid's own width, coverage of the truth at half the budget) and
writes ``adaptive_twin.png`` (width vs CPU-hours) and ``adaptive_twin.parquet`` (every
trajectory) under ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl

from analysis.adaptive.baselines import grid_order, random_order, run_fixed
from analysis.adaptive.loop import run_adaptive, seed_design
from analysis.adaptive.space import Axis, CandidateSpace
from analysis.adaptive.target import TargetFit, evaluate, size_points
from analysis.adaptive.trajectory import reached, width_at
from matplotlib.ticker import FuncFormatter

from analysis.plot_style import plt

DESIGNS = ("grid", "random", "adaptive", "adaptive (ridge)")
EPOCHS, WD = "data.epochs", "optim.weight_decay"
"""The reference grid's tuned axes (runs.parquet columns)."""


class CachedTrainer:
    """A trainer whose runs are the reference grid's: ``train`` reads a run's final loss,
    ``flops`` returns its measured wall seconds (the cost every design pays)."""

    def __init__(self, runs: pl.DataFrame) -> None:
        """``runs``: key, loss, cost_s, one row per cached run."""
        self._by_key = {k: (l, c) for k, l, c in runs.select("key", "loss", "cost_s").iter_rows()}

    def flops(self, frame: pl.DataFrame) -> np.ndarray:
        return np.array([self._by_key[k][1] for k in frame["key"]], dtype=float)

    def train(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(pl.Series("loss", [self._by_key[k][0] for k in frame["key"]], dtype=pl.Float64))


def load(sweep_dir: Path) -> tuple[CandidateSpace, CachedTrainer, TargetFit]:
    """The candidate space, the cache as a trainer, and the truth: the whole grid's fit."""
    runs = pl.read_parquet(sweep_dir / "runs.parquet").filter(
        (pl.col("state") == "COMPLETED") & pl.col("final_loss").is_finite())
    sizes = sorted(set(runs["N"].cast(pl.Float64).to_list()))
    space = CandidateSpace(sizes=tuple(sizes), axes=(
        Axis("epochs", tuple(sorted(set(runs[EPOCHS].cast(pl.Float64).to_list())))),
        Axis("wd", tuple(sorted(set(runs[WD].cast(pl.Float64).to_list()))))))
    keys = [space.key(n, space.cell_of({"epochs": e, "wd": w}))
            for n, e, w in runs.select(pl.col("N").cast(pl.Float64), EPOCHS, WD).iter_rows()]
    cached = pl.DataFrame({"key": keys, "loss": runs["final_loss"].cast(pl.Float64),
                           "cost_s": runs["wall_time_s"].cast(pl.Float64)})
    expected = space.table(lambda f: np.zeros(f.height)).filter(pl.col("replicate") == 0)
    if missing := set(expected["key"]) - set(cached["key"]):
        sys.exit(f"{sweep_dir}: the reference grid lacks {len(missing)} run(s), e.g. {sorted(missing)[0]}")
    trainer = CachedTrainer(cached)
    full = trainer.train(grid_order(space, trainer.flops))
    truth = evaluate(full, space)
    print(f"reference grid: {full.height} runs, {cached['cost_s'].sum() / 3600:.2f} CPU-hours; "
          f"truth E = {truth.E:.4f} (its own 95% CI {truth.ci[0]:.4f}..{truth.ci[1]:.4f}, "
          f"width {truth.width:.4f}, {truth.n_sizes} settled sizes)")
    return space, trainer, truth


def trajectories(space: CandidateSpace, trainer: CachedTrainer, seeds: int, batch: int) -> pl.DataFrame:
    budget = float(grid_order(space, trainer.flops)["flops"].sum())
    out = []
    grid = run_fixed(trainer, space, grid_order(space, trainer.flops), budget, 0.0).trajectory
    out.append(grid.with_columns(pl.lit("grid").alias("design"), pl.lit(0).alias("seed")))
    for s in range(seeds):
        rnd = run_fixed(trainer, space, random_order(space, trainer.flops, s), budget, 0.0).trajectory
        out.append(rnd.with_columns(pl.lit("random").alias("design"), pl.lit(s).alias("seed")))
    for design, sp in (("adaptive", space), ("adaptive (ridge)", dataclasses.replace(space, ridge=True))):
        ad = run_adaptive(trainer, sp, seed_design(sp, trainer.flops), budget, 0.0, batch=batch)
        print(f"{design}: stopped ({ad.stopped}) after {ad.runs.height} runs; best cell per size: "
              + ", ".join(f"{int(n):,}: ({e:g} ep, wd {w:g}) {l:.4f}" for n, e, w, l in
                          size_points(ad.runs, sp).settled.select("N", "epochs", "wd", "loss").iter_rows()))
        out.append(ad.trajectory.with_columns(pl.lit(design).alias("design"), pl.lit(0).alias("seed")))
    return pl.concat(out).with_columns((pl.col("flops") / 3600).alias("cpu_hours"),
                                       pl.lit(budget / 3600).alias("budget_hours"))


def table(traj: pl.DataFrame, truth: float, full_width: float, rel: tuple[float, ...]) -> str:
    """Per design: the median CI width at 25/50/100% of the budget, the CPU-hours to reach
    each width ``k x full_width`` (the whole grid's own width), and at half the budget
    whether the CI covers the truth."""
    budget = float(traj["budget_hours"][0]) * 3600
    head = ("| design | arms | width at 25% | at 50% | at 100% of the budget | "
            + " | ".join(f"CPU-h to {k:g}x the grid's width" for k in rel) + " | CI at 50% covers the truth |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for design in DESIGNS:
        arms = traj.filter(pl.col("design") == design).partition_by("seed")
        w = {f: float(np.median([width_at(a, f * budget) for a in arms])) for f in (0.25, 0.5, 1.0)}
        hours = []
        for k in rel:
            got = [h["flops"] / 3600 for a in arms if (h := reached(a, k * full_width)) is not None]
            hours.append(f"{np.median(got):.2f} ({len(got)}/{len(arms)} reach it)" if got
                         else f"never (0/{len(arms)})")
        half = [a.filter(pl.col("flops") <= 0.5 * budget) for a in arms]
        has_ci = [h for h in half if h.height and h["width"][-1] <= 1.0]  # a usable CI (_width)
        covers = sum(h["lo"][-1] <= truth <= h["hi"][-1] for h in has_ci)
        cells = [design, str(len(arms)), *(_width(w[f]) for f in (0.25, 0.5, 1.0)),
                 *hours, f"{covers}/{len(has_ci)} with a usable CI"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _width(w: float) -> str:
    """A CI width as the table shows it: none yet, or wider than 1 nat (a fit on too few
    settled sizes that identifies nothing, e.g. E ~ 0 +- 1000), or the width."""
    if not math.isfinite(w):
        return "no CI"
    return "> 1 nat (not identified)" if w > 1.0 else f"{w:.3f}"


def plot(traj: pl.DataFrame, out: Path, truth_width: float) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = {"grid": "tab:gray", "random": "tab:orange", "adaptive": "tab:blue",
               "adaptive (ridge)": "tab:green"}
    for design, sub in traj.filter(pl.col("width") <= 1.0).group_by("design", maintain_order=True):
        for i, arm in enumerate(sub.partition_by("seed")):
            ax.step(arm["cpu_hours"], arm["width"], where="post", color=colours[design[0]],
                    alpha=0.9 if design[0] != "random" else 0.35, lw=2 if design[0] != "random" else 1,
                    label=design[0] if i == 0 else None)
            if design[0].startswith("adaptive") and arm["cpu_hours"][-1] < arm["budget_hours"][0] * 0.999:
                ax.plot(arm["cpu_hours"][-1], arm["width"][-1], "o", color=colours[design[0]])
                ax.annotate("stops: no run left that\nwould narrow the CI",
                            (arm["cpu_hours"][-1], arm["width"][-1]), textcoords="offset points",
                            xytext=(8, 6), fontsize=8, color=colours[design[0]])
    ax.axhline(truth_width, color="black", ls=":", lw=1, label="the full grid's own width")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlim(0, float(traj["budget_hours"][0]) * 1.02)
    never = [d for d in DESIGNS if d in set(traj["design"]) and not traj.filter(
        (pl.col("design") == d) & (pl.col("width") <= 1.0)).height]
    if never:
        ax.text(0.02, 0.04, "never a CI <= 1 nat: " + ", ".join(never), transform=ax.transAxes,
                fontsize=8, color="dimgray")
    ax.set_xlabel("CPU-hours spent (1 core per run; measured wall time of each run)")
    ax.set_ylabel("width of E's 95% CI (nats; shown once <= 1)")
    ax.set_title("CPU twin: CI of the regularized asymptote E vs compute, same budget for each design",
                 fontsize=10)
    ax.legend(frameon=False)
    fig.tight_layout()
    path = out / "adaptive_twin.png"
    fig.savefig(path, dpi=130)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir", type=Path)
    ap.add_argument("--random-seeds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4, help="runs per adaptive round")
    ap.add_argument("--relative-targets", type=float, nargs="+", default=[3.0, 2.0, 1.25],
                    help="target widths as multiples of the whole grid's own CI width")
    ap.add_argument("--out", type=Path, default=Path("docs"))
    args = ap.parse_args(argv)
    space, trainer, truth = load(args.sweep_dir)
    traj = trajectories(space, trainer, args.random_seeds, args.batch)
    args.out.mkdir(parents=True, exist_ok=True)
    traj.write_parquet(args.out / "adaptive_twin.parquet")
    print(table(traj, truth.E, truth.width, tuple(args.relative_targets)))
    print(f"figure: {plot(traj, args.out, truth.width)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
