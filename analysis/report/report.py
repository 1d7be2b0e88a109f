"""A markdown report of a sweep's fits, with its figures, from a runs table.

What it fits (each only when the data can support it; a power law whose asymptote is not
identified, ``analysis.fit.identified``, is named with the reason and no numbers):
- per recipe (``analysis.recipes.rows``, the one owner; a table without recipes is one
  group) and unique-token budget U: Kim et al.'s law in N, A/x^B + E, on each size's best
  cell (``cells.best_cells``), fitted by ``recipe_asymptote``: the same E, interval and
  reason as infinite_compute.md, ``scalelab compare`` and ``next``, and compared across groups;
- per recipe again, when its D varies: a joint law over (N, D[, U]) on each point's best
  cell (``joint_md``): Chinchilla, or the two-stage DataConstrained law when some runs
  repeat data (D > U) and enough single-epoch runs exist.

``progress`` (progress.py): a ``SectionProgress`` as each section starts (one per group,
the figures, one per joint law) and once all are written; the fits and bootstraps report
to it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from analysis.atomic import write_text_atomic
from analysis.errors import AnalysisInputError
from analysis.progress import Reporter, Sections, progress_fn
from analysis.recipes.infinite_compute import compare_asymptotes
from analysis.recipes.law_groups import joint_groups
from analysis.recipes.names import REF_WD
from analysis.recipes.recipe_asymptote import NO_RECIPES, RecipeE, best_over_note, recipe_laws
from analysis.report.epochs_md import epochs_section
from analysis.report.joint_md import joint_sections, params_table
from analysis.report.precision_md import precision_section
from analysis.tables.layout import LAWS_REPORT_FILE
from analysis.tables.runs import prepare_runs

__all__ = ["params_table", "write_report", "write_report_status"]


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
    recipes: Mapping[str, Sequence[str]] | None = None,
    ref_wd: float = REF_WD,
    reference: str | None = None,
) -> tuple[Path, list[str]]:
    """``write_report``, also returning one line per section: what was fitted, or what is
    missing (the same lines open the report under "Sections"). ``progress``: see the
    module docstring (None: the enclosing ``progress.reporting`` block's). ``recipes``
    (``--recipe`` NAME=COND filters) and ``ref_wd``: how the recipes are found, as in
    ``analysis.recipes.rows.find_recipes`` (and infinite_compute.md); ``reference``: the
    recipe whose data budgets an untagged ``data`` block holds (``--reference``)."""
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
    laws, source = recipe_laws(data, filters=recipes, ref_wd=ref_wd)
    over = best_over_note(data) if source == NO_RECIPES else None
    if over:
        status.append(f"no recipes: {over}")
    if outside := data.height - sum(law.runs.height for law in laws):
        status.append(f"power law in N: {outside} run(s) belong to no recipe ({source}); "
                      "not in any law in N")
    asym: dict[str, object] = {}
    fitted: list[tuple[str, RecipeE, pl.DataFrame]] = []
    unidentified: list[tuple[str, str, pl.DataFrame]] = []
    groups, group_source = joint_groups(data, recipes, ref_wd=ref_wd, reference=reference)
    section = Sections(LAWS_REPORT_FILE, len(laws) + 1 + len(groups), report)  # + figures, joint laws
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
        md += [f"Note (every law of this report): {over}.", ""] if over else []
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

    # Joint laws over (N, D[, U]): one per recipe, each point its best cell (joint_md.py).
    joint_md, joint_status = joint_sections(groups, group_source, out_dir, section, bootstrap=bootstrap,
                                            seed=seed, workers=workers, report=report)
    md, status = md + joint_md, status + joint_status
    epochs_md, epochs_status = epochs_section(data, out_dir, seed=seed, recipes=recipes)  # recipes across epochs
    md, status = md + epochs_md, status + epochs_status
    md += precision_section(data, out_dir, status, recipes=recipes)  # >= 2 values of train.precision
    sections = "## Sections\n\n" + "\n".join(f"- {line}" for line in status)
    md[md.index("{SECTIONS}")] = sections
    path = write_text_atomic(out_dir / LAWS_REPORT_FILE, "\n".join(md) + "\n")
    section.end()
    return path, status


def _frame_md(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.rows():
        cells = [f"{v:.5g}" if isinstance(v, float) else ("" if v is None else str(v)) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
