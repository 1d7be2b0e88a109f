"""Training curves and per-layer norm trajectories of a sweep's runs (from
``analysis.tables.records_scan``), for the notebooks.

- ``plot_training_curves``: val loss vs training tokens, one line per run, coloured by
  N, one panel per recipe (the runs table's ``recipe`` column, else one panel);
- ``plot_norm_trajectories``: one norm (default the weights' RMS->RMS operator norm) of
  every layer vs step for one run, a panel per module family (attention, MLP, other),
  coloured by depth.
"""

from __future__ import annotations

import re

import polars as pl
from matplotlib import cm, colors
from matplotlib.ticker import FuncFormatter

from analysis.errors import AnalysisInputError
from analysis.plots.style import LOSS_LABEL, human, legend_outside, log_ticks, plt

__all__ = ["plot_norm_trajectories", "plot_training_curves"]

_MAX_PANELS = 4


def plot_training_curves(evals: pl.DataFrame, runs: pl.DataFrame, *, split: str = "val"):
    """Loss vs tokens per run (``evals`` joined to ``runs`` on run_id for N and recipe)."""
    keep = [c for c in ("run_id", "N", "recipe") if c in runs.columns]
    # Step 0 is the untrained model (~ln V for every run): left out, it would set the y range.
    data = (evals.filter((pl.col("split") == split) & (pl.col("step") > 0))
            .join(runs.select(keep), on="run_id", how="inner"))
    if data.height == 0:
        raise AnalysisInputError(f"no '{split}' evals of the runs in the table")
    groups = (sorted(data["recipe"].drop_nulls().unique().to_list())[:_MAX_PANELS]
              if "recipe" in data.columns and data["recipe"].drop_nulls().len() else [None])
    n = data["N"].cast(pl.Float64)
    norm = colors.LogNorm(float(n.min()), float(n.max()) * (1.0001 if n.min() == n.max() else 1.0))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.6 * len(groups) + 1.2, 3.8), squeeze=False,
                             sharey=True, layout="constrained")
    for ax, group in zip(axes[0], groups):
        sub = data if group is None else data.filter(pl.col("recipe") == group)
        for (_run_id,), one in sub.sort("step").group_by("run_id", maintain_order=True):
            ax.plot(one["tokens"], one["loss"], color=cm.viridis(norm(float(one["N"][0]))), lw=1.2, marker=".", ms=3)
        ax.set_title("all runs" if group is None else f"recipe: {group}", fontsize=9)
        ax.set_xlabel("training tokens")
        ax.xaxis.set_major_formatter(FuncFormatter(human))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{split} loss (nats/token)" if split != "val" else LOSS_LABEL)
    bar = fig.colorbar(cm.ScalarMappable(norm=norm, cmap="viridis"), ax=axes[0].tolist(), pad=0.01)
    bar.set_label("parameters N")
    log_ticks(bar.ax.yaxis, float(n.min()), float(n.max()))
    fig.suptitle("Training curves: held-out loss during training, one line per run (after step 0)")
    return fig


def _g3(v: float, _pos=None) -> str:
    return f"{v:.3g}"


def _family(layer: str) -> str:
    return "attention" if ".attn." in layer else ("MLP" if ".mlp." in layer else "other")


def _depth(layer: str) -> int | None:
    m = re.search(r"layers\.(\d+)\.", layer)
    return int(m.group(1)) if m else None


def plot_norm_trajectories(norms: pl.DataFrame, run_id: str, *, norm: str = "rms_to_rms",
                           kind: str = "weight"):
    """``norm`` of ``kind`` ('weight', 'update' or 'grad') per layer vs step for ``run_id``."""
    sub = norms.filter((pl.col("run_id") == run_id) & (pl.col("norm") == norm) & (pl.col("kind") == kind)
                       & (pl.col("param") == "weight"))
    if sub.height == 0:
        raise AnalysisInputError(f"no '{kind}' rows of norm '{norm}' for run {run_id} (norms_every > 0?)")
    layers = sorted(sub["layer"].unique().to_list())
    depths = [d for d in map(_depth, layers) if d is not None]
    top = max(depths, default=0)
    families = [f for f in ("attention", "MLP", "other") if any(_family(la) == f for la in layers)]
    fig, axes = plt.subplots(1, len(families), figsize=(4.4 * len(families) + 1.4, 3.8), squeeze=False,
                             layout="constrained")
    markers = "osD^vPXh<>"
    for ax, family in zip(axes[0], families):
        names = sorted({la.rsplit(".", 1)[-1] for la in layers if _family(la) == family and _depth(la) is not None})
        for la in (la for la in layers if _family(la) == family):
            one = sub.filter(pl.col("layer") == la).sort("step")
            d = _depth(la)
            if d is None:
                ax.plot(one["step"], one["value"], "--", marker=".", lw=1.2, label=la)
                continue
            part = la.rsplit(".", 1)[-1]
            ax.plot(one["step"], one["value"], "-", color=cm.plasma(0.85 * d / max(top, 1)), lw=1.0,
                    marker=markers[names.index(part) % len(markers)], ms=3,
                    label=part if d == 0 else None)
        ax.set_title(family + (" (colour: depth, dark = first layer)" if family != "other" else ""), fontsize=9)
        ax.set_xlabel("step")
        ax.set_yscale("log")
        mine = [la for la in layers if _family(la) == family]
        shown = sub.filter(pl.col("layer").is_in(mine) & (pl.col("value") > 0))["value"]
        if shown.len():
            log_ticks(ax.yaxis, float(shown.min()), float(shown.max()), fmt=_g3)
        ax.grid(alpha=0.3)
        if family == families[-1]:
            legend_outside(ax, fontsize=7)
        else:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel(f"{kind} {norm.replace('_', ' ')} norm")
    fig.suptitle(f"Per-layer {kind} norms ({norm}) of run {run_id}")
    return fig
