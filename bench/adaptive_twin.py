"""The CPU-twin design comparison of docs/adaptive.md: grid vs random vs adaptive on real runs.

    scalelab sweep sweeps/adaptive_twin_reference.yaml      # the reference grid, run once
    scalelab collect runs/adaptive_twin_reference
    python bench/adaptive_twin.py runs/adaptive_twin_reference [--arms 10] [--out docs]

The reference grid (every size x epochs x weight-decay cell, trained with each seed of the
spec) is the cache: a design "trains" a run by reading that run's real final loss, and pays
its cell's measured wall time (1 CPU core per run; the seed-0 run's, the same for every
seed of a cell) as its cost, so the x axis is CPU-hours, this machine's GPU-hours.

Arms. One study sees one seed per cell first. Arm a draws, for every cell independently,
which of the cell's cached seeds is its replicate 0 (and which its replicate 1, ...), from
``numpy.random.default_rng(a)``; arm 0 keeps seed 0 first. So the arms are the studies the
same grid could have given with other seeds, and every design runs on every arm:

- grid: the sizes ascending, each size's cells in the spec's order, replicate 0 only;
- random: the same runs in a random order (``random_order(seed=a)``);
- adaptive: ``analysis.adaptive.run_adaptive`` from its seed design, settling each size by
  one-axis steps (Kim et al.'s coordinate search), and buying replicates (the other seeds)
  once 4 sizes are settled;
- adaptive (ridge): the same, with the all-up / all-down diagonal cells as neighbours too
  (``CandidateSpace.ridge``).

Every design gets the grid's cost (every cell once) as its budget. Two targets:

- E of the regularized recipe (``analysis.adaptive.target_fits``). The truth is the fit on the
  whole cache, every seed of every cell (arm 0's replicate order);
- the ranking of two recipes by E (``analysis.adaptive.targets.Ranking``), slices of the
  grid: light (weight decay 0.1 or 1) and heavy (3 or 10). The truth is the order of their
  fits on the whole cache. A design's ranking is read at its first decided step.

Prints two markdown tables and writes ``adaptive_twin.png`` (E's width vs CPU-hours; the
share of arms with the ranking decided right vs CPU-hours) and ``adaptive_twin.parquet``
(every trajectory) under ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.ticker import FuncFormatter

from analysis.adaptive.baselines import grid_order, random_order, run_fixed
from analysis.adaptive.loop import run_adaptive, seed_design
from analysis.adaptive.space import Axis, CandidateSpace
from analysis.adaptive.target_fits import TargetFit, evaluate, judge
from analysis.adaptive.targets import Ranking, Summary
from analysis.adaptive.trajectory import reached, width_at
from analysis.plots.style import plt
from analysis.tables.layout import runs_file

DESIGNS = ("grid", "random", "adaptive", "adaptive (ridge)")
RANK_DESIGNS = ("grid", "random", "adaptive (ridge)")
EPOCHS, WD = "data.epochs", "optim.weight_decay"
"""The reference grid's tuned axes (runs.parquet columns)."""
RECIPES = {"light": (0.1, 1.0), "heavy": (3.0, 10.0)}
"""The ranked recipes: weight-decay slices of the grid."""
COLOURS = {"grid": "tab:gray", "random": "tab:orange", "adaptive": "tab:blue",
           "adaptive (ridge)": "tab:green"}


@dataclasses.dataclass(frozen=True)
class Cache:
    """The reference grid: its space (replicates = seeds per cell) and one row per run:
    N, epochs, wd, seed (0, 1, ... within the cell), loss, cost_s (the cell's cost)."""

    space: CandidateSpace
    runs: pl.DataFrame

    @property
    def seeds(self) -> int:
        return self.space.replicates


