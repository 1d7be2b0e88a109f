"""report.md's precision section: when the runs have >= 2 values of ``train.precision``, the
precision law (fit/precision.py) with each format's effective-parameter multiplier and its
95% profile CI, Kumar et al.'s gamma form, the trend verdicts in N and in epochs, and the
figure (plots/precision.py). A number whose CI runs to a bound is never printed: its reason
is. Nothing is written for a table with one precision or none.

With named recipes (``--recipe``, the ``recipe`` column) one law per recipe that ran >= 2
precisions (``analysis.recipes.law_groups``), each with its figure
(``precision-<recipe>.png``, ``analysis.report.stems``), then a table of each format's
multiplier across the recipes: two recipes' multipliers "differ" only when their 95%
profile CIs are disjoint (a conservative reading, not a test at 5%), else they are "not
distinguished by these runs".
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.diagnostics import at_bounds
from analysis.fit.precision import COLUMN, Multiplier, PrecisionStudy, fit_precision
from analysis.laws.precision_bits import BITS
from analysis.laws.precision_gaps import Gap, paired_gaps
from analysis.plots.plots import save_figure
from analysis.plots.precision import plot_gaps, plot_precision
from analysis.recipes.law_groups import PrecisionGroup, precision_groups
from analysis.report.stems import recipe_stems

__all__ = ["across_recipes", "precision_lines", "precision_section"]

FIGURE = "precision"


def _fmt_params(study: PrecisionStudy) -> str:
    p = study.fit.params
    return ", ".join(f"{k} = {p[k]:.4g}" for k in ("A", "alpha", "B", "beta", "E", "R_D"))


def _base_unidentified(study: PrecisionStudy) -> set[str]:
    """The base law's parameters (not the multipliers) the data do not identify: not
    identified by their profiles, or ended on their box (``at_bounds``: the rule the fit's
    own bound warnings use)."""
    return {k for k in (*study.fit.not_identified, *at_bounds(study.fit)) if not k.startswith("m_")}


def _gap_lines(gaps: list[Gap], reference: str) -> list[str]:
    if not gaps:
        return []
    return ([f"Paired gaps (no law): each format's mean loss minus `{reference}`'s at every (N, D, U) "
             "cell both ran, averaged over the cells, with a 95% t-interval from the cells' scatter "
             "(analysis.laws.precision_gaps):", ""]
            + [f"- {g.describe()}" for g in gaps] + [""])


def precision_lines(study: PrecisionStudy, gaps: list[Gap] = (), recipe: str | None = None) -> list[str]:
    """The section's markdown lines (no figure written); ``gaps``: the model-free paired gaps;
    ``recipe``: the recipe the law is of (None: the whole table)."""
    n = study.data.height
    of = f", {recipe}" if recipe is not None else ""
    md = [f"## Training precision{of}: effective-parameter multipliers ({n} runs)", ""]
    if study.why_not:
        return md + [f"Not fitted: {study.why_not}.", ""] + _gap_lines(list(gaps), study.reference)
    base = _base_unidentified(study)
    fitted = (f"fitted {_fmt_params(study)} (R^2 = {study.fit.r2:.4f})" if not base else
              f"its base is not identified on these runs ({', '.join(sorted(base))}: see the warnings), "
              "so no parameter of it is a result here; the paired gaps below are")
    md += ["Law (Kumar et al. 2024, arXiv 2411.04330, on Muennighoff et al.'s effective data "
           "D'): L = A / N_eff^alpha + B / D'^beta + E, N_eff = N m_f, one free multiplier per "
           f"format, m = 1 for the reference `{study.reference}`; {fitted}. P counts element bits "
           "plus scale bits per element (MXFP4 4.25, NVFP4 4.5, FP8 8, MXFP8 8.25, bf16 16, fp32 32).", "",
           "| format | bits P | multiplier m (95% profile CI) | implied by gamma form |",
           "|---|---|---|---|",
           f"| {study.reference} | {BITS[study.reference]:g} | 1 (reference) | 1 |"]
    for m in study.multipliers:
        if m.why_not:
            cell = f"not identified: {m.why_not}"
        else:
            cell = f"{m.estimate:.3f} [{m.ci[0]:.3f}, {m.ci[1]:.3f}]"
        imp = "" if m.implied is None else f"{m.implied:.3f} [{m.implied_ci[0]:.3f}, {m.implied_ci[1]:.3f}]"
        md.append(f"| {m.fmt} | {m.bits:g} | {cell} | {imp} |")
    md.append("")
    if study.gamma is not None and study.gamma_why_not is None:
        g = study.gamma
        md += [f"Gamma form N_eff = N (1 - exp(-P / gamma)): gamma = {g.estimate:.3g} bits, 95% "
               f"profile CI [{g.ci[0]:.3g}, {g.ci[1]:.3g}] (objective {study.gamma_fit.objective:.4g} "
               f"against the multiplier form's {study.fit.objective:.4g}).", ""]
    elif study.gamma_why_not:
        md += [f"Gamma form: gamma not identified ({study.gamma_why_not}).", ""]
    if study.trends:
        md += ["Does the gap change? Each format's m_f (x / x0)^k, x = N or epochs (x0 their "
               "geometric mean); the gap |log m| grows when k has the sign of log m and its 95% "
               "profile CI excludes 0. Each line is its own 95% test: over 3 formats x 2 axes a "
               "spurious verdict in about 3 of 10 studies is expected (measured on synthetic "
               "twins with no trend, each moving m by <= 4% across the range), so read the "
               "size of the change each verdict gives:", ""]
        for axis in ("N", "epochs"):
            md += [f"- vs {axis}: " + "; ".join(t.describe() for t in study.trends if t.axis == axis)]
        md.append("")
    md += _gap_lines(list(gaps), study.reference)
    md += [f"- warning: {w}" for w in study.warnings] + ([""] if study.warnings else [])
    return md


def precision_section(data: pl.DataFrame, out_dir: str | Path, status: list[str], *,
                      recipes: dict[str, list[str]] | None = None) -> list[str]:
    """The section's lines for report.md (and its figures in ``out_dir``), lines appended to
    ``status``; [] when ``data`` has fewer than 2 precisions. ``recipes``: the ``--recipe``
    filters (module docstring). Bad input (an unknown precision) is a status line and a
    one-line "not fitted" section, as the joint law's."""
    try:
        groups, notes = precision_groups(data, recipes)
    except AnalysisInputError as err:  # a bad filter: the laws in N have said so already
        status.append(f"precision law: not fitted: {err}")
        return []
    if not groups:
        return []
    named = groups[0].recipe is not None
    stems = recipe_stems([g.recipe for g in groups]) if named else [""]
    md: list[str] = []
    studies: dict[str, PrecisionStudy] = {}
    for group, stem in zip(groups, stems):
        lines, study = _one(group, Path(out_dir), stem, status)
        if not md and notes:  # under the first section's heading
            lines = lines[:2] + [f"- {n}" for n in notes] + [""] + lines[2:]
        md += lines
        if study is not None and named:
            studies[group.recipe] = study
    if len(studies) >= 2:
        md += across_recipes(studies)
    return md


