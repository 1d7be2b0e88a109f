"""The infinite-compute report of a sweep as markdown (``infinite_compute.md``), with
``recipes.png``/``.svg`` beside it.

Every section is written when the runs support it; otherwise one line says exactly what
is missing. A number is written only where the data back it: an asymptote needs
``MIN_POINTS`` points, a finite interval and an identified fit
(``infinite_compute.reportable``); a data-efficiency multiplier needs its interval.
``section_status`` gives the same verdicts as short lines (printed by ``scalelab report``).
``progress`` (analysis.progress): a ``SectionProgress`` as each step starts (the recipe
fits, the figure, the markdown) and once the report is written.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from analysis.atomic import write_text_atomic
from analysis.errors import AnalysisInputError
from analysis.fit.power_law import PowerLawFit
from analysis.progress import Reporter, Sections, progress_fn
from analysis.recipes.budgets import budget_lines
from analysis.recipes.distill_share import share_lines
from analysis.recipes.epoch_study import bound_caveat
from analysis.recipes.infinite_compute import (
    MIN_POINTS,
    RecipeAnalysis,
    analyze,
    ensemble_beats_members,
    flag_of,
    reportable,
)
from analysis.recipes.names import ENSEMBLE_K, JOINT, REF_WD
from analysis.recipes.verdicts import RULE, verdict_lines
from analysis.report.holdout_lines import holdout_lines
from analysis.tables.layout import (
    ENSEMBLE_EVALS_FILE,
    ENSEMBLES_FOLDER,
    RECIPES_FIGURE,
    RECIPES_REPORT_FILE,
    REPORT_FOLDER,
    RUNS_FILE,
)
from analysis.tables.safe_parquet import read_sweep_parquet

__all__ = ["section_status", "write_infinite_compute_report", "write_missing_report"]

REPORT_FILE = RECIPES_REPORT_FILE
_ENSEMBLES = f"{ENSEMBLES_FOLDER}/{ENSEMBLE_EVALS_FILE}"


def _num(v) -> str:
    """A table cell: integer-valued floats of 1,000 and more (a size N, a token count) in
    full with thousands separators, other floats to 5 significant digits."""
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return "inf" if math.isinf(v) else ""
        return f"{v:,.0f}" if abs(v) >= 1e3 and v == round(v) and abs(v) < 1e15 else f"{v:.5g}"
    return "" if v is None else str(v)


def _md(df: pl.DataFrame) -> str:
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(_num(v) for v in row) + " |" for row in df.rows()]
    return "\n".join(lines)


def _asymptote(name: str, fit: PowerLawFit | None, unit: str, what: str, n: int | None = None) -> str:
    """One line: the law, its asymptote and 95% CI, or why none is written."""
    if why := reportable(fit, what, n):
        return f"{name}: {why}"
    lo, hi = fit.ci()
    flag = f" ({f})" if (f := flag_of(fit)) else ""
    return (f"{name}: L = {fit.A:.4g}/({unit})^{fit.B:.4g} + {fit.E:.4f}; asymptote {fit.E:.4f}, "
            f"95% CI [{lo:.4f}, {hi:.4f}]{flag}; R^2 = {fit.r2:.3f}")


def _sizes(res: RecipeAnalysis) -> dict[str, int]:
    return {r: int(c) for r, c in res.best_per_n.group_by("recipe", maintain_order=True).len().rows()}


def _recipe_lines(res: RecipeAnalysis) -> list[str]:
    sizes = _sizes(res)
    return [_asymptote(f"{r} vs N", res.fits.get(r), "N/1e6", "sizes", sizes.get(r, 0))
            for r in res.fits if r != JOINT]


def _ensemble_lines(res: RecipeAnalysis) -> list[str]:
    if not res.has_ensembles:
        return [f"ensembles: no {_ENSEMBLES} — run `scalelab ensemble SWEEP` (needs a block with members)"]
    if not res.ensemble.height:
        return [f"ensembles: {_ENSEMBLES} has no logit-averaged rows — run `scalelab ensemble SWEEP`"]
    lines = [_asymptote(f"ensemble of N={n:,} vs K", f, "K", "values of K") for n, f in res.k_fits.items()]
    k_sizes = int((res.best_per_n["recipe"] == ENSEMBLE_K).sum())
    joint = res.fits.get(JOINT)
    lines.append(_asymptote("ensembles N, K -> inf", joint, "N/1e6", "sizes with an identified K -> inf limit",
                            None if joint is not None else k_sizes))
    return lines


def _data_lines(res: RecipeAnalysis) -> list[str]:
    n = res.data_points.height
    if n < MIN_POINTS:
        return [f"data efficiency: the {res.reference} recipe has {n} budget(s) U, need >= {MIN_POINTS} "
                "(add a `data` block, or runs at other data.unique_tokens)"]
    line = _asymptote(f"data efficiency ({res.reference} recipe vs U)", res.data_fit, "U/1e6", "budgets U")
    m = res.multipliers
    ok = int(m["data_multiplier"].is_not_nan().sum())
    whys = sorted(set(m.filter(pl.col("data_multiplier").is_nan())["why"].drop_nulls().to_list()))
    tail = f" (none for the rest: {'; '.join(whys)})" if whys and ok else (f": {whys[0]}" if len(whys) == 1 else "")
    return [line, f"data-efficiency multipliers: {ok} of {m.height} with a 95% CI{tail}"]


def section_status(res: RecipeAnalysis) -> list[str]:
    """One line per section: what was fitted, or what is missing."""
    sizes = _sizes(res)
    named = ", ".join(f"{r} ({sizes.get(r, 0)} sizes)" for r in res.fits if r != JOINT)
    lines = [f"recipes from {res.recipe_source}: {named}; U0 = {res.U0:,.0f} unique tokens"]
    lines += _recipe_lines(res) + _ensemble_lines(res)
    if not res.students.height:
        lines.append("distillation: no student runs (blocks distill-ensemble, self-distill)")
    else:
        lines += [f"distillation: {line}" for line in share_lines(res)]
    return lines + _data_lines(res)


def _multiplier_table(res: RecipeAnalysis) -> list[str]:
    m = res.multipliers
    shown = m.filter(pl.col("data_multiplier").is_not_nan())
    out = []
    if shown.height:
        table = shown.select("recipe", "loss", pl.col("data_multiplier").alias("multiplier"),
                             pl.col("lo").alias("95% CI lo"), pl.col("hi").alias("95% CI hi"))
        out += [_md(table), ""]
    out += [f"- {r}: no multiplier ({why})" for r, why in m.filter(pl.col("data_multiplier").is_nan())
            .select("recipe", "why").rows()]
    return out + [""]


def _markdown(res: RecipeAnalysis, title: str) -> list[str]:
    md = [f"# {title}", "",
          f"Base budget U0 = {res.U0:,.0f} unique tokens. Loss: final held-out loss (nats/token). Fits: "
          "A/x^B + C by least squares (Kim et al. 2025), x = N or U in millions, and A/K + C over "
          "ensemble members K; CIs are t-intervals from curve_fit's covariance with n minus the free "
          f"parameters (3, or 2 for A/K + C) degrees of freedom. An asymptote is written only "
          f"with >= {MIN_POINTS} points, a finite CI and an identified fit.", "",
          "## Sections", ""] + [f"- {line}" for line in section_status(res)] + ["",
          f"![recipes]({RECIPES_FIGURE}.png)", "", "## Asymptotes (N -> infinity)", ""]
    md += [f"- {line}" for line in _recipe_lines(res)] + [""]
    md += ["## Which recipe is better at infinite compute", "",
           f"Each recipe's level: {RULE} (analysis.recipes.verdicts).", ""]
    md += [f"- {line}" for line in verdict_lines(res)]
    md += [f"- caveat: {bound_caveat(name)}" for name in res.bounds] + [""]
    md += ["## Extrapolation check", "",
           "Each law refitted without its largest size (and its largest two, with >= 6 sizes); "
           "the held-out losses against the refit's 95% prediction interval "
           "(analysis.report.holdout_lines; coverage on synthetic studies: docs/extrapolation.md).",
           ""]
    md += [f"- {line}" for line in holdout_lines(res) or ["no identified law to check"]] + [""]
    md += ["## Best loss per model size", "", _md(res.best_per_n.select("recipe", "N", "loss", "name")), ""]
    md += ["## Ensembles (logit averaging), loss vs K", ""]
    if res.ensemble.height:
        wide = res.ensemble.pivot(on="K", index="N", values="loss").sort("N")
        wide = wide.rename({c: f"K={c}" for c in wide.columns if c != "N"})
        alone = res.members.group_by("N").agg(pl.col("loss").min().alias("best member"),
                                               pl.col("loss").max().alias("worst member"))
        md += [_md(wide.join(alone, on="N", how="left")), ""]
        md += ["Each K-ensemble (members 0..K-1) against each of its own members alone:", ""]
        md += [f"- {line}" for line in ensemble_beats_members(res)] + [""]
    md += [f"- {line}" for line in _ensemble_lines(res)] + [""]
    md += ["## Distilled students", ""]
    md += ([_md(res.students), ""] + [f"- {line}" for line in share_lines(res)] + [""] if res.students.height
           else ["- no student runs (blocks distill-ensemble, self-distill)", ""])
    md += [f"## Data efficiency vs the {res.reference} recipe", ""]
    md += [f"- {line}" for line in _data_lines(res)] + [""]
    md += [_md(res.data_points.select("U", "loss", "name")), ""]
    if res.data_points.height >= MIN_POINTS:
        law = (f"Data law: {res.data_law.why}" + ("; without a floor each multiplier is a lower "
               "bound (a floor C > 0 makes D_eff grow faster)." if not res.data_law.floor else ".")
               if res.data_law is not None else "No data law.")
        md += [f"Reference (1x): the {res.reference} recipe's best loss at U0, {res.ref_loss:.4f}. Multiplier = "
               "D_eff(loss)/D_eff(reference), D_eff(L) = (A/(L - C))^(1/B) from the data law "
               "(analysis.recipes.data_multiplier). 95% CI: residual bootstrap of the data law, "
               "with the compared loss drawn from its standard error.", law, ""]
        md += _multiplier_table(res)
    if res.budgets.height:
        md += ["### At each budget U", "",
               "Each recipe's asymptote vs N fitted at every budget where it has runs of enough "
               f"sizes, and its multiplier there against the {res.reference} recipe's best loss at "
               "that budget (analysis.recipes.budgets):", ""]
        md += [f"- {line}" for line in budget_lines(res.budgets, res.reference)] + [""]
    if res.notes:
        md += ["## Notes", ""] + [f"- {n}" for n in res.notes] + [""]
    return md


def write_missing_report(out_dir: str | Path, title: str, why: str) -> Path:
    """The report of a sweep with no recipe to analyse: the title and what is missing."""
    text = f"# {title}\n\nNot written: {why}\n"
    return write_text_atomic(Path(out_dir) / REPORT_FILE, text)


def write_infinite_compute_report(sweep_dir: str | Path, out_dir: str | Path | None = None, *,
                                  ref_wd: float = REF_WD, loss: str = "final_loss",
                                  recipes: Mapping[str, Sequence[str]] | None = None,
                                  reference: str | None = None,
                                  progress: bool | Reporter | None = None,
                                  runs: pl.DataFrame | None = None) -> tuple[Path, RecipeAnalysis]:
    """Read ``runs.parquet`` and ``ensembles/evals.parquet`` (``runs`` given: those runs, no
    ensembles); write ``infinite_compute.md`` and ``recipes.png``/``.svg`` under ``out_dir``
    (default ``<sweep>/report``).
    ``progress``: see the module docstring (None: the enclosing ``reporting`` block's)."""
    from analysis.plots.plots import save_figure
    from analysis.plots.recipes import plot_recipes

    sweep_dir = Path(sweep_dir)
    runs_path, ens_path = sweep_dir / RUNS_FILE, sweep_dir / _ENSEMBLES
    if runs is None and not os.path.lexists(runs_path):
        raise AnalysisInputError(f"{runs_path} is missing: run `scalelab collect {sweep_dir}` first")
    ensembles = None if runs is not None or not os.path.lexists(ens_path) else read_sweep_parquet(ens_path)
    if runs is None:
        runs = read_sweep_parquet(runs_path)
    section = Sections(REPORT_FILE, 3, progress_fn(progress))
    section("recipe fits")
    try:
        res = analyze(runs, ensembles, ref_wd=ref_wd, loss=loss, recipes=recipes, reference=reference)
    except AnalysisInputError:
        section.end("not written")  # the error says why
        raise
    out = Path(out_dir) if out_dir else sweep_dir / REPORT_FOLDER
    section("recipes figure")
    save_figure(plot_recipes(res), out / RECIPES_FIGURE)
    section("markdown")
    md = _markdown(res, f"Infinite-compute recipes: {sweep_dir.name}")
    path = write_text_atomic(out / REPORT_FILE, "\n".join(md) + "\n")
    section.end()
    return path, res


def main(argv: list[str] | None = None) -> int:
    """``python -m analysis.report.infinite_compute_md SWEEP_DIR``: write the report, print its path."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m analysis.report.infinite_compute_md SWEEP_DIR", file=sys.stderr)
        return 2
    try:
        path, _ = write_infinite_compute_report(args[0])
    except AnalysisInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
