"""Kim et al. 2025 Figure 1 style: best loss vs parameters per recipe, for a paper.

Each recipe gets its colour and marker; its A/N^B + C fit (unless unidentified) is drawn
over the sizes it was fitted on, with a 95% delta-method band (``PowerLawFit.band``) over
the same range, and its asymptote C as a dashed line in its 95% CI band, only when that
asymptote is reportable (``infinite_compute.reportable``), with the largest size ringed: the
point the extrapolation check holds out. A recipe whose loss rises with N gets a dotted line
at its best observed loss minus 2 sigma, the level the verdict holds it to. Students are one
star per block at their seeds' mean (+-1 SD). When a recipe was run at several budgets U
(``budgets``), a lower panel shows its asymptote per U with its CI and multiplier, over the
reference recipe's best loss per U and its data law. The title says what is drawn.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.fit.power_law import SCALE
from analysis.plots.style import LOSS_LABEL, legend_outside, log_x, plt, style_of
from analysis.recipes.extrapolation import MIN_REFIT
from analysis.recipes.infinite_compute import RecipeAnalysis, flag_of, reportable, unidentified
from analysis.recipes.names import ENSEMBLE_K, JOINT
from analysis.recipes.verdicts import recipe_level

__all__ = ["plot_recipes"]

_FIT_OF = {ENSEMBLE_K: JOINT}
"""The per-size K -> inf asymptotes are drawn with the joint (N, K -> inf) fit through them."""
_LABEL = {ENSEMBLE_K: "ensemble, K -> inf per size"}


def _draw_fit(ax, fit, x: np.ndarray, style: dict[str, str]) -> tuple[bool, bool, bool]:
    """The fitted curve over the data's range (not for an unidentified fit: its shape is
    noise), its 95% band where the fit has an interval, and the dashed asymptote where it is
    reportable: (curve, band, asymptote) drawn."""
    if fit is None or unidentified(fit) is not None:
        return False, False, False
    grid = np.geomspace(x.min(), x.max(), 120)
    ax.plot(grid, fit(grid / SCALE), "-", color=style["color"], lw=1.6, zorder=2)
    band = fit.has_ci
    if band:
        lo, hi = fit.band(grid / SCALE)
        band = bool(np.isfinite(lo).all() and np.isfinite(hi).all())
        if band:
            ax.fill_between(grid, lo, hi, color=style["color"], alpha=0.18, lw=0, zorder=1)
    if reportable(fit) is not None:
        return True, band, False
    lo, hi = fit.ci()
    one_dof = " (1 residual dof)" if flag_of(fit) else ""
    ax.axhspan(lo, hi, color=style["color"], alpha=0.10, lw=0, zorder=0)
    ax.axhline(fit.E, ls="--", color=style["color"], lw=1.1, alpha=0.8, zorder=1,
               label=f"  asymptote C = {fit.E:.3f}, 95% CI band [{lo:.3f}, {hi:.3f}]{one_dof}")
    if fit.x.size - 1 >= MIN_REFIT:  # the check ran (its refit keeps a residual dof)
        ax.plot([x.max()], [fit.y[np.argmax(fit.x)]], "o", ms=13, mfc="none", mec=style["color"],
                mew=1.2, zorder=4, label="  held out in the extrapolation check")
    return True, band, True


def _draw_best_observed(ax, res: RecipeAnalysis, recipe: str, style: dict[str, str]) -> bool:
    """A recipe whose loss rises with N: its best observed loss minus 2 sigma, the level the
    verdict holds it to (``verdicts.recipe_level``), as a dotted line."""
    level = recipe_level(res, recipe)
    if isinstance(level, str) or level.identified:
        return False
    ax.axhline(level.lo, ls=":", color=style["color"], lw=1.3, zorder=1,
               label=f"  best observed {level.value:.3f} - 2 sigma = {level.lo:.3f} (overfits)")
    return True


def _draw_students(ax, students: pl.DataFrame) -> None:
    """One star per student block and size: the mean over its seeds, with +-1 SD bars when
    it has several (the seeds are its replicates, not separate results)."""
    if not students.height:
        return
    means = students.group_by("block", "N", maintain_order=True).agg(
        pl.col("loss").mean().alias("mean"), pl.col("loss").std().alias("sd"), pl.len().alias("n"))
    for j, row in enumerate(means.iter_rows(named=True)):
        several = row["n"] > 1
        label = f"{row['block']} student" + (f" (mean of {row['n']} seeds, +-1 SD)" if several else "")
        ax.errorbar([row["N"]], [row["mean"]], yerr=[row["sd"]] if several else None, fmt="*", ms=12,
                    color=f"C{(j + 5) % 10}", capsize=3, zorder=4, label=label)


def _draw_budgets(ax, res: RecipeAnalysis) -> None:
    """The lower panel: each recipe's asymptote E at every budget U with its 95% CI and its
    multiplier there, over the reference recipe's best loss per U and its data law."""
    pts = res.data_points
    u = pts["U"].to_numpy().astype(float)
    ax.plot(u, pts["loss"], "o", color="0.45", ms=5, label=f"{res.reference}, best observed per U")
    if res.data_law is not None:
        grid = np.geomspace(u.min(), u.max(), 100)
        form = "A/U^B + C" if res.data_law.floor else "A/U^B"
        ax.plot(grid, res.data_law.fit.predict(grid / SCALE), "-", color="0.45", lw=1.2,
                label=f"  {res.reference} data law {form}")
    for i, ((recipe,), sub) in enumerate(res.budgets.group_by("recipe", maintain_order=True)):
        style = style_of(recipe, i)
        ok = sub.filter(pl.col("why").is_null()).sort("U")
        if not ok.height:
            continue
        E = ok["E"].to_numpy()
        err = np.stack([E - ok["lo"].to_numpy(), ok["hi"].to_numpy() - E])
        ax.errorbar(ok["U"], E, yerr=err, fmt=style["marker"], color=style["color"], capsize=3, ms=6,
                    label=f"{recipe} asymptote E per U (95% CI)")
        for row in ok.filter(pl.col("m_why").is_null()).iter_rows(named=True):
            ax.annotate(f"x{row['multiplier']:.2f}", (row["U"], row["E"]), textcoords="offset points",
                        xytext=(7, -3), fontsize=8, color=style["color"])
    log_x(ax, u.min() / 1.3, u.max() * 1.3)
    ax.set_xlabel("unique tokens U")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title(f"Asymptote at each budget; x: multiplier vs the {res.reference} recipe's best there",
                 fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax)


