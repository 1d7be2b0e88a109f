"""``scalelab compare SWEEP [RECIPE_A RECIPE_B]``: two recipes' asymptotes E, and their
losses at matched compute, with CIs and p-values (``analysis.recipes.compare``, docs/adaptive.md).
Without RECIPE_A and RECIPE_B the runs must hold exactly two recipes (two ``--recipe``
filters, two values of the ``recipe`` column, ...): those, in the order found.

Reads ``<sweep>/runs.parquet`` (collected first when missing or stale, as ``scalelab
report`` does), finds each recipe's runs by the report's rules (``--recipe
NAME=key=value[,key=value]``, else the ``recipe`` column, else the ``tuned`` blocks), takes
per model size the seeds of its best cell, the cell with the lowest mean loss over its
seeds (``scalelab.adaptive.recipe_cells``), and compares: a paired bootstrap over sizes and
seeds (``--resample sizes+seeds``, the default) or seeds only (``--resample seeds``).
Prints the verdict line of ``scalelab report`` and ``scalelab demo``
(``analysis.recipes.verdicts.pair_line``: each recipe's level is its identified asymptote,
or for a recipe whose loss rises with N its best observed loss +- 2 sigma with sigma from
the sweep's replicate seeds, ``analysis.recipes.replicates``, which reads
``<sweep>/ensembles/evals.parquet`` where there is one; two identified asymptotes by the
paired bootstrap's CI of E_A - E_B, printed below the verdict only then), each recipe's E
or why it is not identified, and the table of losses at matched compute (equal N, equal
tokens).
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.recipes.names import REF_WD
from scalelab.cli.app import app
from scalelab.cli.recipe_options import RECIPE_HELP, REF_WD_HELP, check_ref_wd
from scalelab.errors import UserError, did_you_mean

RESAMPLE = ("sizes+seeds", "seeds")


@app.command("compare")
def compare_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it), or a "
                                 "table of runs (.csv, .parquet; README 'Bring your own runs')."),
    recipe_a: str | None = typer.Argument(None, help=(
        "Recipe A (e.g. regularized); default, with RECIPE_B: the first of exactly two recipes.")),
    recipe_b: str | None = typer.Argument(None, help="Recipe B (e.g. standard); default: the second."),
    n_boot: int = typer.Option(1000, "--n-boot", help=(
        "Bootstrap resamples: 2 to 100,000 (drawn up front: memory grows with resamples x runs).")),
    level: float = typer.Option(0.95, "--level", help="Confidence level, in (0, 1)."),
    resample: str = typer.Option(
        "sizes+seeds", "--resample",
        help="sizes+seeds (two-stage: sizes, then seeds) or seeds (sizes fixed)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Bootstrap seed (>= 0)."),
    recipe: list[str] = typer.Option(
        [], "--recipe", help=RECIPE_HELP),
    loss: str = typer.Option("final_loss", "--loss-column", help="final_loss or best_loss."),
    ref_wd: float = typer.Option(REF_WD, "--ref-wd", help=REF_WD_HELP),
    root: Path | None = typer.Option(None, "--root",
                                     help="Sweeps root, when SWEEP is a spec file."),
) -> int:
    """Compare two recipes at infinite compute (E_A - E_B) and at matched compute."""
    if resample not in RESAMPLE:
        raise UserError(f"expected one of {', '.join(RESAMPLE)}{did_you_mean(resample, RESAMPLE)}",
                        key="--resample")
    if not 0 < level < 1:
        raise UserError(f"must be in (0, 1), got {level}", key="--level")
    from analysis.fit.bootstrap import MAX_RESAMPLES

    if not 2 <= n_boot <= MAX_RESAMPLES:
        raise UserError(f"must be >= 2 and at most {MAX_RESAMPLES:,} (resamples are drawn up "
                        f"front), got {n_boot}", key="--n-boot")
    check_ref_wd(ref_wd)
    if recipe_a is not None and recipe_b is None:
        raise UserError(f"name RECIPE_B too (got only '{recipe_a}'), or neither for the runs' two recipes")
    if recipe_a is not None and recipe_a == recipe_b:
        raise UserError(f"compare two different recipes (got '{recipe_a}' twice)")
    from analysis.errors import AnalysisInputError
    from analysis.recipes.cells import size_points
    from analysis.recipes.compare import matched_compute
    from analysis.recipes.recipe_asymptote import recipe_asymptote
    from analysis.recipes.replicates import find_replicates
    from analysis.recipes.verdicts import pair_verdict
    from scalelab.adaptive.recipe_cells import recipe_cells
    from scalelab.cli.recipe_options import recipe_filters
    from scalelab.cli.runs_table import (
        TABLE_LOSS,
        ensemble_evals,
        is_runs_file,
        read_runs_file,
        read_runs_table,
    )
    from scalelab.sweep.run.launch import sweep_dir_of

    filters = recipe_filters(recipe)
    if is_runs_file(sweep):  # a table of runs from any trainer (its loss read as final_loss)
        sweep_dir, runs, loss = sweep, read_runs_file(sweep, loss), TABLE_LOSS
    else:
        sweep_dir = sweep_dir_of(sweep, root)
        runs = read_runs_table(sweep_dir)
    if recipe_a is None:
        recipe_a, recipe_b = _the_two(runs, filters, ref_wd, sweep_dir)
    cells = recipe_cells(runs, (recipe_a, recipe_b), filters=filters or None, loss=loss,
                         ref_wd=ref_wd)
    rows_a, rows_b = cells.rows[recipe_a], cells.rows[recipe_b]
    try:  # the report's rule, in the report's order (analysis.recipes.verdicts)
        replicates = find_replicates(runs, ensemble_evals(sweep_dir), loss=loss)
        asymptotes = tuple(recipe_asymptote(size_points(r), level) for r in (rows_a, rows_b))
        verdict, boot = pair_verdict(rows_a, rows_b, recipe_a, recipe_b, replicates,
                                     level=level, n_boot=n_boot, seed=seed, resample=resample,
                                     asymptotes=asymptotes)
        matched = matched_compute(rows_a, rows_b, names=(recipe_a, recipe_b), level=level)
    except AnalysisInputError as err:
        raise UserError(str(err), file=str(sweep_dir)) from None
    for note in cells.notes:
        typer.echo(f"note: {note}")
    at = f" at U = {cells.U:,.0f} unique tokens" if cells.U is not None else ""
    typer.echo(f"{sweep_dir}: {recipe_a} vs {recipe_b}{at}, each size's best cell by its mean "
               f"loss over seeds (recipes from {cells.source})")
    typer.echo(verdict)
    if boot is not None:
        typer.echo(f"  paired bootstrap: {boot.stats()}; {n_boot} resamples ({resample}), "
                   f"{100 * boot.converged:.0f}% of refits converged")
    shown = ", ".join(_asymptote_text(name, a, level)
                      for name, a in zip((recipe_a, recipe_b), asymptotes))
    typer.echo(f"  {shown}; {matched.height} shared sizes")
    if matched.height:
        _matched_table(matched, level, recipe_a, recipe_b)
    return 0


def _the_two(runs, filters, ref_wd: float, sweep_dir: Path) -> tuple[str, str]:
    """The runs' recipes when there are exactly two (the report's rule); else one line
    naming what was found."""
    from analysis.errors import AnalysisInputError
    from analysis.recipes.rows import recipes_or_none

    try:
        found = recipes_or_none(runs, filters or None, ref_wd=ref_wd)
    except AnalysisInputError as err:
        raise UserError(str(err), file=str(sweep_dir)) from None
    names = list(found.predicates) if found is not None else []
    if len(names) != 2:
        what = f"found {len(names)} ({', '.join(names)}; {found.source})" if names else "found none"
        raise UserError(f"name the two recipes to compare (RECIPE_A RECIPE_B): {what}", file=str(sweep_dir))
    return names[0], names[1]


def _asymptote_text(name: str, asymptote, level: float) -> str:
    """``E(name) = 1.9860, 95% CI (...)``, or ``E(name) not identified: why`` where the
    report would not write it either (``analysis.recipes.recipe_asymptote``)."""
    if asymptote.why_not:
        why = asymptote.why_not
        return f"E({name}) {why}" if why.startswith("not identified") else f"E({name}) not written: {why}"
    flag = f" [{asymptote.flag}]" if asymptote.flag else ""
    return (f"E({name}) = {asymptote.E:.4f}, {100 * level:g}% CI ({asymptote.lo:.4f}, "
            f"{asymptote.hi:.4f}){flag}")


def _matched_table(matched, level: float, a: str, b: str) -> None:
    """The losses at matched compute (``analysis.recipes.compare.matched_compute``), one row
    per shared size."""
    from rich.table import Table
    from rich.text import Text  # plain text: recipe names are the user's, never markup

    from scalelab.cli.wide import print_wide

    pct = f"{100 * level:g}% CI"
    table = Table(title=Text(f"matched compute: mean loss over seeds at equal N ({a} - {b})"),
                  title_justify="left")
    heads = ("N", f"seeds {a}", f"seeds {b}", f"loss {a}", f"loss {b}", "diff", pct, "p", "test")
    for head in heads:
        table.add_column(Text(head), justify="left" if head == "test" else "right")
    for r in matched.iter_rows(named=True):
        ci = "n/a" if r["lo"] != r["lo"] else f"({r['lo']:+.4f}, {r['hi']:+.4f})"
        p = "n/a" if r["p_value"] != r["p_value"] else f"{r['p_value']:.3g}"
        table.add_row(f"{r['N']:,.0f}", str(r["seeds_a"]), str(r["seeds_b"]), f"{r['loss_a']:.4f}",
                      f"{r['loss_b']:.4f}", f"{r['diff']:+.4f}", ci, p, r["test"])
    print_wide(table)
