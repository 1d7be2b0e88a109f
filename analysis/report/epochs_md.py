"""The "Recipes across epochs" section of report.md: when two or more recipes span
>= ``epoch_curves.MIN_EPOCHS`` epoch values at one unique-token budget U
(``analysis.recipes.epoch_study``), their points (loss +- SE, and which loss is a bound),
the crossover per size, each recipe's R_D* with its interval or why it is not identified, the
verdict at infinite compute under the report's rule with the bound caveat, and the figure
(``recipes_epochs.png``). A table that is no epoch study of recipes gets nothing; one with two
recipes at too few epochs gets one status line saying why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.plots.epoch_recipes import plot_recipe_epochs
from analysis.plots.plots import save_figure
from analysis.recipes.epoch_study import epoch_study

__all__ = ["FIGURE", "epochs_section"]

FIGURE = "recipes_epochs"


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1e3 else f"{v:g}"


def epochs_section(data: pl.DataFrame, out_dir: str | Path, *, seed: int = 0,
                   recipes: Mapping[str, Sequence[str]] | None = None) -> tuple[list[str], list[str]]:
    """(the section's markdown lines, its status lines) for the report's fit table ``data``
    (``recipes``: ``--recipe`` filters, as ``find_recipes`` takes them); both empty when
    the table is no epoch study of recipes."""
    try:
        study = epoch_study(data, recipes=recipes, seed=seed)
    except AnalysisInputError as err:  # this section's input, not the whole report's
        return [], [f"recipes across epochs: not written: {err}"]
    if study is None:
        return [], []
    if isinstance(study, str):
        return [], [study]
    c = study.curves
    names = ", ".join(c.recipes)
    md = ["## Recipes across epochs", "",
          f"Recipes ({c.source}): {names}, at U = {_num(c.U)} unique tokens. Each point is the best cell "
          "over the other axes (e.g. lr) at that (recipe, N, epochs), by its mean loss over seeds. "
          f"SE: the Monte Carlo SE of the loss (0 for an exact NLL); SD: the point's SD used for the "
          f"crossover, the SE and a run-to-run noise of {c.tau:.2g} nats ({c.tau_from}).", "",
          "| recipe | N | epochs | seeds | loss | SE | SD | bound? |", "|---|---|---|---|---|---|---|---|"]
    for r in c.points.iter_rows(named=True):
        md.append(f"| {r['recipe']} | {_num(r['N'])} | {r['epochs']:g} | {r['seeds']} | {r['loss']:.4f} | "
                  f"{r['se']:.2g} | {r['sigma']:.2g} | {'yes (ELBO)' if r['bound'] else 'no (exact)'} |")
    md += ["", "### Crossover per size", "",
           "Where the recipe lower at the last shared epoch overtakes the other: linear interpolation of "
           "the loss difference in ln(epochs) between sampled epochs, 95% interval from a parametric "
           "bootstrap of the points with their SDs, each end widened to the sampled epoch at or beyond it "
           "(the curves are not sampled in between; docs/diffusion.md).", ""]
    md += ([f"- N = {_num(x.N)}: {x.line()}" for x in study.crossovers]
           or ["- no size has two recipes at >= 2 shared epochs"])
    md += ["", "### Data-constrained law per recipe (Muennighoff et al. 2023)", ""]
    for r, law in study.laws.items():
        how = f" ({law.method}, {law.points} points)" if law.method else ""
        md.append(f"- {r}{how}: {law.line()}")
    md += ["", "### Verdict at infinite compute", ""]
    md += [f"- {v}" for v in study.verdicts]
    md += [f"- caveat: {cav}" for cav in study.caveats]
    save_figure(plot_recipe_epochs(study), Path(out_dir) / FIGURE)
    md += ["", f"![recipes across epochs]({FIGURE}.png)", ""]
    resolved = sum(x.resolved for x in study.crossovers)
    status = [f"recipes across epochs: {names} at U = {_num(c.U)}; crossover resolved at {resolved} of "
              f"{len(study.crossovers)} size(s); R_D* written for "
              f"{sum(law.r_d is not None for law in study.laws.values())} of {len(study.laws)} recipe(s)"]
    return md, status
