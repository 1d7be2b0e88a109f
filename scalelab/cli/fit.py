"""``scalelab fit SWEEP --law ...``; ``--isoflop``: ``scalelab.cli.fit_isoflop``;
``scalelab report``: ``scalelab.cli.report``.

Reads ``<sweep>/runs.parquet`` (``scalelab collect`` writes it; when it is missing or stale
it is collected first: ``scalelab.cli.runs_table``, the freshness rule ``report``,
``compare`` and ``next`` share), or for ``--x K`` ``<sweep>/ensembles/evals.parquet``, and hands it to
``analysis.fit.grouped.fit_selection`` (--where, --group-by, one fit per group); prints one
table (``scalelab.cli.fit_table``) with bootstrap SEs and CIs and saves a plot per group.

Progress on stderr (``scalelab.cli.progress``): the collect when there is one, each fit's
multistart stages (iterations of each) and each bootstrap (resamples refitted), heard
through ``analysis.progress.reporting``; ``-q`` silences it, ``--log-format json`` makes
it JSON lines. The table and plots print on stdout either way.

``--holdout-largest K``: each group's extrapolation check, one line per group
(``scalelab.cli.fit_holdout``; docs/extrapolation.md).

SWEEP may be a table of runs from any trainer instead (a .csv, .parquet or .pq file:
``scalelab.cli.runs_table.read_runs_file``); its plots go beside it, under
``<table stem>_fit/``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from scalelab.cli.app import app
from scalelab.cli.progress import ProgressOutput, log_format_option, quiet_option
from scalelab.cli.resamples import BOOTSTRAP_HELP
from scalelab.errors import UserError, did_you_mean
from scalelab.store.layout import FIT_FOLDER, ensemble_evals_file

LAWS = ("powerlaw", "chinchilla", "data_constrained")


def _runs_table(sweep_dir: Path, progress: Callable[[Any], None] | None = None,
                loss: str = "final_loss"):
    """``<sweep>/runs.parquet``, collected first when missing or stale (reported to
    ``progress``): ``scalelab.cli.runs_table``; or a table of runs (.csv, .parquet), its
    ``loss`` column read as final_loss."""
    from scalelab.cli.runs_table import is_runs_file, read_runs_file, read_runs_table

    if is_runs_file(sweep_dir):
        return read_runs_file(sweep_dir, loss)
    return read_runs_table(sweep_dir, progress)


def _fit_folder(sweep: Path) -> Path:
    """``<sweep>/fit``, or ``<table stem>_fit`` beside a table of runs."""
    from scalelab.cli.runs_table import is_runs_file, runs_file_folder

    return runs_file_folder(sweep, FIT_FOLDER) if is_runs_file(sweep) else sweep / FIT_FOLDER


def _table_loss(sweep: Path, loss: str) -> str:
    """The loss column downstream: final_loss for a table of runs (``read_runs_file`` put
    the table's loss there), else ``loss``."""
    from scalelab.cli.runs_table import TABLE_LOSS, is_runs_file

    return TABLE_LOSS if is_runs_file(sweep) else loss


def _analysis_errors():
    from analysis.errors import AnalysisInputError

    return AnalysisInputError


ISOFLOP_METHODS = ("parabola", "interp")
"""analysis.isoflop.estimate.METHODS (tests/scalelab/test_cli_fit_isoflop_groups.py keeps
them equal: this module does not import analysis at start-up)."""
ISOFLOP_LINES = ("two-stage", "joint")
"""--isoflop-line's values: fit_isoflops(joint=False / True)."""
ISOFLOP_WINDOW = 8.0
"""analysis.isoflop.window.DEFAULT_WINDOW (the same test keeps them equal)."""


@app.command("fit")
def fit_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (holding runs.parquet or runs/), or "
                                 "a table of runs from any trainer (.csv, .parquet: columns N, D, "
                                 "loss[, U, recipe, seed, hp...]; README 'Bring your own runs'); "
                                 "plots then go to <table stem>_fit/."),
    law: str | None = typer.Option(
        None, "--law", help=f"One of {', '.join(LAWS)} (default powerlaw)."
    ),
    x: str | None = typer.Option(
        None,
        "--x",
        help="PowerLaw variable: N params, D total tokens, U unique tokens, C FLOPs, or K "
        "ensemble members (from <sweep>/ensembles/evals.parquet; run `scalelab ensemble` "
        "first). Default N. chinchilla and data_constrained read N, D[, U] and take no --x.",
    ),
    where: list[str] = typer.Option(
        [],
        "--where",
        help="Keep the runs meeting a condition on the runs table's columns (repeatable, "
        "ANDed): KEY=VALUE, KEY!=VALUE, KEY<VALUE, ... (e.g. recipe=standard, "
        "optim.weight_decay!=0.1, epochs<=1, member=null), or a polars expression "
        "(e.g. pl.col('model.preset').is_in(['cpu-50k', 'cpu-1m'])) parsed against a "
        "whitelist, never evaluated. Columns D, U, C and (with --x K) K can be named too.",
    ),
    group_by: list[str] = typer.Option(
        [], "--group-by", help="Fit once per distinct value of this column (repeatable)."
    ),
    bootstrap: int = typer.Option(200, "--bootstrap", help=BOOTSTRAP_HELP),
    seed: int = typer.Option(0, "--seed", min=0, help="Bootstrap seed (>= 0)."),
    loss: str = typer.Option("final_loss", "--loss-column", help="final_loss or best_loss (a "
                             "table's loss column: default its loss, final_loss, val_loss or "
                             "val/loss)."),
    out: Path | None = typer.Option(
        None, "--out", help="Plot path stem (default <sweep>/fit/<law>[_<x>], or "
        "<table stem>_fit/<law>[_<x>] beside a table; -<group> added)."
    ),
    isoflop: bool = typer.Option(
        False,
        "--isoflop",
        help="Fit isoFLOP profiles (Hoffmann et al.'s approach 2) instead of a law: a "
        "parabola in log N per compute budget, then N_opt ~ C^a and D_opt ~ C^b with "
        "bootstrap CIs; plot at <sweep>/fit/isoflop. Takes no --law or --x; --group-by "
        "gives one fit per group in one table (docs/isoflop.md).",
    ),
    window: float = typer.Option(
        ISOFLOP_WINDOW,
        "--window",
        metavar="FACTOR",
        help="--isoflop only: each budget keeps its runs with N within FACTOR of its "
        "lowest-loss N (> 1; default 8, from the realistic synthetic study in docs/isoflop.md); 0 "
        "keeps every run.",
    ),
    isoflop_method: str = typer.Option(
        "parabola",
        "--isoflop-method",
        help="--isoflop only: each budget's optimum from a parabola in log N (default) or "
        "'interp' (a smoothing spline's argmin, Porian et al. 2024).",
    ),
    isoflop_line: str = typer.Option(
        "two-stage",
        "--isoflop-line",
        help="--isoflop only: the power law through each budget's vertex (two-stage, "
        "Hoffmann et al.; default) or 'joint': one least-squares fit of every budget's "
        "parabola with its vertex on the line (parabola only; docs/isoflop.md: on 1,200 "
        "realistic synthetic sweeps a median error of 0.93% against 1.10%).",
    ),
    profile: bool = typer.Option(
        False,
        "--profile",
        help="Also each free parameter's 95% profile-likelihood interval, one line per "
        "parameter and group, each end marked [profile] (the refitted rise crosses the "
        "threshold there, verified 0.5-2x), [box] (it stays below up to the bound) or 'not "
        "found' (docs/fit_diagnostics.md). Slower: one walk of refits per end.",
    ),
    holdout_largest: int = typer.Option(
        0,
        "--holdout-largest",
        metavar="K",
        help="Extrapolation check (0: off): per group, refit the law by least squares "
        "without the K largest distinct x values (N for chinchilla and data_constrained) and "
        "predict each held-out loss with a 95% prediction interval, one line per group (the "
        "report's holdout lines; docs/extrapolation.md); drawn on the plot and written to "
        "<stem>-holdout.json. powerlaw (any --x), chinchilla, data_constrained; --isoflop "
        "is refused.",
    ),
    quiet: bool = quiet_option(),
    log_format: str | None = log_format_option(),
) -> int:
    """Fit a scaling law to a sweep's completed runs, optionally selected (--where) and
    split (--group-by): one table of parameters with bootstrap SEs and CIs, R^2 and
    identifiability per group; a plot per group. A group with fewer runs than free
    parameters + 1 is refused (exit 2); a parameter at its bound reads 'not identified'."""
    from rich.console import Console

    from scalelab.cli.wide import print_wide

    output = ProgressOutput.from_flags(log_format, quiet)
    from scalelab.cli.fit_holdout import check_holdout_option
    from scalelab.cli.resamples import check_bootstrap

    check_bootstrap(bootstrap)
    _check_out(out)
    check_holdout_option(holdout_largest, (law or "powerlaw").strip().lower().replace("-", "_"),
                         isoflop=isoflop)
    _check_isoflop_options(isoflop, window, isoflop_method, isoflop_line)
    if profile and isoflop:
        raise UserError("--isoflop fits no law: no parameters to profile", key="--profile")
    if isoflop:
        return _isoflop(sweep, law, x, group_by, where, bootstrap, seed, loss, out, output,
                        window=window or None, method=isoflop_method, joint=isoflop_line == "joint")
    key = (law or "powerlaw").strip().lower().replace("-", "_")
    if key not in LAWS:
        raise UserError(
            f"unknown law '{law}'{did_you_mean(key, LAWS)}; choose from {list(LAWS)}", key="--law"
        )
    import warnings

    from analysis.errors import IdentifiabilityWarning
    from analysis.fit.grouped import fit_selection
    from analysis.plots.plots import plot_loss_vs_x, save_figure
    from analysis.progress import reporting
    from scalelab.cli.fit_table import fit_table, warning_lines

    warnings.simplefilter("ignore", IdentifiabilityWarning)  # printed from result.warnings below
    with output, reporting(output.sink):  # fit_selection's fits and bootstraps report there
        table = _ensembles_table(sweep) if x == "K" else _runs_table(sweep, output.sink, loss)
        try:
            sel = fit_selection(
                table, law=key, x=x, where=where, by=group_by, loss=_table_loss(sweep, loss),
                bootstrap=bootstrap, seed=seed,
            )  # fmt: skip
        except _analysis_errors() as err:
            raise UserError(str(err), file=str(sweep)) from None
    holdouts = _holdouts(sel, holdout_largest)
    console = Console()
    for note in sel.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    print_wide(fit_table(sel, where, group_by), console)
    for line in warning_lines(sel, grouped=bool(group_by)):
        console.print(line, markup=False, highlight=False)
    for h in holdouts:
        console.print(h.line(), markup=False, highlight=False, soft_wrap=True)
    if profile:
        for line in _profile_lines(sel, grouped=bool(group_by)):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    base = out if out is not None else _fit_folder(sweep) / (key if x in (None, "N") else f"{key}_{x}")
    for i, g in enumerate(sel.groups):
        stem = base.with_name(f"{base.name}-{_slug(g.label)}") if group_by else base
        fig = plot_loss_vs_x(g.data, g.result, g.boot, x=sel.x, title=f"{key} fit: {g.label}")
        if holdouts:
            from scalelab.cli.fit_holdout import draw_holdout

            draw_holdout(fig, holdouts[i])
        console.print(f"plot: {save_figure(fig, stem)[0]}", markup=False, highlight=False)
    if holdouts:
        from scalelab.cli.fit_holdout import write_holdout_json

        path = write_holdout_json(base.with_name(f"{base.name}-holdout.json"), key, sel.x,
                                  holdout_largest, holdouts)
        console.print(f"holdout: {path}", markup=False, highlight=False)
    return 0


