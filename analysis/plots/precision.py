"""The precision study's figure (fit/precision.py): left, loss vs N per training precision at
the study's fewest and most epochs with the fitted multiplier law; middle, the same runs'
loss above the reference's fitted law (the gap the left panel's curves hide); right, each format's
effective-parameter multiplier m_f against the reference with its 95% profile CI, over
effective bits P, and Kumar et al.'s gamma form m(P) through them where gamma is identified.
A multiplier that is not identified is drawn as a grey cross at 1 with no bar, named so.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from analysis.fit.precision import PrecisionStudy
from analysis.laws.precision_bits import bits_of
from analysis.plots.style import LOSS_LABEL, legend_outside, log_x, plt, style_of

__all__ = ["plot_precision"]


def _frame(data: pl.DataFrame) -> tuple[list[float], np.ndarray, np.ndarray, float]:
    """(the fewest and most epochs, the sizes, a grid over them, U) of the panels."""
    ep = np.unique(data["epochs"].to_numpy())
    shown = [float(ep.min())] + ([float(ep.max())] if ep.size > 1 else [])
    n = data["N"].to_numpy()
    return shown, n, np.geomspace(n.min(), n.max(), 80), float(data["U"].min())


def _loss_panel(ax, study: PrecisionStudy) -> None:
    data, fit = study.data, study.fit
    shown, n, grid, U = _frame(data)
    for i, f in enumerate(study.formats):
        st = style_of(f, i)
        sub = data.filter(pl.col("precision") == f)
        for j, e in enumerate(shown):
            pts = sub.filter((pl.col("epochs") - e).abs() < 1e-6 * e)
            face = st["color"] if j == 0 else "white"
            label = f"{f} ({bits_of(f):g} bits)" if j == 0 else None
            ax.scatter(pts["N"], pts["loss"], marker=st["marker"], facecolor=face,
                       edgecolor=st["color"], s=28, zorder=3, label=label)
            if fit is not None:
                X = {"N": grid, "D": np.full(grid.size, U * e), "U": np.full(grid.size, U),
                     "P": np.full(grid.size, bits_of(f)),
                     "fmt": np.full(grid.size, float(i + 1))}
                ax.plot(grid, fit.predict(X), "-" if j == 0 else "--", color=st["color"], lw=1.2)
    log_x(ax, n.min() / 1.3, n.max() * 1.3)
    ax.set_xlabel("parameters N")
    ax.set_ylabel(LOSS_LABEL)
    which = " (filled, solid) and ".join(f"{e:g}" for e in shown)
    ax.set_title(f"loss vs N at {which}{' (open, dashed)' if len(shown) > 1 else ''} epochs,\n"
                 f"U = {U:.3g} unique tokens; lines: fitted multiplier law", fontsize=9)


def _gap_panel(ax, study: PrecisionStudy) -> None:
    """Each run's loss minus the reference's fitted law at its (N, D), and each format's
    fitted gap: the difference the left panel's overlapping curves hide."""
    data, fit = study.data, study.fit
    shown, n, grid, U = _frame(data)

    def at(N, D, f: str, i: int):
        k = np.size(N)
        return fit.predict({"N": np.asarray(N, dtype=float), "D": np.asarray(D, dtype=float),
                            "U": np.full(k, U), "P": np.full(k, bits_of(f)), "fmt": np.full(k, float(i + 1))})

    ref = study.formats[0]
    ax.axhline(0.0, color="0.6", lw=0.8, zorder=1)
    for i, f in enumerate(study.formats[1:], start=1):
        st = style_of(f, i)
        sub = data.filter(pl.col("precision") == f)
        for j, e in enumerate(shown):
            pts = sub.filter((pl.col("epochs") - e).abs() < 1e-6 * e)
            base = at(pts["N"].to_numpy(), pts["D"].to_numpy(), ref, 0)
            ax.scatter(pts["N"], pts["loss"].to_numpy() - base, marker=st["marker"],
                       facecolor=st["color"] if j == 0 else "white", edgecolor=st["color"], s=28,
                       zorder=3, label=f if j == 0 else None)
            D = np.full(grid.size, U * e)
            ax.plot(grid, at(grid, D, f, i) - at(grid, D, ref, 0), "-" if j == 0 else "--",
                    color=st["color"], lw=1.2)
    log_x(ax, n.min() / 1.3, n.max() * 1.3)
    ax.set_xlabel("parameters N")
    ax.set_ylabel(f"loss - fitted {ref} loss (nats)")
    ax.set_title(f"gap to {ref}; markers and lines as on the left", fontsize=9)


