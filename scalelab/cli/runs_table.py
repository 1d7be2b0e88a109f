"""The runs table every command that analyses a sweep reads (``fit``, ``report``,
``compare``, ``next``): ``<sweep>/runs.parquet``, collected first when it is missing or
stale. Stale is one rule for all of them, ``scalelab.sweep.view.collect.runs_table_stale``
(older than the spec, the plan or any run's status, manifest, config or evals), so a
command run after a run finished sees that run.

In place of a sweep directory, ``fit``, ``report``, ``compare`` and ``transfer`` take a table
of runs from any trainer (``is_runs_file``: a .csv, .parquet or .pq path; README.md, "Bring
your own runs"): ``read_runs_file`` maps it to the runs-table shape
(``analysis.tables.external``) and ``runs_file_folder`` says where their outputs go, beside
it (``<table stem>_report/``, ``<table stem>_fit/``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from scalelab.errors import UserError
from scalelab.store.layout import PLAN_FILE, RUNS_FILE, RUNS_FOLDER

__all__ = [
    "TABLE_LOSS",
    "fresh_runs_table",
    "is_runs_file",
    "read_runs_file",
    "read_runs_table",
    "runs_file_folder",
]

TABLE_LOSS = "final_loss"
"""The loss column of a table read by ``read_runs_file`` (whatever the table called it)."""


def fresh_runs_table(sweep: Path, progress: Callable[[Any], None] | None = None) -> Path:
    """``<sweep>/runs.parquet``, collected first when missing or stale (the collect
    reporting to ``progress``: ``scalelab.sweep.view.collect``)."""
    from scalelab.sweep.view.collect import collect, stale_reason

    if not sweep.is_dir():
        raise UserError("no such sweep directory", file=str(sweep))
    if why := stale_reason(sweep):
        if not (sweep / RUNS_FOLDER).is_dir() and not (sweep / PLAN_FILE).is_file():
            raise UserError(f"neither {RUNS_FILE} nor {RUNS_FOLDER}/ here: not a sweep directory",
                            file=str(sweep))
        typer.echo(f"collecting {sweep} ({why})")
        collect(sweep, progress=progress)
    return sweep / RUNS_FILE


def read_runs_table(sweep: Path, progress: Callable[[Any], None] | None = None):
    """``fresh_runs_table``'s runs.parquet, read (a damaged one: one line, exit 2)."""
    from scalelab.store.sweep_files import read_sweep_file

    return read_sweep_file(fresh_runs_table(sweep, progress))


def is_runs_file(path: Path) -> bool:
    """Whether ``path`` names a table of runs (.csv, .parquet, .pq), not a sweep."""
    from analysis.tables.external import is_table_path

    return is_table_path(path)


def read_runs_file(path: Path, loss: str = "final_loss"):
    """The table of runs at ``path`` in the runs-table shape, its loss in ``TABLE_LOSS``
    (``loss``: the --loss-column, ``final_loss`` meaning the table's loss, final_loss,
    val_loss or val/loss column). Prints its notes (rows dropped) as ``note:`` lines; bad
    input is one line naming the file and the column (UserError, exit 2)."""
    from analysis.tables.external import ExternalTableError, read_external

    try:
        table = read_external(path, loss_column=None if loss == TABLE_LOSS else loss)
    except ExternalTableError as err:
        raise UserError(f"{err.what} ({err.reason})", file=err.path) from None
    for note in table.notes:
        typer.echo(f"note: {note}")
    return table.runs


def runs_file_folder(path: Path, folder: str) -> Path:
    """Where a command writes, for a table of runs, what goes under ``<sweep>/<folder>``:
    ``<table stem>_<folder>`` beside the table."""
    from analysis.tables.external import output_folder

    return output_folder(path, folder)


def ensemble_evals(sweep_dir: Path):
    """``<sweep>/ensembles/evals.parquet`` (which runs are one ensemble's members), or None."""
    from analysis.tables.layout import ENSEMBLE_EVALS_FILE, ENSEMBLES_FOLDER
    from analysis.tables.safe_parquet import SweepFileError, read_sweep_parquet

    path = Path(sweep_dir) / ENSEMBLES_FOLDER / ENSEMBLE_EVALS_FILE
    if not os.path.lexists(path):
        return None
    try:
        return read_sweep_parquet(path)
    except SweepFileError as err:
        raise UserError(f"{err.what} ({err.reason})", file=err.path) from None
