"""The runs table every command that analyses a sweep reads (``fit``, ``report``,
``compare``, ``next``): ``<sweep>/runs.parquet``, collected first when it is missing or
stale. Stale is one rule for all of them, ``scalelab.sweep.view.collect.runs_table_stale``
(older than the spec, the plan or any run's status, manifest, config or evals), so a
command run after a run finished sees that run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from scalelab.errors import UserError
from scalelab.store.layout import PLAN_FILE, RUNS_FILE, RUNS_FOLDER

__all__ = ["fresh_runs_table", "read_runs_table"]


def fresh_runs_table(sweep: Path, progress: Callable[[Any], None] | None = None) -> Path:
    """``<sweep>/runs.parquet``, collected first when missing or stale (the collect
    reporting to ``progress``: ``scalelab.sweep.view.collect``)."""
    from scalelab.sweep.view.collect import collect, runs_table_stale

    if not sweep.is_dir():
        raise UserError("no such sweep directory", file=str(sweep))
    if runs_table_stale(sweep):
        if not (sweep / RUNS_FOLDER).is_dir() and not (sweep / PLAN_FILE).is_file():
            raise UserError(f"neither {RUNS_FILE} nor {RUNS_FOLDER}/ here: not a sweep directory",
                            file=str(sweep))
        typer.echo(f"collecting {sweep} ({RUNS_FILE} missing or older than the runs)")
        collect(sweep, progress=progress)
    return sweep / RUNS_FILE


def read_runs_table(sweep: Path, progress: Callable[[Any], None] | None = None):
    """``fresh_runs_table``'s runs.parquet, read (a damaged one: one line, exit 2)."""
    from scalelab.store.sweep_files import read_sweep_file

    return read_sweep_file(fresh_runs_table(sweep, progress))
