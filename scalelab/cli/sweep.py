"""``scalelab sweep | status | retry | collect``.

- ``sweep SPEC [--dry-run] [--executor E] [--root DIR]``: plan, then launch what needs
  launching (idempotent). On Slurm it returns once the arrays are queued; locally it
  runs the sweep with a progress bar. Exit 1 when a run it waited on FAILED.
  ``--dry-run`` prints the plan and launches nothing: one row per (block, model size)
  (``scalelab.sweep.view.render.render_overview``); ``--runs`` one row per run, paged on a
  terminal; ``--format csv|json|parquet`` the per-run plan table (scalar columns) on
  stdout or, with ``-o FILE``, in FILE (parquet needs ``-o``; the format defaults to
  FILE's suffix). json is one object per run: ``pl.read_json(f, infer_schema_length=None)``
  reads it back. The table views end with the design check
  (``scalelab.sweep.view.design_check``: each recipe or block whose law the planned runs
  cannot identify, what to add and its cost); a launch prints its problems first (advisory).
- ``status SWEEP``: the grid of run states (SWEEP: a sweep directory or its spec file).
- ``retry SWEEP [--failed] [--preempted]``: relaunch only failed/cancelled and/or
  preempted/timed-out runs (neither flag: both), each with the config and launcher the
  spec gives it (SWEEP's spec file, else the sweep's spec.yaml): a run directory's files
  are never read back as launch instructions (``launch.plan_from_disk``).
- ``collect SWEEP``: write ``<sweep>/runs.parquet`` and print its size.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from scalelab.cli.app import app
from scalelab.cli.progress import ProgressOutput, log_format_option, quiet_option
from scalelab.cli.recipe_options import RECIPE_HELP, TARGET_CHOICES, recipe_filters
from scalelab.cli.wide import natural_width
from scalelab.errors import EXIT_FAILURE, EXIT_OK, UserError, did_you_mean

_EXECUTOR_HELP = "auto | slurm | local | debug (default: the spec's launcher.executor)."
_TARGET_HELP = "module:function trained instead of scalelab.train:train (tests)."
_FORMATS = ("table", "csv", "json", "parquet")
_FORMAT_HELP = ("With --dry-run: table (default) | csv | json | parquet: the per-run plan "
                "table; parquet needs -o.")
_OUTPUT_HELP = "With --dry-run: write the plan to FILE (format: --format, else FILE's suffix)."
_ADAPTIVE_HELP = ("Run SPEC's grid as an adaptive study (docs/adaptive.md): a seed design, then "
                  "the runs `scalelab next` proposes, round after round, until --budget is spent "
                  "or the CI of E is --target-width wide; rounds recorded in <sweep>/adaptive/.")
_RUNS_HELP = "With --dry-run: one row per run instead of per block and size (paged on a terminal)."


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _report(console: Console, report, waited: bool) -> int:
    from collections import Counter

    skipped = Counter(r for a, r in zip(report.decisions["action"], report.decisions["reason"]) if a == "skip")
    console.print(f"[bold]{report.sweep_dir}[/]: {len(report.handles)} launched on {report.backend}, "
                  f"{report.skipped} skipped" + "".join(f"\n  skip {n} x {r}" for r, n in skipped.most_common()))
    if report.handles and not waited:
        jobs = sorted({h.job_id.split("_")[0] for h in report.handles})
        console.print(f"  queued as job(s) {', '.join(jobs)}; follow with: scalelab status {report.sweep_dir}")
    if report.results:
        done = Counter(report.results.values())
        console.print("  finished: " + ", ".join(f"{n} {s.lower()}" for s, n in sorted(done.items())))
    return EXIT_FAILURE if "FAILED" in report.results.values() else EXIT_OK


@app.command("sweep")
def sweep_cmd(
    spec: Path = typer.Argument(..., help="Sweep spec YAML."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and what would launch; change nothing."),
    runs: bool = typer.Option(False, "--runs", help=_RUNS_HELP),
    fmt: str | None = typer.Option(None, "--format", help=_FORMAT_HELP),
    output: Path | None = typer.Option(None, "-o", "--output", help=_OUTPUT_HELP),
    executor: str | None = typer.Option(None, "--executor", help=_EXECUTOR_HELP),
    root: Path | None = typer.Option(
        None, "--root", help="Sweeps root (default $SCALELAB_ROOT, launcher.root, ./runs)."),
    wait: bool = typer.Option(False, "--wait", help="On Slurm, block until the jobs end."),
    target: str | None = typer.Option(None, "--train-target", hidden=True, help=_TARGET_HELP),
    adaptive: bool = typer.Option(False, "--adaptive", help=_ADAPTIVE_HELP),
    budget: float | None = typer.Option(
        None, "--budget", help="With --adaptive: GPU-hours for the whole study (needs launcher.flops_per_gpu_s)."),
    target_width: float = typer.Option(
        0.0, "--target-width", help=(
            "With --adaptive: stop once the target's CI is at most this wide (default 0: until the budget; "
            "a ranking also stops once decided).")),
    goal: str = typer.Option("regularized.E", "--target", help="With --adaptive, what to pin down: " + TARGET_CHOICES),
    recipe: list[str] = typer.Option([], "--recipe", help="With --adaptive: " + RECIPE_HELP),
    quiet: bool = quiet_option(),
    log_format: str | None = log_format_option(),
) -> int:
    """Plan SPEC and launch the runs that are new, preempted or timed out. -q and
    --log-format also reach the runs it launches (SCALELAB_QUIET, SCALELAB_LOG_FORMAT)."""
    from scalelab.sweep.run.backends import check_executor
    from scalelab.sweep.run.launch import decide, sweep_dir_for
    from scalelab.sweep.run.start import plan_sweep, start_sweep
    from scalelab.sweep.spec.load import load_spec

    check_executor(executor)
    shown = ProgressOutput.from_flags(log_format, quiet)
    _pass_log_settings(shown)
    if adaptive or budget is not None:
        return _adaptive(spec, budget, target_width, goal, recipe, adaptive=adaptive, dry_run=dry_run, root=root,
                         executor=executor, target=target)
    fmt = _plan_format(fmt, output, dry_run=dry_run, runs=runs)
    loaded = load_spec(spec)
    plan = plan_sweep(loaded)
    sweep_dir = sweep_dir_for(loaded.name, root=root, launcher_root=loaded.launcher.root)
    console = _console()
    if dry_run:
        if fmt != "table":
            return _export_plan(console, plan.table, fmt, output)
        from scalelab.sweep.view.render import render_overview, render_plan

        decisions = decide(plan, sweep_dir)
        view = (render_plan(plan, decisions, max_rows=None) if runs
                else render_overview(plan, decisions))
        from rich.console import Group
        from rich.text import Text

        checked = _design_lines(plan)
        if checked:
            view = Group(view, Text(""), Text("\n".join(checked)))
        if output is not None:
            _write(output, _plain_text(view, natural_width(view)))
            console.print(f"wrote {output}: the plan of {len(plan)} runs")
        elif runs:
            _page(console, view)
        else:
            console.print(view)
        return EXIT_OK
    for line in _design_lines(plan, launch=True):
        console.print(line, markup=False)
    started = start_sweep(loaded, sweep_dir, text=_spec_copy(console, spec, loaded, plan, sweep_dir))
    report = started.launch(plan, wait=wait, executor=executor, progress=shown.run_bars,
                            target=target)  # staged when it has students: teachers -> text -> students
    return _report(console, report, waited=wait or not report.handles or bool(report.results))


def _design_lines(plan, *, launch: bool = False) -> list[str]:
    """The design check (``scalelab.sweep.view.design_check``): the whole check on a dry run,
    its problems only before a launch. Advisory: a check that fails says so in one line."""
    from scalelab.sweep.view import design_check

    try:
        findings = design_check.check_plan(plan)
    except Exception as err:  # advisory: never stops a plan or a launch
        return [f"design check: skipped ({type(err).__name__}: {err})"]
    return design_check.launch_lines(findings) if launch else design_check.lines(findings)


def _spec_copy(console: Console, spec: Path, loaded, plan, sweep_dir: Path) -> str:
    """The text ``<sweep>/spec.yaml`` gets: the launched spec's, except when it is
    ``scalelab next``'s block (one block, ``adaptive``) and its every run is a run of the
    sweep's recorded adaptive study: then the study's, so that ``collect`` keeps every run
    of the study in spec (``scalelab.adaptive.membership``). A spec of the user's own, even
    a subset of the study, replaces it as any new spec does."""
    text = loaded.text or Path(spec).read_text()
    if [name for name, _ in loaded.blocks] != ["adaptive"]:  # block.BLOCK_NAME: only next's
        return text  # blocks; a user's own spec, even a subset of the study, is copied
    if not (sweep_dir / "adaptive" / "study.yaml").is_file():  # record.ADAPTIVE_DIR, STUDY_FILE:
        return text  # no study recorded (checked first: analysis.adaptive is slow to import)
    from scalelab.adaptive.membership import kept_study

    kept = kept_study(sweep_dir, plan.table["run_id"].to_list())
    if kept is None or kept.text == text:
        return text
    console.print(f"{spec}: runs of the adaptive study {kept.path}; the sweep's spec.yaml "
                  "stays the study's", markup=False)
    return kept.text


def _pass_log_settings(output: ProgressOutput) -> None:
    """Hand ``-q`` / ``--log-format`` to the jobs through their environment (local jobs and
    Slurm jobs inherit it; ``scalelab.train.console.progress_log.LogSettings.from_env``)."""
    from scalelab.train.console.progress_log import LOG_FORMAT_ENV, QUIET_ENV

    os.environ[LOG_FORMAT_ENV] = output.settings.format
    if output.settings.quiet:
        os.environ[QUIET_ENV] = "1"


def _adaptive(spec: Path, budget: float | None, target_width: float, goal: str, recipe: list[str],
              *, adaptive: bool, dry_run: bool, root: Path | None, executor: str | None,
              target: str | None) -> int:
    """``--adaptive --budget H``: ``scalelab.adaptive.loop.run_adaptive_sweep`` (waits for
    every round; a rerun continues the study and launches nothing once it has ended)."""
    if not adaptive or budget is None or dry_run:
        raise UserError("--adaptive needs --budget GPU_HOURS (and no --dry-run); --budget needs --adaptive")
    from scalelab.adaptive.loop import run_adaptive_sweep

    result = run_adaptive_sweep(spec, budget, target_width=target_width, root=root,
                                executor=executor, target=target, goal=goal,
                                recipes=recipe_filters(recipe), say=typer.echo)
    for line in result.lines():
        typer.echo(line)
    return EXIT_OK


def _plan_format(fmt: str | None, output: Path | None, *, dry_run: bool, runs: bool) -> str:
    """The plan's output format: ``fmt``, else ``output``'s suffix, else 'table'. Bad
    combinations are a UserError (exit 2) before any planning."""
    if not dry_run and (runs or fmt is not None or output is not None):
        raise UserError("--runs, --format and --output show the plan: add --dry-run")
    if fmt is None:
        suffix = output.suffix.lower().lstrip(".") if output is not None else ""
        fmt = suffix if suffix in _FORMATS else "table"
    fmt = fmt.lower()
    if fmt not in _FORMATS:
        raise UserError(f"--format {fmt}: expected one of {', '.join(_FORMATS)}"
                        f"{did_you_mean(fmt, _FORMATS)}")
    if fmt == "parquet" and output is None:
        raise UserError("--format parquet is binary: write it to a file with -o FILE")
    return fmt


def _export_plan(console: Console, table: Any, fmt: str, output: Path | None) -> int:
    """The per-run plan table (its scalar columns) as csv, json or parquet, to ``output``
    or stdout."""
    from scalelab.sweep.view.plan_view import scalar_table

    frame = scalar_table(table)
    if fmt == "parquet":
        _write(output, frame)
    else:
        text = frame.write_csv() if fmt == "csv" else frame.write_json() + "\n"
        if output is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return EXIT_OK
        _write(output, text)
    console.print(f"wrote {output}: {frame.height} runs x {frame.width} columns ({fmt})")
    return EXIT_OK


def _write(path: Path, content: Any) -> None:
    """Text, or a polars frame as parquet, to ``path`` atomically; a path that cannot be
    written is a UserError."""
    from scalelab.store.atomic import write_parquet_atomic, write_text_atomic

    if path.is_dir():
        raise UserError(f"{path}: is a directory; give a file name with -o")
    if not path.parent.is_dir():
        raise UserError(f"{path}: no such directory {path.parent}")
    try:
        if isinstance(content, str):
            write_text_atomic(path, content)
        else:
            write_parquet_atomic(path, content)
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None


def _plain_text(view: Any, width: int) -> str:
    """``view`` rendered as plain text (no colour) at ``width`` columns."""
    import io

    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False,
                      soft_wrap=True)
    console.print(view)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"


def _page(console: Console, view: Any) -> None:
    """``view`` at its natural width (never crushed): through the pager on a terminal
    (``less -FRSX`` unless $LESS says otherwise: long lines scroll sideways), else printed."""
    wide = Console(file=console.file, width=max(console.width, natural_width(view)),
                   highlight=False, soft_wrap=True)
    if not wide.is_terminal:
        wide.print(view)
        return
    os.environ.setdefault("LESS", "-FRSX")
    with wide.pager(styles=True):
        wide.print(view)


@app.command("status")
def status_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it)."),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root, when SWEEP is a spec file."),
) -> int:
    """Grid of run states: rows N, columns D or epochs, one panel per other axis."""
    from scalelab.sweep.run.launch import sweep_dir_of
    from scalelab.sweep.view.status import render_status, sweep_states

    sweep_dir = sweep_dir_of(sweep, root)
    _console().print(render_status(sweep_states(sweep_dir), title=str(sweep_dir)))
    return EXIT_OK


@app.command("retry")
def retry_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it)."),
    failed: bool = typer.Option(False, "--failed", help="Relaunch FAILED and CANCELLED runs."),
    preempted: bool = typer.Option(False, "--preempted", help="Resume PREEMPTED and TIMEOUT runs."),
    executor: str | None = typer.Option(None, "--executor", help=_EXECUTOR_HELP),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root, when SWEEP is a spec file."),
    wait: bool = typer.Option(False, "--wait", help="On Slurm, block until the jobs end."),
    target: str | None = typer.Option(None, "--train-target", hidden=True, help=_TARGET_HELP),
) -> int:
    """Relaunch failed and/or preempted runs of a sweep (neither flag: both). Configs and
    launchers come from the spec (SWEEP's spec file, else the sweep's spec.yaml), never
    from what a run directory holds."""
    from scalelab.sweep.run.backends import check_executor
    from scalelab.sweep.run.launch import execute, plan_from_disk, sweep_and_spec, sweep_spec
    from scalelab.sweep.spec.sections import LauncherConfig

    check_executor(executor)
    if not failed and not preempted:
        failed = preempted = True
    sweep_dir, spec = sweep_and_spec(sweep, root)
    spec = spec if spec is not None else sweep_spec(sweep_dir)
    launcher = spec.launcher if spec is not None else LauncherConfig()
    kwargs = {"target": target} if target else {}
    report = execute(plan_from_disk(sweep_dir, spec), sweep_dir, launcher, wait=wait, executor=executor,
                     retry_failed=failed, retry_preempted=preempted, **kwargs)
    return _report(_console(), report, waited=wait or not report.handles or bool(report.results))


@app.command("collect")
def collect_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it)."),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root, when SWEEP is a spec file."),
    quiet: bool = quiet_option(),
    log_format: str | None = log_format_option(),
) -> int:
    """Write <sweep>/runs.parquet: one row per run (axes, N, D, losses, state, wall time);
    progress (run directories read) on stderr."""
    from scalelab.sweep.run.launch import sweep_dir_of
    from scalelab.sweep.view.collect import RUNS_FILE, collect, summary

    output = ProgressOutput.from_flags(log_format, quiet)
    sweep_dir = sweep_dir_of(sweep, root)
    with output:
        frame = collect(sweep_dir, progress=output.sink)
    typer.echo(f"wrote {sweep_dir / RUNS_FILE}: {frame.height} runs ({summary(frame)})")
    return EXIT_OK
