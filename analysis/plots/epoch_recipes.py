"""Recipes across epochs: loss against epochs (log x), one panel per model size, one colour
and marker per recipe, error bars of +-1 Monte Carlo SE where a loss has one
(``final_loss_se``), and each crossover marked: a dashed line at its estimate and its
interval shaded, or, where the noise does not place it, nothing drawn (the panel's title
says why). A recipe whose loss is an upper bound is labelled so in the legend."""

from __future__ import annotations

import math

from analysis.plots.style import LOSS_LABEL, human, log_ticks, plt, style_of
from analysis.recipes.epoch_study import EpochStudy

__all__ = ["plot_recipe_epochs"]

_COLS = 3
_OPEN = "where the crossover may lie (one end open)"


def plot_recipe_epochs(study: EpochStudy):
    """The figure of ``study`` (module docstring)."""
    pts = study.curves.points
    sizes = study.curves.sizes
    cols = 2 if len(sizes) == 4 else min(_COLS, len(sizes))
    rows = math.ceil(len(sizes) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.8 * cols, 3.6 * rows), squeeze=False)
    lo_e, hi_e = float(pts["epochs"].min()), float(pts["epochs"].max())
    for k, n in enumerate(sizes):
        ax = axes[k // cols][k % cols]
        for i, r in enumerate(study.curves.recipes):
            c = study.curves.curve(r, n)
            if not c.height:
                continue
            st = style_of(r, i)
            label = f"{r} (ELBO: upper bound)" if study.curves.bound[r] else f"{r} (exact NLL)"
            se = c["se"].to_numpy()
            ax.errorbar(c["epochs"].to_numpy(), c["loss"].to_numpy(), yerr=se if se.any() else None,
                        color=st["color"], marker=st["marker"], ms=4, lw=1.2, capsize=2, label=label)
        notes = []
        for x in (x for x in study.crossovers if x.N == n):
            if x.kind == "crossover":
                ax.axvspan(x.lo, x.hi, color="0.82", zorder=0, label="crossover, 95% interval")
                if math.isfinite(x.estimate):
                    ax.axvline(x.estimate, color="0.3", ls="--", lw=1, label="crossover, estimate")
                notes.append(f"{x.b} overtakes {x.a}: epoch {x.estimate:.3g} (95% {x.lo:.3g}-{x.hi:.3g})")
            elif x.kind == "none":
                notes.append(f"no crossover: {x.b} lower throughout")
            elif x.kind == "by":
                ax.axvspan(lo_e / 1.3, x.hi, color="0.93", zorder=0, label=_OPEN)
                notes.append(f"{x.b} lower by epoch {x.hi:.3g}; start not resolved")
            elif x.kind == "after":
                ax.axvspan(x.lo, hi_e * 1.3, color="0.93", zorder=0, label=_OPEN)
                notes.append(f"{x.b} overtakes {x.a} after epoch {x.lo:.3g}, if at all")
            else:
                notes.append("crossover not resolved")
        ax.set_xscale("log")
        ax.set_xlim(lo_e / 1.3, hi_e * 1.3)
        log_ticks(ax.xaxis, lo_e / 1.3, hi_e * 1.3, fmt=lambda v, _p=None: f"{v:g}")
        ax.set_title(f"N = {human(n)}" + ("\n" + "\n".join(notes) if notes else ""), fontsize=8.5)
        ax.set_xlabel("epochs over U")
        if k % cols == 0:
            ax.set_ylabel(LOSS_LABEL)
        ax.grid(alpha=0.3)
    for k in range(len(sizes), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    legend: dict[str, object] = {}  # one entry per label, from every panel
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(lab, h)
    labels = sorted(legend, key=lambda lab: lab.startswith("crossover") or lab == _OPEN)  # recipes first
    axes[0][cols - 1].legend([legend[lab] for lab in labels], labels, fontsize=8, loc="upper left",
                             bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
    fig.suptitle(f"Recipes across epochs at U = {human(study.curves.U)} unique tokens "
                 "(error bars: +-1 Monte Carlo SE)", fontsize=10)
    fig.tight_layout()
    return fig