def _holdouts(sel, k: int) -> list:
    """``--holdout-largest K``: each group's extrapolation check (``scalelab.cli.fit_holdout``;
    [] when K = 0). A K that leaves a group too few x values is refused (UserError)."""
    if k == 0:
        return []
    from scalelab.cli.fit_holdout import group_holdouts

    try:
        return group_holdouts(sel, k)
    except _analysis_errors() as err:
        raise UserError(str(err), key="--holdout-largest") from None




def _profile_lines(sel, *, grouped: bool) -> list[str]:
    """``--profile``: ``Profile.describe()`` of every free parameter of every group, or why a
    parameter has none."""
    out = []
    for g in sel.groups:
        head = f"profile [{g.label}]" if grouped else "profile"
        for name in g.result.free:
            try:
                line = g.result.profile(name).describe()
            except _analysis_errors() as err:
                line = f"{name}: no profile ({err})"
            out.append(f"{head}: {line}")
    return out


def _check_isoflop_options(isoflop: bool, window: float, method: str, line: str = "two-stage") -> None:
    """--window, --isoflop-method and --isoflop-line: --isoflop's, each checked in one line."""
    if not isoflop:
        for flag, given in (("--window", window != ISOFLOP_WINDOW),
                            ("--isoflop-method", method != "parabola"),
                            ("--isoflop-line", line != "two-stage")):
            if given:
                raise UserError("applies to --isoflop fits only", key=flag)
        return
    if not (window == 0 or (math.isfinite(window) and window > 1)):
        raise UserError(f"expected a factor > 1 in N, or 0 for every run, got {window:g}",
                        key="--window")
    if method not in ISOFLOP_METHODS:
        raise UserError(f"expected one of {', '.join(ISOFLOP_METHODS)}, got '{method}'"
                        f"{did_you_mean(method, ISOFLOP_METHODS)}", key="--isoflop-method")
    if line not in ISOFLOP_LINES:
        raise UserError(f"expected one of {', '.join(ISOFLOP_LINES)}, got '{line}'"
                        f"{did_you_mean(line, ISOFLOP_LINES)}", key="--isoflop-line")
    if line == "joint" and method != "parabola":
        raise UserError("the joint line ties each budget's parabola to the line: it takes "
                        "--isoflop-method parabola, not interp", key="--isoflop-line")


