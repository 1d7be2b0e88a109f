"""The full report of one sweep directory: the infinite-compute recipes report
(``infinite_compute.md``, ``recipes.png``) and the data-constrained scaling-law report
(``report.md``), both under ``<sweep>/report``, and one status line per section of each
(what was fitted, or exactly what is missing). Reads ``runs.parquet`` (and
``ensembles/evals.parquet``); collecting them is the caller's job (``scalelab report``).
``progress`` (analysis.progress) hears each report's sections and their fits and bootstraps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.atomic import write_text_atomic
from analysis.errors import AnalysisInputError
from analysis.progress import Reporter, progress_fn
from analysis.recipes.names import REF_WD
from analysis.recipes.rows import find_recipes
from analysis.report.infinite_compute_md import (
    section_status,
    write_infinite_compute_report,
    write_missing_report,
)
from analysis.report.report import write_report_status
from analysis.tables.layout import LAWS_REPORT_FILE, report_folder, runs_file
from analysis.tables.safe_parquet import SweepFileError, read_sweep_parquet

__all__ = ["SweepReport", "write_sweep_report"]


@dataclass(frozen=True)
class SweepReport:
    """The files written and, per file, its section lines."""

    sections: dict[Path, list[str]]


def write_sweep_report(sweep_dir: str | Path, *, loss: str = "final_loss", bootstrap: int = 200,
                       seed: int = 0, recipes: Mapping[str, Sequence[str]] | None = None,
                       reference: str | None = None, ref_wd: float = REF_WD,
                       progress: bool | Reporter | None = None, runs: pl.DataFrame | None = None,
                       out_dir: str | Path | None = None) -> SweepReport:
    """Write both reports of ``sweep_dir`` (or of ``runs``, a table of runs already in the
    runs-table shape, ``analysis.tables.external``, into ``out_dir``). Bad input (a filter on a column the runs do
    not have, an unknown loss column) raises AnalysisInputError; a section the runs cannot
    support is written as what is missing. ``progress``: a callable gets every report's
    progress events (True: stderr; None: the enclosing ``progress.reporting`` block's)."""
    report = progress_fn(progress) or False  # False: both reports stay silent too
    sweep_dir = Path(sweep_dir)
    out = Path(out_dir) if out_dir is not None else report_folder(sweep_dir)
    if runs is None:
        runs = read_sweep_parquet(runs_file(sweep_dir))
    if loss not in runs.columns:
        raise AnalysisInputError(f"runs table has no loss column '{loss}' (use final_loss or best_loss)")
    if recipes:
        find_recipes(runs, recipes)  # a bad filter is bad input, not a missing section
    sections: dict[Path, list[str]] = {}
    title = f"Infinite-compute recipes: {sweep_dir.name}"
    try:
        path, res = write_infinite_compute_report(sweep_dir, out, ref_wd=ref_wd, loss=loss,
                                                  recipes=recipes, reference=reference,
                                                  progress=report, runs=runs)
        sections[path] = section_status(res)
    except SweepFileError:
        raise  # a damaged sweep file is bad input, not a missing section
    except AnalysisInputError as err:
        if reference is not None and "reference recipe" in str(err):
            raise
        sections[write_missing_report(out, title, str(err))] = [f"not written: {err}"]
    try:
        path, status = write_report_status(runs, out, title=f"Scaling-law report: {sweep_dir.name}",
                                           loss=loss, bootstrap=bootstrap, seed=seed,
                                           progress=report, recipes=recipes, ref_wd=ref_wd,
                                           reference=reference)
        sections[path] = status
    except AnalysisInputError as err:
        path = out / LAWS_REPORT_FILE
        write_text_atomic(path, f"# Scaling-law report: {sweep_dir.name}\n\nNot written: {err}\n")
        sections[path] = [f"not written: {err}"]
    return SweepReport(sections)
