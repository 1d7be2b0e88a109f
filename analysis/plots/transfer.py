"""The figure of a transfer law (``analysis.transfer``): two panels.

- left: loss against hp per group (colour: the group's first x), each accepted group's
  fitted valley over its window and its optimum (star); refused groups' points hollow;
  with ``best_over``, each point is its cell's loss profiled over that column, ringed in
  red where that profile had no valley (its best run's loss);
- right: hp* against the first x (error bars: each optimum's interval) with the law fitted
  to every accepted group (``fit``: the law ``scalelab transfer`` prints) and its prediction
  band (for a one-variable law; for (N, D) the law's value at each group, as crosses; one
  marker per D value in both panels when there are at most six). With a held-out check
  (``holdout``, ``refit``): the refit without the held-out groups as a secondary dashed line
  (grey pluses for (N, D)), labelled as such, its prediction interval at each held-out
  group in red and the group's measured optimum as an open red square. Points the law was
  asked to predict (``predict``: (x, hp*, lo, hi)) are green diamonds with their interval;
  the drawn law reaches them (points more than ``REACH`` times beyond the fitted range are
  named in the legend only).

The law's artists carry gids (``LAW_GID``, ``REFIT_GID``, ``PREDICT_GID``), so a test can
read back what was drawn.

Save it with ``analysis.plots.plots.save_figure`` (atomic PNG + SVG).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogFormatter

from analysis.plots.style import LOSS_LABEL, legend_outside, plt
from analysis.transfer.holdout import HeldOut
from analysis.transfer.transfer import TransferFit, group_label

__all__ = ["LAW_GID", "PREDICT_GID", "REFIT_GID", "plot_transfer"]

LAW_GID = "transfer-law"
"""gid of the drawn law (a line, or crosses for (N, D)): always ``fit``'s, the printed law."""
REFIT_GID = "transfer-refit"
"""gid of the held-out refit's law (dashed line, or pluses), drawn only when given."""
PREDICT_GID = "transfer-predict"
"""gid of each predicted point's marker."""


