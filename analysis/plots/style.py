"""The look shared by every analysis figure: backend, axis labels, readable log ticks,
recipe styles (colour AND marker) and a legend that stays off the data.

Backend: a script, a test or the CLI gets Agg (headless, no display needed); a Jupyter
kernel (``ipykernel`` imported) or an explicit ``MPLBACKEND`` keeps its own, so notebooks
show figures inline.
"""

from __future__ import annotations

import os
import sys

import matplotlib

if "MPLBACKEND" not in os.environ and "ipykernel" not in sys.modules:
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from analysis.recipes.names import ENSEMBLE_K, REGULARIZED, STANDARD

__all__ = ["LOSS_LABEL", "human", "legend_outside", "log_ticks", "log_x", "plt", "style_of"]

LOSS_LABEL = "val loss (nats/token)"

_PALETTE = ("tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple",
            "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "h", "<", ">")
_FIXED = {STANDARD: 0, REGULARIZED: 1, ENSEMBLE_K: 3}


def human(v: float, _pos=None) -> str:
    """50000 -> '50k', 1e6 -> '1M', 2.5e9 -> '2.5B' (tick labels)."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def log_ticks(axis, lo: float, hi: float, fmt=human) -> None:
    """Labelled ticks of a log ``axis`` (``ax.xaxis``, ``ax.yaxis``, a colorbar's) spanning
    [lo, hi]: every 1..9 x 10^k under a decade, 1, 2, 5 x 10^k up to three decades, decades
    beyond; minor ticks unlabelled, so labels never pile up."""
    ratio = hi / lo if lo > 0 else float("inf")
    if ratio <= 8:
        subs: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
    elif ratio <= 1e3:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(fmt))
    axis.set_minor_formatter(NullFormatter())


def log_x(ax, lo: float, hi: float) -> None:
    """Log x axis over [lo, hi] (``log_ticks``), written as 50k / 100k / 1M."""
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    log_ticks(ax.xaxis, lo, hi)


def style_of(name: str, i: int) -> dict[str, str]:
    """Colour and marker of the i-th series called ``name`` (Kim's recipes keep theirs)."""
    k = _FIXED.get(name, i) % len(_PALETTE)
    return {"color": _PALETTE[k], "marker": _MARKERS[k]}


def legend_outside(ax, fontsize: int = 8) -> None:
    """The legend to the right of the axes (the figure grows to hold it when saved)."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              frameon=False)
