"""A markdown report of a sweep's fits, with its figures, from a runs table.

What it fits (each only when the data can support it; a power law whose asymptote is not
identified, ``analysis.fit.identified``, is named with the reason and no numbers):
- per recipe (the ``recipe`` column) or, without one, per training-token count D:
  a PowerLaw in N, A/N^alpha + E, whose E is that group's N -> infinity asymptote,
  bootstrapped for SEs and CIs, and compared across groups;
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
from analysis.fit.bootstrap import bootstrap_fit
from analysis.fit.constrained import fit_data_constrained
from analysis.errors import AnalysisInputError, IdentifiabilityWarning
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.identified import why_not_identified
from analysis.laws.laws import Chinchilla, PowerLaw
from analysis.plots.plots import (
    plot_isoflop,
    plot_loss_vs_epochs,
    plot_loss_vs_x,
    plot_residuals,
    save_figure,
)
from analysis.progress import Reporter, Sections, progress_fn
from analysis.recipes.asymptotes import compare_asymptotes
from analysis.tables.layout import LAWS_REPORT_FILE
from analysis.tables.runs import prepare_runs

__all__ = ["MIN_GROUP_POINTS", "params_table", "write_report", "write_report_status"]

MIN_JOINT_RUNS = 6  # runs a joint law over (N, D[, U]) needs (5 parameters + 1)

MIN_GROUP_POINTS = 4  # distinct N values a PowerLaw-in-N group needs (3 would interpolate)


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


def _group_columns(data: pl.DataFrame) -> list[str]:
    """Runs of one group differ only in N: same recipe (when recorded) and same D."""
    return [c for c in ("recipe", "D") if c in data.columns]


def _label(cols: list[str], key: tuple) -> str:
    return ", ".join(
        f"{c}={v:.3g}" if isinstance(v, float) else f"{c}={v}" for c, v in zip(cols, key)
    )


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

    # Per-group power laws in N and their asymptotes.
    gcols = _group_columns(data)
    asym: dict[str, object] = {}
    group_fits: list[tuple[str, FitResult, object, pl.DataFrame]] = []
    unidentified: list[tuple[str, str, pl.DataFrame]] = []
    groups = sorted(data.group_by(gcols), key=lambda kv: tuple(str(k) for k in kv[0]))
    section = Sections(LAWS_REPORT_FILE, len(groups) + 2, report)  # + the figures, the joint law
    for key, sub in groups:
        name = _label(gcols, key)
        section(f"power law in N, {name}")
        if (sizes := sub["N"].n_unique()) < MIN_GROUP_POINTS:
            status.append(f"power law in N, {name}: {sizes} size(s), need >= {MIN_GROUP_POINTS}")
            continue
        fit = _fit_quiet(fit_law, PowerLaw(x="N"), sub, progress=report)
        why = why_not_identified(fit.params["alpha"], fit.params["E"], sub["N"], sub["loss"], fit.predict(sub))
        if why:
            status.append(f"power law in N, {name}: not identified: {why}")
            unidentified.append((name, why, sub))
            continue
        status.append(f"power law in N, {name}: fitted on {sizes} sizes")
        boot = _bootstrap(fit, bootstrap, seed, workers, report)
        group_fits.append((name, fit, boot, sub))
        asym[name] = (fit, boot) if boot is not None else fit.params["E"]
    section("power-law figures")
    if group_fits:
        md += ["## Power law in N per group: L = A / N^alpha + E", ""]
        for i, (name, fit, boot, sub) in enumerate(group_fits):
            md += [
                f"### {name} ({sub.height} runs, R^2 = {fit.r2:.4f})",
                "",
                params_table(fit, boot),
                "",
            ]
            md += [f"- warning: {w}" for w in fit.warnings] + [""]
            stem = out_dir / f"loss_vs_N_{i}"
            save_figure(plot_loss_vs_x(sub, fit, boot, title=f"{name}: loss vs N"), stem)
            md += [f"![loss vs N, {name}]({stem.name}.png)", ""]
        cmp = compare_asymptotes(asym)
        md += ["## Asymptotes compared (N -> infinity)", "", _frame_md(cmp), ""]
    for name, why, sub in unidentified:
        md += [f"### {name} ({sub.height} runs): power law in N not identified", "",
               f"{why}; no parameters or asymptote written.", ""]

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