def plot_transfer(fit: TransferFit, holdout: list[HeldOut] | None = None,
                  refit: TransferFit | None = None,
                  predict: Sequence[tuple[dict[str, float], float, float, float]] = ()):
    """The figure (returned, not saved). The law drawn is ``fit``'s (fitted to every
    accepted group, the one printed). ``refit``: the law refitted without the held-out
    groups (``analysis.transfer.holdout.holdout_check``), drawn dashed as a secondary line
    (not drawn when None or ``fit`` itself); ``predict``: (x, hp*, lo, hi) per point to
    mark (one more than ``REACH`` times beyond the fitted range, or with no finite hp*,
    is named in the legend only)."""
    first = fit.x[0]
    refit = None if refit is fit else refit
    vals = fit.table[first].to_numpy()
    near = [p for p in predict if _plottable(p[1]) and vals.min() / REACH <= p[0][first] <= vals.max() * REACH]
    off = [p for p in predict if not any(p is q for q in near)]
    predict = near
    fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2))
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
    ax_l.xaxis.set_major_formatter(FuncFormatter(_plain))  # as the right panel's hp axis
    ax_l.xaxis.set_minor_formatter(FuncFormatter(_two_five))
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

    ok = fit.accepted  # every group the drawn law was fitted to, held out of the refit or not
    by_d = _by_second(fit) and ok.height > 0
    for part in ok.partition_by(fit.x[1], maintain_order=True) if by_d else [ok]:
        xs, y = part[first].to_numpy(), part["hp_opt"].to_numpy()
        err = np.vstack([y - part["hp_lo"].to_numpy(), part["hp_hi"].to_numpy() - y])
        which = f", {fit.x[1]}={part[fit.x[1]][0]:.3g}" if by_d else ""
        ax_r.errorbar(xs, y, yerr=err, fmt=marker(part.row(0, named=True)) if part.height else "o",
                      color="tab:blue", ms=5, capsize=3, label=f"optima (fitted){which}")
    law = fit.law
    if len(fit.x) == 1:
        reach = [vals.min(), vals.max(), *(p[0][first] for p in predict)]
        grid = np.geomspace(min(reach) / 1.3, max(reach) * 1.3, 200)
        with np.errstate(over="ignore", under="ignore"):
            pred = np.array([law.predict(**{first: v}) for v in grid])
        ax_r.plot(grid, pred[:, 0], color="k", lw=1.2, label=_law_text(fit), gid=LAW_GID)
        if np.all(np.isfinite(pred[:, 1:])):
            ax_r.fill_between(grid, pred[:, 1], pred[:, 2], color="0.5", alpha=0.2,
                              label=f"{100 * law.level:g}% prediction interval")
        if refit is not None:
            with np.errstate(over="ignore", under="ignore"):
                again = np.array([refit.law.predict(**{first: v})[0] for v in grid])
            ax_r.plot(grid, again, color="tab:red", lw=1.0, ls="--", alpha=0.8, gid=REFIT_GID,
                      label=f"held-out check only, {_law_text(refit, 'refit')}")
    else:
        pred = np.array([law.predict(**{v: r[v] for v in fit.x}) for r in ok.iter_rows(named=True)])
        ax_r.scatter(ok[first], pred[:, 0], marker="x", color="k", label=_law_text(fit), gid=LAW_GID)
        if refit is not None:
            again = np.array([refit.law.predict(**{v: r[v] for v in fit.x})[0]
                              for r in ok.iter_rows(named=True)])
            ax_r.scatter(ok[first], again, marker="+", color="tab:red", gid=REFIT_GID,
                         label=f"held-out check only, {_law_text(refit, 'refit')}")
    for h in holdout or []:
        ax_r.errorbar([h.x[first]], [h.predicted], yerr=[[h.predicted - h.lo], [h.hi - h.predicted]],
                      fmt="none", ecolor="tab:red", capsize=4, lw=1.5)
        if h.why is None:
            ax_r.scatter([h.x[first]], [h.observed], marker=marker(h.x) if by_d else "s", s=90,
                         color="none", edgecolors="tab:red", lw=1.2, zorder=4,
                         label=f"held out of the refit ({group_label(h.x, fit.x)}); "
                         "red bar: the refit's PI")
    for at, hp, lo, hi in predict:
        band = [[hp - lo], [hi - hp]] if _plottable(lo, hi) else None
        bar = ax_r.errorbar([at[first]], [hp], yerr=band, fmt="D", ms=6, color="tab:green",
                            mec="k", mew=0.5, capsize=4, zorder=5,
                            label=f"predicted at {_point(at)}: {hp:.3g}")
        bar.lines[0].set_gid(PREDICT_GID)  # the marker (not the caps)
    for at, hp, _, _ in off:  # named in the legend, not drawn
        ax_r.plot([], [], " ", label=f"predicted at {_point(at)}: {hp:.3g} (off the figure)")
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


def _two_five(value: float, _pos=None) -> str:
    """A minor tick of a horizontal log axis labelled only at 2 and 5 x 10^k (0.02, 0.05):
    every minor label of a 1-2 decade axis runs its neighbours together."""
    mantissa = value / 10 ** np.floor(np.log10(value) + 1e-9)
    return _plain(value) if round(mantissa, 6) in (2.0, 5.0) else ""


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


def _law_text(fit: TransferFit, title: str = "law") -> str:
    terms = " ".join(f"{v}^{a:.3f}" for v, a in zip(fit.x, fit.law.coef[1:]))
    return f"{title}: {fit.law.c:.3g} {terms}"


REACH = 1e8
"""A --predict point is drawn when its first x is within this factor of the fitted groups'
range (beyond it, named in the legend only: the fitted groups would be a dot)."""


def _plottable(*values: float) -> bool:
    """Every value finite and within 1e-300 to 1e300, where a log axis (and its margins)
    stays inside the float range."""
    return all(np.isfinite(v) and 1e-300 <= v <= 1e300 for v in values)


def _point(at: dict[str, float]) -> str:
    return ", ".join(f"{v}={x:.3g}" for v, x in at.items())
