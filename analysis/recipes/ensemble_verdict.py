"""Ensembles against the recipes at infinite compute, under the one verdict rule
(``analysis.recipes.verdict``).

Kim et al. 2025 ("Pre-training under infinite compute", arXiv 2509.14786, sec. 4) take an
ensemble's loss to its K -> inf limit (A/K + C over members K, per model size N) and those
limits to N -> inf (A/N^B + C): the joint (N, K -> inf) asymptote. The ensemble's level here:

* the joint (N, K -> inf) asymptote with its 95% CI, when it may be written
  (``infinite_compute.reportable``: enough sizes with an identified K -> inf limit, a finite
  interval, identified);
* else each size's K -> inf limit C with its 95% CI from its K law, one level per size
  whose K law may be written. A limit at one N is what more members buy at that size, not
  what larger models would: it is an upper bound on the joint asymptote only if the loss
  falls with N, so a verdict from it says which size it rests on.

Against a recipe's asymptote the two are not paired (the ensemble's limit comes from the
members of one or a few sizes; the recipe's from its own sizes and seeds), so the rule's
paired Delta E does not apply: a winner only when the intervals separate, X = B.lo - A.hi > 0
(``recipe_verdict(..., paired=False)``), else "no verdict" with how much they overlap.
Against an overfitting recipe, its best observed loss - 2 sigma as always.
"""

from __future__ import annotations

from collections.abc import Mapping

from analysis.recipes.extrapolation import count_label
from analysis.recipes.infinite_compute import RecipeAnalysis, reportable
from analysis.recipes.verdict import RecipeLevel, recipe_verdict

__all__ = ["JOINT", "ensemble_levels", "ensemble_lines"]

JOINT = "ensemble (N,K->inf)"
"""The joint law's key in ``RecipeAnalysis.fits`` (and the level's name)."""


def ensemble_levels(res: RecipeAnalysis) -> tuple[list[RecipeLevel], str]:
    """The ensemble's levels (module docstring) and which is used, in words."""
    k_sizes = len(res.k_fits) and sum(reportable(f, "values of K") is None
                                      for f in res.k_fits.values())
    joint = res.fits.get(JOINT)
    why = reportable(joint, "sizes", None if joint is not None else k_sizes)
    if why is None:
        lo, hi = joint.ci()
        return ([RecipeLevel.asymptote(JOINT, joint.C, lo, hi, joint.se["C"])],
                "the joint (N, K -> inf) asymptote")
    levels = []
    for n, fit in sorted(res.k_fits.items()):
        if reportable(fit, "values of K") is None:
            lo, hi = fit.ci()
            levels.append(RecipeLevel.asymptote(f"ensemble K->inf at N={count_label(n)}", fit.C,
                                                lo, hi, fit.se["C"]))
    return levels, (f"each size's K -> inf limit from its K law; no joint (N, K -> inf) "
                    f"asymptote: {why}")


def ensemble_lines(res: RecipeAnalysis, levels: Mapping[str, RecipeLevel | str]) -> list[str]:
    """One line per ensemble level and recipe (module docstring); none without ensemble
    evals. ``levels``: each recipe's level or why it has none (``verdicts.recipe_level``)."""
    if not res.ensemble.height:
        return []
    ens, used = ensemble_levels(res)
    if not ens:
        return [f"ensembles vs recipes: no verdict (no ensemble level: {used})"]
    lines = []
    for e in ens:
        for name, level in levels.items():
            if isinstance(level, str):
                lines.append(f"{e.name} vs {name}: no verdict ({level})")
                continue
            v = recipe_verdict(e, level, paired=False)
            lines.append(f"{v.line()}; {e.name}: {e.describe()}, {name}: {level.describe()} "
                         f"(ensemble level: {used})")
    return lines
