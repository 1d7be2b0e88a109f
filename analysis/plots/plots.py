"""Figures of fits (matplotlib, Agg backend; saved as PNG and SVG).

- ``plot_loss_vs_x``: loss vs N (or D, K, ...) with fitted curves, the asymptote E and,
  given a bootstrap, 95% bands for both;
- ``plot_loss_vs_epochs``: loss vs epochs (D/U) at fixed unique tokens U, one line per N;
- ``plot_isoflop``: loss vs N along constant-compute (C = 6ND) slices, with the law's
  curves where it depends on N and D only;
- ``plot_residuals``: log-space residuals vs prediction and vs N.

Curves and bands are drawn over the data's range only; styling: ``analysis.plots.style``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from analysis.atomic import write_atomic
from analysis.plots.style import LOSS_LABEL, human, legend_outside, log_x, plt

__all__ = [
    "plot_isoflop",
    "plot_loss_vs_epochs",
    "plot_loss_vs_x",
    "plot_residuals",
    "save_figure",
]

_MAX_CURVES = 8


def save_figure(fig, stem: str | Path, formats: tuple[str, ...] = ("png", "svg"), *,
                close: bool = True) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` atomically (cropped to what is drawn, legends
    outside the axes included); closes the figure unless ``close`` is False.

    The format is appended to the stem's name, never swapped for its last dot-part: a group
    stem such as ``f-data.epochs=32`` keeps its ``.epochs=32`` (``with_suffix`` would write
    every group of ``data.epochs`` to one ``f-data.png``). A stem already ending in one of
    ``formats`` loses that ending first."""
    stem = Path(stem)
    if stem.suffix.lstrip(".") in formats:
        stem = stem.with_suffix("")
    paths = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        write_atomic(path, lambda p, fmt=fmt: fig.savefig(p, format=fmt, dpi=130, bbox_inches="tight"))
        paths.append(path)
    if close:
        plt.close(fig)
    return paths


_X_LABELS = {"N": "parameters N", "D": "training tokens D", "U": "unique tokens U", "K": "ensemble members K"}


def _groups(values: np.ndarray) -> list[float]:
    """Distinct values (relative tolerance 1e-6), capped at _MAX_CURVES spread over the range."""
    uniq = np.unique(np.round(np.log(values), 6))
    if uniq.size > _MAX_CURVES:
        uniq = uniq[np.linspace(0, uniq.size - 1, _MAX_CURVES).round().astype(int)]
    return [float(np.exp(u)) for u in uniq]


def _near(values: np.ndarray, v: float) -> np.ndarray:
    return np.abs(np.log(values) - np.log(v)) < 1e-6


def _ratio_groups(data: pl.DataFrame, x: str, others: list[str]) -> np.ndarray | None:
    """Each run's tokens-per-parameter ratio D/N (3 significant digits), when the law's other
    column is D alone and the runs fall into fewer ratio groups than D values (a grid of N
    by D/N, as in Hoffmann et al.'s and Besiroglu et al.'s designs): then a curve per ratio
    shows the law along each, where a curve per D would show single points. None otherwise."""
    if x != "N" or others != ["D"]:
        return None
    r = (data["D"].to_numpy().astype(float) / data["N"].to_numpy().astype(float))
    r = np.array([float(f"{v:.3g}") for v in r])
    n_ratio, n_d = np.unique(r).size, data["D"].n_unique()
    return r if n_ratio < n_d else None