def _isoflop(sweep, law, x, group_by, where, bootstrap, seed, loss, out,
             output: ProgressOutput, *, window: float | None = ISOFLOP_WINDOW,
             method: str = "parabola", joint: bool = False) -> int:
    """``--isoflop``: refuse the law options, then ``scalelab.cli.fit_isoflop`` (the
    collect, when there is one, reports to ``output``)."""
    from scalelab.cli.fit_isoflop import run_isoflop

    for flag, given in (("--law", law), ("--x", x)):
        if given:
            raise UserError(f"--isoflop fits no law and takes no {flag}", key=flag)
    with output:
        table = _runs_table(sweep, output.sink, loss)
    try:
        run_isoflop(table, where=where, loss=_table_loss(sweep, loss), bootstrap=bootstrap,
                    seed=seed, out=out if out is not None else _fit_folder(sweep) / "isoflop",
                    group_by=group_by, window=window, method=method, joint=joint)  # fmt: skip
    except _analysis_errors() as err:
        raise UserError(str(err), file=str(sweep)) from None
    return 0


def _check_out(out: Path | None) -> None:
    """--out: a path stem with a file name (``''`` and ``.`` name no file)."""
    if out is not None and out.name in ("", ".", ".."):
        raise UserError(f"expected a path stem with a file name (e.g. fits/powerlaw), got '{out}'",
                        key="--out")


def _ensembles_table(sweep_dir: Path):
    """``<sweep>/ensembles/evals.parquet`` (``scalelab ensemble`` writes it): --x K's table."""
    from scalelab.cli.runs_table import is_runs_file
    from scalelab.store.sweep_files import read_sweep_file

    if is_runs_file(sweep_dir):
        raise UserError("--x K fits a sweep's ensembles/evals.parquet; a table of runs has none",
                        file=str(sweep_dir), key="--x")
    if not sweep_dir.is_dir():
        raise UserError("no such sweep directory", file=str(sweep_dir))
    path = ensemble_evals_file(sweep_dir)
    if not os.path.lexists(path):
        raise UserError(
            f"--x K fits ensembles/evals.parquet, which is missing: run `scalelab ensemble "
            f"{sweep_dir}` first",
            file=str(sweep_dir),
        )
    return read_sweep_file(path)


def _slug(label: str) -> str:
    """A group label as a file-name part: 'recipe=standard, D=2048' -> 'recipe=standard_D=2048'."""
    return re.sub(r"[^\w.=+-]+", "_", label).strip("_") or "group"