def _multiplier_panel(ax, study: PrecisionStudy) -> None:
    ref = study.reference
    ax.axhline(1.0, color="0.6", lw=0.8, zorder=1)
    ax.scatter([bits_of(ref)], [1.0], color="black", marker="*", s=70, zorder=3,
               label=f"{ref} (reference, m = 1)")
    for i, m in enumerate(study.multipliers, start=1):
        st = style_of(m.fmt, i)
        if m.why_not is not None:
            ax.scatter([m.bits], [1.0], color="0.5", marker="x", s=40, zorder=3,
                       label=f"{m.fmt}: not identified")
            continue
        err = [[m.estimate - m.ci[0]], [m.ci[1] - m.estimate]]
        ax.errorbar([m.bits], [m.estimate], yerr=err, fmt=st["marker"], color=st["color"],
                    capsize=3, ms=6, zorder=3,
                    label=f"{m.fmt}: m = {m.estimate:.3f} [{m.ci[0]:.3f}, {m.ci[1]:.3f}]")
    bits = [bits_of(f) for f in study.formats]
    lo, hi = min(bits) / 1.25, max(bits) * 1.25
    if study.gamma is not None and study.gamma_why_not is None:
        g = study.gamma.estimate
        P = np.geomspace(lo, hi, 100)
        r = -math.expm1(-bits_of(ref) / g)
        ax.plot(P, -np.expm1(-P / g) / r, ":", color="black", lw=1.0,
                label=f"gamma form, gamma = {g:.2f} bits")
    log_x(ax, lo, hi)
    ax.set_xlabel("effective bits P (element + scale bits per element)")
    ax.set_ylabel(f"multiplier m = N_eff / N_eff({ref})")
    ax.set_title("effective-parameter multiplier, 95% profile CI", fontsize=9)


def plot_precision(study: PrecisionStudy, title: str | None = None):
    """The figure (module docstring); the caller saves it (plots.save_figure). ``title``: a
    line above the panels (the recipe the law is of)."""
    fig, (a, g, b) = plt.subplots(1, 3, figsize=(17.5, 4.6), gridspec_kw={"wspace": 0.55})
    _loss_panel(a, study)
    legend_outside(a)
    _gap_panel(g, study)
    _multiplier_panel(b, study)
    legend_outside(b)
    if title:
        fig.suptitle(title, y=1.04, fontsize=11)
    return fig


def plot_gaps(gaps, reference: str, title: str | None = None):
    """The model-free paired gaps (``analysis.laws.precision_gaps``): each format's mean loss
    minus the reference's per epoch count, with its 95% t-interval; the figure drawn when
    the law's base is not identified (its fitted lines would be no result). ``title``: a
    line above the panel (the recipe)."""
    per = [g for g in gaps if g.epochs is not None]
    fmts = sorted({g.fmt for g in per}, key=lambda f: -bits_of(f))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, f in enumerate(fmts):
        st = style_of(f, i)
        pts = sorted((g for g in per if g.fmt == f), key=lambda g: g.epochs)
        x = np.array([g.epochs for g in pts]) * (1 + 0.04 * (i - (len(fmts) - 1) / 2))  # side by side
        y = np.array([g.mean for g in pts])
        err = np.array([[g.mean - g.ci[0], g.ci[1] - g.mean] if g.ci else [0.0, 0.0] for g in pts]).T
        ax.errorbar(x, y, yerr=err, color=st["color"], marker=st["marker"], ms=5, lw=1.2, capsize=3,
                    label=f"{f} ({bits_of(f):g} bits)")
    ax.axhline(0.0, color="0.5", lw=1)
    ax.set_xscale("log")
    epochs = sorted({g.epochs for g in per})
    ax.set_xticks(epochs, [f"{e:g}" for e in epochs])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlim(epochs[0] / 1.4, epochs[-1] * 1.4)
    ax.set_xlabel("epochs over U")
    ax.set_ylabel(f"loss - {reference} loss (nats), same N and data")
    ax.set_title(f"Paired gap to {reference}: mean over sizes, 95% t-interval", fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig
