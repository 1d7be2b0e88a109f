"""``scalelab report SWEEP``: the full report of a sweep.

Collects the runs first when ``runs.parquet`` is missing or stale (``scalelab.cli.runs_table``:
the freshness rule ``fit``, ``compare`` and ``next`` share), then writes ``<sweep>/report/infinite_compute.md`` with
``recipes.png`` (Kim et al. 2025 recipes: asymptotes, ensembles, distillation, data
efficiency) and ``<sweep>/report/report.md`` (power laws in N, the data-constrained law),
and prints one line per section: what was fitted, or exactly what is missing.
Recipes: ``--recipe NAME=COND[,COND...]`` (repeatable; ``analysis.recipes.rows``), else the runs' ``recipe``
column (``extra.recipe``), else the ``tuned`` block.

Progress on stderr (``scalelab.cli.progress``): the collect, each report's sections done
of its total with the section's name, and the fits and bootstraps inside them; ``-q``
silences it, ``--log-format json`` makes it JSON lines.
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.recipes.names import REF_WD
from scalelab.cli.app import app
from scalelab.cli.progress import ProgressOutput, log_format_option, quiet_option
from scalelab.cli.recipe_options import RECIPE_HELP, REF_WD_HELP, check_ref_wd, recipe_filters
from scalelab.cli.resamples import BOOTSTRAP_HELP
from scalelab.cli.runs_table import (
    TABLE_LOSS,
    fresh_runs_table,
    is_runs_file,
    read_runs_file,
    runs_file_folder,
)
from scalelab.errors import UserError
from scalelab.store.layout import RECIPES_FIGURE, REPORT_FOLDER, report_folder


@app.command("report")
def report_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (holding runs.parquet or runs/), or "
                                 "a table of runs (.csv, .parquet; README 'Bring your own runs'): "
                                 "its report goes to <table stem>_report/ beside it."),
    bootstrap: int = typer.Option(200, "--bootstrap", help=BOOTSTRAP_HELP),
    seed: int = typer.Option(0, "--seed", min=0, help="Bootstrap seed (>= 0)."),
    loss: str = typer.Option("final_loss", "--loss-column", help="final_loss or best_loss."),
    recipe: list[str] = typer.Option(
        [], "--recipe", help=RECIPE_HELP
    ),
    reference: str | None = typer.Option(
        None, "--reference", help="Recipe the data multipliers are relative to (default: standard)."
    ),
    ref_wd: float = typer.Option(REF_WD, "--ref-wd", help=REF_WD_HELP),
    quiet: bool = quiet_option(),
    log_format: str | None = log_format_option(),
) -> int:
    """Write <sweep>/report/ (recipes, asymptotes with CIs, laws, figures); print each section."""
    from scalelab.cli.resamples import check_bootstrap

    check_bootstrap(bootstrap)
    check_ref_wd(ref_wd)
    filters = recipe_filters(recipe)
    output = ProgressOutput.from_flags(log_format, quiet)
    with output:
        runs, out = None, None
        if is_runs_file(sweep):  # a table of runs from any trainer, reported beside it
            runs, out, loss = read_runs_file(sweep, loss), runs_file_folder(sweep, REPORT_FOLDER), TABLE_LOSS
        else:
            fresh_runs_table(sweep, output.sink)
        from analysis.errors import AnalysisInputError
        from analysis.report.sweep_report import write_sweep_report
        from analysis.tables.safe_parquet import SweepFileError

        try:
            done = write_sweep_report(sweep, loss=loss, bootstrap=bootstrap, seed=seed,
                                      recipes=filters or None, reference=reference, ref_wd=ref_wd,
                                      progress=output.sink, runs=runs, out_dir=out)
        except SweepFileError as err:
            raise UserError(f"{err.what} ({err.reason})", file=err.path) from None
        except AnalysisInputError as err:
            raise UserError(str(err), file=str(sweep)) from None
    for path, lines in done.sections.items():
        typer.echo(str(path))
        for line in lines:
            typer.echo(f"  {line}")
    figure = (out or report_folder(sweep)) / f"{RECIPES_FIGURE}.png"
    if figure.is_file():
        typer.echo(f"figure: {figure}")
    return 0