def plot_loss_vs_x(data: pl.DataFrame, fit=None, boot=None, *, x: str = "N", title: str = ""):
    """Loss vs ``x`` (log axis). A law of x alone gives one curve (with a 95% bootstrap band,
    given ``boot``); a law of (N, D[, U]) gives one curve per distinct D (and U) in the
    data, holding those fixed. Curves and bands span the data's range."""
    fig, ax = plt.subplots(figsize=(7.4, 4.4), layout="constrained")
    xs = data[x].to_numpy().astype(float)
    y = data["loss"].to_numpy().astype(float)
    cols = fit.law.columns if fit is not None else (x,)
    others = [c for c in cols if c != x]
    grid = np.geomspace(xs.min(), xs.max(), 200)
    band = None
    if not others:
        ax.scatter(xs, y, s=22, color="C0", marker="o", zorder=3, label="runs")
        if fit is not None:
            ax.plot(grid, fit.predict({x: grid}), color="C0", label=f"{fit.law.name} fit")
            if boot is not None:
                preds = np.stack(
                    [
                        fit.law.predict(dict(zip(boot.param_names, s)), {x: grid})
                        for s in boot.samples
                    ]
                )
                band = np.percentile(preds, [2.5, 97.5], axis=0)
    else:
        ratio = _ratio_groups(data, x, others)
        every = (sorted(set(ratio)) if ratio is not None
                 else data.select(others).unique().sort(others).rows())
        keys = every[:_MAX_CURVES]
        if len(every) > len(keys):  # say that the plot shows a part of the runs
            title = (title or (f"{fit.law.name} fit" if fit is not None else f"loss vs {x}")) + (
                f" ({len(keys)} of {len(every)} ({', '.join(others)}) settings shown)")
        markers = "osD^vPXh"
        for i, key in enumerate(keys):
            if ratio is not None:  # a curve per tokens-per-parameter ratio D/N
                mask = ratio == key
                label = f"D/{x} = {human(key)}"
            else:
                mask = np.ones(len(xs), dtype=bool)
                for c, v in zip(others, key):
                    mask &= _near(data[c].to_numpy().astype(float), v)
                label = ", ".join(f"{c}={human(v)}" for c, v in zip(others, key))
            ax.scatter(xs[mask], y[mask], s=22, color=f"C{i}", marker=markers[i % 8], zorder=3, label=label)
            if fit is not None:
                sub = np.geomspace(xs[mask].min(), xs[mask].max(), 100)
                cond = ({"D": key * sub} if ratio is not None
                        else {c: np.full_like(sub, v) for c, v in zip(others, key)})
                ax.plot(sub, fit.predict({x: sub, **cond}), color=f"C{i}")
    if fit is not None and "E" in fit.params:
        E = fit.params["E"]
        held = "E" not in fit.free  # fixed, e.g. by a two-stage fit's stage 1: no CI of its own
        ax.axhline(E, color="k", ls="--", lw=1,
                   label=f"asymptote E = {E:.4g}" + (" (held fixed)" if held else ""))
    ax.margins(y=0.12)
    ylim = ax.get_ylim()  # bands and CIs may not stretch the axes past the data, fit and E
    if band is not None:
        ax.fill_between(grid, band[0], band[1], color="C0", alpha=0.2, lw=0, label="95% band (bootstrap)")
    if fit is not None and "E" in fit.free and boot is not None:
        lo, hi = boot.ci()["E"]
        ax.axhspan(lo, hi, color="k", alpha=0.08, label=f"E 95% CI [{lo:.4g}, {hi:.4g}]")
    ax.set_ylim(ylim)
    log_x(ax, xs.min() / 1.3, xs.max() * 1.3)
    ax.set_xlabel(_X_LABELS.get(x, x))
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title(title or (f"{fit.law.name} fit" if fit is not None else f"loss vs {x}"), fontsize=10)
    legend_outside(ax, fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def plot_loss_vs_epochs(data: pl.DataFrame, fit=None, *, title: str = ""):
    """Loss vs epochs = D/U, one panel per unique-token budget U (up to 4), a line per N."""
    Us = _groups(data["U"].to_numpy().astype(float))[:4]
    fig, axes = plt.subplots(
        1, len(Us), figsize=(4.2 * len(Us), 3.8), squeeze=False, layout="constrained"
    )
    for ax, U in zip(axes[0], Us):
        sub = data.filter(pl.Series(_near(data["U"].to_numpy().astype(float), U)))
        for i, N in enumerate(_groups(sub["N"].to_numpy().astype(float))):
            rows = sub.filter(pl.Series(_near(sub["N"].to_numpy().astype(float), N))).sort("D")
            ep = rows["D"].to_numpy() / U
            ax.plot(ep, rows["loss"].to_numpy(), "osD^vPXh"[i % 8], color=f"C{i}", ms=4, label=f"N={human(N)}")
            if fit is not None and set(fit.law.columns) <= {"N", "D", "U"}:
                eg = np.geomspace(max(ep.min(), 1e-3), ep.max(), 100)
                cols = {"N": np.full_like(eg, N), "D": eg * U, "U": np.full_like(eg, U)}
                ax.plot(eg, fit.predict({c: cols[c] for c in fit.law.columns}), color=f"C{i}")
        ax.set_xscale("log")
        ax.set_xlabel("epochs (D / U)")
        ax.set_title(f"U = {human(U)} unique tokens", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(LOSS_LABEL)
    legend_outside(axes[0][-1], fontsize=7)
    fig.suptitle(title or "loss vs epochs at fixed unique data")
    return fig


def plot_isoflop(data: pl.DataFrame, fit=None, *, title: str = ""):
    """Loss vs N on slices of constant C = 6 N D (C rounded to 0.05 decades)."""
    C = 6.0 * data["N"].to_numpy() * data["D"].to_numpy()
    bucket = np.round(np.log10(C) / 0.05) * 0.05
    fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    for i, b in enumerate(np.unique(bucket)[:_MAX_CURVES]):
        m = bucket == b
        order = np.argsort(data["N"].to_numpy()[m])
        N = data["N"].to_numpy()[m][order]
        ax.plot(
            N, data["loss"].to_numpy()[m][order], "o", color=f"C{i}", ms=4, label=f"C = 1e{b:.2f}"
        )
        if fit is not None and set(fit.law.columns) <= {"N", "D"}:
            ng = np.geomspace(N.min() / 2, N.max() * 2, 100)
            ax.plot(ng, fit.predict({"N": ng, "D": 10**b / (6 * ng)}), color=f"C{i}")
    n_all = data["N"].to_numpy().astype(float)
    log_x(ax, n_all.min() / 2.2, n_all.max() * 2.2)
    ax.set_xlabel(_X_LABELS["N"])
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title(title or "isoFLOP slices (C = 6ND)")
    legend_outside(ax, fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def plot_residuals(data: pl.DataFrame, fit, *, title: str = ""):
    """log Lhat - log L vs predicted loss and vs N; the Huber delta marked."""
    pred = fit.predict(data)
    res = np.log(pred) - np.log(data["loss"].to_numpy())
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for ax, xv, name in ((axes[0], pred, "predicted loss"), (axes[1], data["N"].to_numpy(), "N")):
        ax.scatter(xv, res, s=12)
        ax.axhline(0, color="k", lw=1)
        for s in (-fit.delta, fit.delta):
            ax.axhline(s, color="k", lw=0.5, ls=":")
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    n_all = data["N"].to_numpy().astype(float)
    log_x(axes[1], n_all.min() / 1.3, n_all.max() * 1.3)
    axes[0].set_xlabel("predicted " + LOSS_LABEL)
    axes[1].set_xlabel(_X_LABELS["N"])
    axes[0].set_ylabel("log residual (log fit - log loss)")
    fig.suptitle(title or f"{fit.law.name} residuals")
    return fig
