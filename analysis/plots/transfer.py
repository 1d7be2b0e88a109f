"""The figure of a transfer law (``analysis.transfer``): two panels.

- left: loss against hp per group (colour: the group's first x), each accepted group's
  fitted valley over its window and its optimum (star); refused groups' points hollow;
  with ``best_over``, each point is its cell's loss profiled over that column, ringed in
  red where that profile had no valley (its best run's loss);
- right: hp* against the first x (error bars: each optimum's interval) with the law and its
  prediction band (for a one-variable law; for (N, D) the law's value at each group, as
  crosses; one marker per D value in both panels when there are at most six); held-out groups (``holdout``) drawn as open squares with the refitted law's
  interval.

Save it with ``analysis.plots.plots.save_figure`` (atomic PNG + SVG).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogFormatter

from analysis.plots.style import LOSS_LABEL, legend_outside, plt
from analysis.transfer.holdout import HeldOut
from analysis.transfer.transfer import TransferFit, group_label

__all__ = ["plot_transfer"]


def plot_transfer(fit: TransferFit, holdout: list[HeldOut] | None = None, law_fit: TransferFit | None = None):
    """The figure (returned, not saved). ``law_fit``: the fit whose law is drawn (the
    refit without held-out groups), default ``fit``."""
    law_fit = law_fit or fit
    first = fit.x[0]
    fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2))
    vals = fit.table[first].to_numpy()
    norm = LogNorm(vmin=vals.min(), vmax=max(vals.max(), vals.min() * 1.0001))
    cmap = plt.get_cmap("viridis")
    marker = _markers(fit)
    for row in fit.table.iter_rows(named=True):
        g = fit.cells.filter(pl.all_horizontal([pl.col(v) == row[v] for v in fit.x]))
        colour = cmap(norm(row[first]))
        hp = np.exp(g["u"].to_numpy())
        ok = row["why"] is None
        ax_l.scatter(hp, g["loss"], s=18, marker=marker(row), color=colour if ok else "none",
                     edgecolors=colour, zorder=3,
                     label=group_label(row, fit.x) + ("" if ok else " (refused)"))
        if ok:
            u = np.linspace(np.log(row["hp_window_lo"]), np.log(row["hp_window_hi"]), 80)
            ax_l.plot(np.exp(u), row["q0"] + row["q1"] * u + row["q2"] * u * u, color=colour, lw=1.2)
            ax_l.scatter([row["hp_opt"]], [row["loss_opt"]], marker="*", s=90, color=colour,
                         edgecolors="k", lw=0.5, zorder=4)
    ax_l.set_xscale("log")
    ax_l.set_xlabel(fit.hp)
    ax_l.set_ylabel(LOSS_LABEL if fit.best_over is None else f"{LOSS_LABEL}, profiled over {fit.best_over}")
    ax_l.set_title("loss against hp per group, fitted valleys (stars: optima)", fontsize=9)
    if fit.best_over is not None:  # cells whose profile had no valley
        edge = fit.cells.filter(pl.col("over_edge").is_not_null())
        if edge.height:
            ax_l.scatter(np.exp(edge["u"].to_numpy()), edge["loss"], s=70, marker="o", color="none",
                         edgecolors="red", lw=0.8, zorder=2,
                         label=f"no valley in {fit.best_over}: best run used")
    legend_outside(ax_l, fontsize=7)

    ok = fit.accepted
    held = {tuple(h.x[v] for v in fit.x) for h in holdout or []}
    train = ok.filter(~pl.struct(fit.x).map_elements(lambda s: tuple(s[v] for v in fit.x) in held,
                                                      return_dtype=pl.Boolean)) if held else ok
    by_d = _by_second(fit) and train.height > 0
    for part in train.partition_by(fit.x[1], maintain_order=True) if by_d else [train]:
        xs, y = part[first].to_numpy(), part["hp_opt"].to_numpy()
        err = np.vstack([y - part["hp_lo"].to_numpy(), part["hp_hi"].to_numpy() - y])
        which = f", {fit.x[1]}={part[fit.x[1]][0]:.3g}" if by_d else ""
        ax_r.errorbar(xs, y, yerr=err, fmt=marker(part.row(0, named=True)) if part.height else "o",
                      color="tab:blue", ms=5, capsize=3, label=f"optima (fitted){which}")
    law = law_fit.law
    if len(fit.x) == 1:
        grid = np.geomspace(vals.min() / 1.3, vals.max() * 1.3, 100)
        pred = np.array([law.predict(**{first: v}) for v in grid])
        ax_r.plot(grid, pred[:, 0], color="k", lw=1.2, label=_law_text(law_fit))
        if np.all(np.isfinite(pred[:, 1:])):
            ax_r.fill_between(grid, pred[:, 1], pred[:, 2], color="0.5", alpha=0.2,
                              label=f"{100 * law.level:g}% prediction interval")
    else:
        pred = np.array([law.predict(**{v: r[v] for v in fit.x}) for r in ok.iter_rows(named=True)])
        ax_r.scatter(ok[first], pred[:, 0], marker="x", color="k", label=_law_text(law_fit))
    for h in holdout or []:
        ax_r.errorbar([h.x[first]], [h.predicted], yerr=[[h.predicted - h.lo], [h.hi - h.predicted]],
                      fmt="none", ecolor="tab:red", capsize=4, lw=1.5)
        if h.why is None:
            ax_r.scatter([h.x[first]], [h.observed], marker=marker(h.x) if by_d else "s", s=40, color="none",
                         edgecolors="tab:red", zorder=4, label=f"held out ({group_label(h.x, fit.x)})")
    ax_r.set_xscale("log")
    ax_r.set_yscale("log")
    # plain numbers (2, 0.01), not 2x10^0; minor ticks labelled as matplotlib's log axis
    # decides (only when the axis spans about a decade or less)
    ax_r.yaxis.set_major_formatter(FuncFormatter(_plain))
    ax_r.yaxis.set_minor_formatter(_PlainMinor(labelOnlyBase=False, minor_thresholds=(1.2, 0.6)))
    ax_r.set_xlabel(first)
    ax_r.set_ylabel(f"optimal {fit.hp}")
    ax_r.set_title(f"{fit.hp}* against {first}", fontsize=9)
    legend_outside(ax_r, fontsize=7)
    fig.tight_layout()
    return fig


_SHAPES = "osD^v<"


def _by_second(fit: TransferFit) -> bool:
    """Mark groups by their D: a law in (N, D) over a few shared D values (token budgets)."""
    return len(fit.x) > 1 and fit.table[fit.x[1]].n_unique() <= len(_SHAPES)


def _plain(value: float, _pos=None) -> str:
    """A log axis' major tick: 0.001 .. 10000 as plain numbers, else 10^k."""
    if 1e-4 <= value < 1e5:
        return f"{value:g}"
    return f"$10^{{{np.log10(value):.0f}}}$"


class _PlainMinor(LogFormatter):
    """matplotlib's choice of which minor ticks to label, written as ``_plain`` numbers
    (0.002, not 2e-03, beside a major 0.001)."""

    def __call__(self, x, pos=None) -> str:
        return _plain(x) if super().__call__(x, pos) else ""


def _markers(fit: TransferFit):
    """A group's marker: one per D value when ``_by_second``, else a circle."""
    if not _by_second(fit):
        return lambda row: "o"
    rank = {v: i for i, v in enumerate(sorted(set(fit.table[fit.x[1]].to_list())))}
    return lambda row: _SHAPES[rank[row[fit.x[1]]]]


def _law_text(fit: TransferFit) -> str:
    terms = " ".join(f"{v}^{a:.3f}" for v, a in zip(fit.x, fit.law.coef[1:]))
    return f"law: {fit.law.c:.3g} {terms}"