class CachedTrainer:
    """A trainer whose runs are the cache's: ``train`` reads a run's final loss, ``flops``
    returns its cost in seconds. ``by_key``: key -> (loss, cost_s)."""

    def __init__(self, by_key: dict[str, tuple[float, float]]) -> None:
        self._by_key = by_key

    def flops(self, frame: pl.DataFrame) -> np.ndarray:
        return np.array([self._by_key[k][1] for k in frame["key"]], dtype=float)

    def train(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(pl.Series("loss", [self._by_key[k][0] for k in frame["key"]],
                                            dtype=pl.Float64))


def load(sweep_dir: Path) -> Cache:
    """The cache: every COMPLETED run of the reference grid (exits when a cell lacks a seed)."""
    runs = pl.read_parquet(runs_file(sweep_dir)).filter(
        (pl.col("state") == "COMPLETED") & pl.col("final_loss").is_finite())
    seed = pl.col("seed").cast(pl.Int64) if "seed" in runs.columns else pl.lit(0, dtype=pl.Int64)
    runs = runs.select(pl.col("N").cast(pl.Float64), pl.col(EPOCHS).cast(pl.Float64).alias("epochs"),
                       pl.col(WD).cast(pl.Float64).alias("wd"), seed.alias("seed"),
                       pl.col("final_loss").cast(pl.Float64).alias("loss"),
                       pl.col("wall_time_s").cast(pl.Float64).alias("wall_s"))
    seeds = sorted(set(runs["seed"].to_list()))
    space = CandidateSpace(tuple(sorted(set(runs["N"].to_list()))), (
        Axis("epochs", tuple(sorted(set(runs["epochs"].to_list())))),
        Axis("wd", tuple(sorted(set(runs["wd"].to_list()))))), replicates=len(seeds))
    cells = runs.group_by("N", "epochs", "wd").agg(pl.col("seed").n_unique().alias("n"))
    want = len(space.sizes) * math.prod(space.shape)
    if cells.height != want or (cells["n"] != len(seeds)).any():
        sys.exit(f"{sweep_dir}: the reference grid is incomplete: {cells.height} of {want} cells, "
                 f"need seeds {seeds} in each")
    first = runs.filter(pl.col("seed") == seeds[0]).select("N", "epochs", "wd", pl.col("wall_s").alias("cost_s"))
    runs = runs.join(first, on=["N", "epochs", "wd"]).with_columns(
        pl.col("seed").replace_strict({s: i for i, s in enumerate(seeds)}))
    return Cache(space, runs.sort("N", "epochs", "wd", "seed"))


def arm(cache: Cache, a: int) -> CachedTrainer:
    """Arm ``a``'s trainer: per cell, replicate r is the cached seed perm[r] (module docstring)."""
    rng = np.random.default_rng(a)
    by_key = {}
    for (n, e, w), cell in cache.runs.group_by("N", "epochs", "wd", maintain_order=True):
        perm = np.arange(cache.seeds) if a == 0 else rng.permutation(cache.seeds)
        c = cache.space.cell_of({"epochs": e, "wd": w})
        for r, s in enumerate(perm):
            row = cell.row(int(s), named=True)
            by_key[cache.space.key(n, c, r)] = (row["loss"], row["cost_s"])
    return CachedTrainer(by_key)


def recipes(space: CandidateSpace) -> Ranking:
    return Ranking({name: space.restrict({"wd": wd}) for name, wd in RECIPES.items()})


def truth(cache: Cache) -> tuple[TargetFit, Summary, float]:
    """E of the whole cache, the ranking of the recipes on it, and the grid's cost (s)."""
    tr = arm(cache, 0)
    full = tr.train(cache.space.table(tr.flops))
    budget = float(grid_order(cache.space, tr.flops)["flops"].sum())
    fit = evaluate(full, cache.space)
    ranking, _ = judge(recipes(cache.space), full)
    return fit, ranking, budget


def _design(design: str, tr: CachedTrainer, space: CandidateSpace, a: int, budget: float,
            batch: int, target=None) -> pl.DataFrame:
    if design.startswith("adaptive"):
        sp = dataclasses.replace(space, ridge=design.endswith("(ridge)"))
        return run_adaptive(tr, sp, seed_design(sp, tr.flops), budget, 0.0, batch=batch,
                            target=None if target is None else recipes(sp)).trajectory
    order = grid_order(space, tr.flops) if design == "grid" else random_order(space, tr.flops, a)
    return run_fixed(tr, space, order, budget, 0.0, target=target).trajectory


def trajectories(cache: Cache, arms: int, budget: float, batch: int) -> pl.DataFrame:
    """Every design on every arm, for both targets (column ``target``: E or ranking)."""
    out = []
    for a in range(arms):
        tr = arm(cache, a)
        for design in DESIGNS:
            traj = _design(design, tr, cache.space, a, budget, batch)
            out.append(traj.with_columns(pl.lit("E").alias("target"), pl.lit(design).alias("design"),
                                         pl.lit(a).alias("arm")))
        for design in RANK_DESIGNS:
            traj = _design(design, tr, cache.space, a, budget, batch, target=recipes(cache.space))
            out.append(traj.with_columns(pl.lit("ranking").alias("target"),
                                         pl.lit(design).alias("design"), pl.lit(a).alias("arm")))
        print(f"arm {a} done", file=sys.stderr)
    return pl.concat(out, how="diagonal_relaxed").with_columns(
        (pl.col("flops") / 3600).alias("cpu_hours"), pl.lit(budget / 3600).alias("budget_hours"))


def e_table(traj: pl.DataFrame, fit: TargetFit, rel: tuple[float, ...]) -> str:
    """Per design: the median CI width of E at 25/50/100% of the budget, the CPU-hours to
    reach k x the whole cache's width, and the arms whose CI at the end covers the truth."""
    traj = traj.filter(pl.col("target") == "E")
    budget = float(traj["budget_hours"][0]) * 3600
    head = ("| design | arms | width at 25% | at 50% | at 100% of the budget | "
            + " | ".join(f"CPU-h to {k:g}x the truth's width" for k in rel)
            + " | CI at the end covers the truth |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for design in DESIGNS:
        arms = traj.filter(pl.col("design") == design).partition_by("arm")
        w = {f: float(np.median([width_at(a, f * budget) for a in arms])) for f in (0.25, 0.5, 1.0)}
        hours = []
        for k in rel:
            got = [h["flops"] / 3600 for a in arms if (h := reached(a, k * fit.width)) is not None]
            hours.append(f"{np.median(got):.2f} ({len(got)}/{len(arms)} arms)" if got
                         else f"never (0/{len(arms)})")
        ends = [a.row(-1, named=True) for a in arms]
        usable = [e for e in ends if e["width"] <= 1.0]
        covers = sum(e["lo"] <= fit.E <= e["hi"] for e in usable)
        cells = [design, str(len(arms)), *(_width(w[f]) for f in (0.25, 0.5, 1.0)), *hours,
                 f"{covers}/{len(usable)} with a usable CI"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ranking_table(traj: pl.DataFrame, order: tuple[str, ...]) -> str:
    """Per design: arms that decided the ranking right / wrong / never within the budget,
    and the median CPU-hours at the first decision (of the arms that decided)."""
    traj = traj.filter(pl.col("target") == "ranking")
    want = " < ".join(order)
    lines = [("| design | arms | decided right | decided wrong | never decided | CPU-h at the "
             "decision (median) | order at the end of the budget (undecided arms) |"),
             "|---|---|---|---|---|---|---|"]
    for design in RANK_DESIGNS:
        arms = traj.filter(pl.col("design") == design).partition_by("arm")
        firsts = [a.filter(pl.col("decided")) for a in arms]
        right = sum(f.height > 0 and f["order"][0] == want for f in firsts)
        wrong = sum(f.height > 0 and f["order"][0] != want for f in firsts)
        hours = [f["flops"][0] / 3600 for f in firsts if f.height]
        ends = [a["order"][-1] for a, f in zip(arms, firsts) if not f.height]
        counts = ", ".join(f"{o or 'no fit'}: {ends.count(o)}" for o in sorted(set(ends), key=str))
        lines.append(f"| {design} | {len(arms)} | {right} | {wrong} | {len(arms) - right - wrong} | "
                     f"{np.median(hours):.2f} |" if hours else
                     f"| {design} | {len(arms)} | {right} | {wrong} | {len(arms)} | - |")
        lines[-1] += f" {counts or '-'} |"
    return "\n".join(lines)


def _width(w: float) -> str:
    """A CI width as the table shows it: none yet, wider than 1 nat (a fit that identifies
    nothing), or the width."""
    if not math.isfinite(w):
        return "no CI"
    return "> 1 nat (not identified)" if w > 1.0 else f"{w:.3f}"


CLIP = 5.0
"""Widths above this many nats (or no CI at all) are drawn at it."""


def plot(traj: pl.DataFrame, out: Path, fit: TargetFit, ranking: Summary) -> Path:
    """Left: E's CI width vs CPU-hours, the median over arms and their interquartile band
    (no CI counts as infinitely wide; drawn at CLIP). Right: the share of arms whose ranking
    is decided (right: solid, wrong: dashed) by then."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4))
    budget = float(traj["budget_hours"][0])
    grid_h = np.linspace(0, budget, 400)
    e = traj.filter(pl.col("target") == "E")
    for design in DESIGNS:
        arms = e.filter(pl.col("design") == design).partition_by("arm")
        w = np.array([[width_at(a, h * 3600) for h in grid_h] for a in arms])  # (arms, 400)
        w = np.where(np.isfinite(w), w, 1e9)  # no CI: wider than any
        q25, med, q75 = (np.minimum(np.percentile(w, q, axis=0), CLIP) for q in (25, 50, 75))
        ax.plot(grid_h, med, color=COLOURS[design], lw=2, label=design)
        ax.fill_between(grid_h, q25, q75, color=COLOURS[design], alpha=0.15, lw=0)
    ax.axhline(fit.width, color="black", ls=":", lw=1, label="the whole cache's own width")
    ax.set_yscale("log")
    ax.set_ylim(0.2, CLIP * 1.15)
    ax.set_yticks([0.2, 0.3, 0.5, 1, 2, 3, 5])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.text(0.01, CLIP * 1.03, f"no CI, or wider than {CLIP:g} nats", fontsize=7, color="dimgray")
    ax.set_xlim(0, budget * 1.02)
    ax.set_xlabel("CPU-hours spent (1 core per run)")
    ax.set_ylabel("width of E's 95% CI (nats): median, IQR band")
    ax.set_title(f"regularized E ({len(arms)} arms)", fontsize=10)
    ax.legend(frameon=False, fontsize=8, loc="lower left")
    r = traj.filter(pl.col("target") == "ranking")
    want = " < ".join(ranking.order)
    for design in RANK_DESIGNS:
        arms = r.filter(pl.col("design") == design).partition_by("arm")
        firsts = [a.filter(pl.col("decided")) for a in arms]
        for right, ls, lw in ((True, "-", 2), (False, "--", 1)):
            share = [np.mean([f.height > 0 and (f["order"][0] == want) == right
                              and f["flops"][0] / 3600 <= h for f in firsts]) for h in grid_h]
            if right or max(share) > 0:
                bx.step(grid_h, share, where="post", color=COLOURS[design], lw=lw, ls=ls,
                        label=f"{design}: {'decided, ' + want if right else 'decided the other way'}")
    bx.set_ylim(-0.02, 1.02)
    bx.set_xlim(0, budget * 1.02)
    bx.set_xlabel("CPU-hours spent (1 core per run)")
    bx.set_ylabel("share of arms with the ranking decided")
    state = "decided" if ranking.decided else "not decided"
    bx.set_title(f"ranking by E; the whole cache: {want}, {state}\n({ranking.note} = "
                 f"{ranking.value:.3f}, 95% CI {ranking.lo:.3f}..{ranking.hi:.3f})", fontsize=9)
    bx.legend(frameon=False, fontsize=8, loc="upper left")
    fig.suptitle("CPU twin, real runs: the same budget for each design", fontsize=11)
    fig.tight_layout()
    path = out / "adaptive_twin.png"
    fig.savefig(path, dpi=130)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir", type=Path)
    ap.add_argument("--arms", type=int, default=10, help="seed draws of the cache (module docstring)")
    ap.add_argument("--batch", type=int, default=4, help="runs per adaptive round")
    ap.add_argument("--relative-targets", type=float, nargs="+", default=[3.0, 2.0, 1.25],
                    help="target widths as multiples of the whole cache's own CI width")
    ap.add_argument("--out", type=Path, default=Path("docs"))
    args = ap.parse_args(argv)
    cache = load(args.sweep_dir)
    fit, ranking, budget = truth(cache)
    print(f"reference grid: {cache.runs.height} runs ({cache.seeds} seed(s) per cell); the grid "
          f"costs {budget / 3600:.2f} CPU-hours once per cell. Truth: E = {fit.E:.4f} (95% CI "
          f"{fit.ci[0]:.4f}..{fit.ci[1]:.4f}, width {fit.width:.4f}); ranking "
          f"{' < '.join(ranking.order)} ({'decided' if ranking.decided else 'NOT decided'}: "
          f"{ranking.note} = {ranking.value:.4f}, CI {ranking.lo:.4f}..{ranking.hi:.4f})")
    traj = trajectories(cache, args.arms, budget, args.batch)
    args.out.mkdir(parents=True, exist_ok=True)
    traj.write_parquet(args.out / "adaptive_twin.parquet")
    print(e_table(traj, fit, tuple(args.relative_targets)))
    print()
    print(ranking_table(traj, ranking.order))
    print(f"figure: {plot(traj, args.out, fit, ranking)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
