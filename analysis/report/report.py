"""A markdown report of a sweep's fits, with its figures, from a runs table.

What it fits (each only when the data can support it; a power law whose asymptote is not
identified, ``analysis.fit.identified``, is named with the reason and no numbers):
- per recipe (``analysis.recipes.rows``, the one owner; a table without recipes is one
  group) and unique-token budget U: Kim et al.'s law in N, A/x^B + E, on each size's best
  cell (``cells.best_cells``), fitted by ``recipe_asymptote``: the same E, interval and
  reason as infinite_compute.md, ``scalelab compare`` and ``next``, and compared across groups;
- over the whole table, when D varies: Chinchilla, or the two-stage DataConstrained
  law when some runs repeat data (D > U) and enough single-epoch runs exist.

``progress`` (progress.py): a ``SectionProgress`` as each section starts (one per group,
the figures, the joint law) and once all are written; the fits and bootstraps report
to it too.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl

from analysis.atomic import write_text_atomic
from analysis.errors import AnalysisInputError, IdentifiabilityWarning
from analysis.fit.bootstrap import bootstrap_fit
from analysis.fit.constrained import fit_data_constrained
from analysis.fit.fit import FitResult, fit_law
from analysis.laws.laws import Chinchilla
from analysis.plots.plots import (
    plot_isoflop,
    plot_loss_vs_epochs,
    plot_residuals,
    save_figure,
)
from analysis.progress import Reporter, Sections, progress_fn
from analysis.recipes.infinite_compute import compare_asymptotes
from analysis.recipes.recipe_asymptote import RecipeE, recipe_laws
from analysis.report.epochs_md import epochs_section
from analysis.report.precision_md import precision_section
from analysis.tables.layout import LAWS_REPORT_FILE
from analysis.tables.runs import prepare_runs

__all__ = ["params_table", "write_report", "write_report_status"]

MIN_JOINT_RUNS = 6  # runs a joint law over (N, D[, U]) needs (5 parameters + 1)


def params_table(fit: FitResult, boot=None, level: float = 0.95) -> str:
    """Markdown table: parameter | value | SE | CI (bootstrap, when given) | fixed?"""
    ci = boot.ci(level) if boot is not None else {}
    se = boot.se if boot is not None else {}
    lines = [f"| parameter | value | SE | {int(level * 100)}% CI |", "|---|---|---|---|"]
    for p, v in fit.params.items():
        if p in fit.fixed:
            lines.append(f"| {p} | {v:.6g} | fixed | fixed |")
        elif p in fit.not_identified:  # never a bare number (fit/saturation_identified.py)
            lines.append(f"| {p} | not identified ({fit.not_identified[p]}) | | |")
        elif boot is not None:
            lo, hi = ci[p]
            lines.append(f"| {p} | {v:.6g} | {se[p]:.3g} | [{lo:.5g}, {hi:.5g}] |")
        else:
            lines.append(f"| {p} | {v:.6g} | | |")
    return "\n".join(lines)


def _fit_quiet(fn, *args, **kwargs) -> FitResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        return fn(*args, **kwargs)


def _reason(why: str) -> str:
    """``recipe_asymptote``'s reason as the report's other file words it."""
    return why if why.startswith("not identified") else f"not identified: {why}"


def _asymptote_table(res: RecipeE, level: float = 0.95) -> str:
    """Markdown table of A, B, E: value, SE (Gauss-Newton) and the t interval of E."""
    fit = res.fit
    se = fit.se
    lines = [f"| parameter | value | SE | {int(level * 100)}% CI |", "|---|---|---|---|",
             f"| A | {fit.A:.6g} | {se['A']:.3g} | |", f"| B | {fit.B:.6g} | {se['B']:.3g} | |",
             f"| E | {fit.E:.6g} | {se['E']:.3g} | [{res.lo:.5g}, {res.hi:.5g}] |"]
    return "\n".join(lines)


def write_report(runs: pl.DataFrame, out_dir: str | Path, **options) -> Path:
    """Fit, plot and write ``out_dir/report.md`` (figures beside it); returns its path.
    ``options``: those of ``write_report_status`` (title, loss, bootstrap, seed, workers,
    progress)."""
    return write_report_status(runs, out_dir, **options)[0]


def write_report_status(
    runs: pl.DataFrame,
    out_dir: str | Path,
    *,
    title: str = "Scaling-law report",
    loss: str = "final_loss",
    bootstrap: int = 200,
    seed: int = 0,
    workers: int | None = None,
    progress: bool | Reporter | None = None,
) -> tuple[Path, list[str]]:
    """``write_report``, also returning one line per section: what was fitted, or what is
    missing (the same lines open the report under "Sections"). ``progress``: see the
    module docstring (None: the enclosing ``progress.reporting`` block's)."""
    out_dir = Path(out_dir)
    report = progress_fn(progress) or False  # False: the steps below stay silent too
    status: list[str] = []
    table = prepare_runs(runs, loss=loss)
    data = table.data
    if data.height == 0:
        raise AnalysisInputError("no completed runs with a finite loss to report on")
    md = [f"# {title}", "", "{SECTIONS}", ""]
    md += [f"Runs: {table.n_input} in the table, {data.height} used.", ""]
    md += [f"- {n}" for n in table.notes] + ([""] if table.notes else [])
    md += [
        f"Loss column: `{loss}`. Fits minimise the summed Huber loss (delta 1e-3) of log-loss "
        f"residuals from a multi-start grid; bootstrap: {bootstrap} seeded resamples "
        f"(seed {seed}).",
        "",
    ]

    # Per recipe and unique-token budget: the recipe law in N on each size's best cell, by the
    # one rule and engine of infinite_compute.md, compare and next (same E, interval, reason).
    laws, source = recipe_laws(data)
    if outside := data.height - sum(law.runs.height for law in laws):
        status.append(f"power law in N: {outside} run(s) belong to no recipe ({source}); "
                      "not in any law in N")
    asym: dict[str, object] = {}
    fitted: list[tuple[str, RecipeE, pl.DataFrame]] = []
    unidentified: list[tuple[str, str, pl.DataFrame]] = []
    section = Sections(LAWS_REPORT_FILE, len(laws) + 2, report)  # + the figures, the joint law
    for law in laws:
        name, res, sub = law.label, law.asymptote, law.runs
        section(f"power law in N, {name}")
        if res.why_not:
            status.append(f"power law in N, {name}: {_reason(res.why_not)}")
            unidentified.append((name, res.why_not, sub))
            continue
        flag = f" ({res.flag})" if res.flag else ""
        status.append(f"power law in N, {name}: fitted on {res.n} sizes{flag}")
        fitted.append((name, res, sub))
        asym[name] = res.fit
    section("power-law figures")
    if fitted:
        md += ["## Power law in N per recipe: L = A / x^B + E, x = N / 1e6", "",
               f"Recipes from {source}. Each size's point is its best cell by the mean loss over "
               "its seeds, fitted by least squares weighted by the seed count, with t intervals "
               "(the rule and engine of infinite_compute.md, `scalelab compare` and `next`; "
               "their figure: recipes.png).", ""]
        for name, res, sub in fitted:
            fit = res.fit
            md += [f"### {name} ({sub.height} runs, {fit.x.size} sizes, R^2 = {fit.r2:.4f})", "",
                   _asymptote_table(res), ""]
            md += [f"- {res.flag}", ""] if res.flag else []
        cmp = compare_asymptotes(asym)
        md += ["## Asymptotes compared (N -> infinity)", "", _frame_md(cmp), ""]
    for name, why, sub in unidentified:
        md += [f"### {name} ({sub.height} runs): power law in N not identified", "",
               f"{_reason(why)}; no parameters or asymptote written.", ""]

    # Joint law over (N, D[, U]).
    section("joint law")
    if data["D"].n_unique() < 2:
        status.append("joint law over (N, D): one value of D, need >= 2")
    elif data.height < MIN_JOINT_RUNS:
        status.append(f"joint law over (N, D): {data.height} runs, need >= {MIN_JOINT_RUNS}")
    else:
        repeated = bool((data["D"] > data["U"] * (1 + 1e-9)).any())
        joint = None
        try:
            joint = (
                _fit_quiet(fit_data_constrained, data, progress=report)
                if repeated
                else _fit_quiet(fit_law, Chinchilla(), data, progress=report)
            )
        except AnalysisInputError as err:
            md += [f"Joint law not fitted: {err}", ""]
            status.append(f"joint law ({'DataConstrained' if repeated else 'Chinchilla'}): not fitted: {err}")
        if joint is not None:
            status.append(f"joint law: {joint.law.name} fitted on {data.height} runs")
            boot = _bootstrap(joint, bootstrap, seed, workers, report)
            md += [
                f"## {joint.law.name} over all runs (R^2 = {joint.r2:.4f})",
                "",
                params_table(joint, boot),
                "",
            ]
            if joint.fixed:
                md += [
                    "Base parameters fixed from the stage-1 fit on single-epoch runs "
                    "(Muennighoff et al. two-stage procedure); SEs are conditional on them.",
                    "",
                ]
            md += [f"- warning: {w}" for w in joint.warnings] + [""]
            save_figure(plot_residuals(data, joint), out_dir / "residuals")
            md += ["![residuals](residuals.png)", ""]
            if repeated:
                save_figure(plot_loss_vs_epochs(data, joint), out_dir / "loss_vs_epochs")
                md += ["![loss vs epochs](loss_vs_epochs.png)", ""]
            C = np.round(np.log10(6 * data["N"].to_numpy() * data["D"].to_numpy()) / 0.05)
            if np.unique(C).size >= 2 and not repeated:
                save_figure(plot_isoflop(data, joint), out_dir / "isoflop")
                md += ["![isoFLOP](isoflop.png)", ""]
    epochs_md, epochs_status = epochs_section(data, out_dir, seed=seed)  # recipes across epochs
    md, status = md + epochs_md, status + epochs_status
    md += precision_section(data, out_dir, status)  # >= 2 values of train.precision
    sections = "## Sections\n\n" + "\n".join(f"- {line}" for line in status)
    md[md.index("{SECTIONS}")] = sections
    path = write_text_atomic(out_dir / LAWS_REPORT_FILE, "\n".join(md) + "\n")
    section.end()
    return path, status


def _bootstrap(fit: FitResult, n: int, seed: int, workers: int | None, report: Reporter | bool):
    """``n`` resamples of ``fit`` (fit/bootstrap.py), reported to ``report``; None when n < 2."""
    return bootstrap_fit(fit, n=n, seed=seed, workers=workers, progress=report) if n >= 2 else None


def _frame_md(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.rows():
        cells = [f"{v:.5g}" if isinstance(v, float) else ("" if v is None else str(v)) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
