"""``report.md``'s joint laws over (N, D[, U]): one per recipe, on each point's best cell.

Which runs: ``analysis.recipes.law_groups`` (the recipes of the law in N; per (N, D, U) the
best cell's runs). Which law: Chinchilla (Hoffmann et al. 2022, arXiv 2203.15556) when
every run of the group saw its data once, else the data-constrained law of Muennighoff et
al. 2023 (arXiv 2305.16264) by their two-stage procedure (``fit.constrained``). A
parameter the fit cannot identify is named, never a bare number (``params_table``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from analysis.errors import AnalysisInputError, IdentifiabilityWarning
from analysis.fit.bootstrap import bootstrap_fit
from analysis.fit.constrained import fit_data_constrained
from analysis.fit.fit import FitResult, fit_law
from analysis.laws.laws import Chinchilla
from analysis.plots.plots import plot_isoflop, plot_loss_vs_epochs, plot_residuals, save_figure
from analysis.progress import Reporter
from analysis.recipes.law_groups import JointGroup
from analysis.report.stems import recipe_stems

__all__ = ["MIN_JOINT_RUNS", "joint_sections", "params_table"]

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


def _labels(groups: list[JointGroup]) -> list[tuple[str, str]]:
    """(the status line's name, the figures' stem suffix) of each group: the recipe's name
    and its stem (``analysis.report.stems``: safe for a file name, unique among the groups)."""
    if len(groups) == 1:
        return [("joint law", "")]
    return [(f"joint law, {g.name}", stem) for g, stem in zip(groups, recipe_stems([g.name for g in groups]))]


def joint_sections(groups: list[JointGroup], source: str, out_dir: Path, section: Callable[[str], None], *,
                   bootstrap: int, seed: int, workers: int | None,
                   report: Reporter | bool) -> tuple[list[str], list[str]]:
    """(markdown, status lines) of every group's joint law; ``section`` hears each start."""
    md: list[str] = []
    status: list[str] = []
    several = len(groups) > 1
    if several:
        md += [f"Joint laws: one per recipe ({source}); each (N, D, U) point is its best cell "
               "(the lowest mean loss over seeds, all its seeds fitted), as the law in N takes "
               "each size's best cell.", ""]
    for group, (name, stem) in zip(groups, _labels(groups)):
        section(name)
        data = group.runs
        if data["D"].n_unique() < 2:
            status.append(f"{name} over (N, D): one value of D, need >= 2")
            continue
        if data.height < MIN_JOINT_RUNS:
            status.append(f"{name} over (N, D): {data.height} runs, need >= {MIN_JOINT_RUNS}")
            continue
        repeated = bool((data["D"] > data["U"] * (1 + 1e-9)).any())
        kind = "DataConstrained" if repeated else "Chinchilla"
        try:
            fit = (_fit_quiet(fit_data_constrained, data, progress=report) if repeated
                   else _fit_quiet(fit_law, Chinchilla(), data, progress=report))
        except AnalysisInputError as err:
            md += [f"{name[0].upper()}{name[1:]} ({kind}) not fitted: {err}", ""]
            status.append(f"{name} ({kind}): not fitted: {err}")
            continue
        picked = (f" ({data.height} of {group.n_input} runs: each point's best cell)"
                  if data.height < group.n_input else "")
        status.append(f"{name}: {fit.law.name} fitted on {data.height} runs at {group.points} "
                      f"(N, D, U) points{picked}")
        boot = bootstrap_fit(fit, n=bootstrap, seed=seed, workers=workers,
                             progress=report) if bootstrap >= 2 else None
        over = f" ({group.name})" if several else ""
        md += [f"## {fit.law.name} joint law{over} (R^2 = {fit.r2:.4f})", "",
               f"{data.height} runs at {group.points} (N, D, U) points{picked}.", "",
               params_table(fit, boot), ""]
        if fit.fixed:
            md += ["Base parameters fixed from the stage-1 fit on single-epoch runs "
                   "(Muennighoff et al. two-stage procedure); SEs are conditional on them.", ""]
        md += [f"- warning: {w}" for w in fit.warnings] + [""]
        of = f", {group.name}" if several else ""
        save_figure(plot_residuals(data, fit, title=f"{fit.law.name} residuals{of}"), out_dir / f"residuals{stem}")
        md += [f"![residuals{over}](residuals{stem}.png)", ""]
        if repeated:
            save_figure(plot_loss_vs_epochs(data, fit, title=f"loss vs epochs at fixed unique data{of}"),
                        out_dir / f"loss_vs_epochs{stem}")
            md += [f"![loss vs epochs{over}](loss_vs_epochs{stem}.png)", ""]
        C = np.round(np.log10(6 * data["N"].to_numpy() * data["D"].to_numpy()) / 0.05)
        if np.unique(C).size >= 2 and not repeated:
            save_figure(plot_isoflop(data, fit, title=f"isoFLOP slices (C = 6ND){of}"), out_dir / f"isoflop{stem}")
            md += [f"![isoFLOP{over}](isoflop{stem}.png)", ""]
    return md, status
