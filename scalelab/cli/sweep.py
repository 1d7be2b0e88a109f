"""``scalelab sweep | status | retry | collect``.

- ``sweep SPEC [--dry-run] [--executor E] [--root DIR]``: plan, then launch what needs
  launching (idempotent). On Slurm it returns once the arrays are queued; locally it
  runs the sweep with a progress bar. Exit 1 when a run it waited on FAILED.
- ``status SWEEP``: the grid of run states (SWEEP: a sweep directory or its spec file).
- ``retry SWEEP [--failed] [--preempted]``: relaunch only failed/cancelled and/or
  preempted/timed-out runs (neither flag: both).
- ``collect SWEEP``: write ``<sweep>/runs.parquet`` and print its size.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from scalelab.cli.app import app
from scalelab.errors import EXIT_FAILURE, EXIT_OK, UserError

_EXECUTOR_HELP = "auto | slurm | local | debug (default: the spec's launcher.executor)."
_TARGET_HELP = "module:function trained instead of scalelab.train:train (tests)."


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _sweep_dir(path: Path, root: Path | None) -> Path:
    """A sweep directory, given it or the spec file that made it."""
    if path.is_file():
        from scalelab.sweep.launch import sweep_dir_for
        from scalelab.sweep.spec import load_spec

        spec = load_spec(path)
        return sweep_dir_for(spec.name, root=root, launcher_root=spec.launcher.root)
    if not path.is_dir():
        raise UserError(f"{path}: no such sweep directory or spec file")
    return path


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
    executor: str | None = typer.Option(None, "--executor", help=_EXECUTOR_HELP),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root (default $SCALELAB_ROOT, launcher.root, ./runs)."),
    wait: bool = typer.Option(False, "--wait", help="On Slurm, block until the jobs end."),
    target: str | None = typer.Option(None, "--train-target", hidden=True, help=_TARGET_HELP),
) -> int:
    """Plan SPEC and launch the runs that are new, preempted or timed out."""
    from scalelab.store.atomic import write_text_atomic
    from scalelab.sweep.backends import check_executor
    from scalelab.sweep.launch import decide, execute, sweep_dir_for
    from scalelab.sweep.plan import dataset_facts, expand
    from scalelab.sweep.spec import load_spec

    check_executor(executor)
    loaded = load_spec(spec)
    plan = expand(loaded, datasets=dataset_facts(loaded))
    sweep_dir = sweep_dir_for(loaded.name, root=root, launcher_root=loaded.launcher.root)
    console = _console()
    if dry_run:
        from scalelab.sweep.render import render_plan

        console.print(render_plan(plan, decide(plan, sweep_dir)))
        return EXIT_OK
    sweep_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(sweep_dir / "spec.yaml", loaded.text or Path(spec).read_text())
    kwargs = {"target": target} if target else {}
    from scalelab.distill.stages import execute_staged, has_students

    launch = execute_staged if has_students(plan) else execute  # teachers -> text -> students
    report = launch(plan, sweep_dir, loaded.launcher, wait=wait, executor=executor, **kwargs)
    return _report(console, report, waited=wait or not report.handles or bool(report.results))


@app.command("status")
def status_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it)."),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root, when SWEEP is a spec file."),
) -> int:
    """Grid of run states: rows N, columns D or epochs, one panel per other axis."""
    from scalelab.sweep.status import render_status, sweep_states

    sweep_dir = _sweep_dir(sweep, root)
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
    """Relaunch failed and/or preempted runs of a sweep (neither flag: both)."""
    from scalelab.sweep.backends import check_executor
    from scalelab.sweep.launch import execute, plan_from_disk
    from scalelab.sweep.sections import LauncherConfig
    from scalelab.sweep.spec import load_spec

    check_executor(executor)
    if not failed and not preempted:
        failed = preempted = True
    sweep_dir = _sweep_dir(sweep, root)
    spec_copy = sweep_dir / "spec.yaml"
    launcher = load_spec(spec_copy).launcher if spec_copy.exists() else LauncherConfig()
    kwargs = {"target": target} if target else {}
    report = execute(plan_from_disk(sweep_dir), sweep_dir, launcher, wait=wait, executor=executor,
                     retry_failed=failed, retry_preempted=preempted, **kwargs)
    return _report(_console(), report, waited=wait or not report.handles or bool(report.results))


@app.command("collect")
def collect_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it)."),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root, when SWEEP is a spec file."),
) -> int:
    """Write <sweep>/runs.parquet: one row per run (axes, N, D, losses, state, wall time)."""
    from scalelab.sweep.collect import RUNS_FILE, collect

    sweep_dir = _sweep_dir(sweep, root)
    frame = collect(sweep_dir)
    counts = frame.group_by("state").len().sort("state", nulls_last=True)
    summary = ", ".join(f"{n} {(s or 'not started').lower()}" for s, n in counts.iter_rows())
    _console().print(f"wrote {sweep_dir / RUNS_FILE}: {frame.height} runs ({summary})")
    return EXIT_OK
