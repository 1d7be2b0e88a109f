"""``scalelab tune SPEC``: Optuna or Kim et al.'s certified coordinate search (arXiv 2509.14786).

The spec's ``tune:`` section says which (``scalelab.sweep.spec.sections.TuneConfig``). Trials
are ordinary runs in the sweep directory ``<root>/<name>-tune/``; re-running the command
continues the study. Each round waits for its runs (on Slurm too: run ``tune`` itself in a
long-lived session or as a small CPU job).

Progress on stderr (``scalelab.cli.progress``): trials finished of the total and the best
value so far with its parameters, after each round; the local executor's run bar during
the rounds. ``-q`` shows neither; ``--log-format json`` prints the trial reports as JSON lines.
"""

from __future__ import annotations

from pathlib import Path

import typer

from scalelab.cli.app import app
from scalelab.cli.progress import ProgressOutput, log_format_option, quiet_option

TRIAL_LIMIT = 10_000
"""--n-trials is at most this: each trial is a full training run (as ``config.MEMBER_LIMIT``
bounds a spec's members), and Optuna's samplers read every finished trial at each ask, so
the study's own work grows with the square of the trials."""


@app.command("tune")
def tune_cmd(
    spec: Path = typer.Argument(..., help="Sweep spec YAML with a tune: section."),
    root: Path | None = typer.Option(
        None, "--root", help="Sweeps root (default $SCALELAB_ROOT, launcher.root, ./runs)."),
    executor: str | None = typer.Option(None, "--executor", help="auto | slurm | local | debug (default: the spec's)."),
    n_trials: int | None = typer.Option(None, "--n-trials", min=1, max=TRIAL_LIMIT, help=(
        "Optuna: finished trials to reach (default tune.n_trials); at most 10,000: each trial "
        "is a training run, and the sampler reads every finished trial at each ask.")),
    target: str | None = typer.Option(None, "--train-target", hidden=True, help=(
        "module:function trained instead of scalelab.train:train (tests).")),
    quiet: bool = quiet_option(),
    log_format: str | None = log_format_option(),
) -> int:
    """Tune SPEC: each trial is an ordinary run; re-running continues the study."""
    from scalelab.sweep.plan.datasets import dataset_facts
    from scalelab.sweep.run.launch import sweep_dir_for
    from scalelab.sweep.run.start import start_sweep
    from scalelab.sweep.spec.load import load_spec
    from scalelab.tune.study import execute_runner, tune

    output = ProgressOutput.from_flags(log_format, quiet)  # a bad value: before any work
    loaded = load_spec(spec)
    if loaded.tune is None:
        raise loaded.error("no tune: section (method, objective, space or axes)", None)
    sweep_dir = sweep_dir_for(f"{loaded.name}-tune", root=root, launcher_root=loaded.launcher.root)
    start_sweep(loaded, sweep_dir)  # each round's plan: execute_runner -> launch_plan
    with output:
        runs = execute_runner(sweep_dir, loaded, executor=executor, target=target,
                              progress=output.run_bars)

        def runner(plan):
            with output.paused():  # the round's own run bar draws meanwhile
                return runs(plan)

        report = tune(loaded, sweep_dir, runner=runner, datasets=dataset_facts(loaded),
                      n_trials=n_trials, progress=output.sink)
    typer.echo(f"{sweep_dir}:")
    for line in report.lines():
        typer.echo(line)
    return 0
