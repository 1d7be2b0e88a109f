"""The figure of an approach-2 fit (``analysis.isoflop.isoflop``): two panels.

- left: loss vs N per compute budget (colour: C), each kept budget's parabola and its
  optimum (star); excluded budgets in grey, their reason in the legend; points in no
  usable budget (too few points) as small grey dots;
- right: N_opt and D_opt vs C (error bars: bootstrap SEs) with the fitted power laws and
  their bootstrap bands; excluded budgets' vertices hollow.

Save it with ``analysis.plots.plots.save_figure`` (atomic PNG + SVG).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm

from analysis.isoflop.isoflop import IsoFlopFit
from analysis.plots.style import LOSS_LABEL, legend_outside, log_ticks, log_x, plt

__all__ = ["plot_isoflops", "sci"]

_GREY = "0.6"


def sci(v: float, _pos=None) -> str:
    """1e20 -> '1e20', 3e20 -> '3e20', 2.5e19 -> '2.5e19' (FLOP tick labels)."""
    if v <= 0:
        return f"{v:g}"
    exp = int(np.floor(np.log10(v) + 1e-9))
    mant = v / 10.0**exp
    return f"1e{exp}" if abs(mant - 1) < 1e-6 else f"{mant:.2g}e{exp}"


def _curve(row: dict, n_lo: float, n_hi: float, log_loss: bool):
    """The budget's parabola over [n_lo, n_hi] (vertex form), or None without a vertex."""
    if not np.isfinite(row["N_opt"]):
        return None
    n = np.geomspace(n_lo, n_hi, 120)
    lift = row["curvature"] * np.log(n / row["N_opt"]) ** 2
    return n, row["loss_opt"] * np.exp(lift) if log_loss else row["loss_opt"] + lift


def _loss_panel(ax, fit: IsoFlopFit, norm: LogNorm, cmap) -> None:
    pts = fit.points
    too_few = pl.col("reason").str.starts_with("too few")
    small = fit.optima.filter(too_few)["budget"].implode()
    loose = pts.filter(pl.col("budget").is_in(small) | (pl.col("budget") < 0))
    if loose.height:
        ax.scatter(loose["N"], loose["loss"], s=8, color=_GREY, alpha=0.6, lw=0,
                   label=f"in no budget of >= 3 points ({loose.height})")  # fmt: skip
    excluded: dict[str, list[str]] = {}
    for row in fit.optima.filter(~too_few).iter_rows(named=True):
        sub = pts.filter(pl.col("budget") == row["budget"])
        n_lo, n_hi = float(sub["N"].min()) / 1.15, float(sub["N"].max()) * 1.15
        curve = _curve(row, n_lo, n_hi, fit.log_loss)
        if row["kept"]:
            colour = cmap(norm(row["C"]))
            ax.scatter(sub["N"], sub["loss"], s=16, color=colour, zorder=3)
            if curve is not None:
                ax.plot(*curve, color=colour, lw=1.2)
            ax.plot(row["N_opt"], row["loss_opt"], "*", ms=11, color=colour, mec="k", mew=0.7,
                    zorder=4)  # fmt: skip
            continue
        excluded.setdefault(row["reason"].split(":")[0], []).append(sci(row["C"]))
        ax.scatter(sub["N"], sub["loss"], s=16, facecolor="none", edgecolor=_GREY, zorder=2)
        if curve is not None:
            ax.plot(*curve, color=_GREY, lw=1, ls="--")
    for kind, budgets in excluded.items():
        ax.scatter([], [], s=16, facecolor="none", edgecolor=_GREY,
                   label=f"excluded, {kind}: C = {', '.join(budgets)}")  # fmt: skip
    ax.plot([], [], "*", ms=11, color="w", mec="k", label="parabola vertex (kept budget)")
    n_all = pts["N"].to_numpy()
    log_x(ax, n_all.min() / 1.3, n_all.max() * 1.3)
    losses = pts["loss"].to_numpy()
    pad = 0.06 * (losses.max() - losses.min())
    ax.set_ylim(losses.min() - pad, losses.max() + pad)
    ax.set_xlabel("parameters N")
    ax.set_ylabel(LOSS_LABEL)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)
    ax.grid(alpha=0.3)


def _optima_panel(ax, fit: IsoFlopFit) -> None:
    opt = fit.optima.filter(pl.col("N_opt").is_not_nan())
    kept, other = opt.filter(pl.col("kept")), opt.filter(~pl.col("kept"))
    c_lo, c_hi = float(opt["C"].min()) / 1.5, float(opt["C"].max()) * 1.5
    grid = np.geomspace(c_lo, c_hi, 100)
    pct = f"{100 * fit.level:g}%"
    for col, marker, colour, exp, ci, pred in (
        ("N_opt", "o", "C0", fit.a, fit.a_ci, fit.n_opt),
        ("D_opt", "s", "C1", fit.b, fit.b_ci, fit.d_opt),
    ):
        name = col[0]
        ax.errorbar(kept["C"], kept[col], yerr=kept[f"{col}_se"].fill_nan(0.0), fmt=marker,
                    color=colour, ms=5, capsize=2, label=f"{name}_opt per budget")  # fmt: skip
        if other.height:
            ax.scatter(other["C"], other[col], marker=marker, facecolor="none",
                       edgecolor=_GREY, label=f"{name}_opt, excluded budget")  # fmt: skip
        interval = f" ({pct} CI {ci[0]:.3f}, {ci[1]:.3f})" if np.isfinite(ci[0]) else ""
        ax.plot(grid, pred(grid), color=colour, label=f"{name}_opt ∝ C^{exp:.3f}{interval}")
        lo, hi = fit.band(grid, name)
        if np.all(np.isfinite(lo)):
            ax.fill_between(grid, lo, hi, color=colour, alpha=0.18, lw=0)
    ax.set_xscale("log")
    ax.set_xlim(c_lo, c_hi)
    log_ticks(ax.xaxis, c_lo, c_hi, fmt=sci)
    ax.set_yscale("log")
    y_lo, y_hi = ax.get_ylim()
    log_ticks(ax.yaxis, y_lo, y_hi)
    ax.set_xlabel("compute C (FLOPs)")
    ax.set_ylabel("compute-optimal N (parameters), D (tokens)")
    legend_outside(ax, fontsize=7)
    ax.grid(alpha=0.3)


def plot_isoflops(fit: IsoFlopFit, *, title: str = ""):
    """The two-panel figure of ``fit`` (module docstring); returns the matplotlib figure."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.4), layout="constrained")
    with_points = fit.optima.filter(pl.col("n_points") > 0)["C"].to_numpy()
    norm = LogNorm(with_points.min(), with_points.max() * (1 + 1e-9))
    cmap = plt.get_cmap("viridis")
    _loss_panel(left, fit, norm, cmap)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=left, pad=0.01)
    bar.set_label("compute C (FLOPs)")
    log_ticks(bar.ax.yaxis, norm.vmin, norm.vmax, fmt=sci)
    _optima_panel(right, fit)
    fig.suptitle(title or f"isoFLOP profiles, {fit.summary()}", fontsize=10)
    return fig