def plot_recipes(res: RecipeAnalysis, *, title: str = ""):
    """Loss vs N per recipe with fits, bands and (identified) asymptotes, and, when a recipe
    was run at several budgets, its asymptote against U below; returns the figure."""
    budgets = res.budgets.height > 0 and res.data_points.height > 0
    if budgets:
        fig, (ax, low) = plt.subplots(2, 1, figsize=(8.2, 7.8), layout="constrained",
                                      height_ratios=(1.6, 1.0))
        _draw_budgets(low, res)
    else:
        fig, ax = plt.subplots(figsize=(8.2, 4.6), layout="constrained")
    best = res.best_per_n
    n_all = best["N"].to_numpy().astype(float)
    curves = bands = asymptotes = dotted = 0
    order = list(dict.fromkeys(best["recipe"].to_list()))
    for i, recipe in enumerate(order):
        sub = best.filter(pl.col("recipe") == recipe).sort("N")
        x, y = sub["N"].to_numpy().astype(float), sub["loss"].to_numpy().astype(float)
        style = style_of(recipe, i)
        fit = res.fits.get(_FIT_OF.get(recipe, recipe))
        why = reportable(fit, "sizes", n=x.size)
        label = _LABEL.get(recipe, recipe)
        if why is not None:
            what = "joint N, K fit" if recipe in _FIT_OF else "fit"
            label += f" (no {what}: {why.split(':')[0]})"
        ax.plot(x, y, style["marker"], color=style["color"], ms=6, mec="white", mew=0.6, zorder=3, label=label)
        drawn, band, dashed = _draw_fit(ax, fit, x, style)
        if not drawn and recipe in res.fits and recipe not in _FIT_OF:
            dotted += _draw_best_observed(ax, res, recipe, style)
        curves += drawn
        bands += band
        asymptotes += dashed
    if res.ensemble.height:
        kmax = res.ensemble.filter(pl.col("K") == res.ensemble["K"].max())
        style = style_of(ENSEMBLE_K, 0)
        ax.plot(kmax["N"], kmax["loss"], style["marker"], color=style["color"], mfc="none", ms=7,
                zorder=3, label=f"ensemble K={int(kmax['K'][0])} (observed)")
    _draw_students(ax, res.students)
    log_x(ax, n_all.min() / 1.3, n_all.max() * 1.3)
    ax.set_xlabel("parameters N (per model)")
    ax.set_ylabel(LOSS_LABEL)
    if not title:
        drawn = ["markers: best loss per N"]
        if curves:
            drawn.append("lines: A/N^B + C fits" + (", shaded: 95% bands" if bands else ""))
        if asymptotes:
            ringed = any(h.get_label().strip().startswith("held out")
                         for h in ax.get_lines())
            drawn.append("dashed: asymptote C with its CI band"
                         + ("; ringed: held out" if ringed else ""))
        if dotted:
            drawn.append("dotted: an overfitting recipe's best - 2 sigma")
        key = "\n".join(f"{d};" if i < len(drawn) - 1 else d for i, d in enumerate(drawn))
        title = f"Recipes at U = {res.U0:,.0f} unique tokens"
        # the key goes under the axes, one item per line: a one-line key as wide as the
        # figure squeezed the axes to a third of it
        ax.text(0.0, -0.16, key, transform=ax.transAxes, ha="left", va="top", fontsize=8,
                color="0.3")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax)
    return fig