def _one(group: PrecisionGroup, out_dir: Path, stem: str, status: list[str]) -> tuple[list[str], PrecisionStudy | None]:
    """One group's lines (and figure), and its study when fitted."""
    of = f", {group.recipe}" if group.recipe is not None else ""
    try:
        study = fit_precision(group.runs)
    except AnalysisInputError as err:
        status.append(f"precision law{of}: not fitted: {err}")
        return [f"## Training precision{of}", "", f"Not fitted: {err}", ""], None
    gaps = paired_gaps(group.runs.rename({COLUMN: "precision"}), study.reference) if study.reference else []
    md = precision_lines(study, gaps, group.recipe)
    if study.why_not:
        status.append(f"precision law{of}: not fitted: {study.why_not}")
        return md, None
    title = f"recipe: {group.recipe}" if group.recipe is not None else None
    fig = (plot_precision(study, title) if not _base_unidentified(study) or not gaps
           else plot_gaps(gaps, study.reference, title))
    save_figure(fig, out_dir / f"{FIGURE}{stem}")
    status.append(f"precision law{of}: fitted on {study.data.height} runs, {len(study.formats)} formats")
    return md + [f"![training precision{of}]({FIGURE}{stem}.png)", ""], study


def _cell(m: Multiplier | None) -> str:
    if m is None:
        return "not run"
    return f"not identified ({m.why_not})" if m.why_not else f"{m.estimate:.3f} [{m.ci[0]:.3f}, {m.ci[1]:.3f}]"


def across_recipes(studies: dict[str, PrecisionStudy]) -> list[str]:
    """Each format's multiplier side by side across the recipes whose laws share its
    reference precision, and whether two recipes' multipliers differ (module docstring)."""
    refs = {s.reference for s in studies.values()}
    if len(refs) != 1:
        return [f"The recipes' laws use different reference precisions ({', '.join(sorted(refs))}): "
                "their multipliers are not compared.", ""]
    names = list(studies)
    by = {n: {m.fmt: m for m in studies[n].multipliers} for n in names}
    heads = [n.replace("|", "\\|") for n in names]  # a recipe column's value may hold a pipe
    formats = sorted({f for n in names for f in by[n]}, key=lambda f: -BITS.get(f, 0.0))
    ref = refs.pop()
    md = [f"### Multipliers across recipes (against `{ref}` in each recipe)", "",
          "| format | " + " | ".join(heads) + " | reading |", "|---|" + "---|" * (len(names) + 1)]
    for f in formats:
        ms = [by[n].get(f) for n in names]
        md.append(f"| {f} | " + " | ".join(_cell(m) for m in ms) + f" | {_reading(heads, ms)} |")
    return md + ["", "Two recipes differ when their 95% profile CIs are disjoint; overlapping CIs are "
                 "not distinguished by these runs (the CIs are each recipe's own, so this reading is "
                 "conservative).", ""]


def _reading(names: list[str], ms: list[Multiplier | None]) -> str:
    shown = [(n, m) for n, m in zip(names, ms) if m is not None and not m.why_not]
    if len(shown) < 2:
        return "fewer than 2 recipes identified"
    pairs = []
    for i, (a, ma) in enumerate(shown):
        for b, mb in shown[i + 1:]:
            if ma.ci[1] < mb.ci[0] or mb.ci[1] < ma.ci[0]:
                hi, lo = (a, b) if ma.estimate > mb.estimate else (b, a)
                pairs.append(f"{lo} loses more than {hi}")
            else:
                pairs.append(f"{a} and {b} not distinguished")
    return "; ".join(pairs)
