"""``scalelab tune SPEC``: Optuna or Kim et al.'s certified coordinate search (arXiv 2509.14786).

The spec's ``tune:`` section says which (``scalelab.sweep.sections.TuneConfig``). Trials
are ordinary runs in the sweep directory ``<root>/<name>-tune/``; re-running the command
continues the study. Each round waits for its runs (on Slurm too: run ``tune`` itself in a
long-lived session or as a small CPU job).
"""

from __future__ import annotations

from pathlib import Path

import typer

from scalelab.cli.app import app


@app.command("tune")
def tune_cmd(
    spec: Path = typer.Argument(..., help="Sweep spec YAML with a tune: section."),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root (default $SCALELAB_ROOT, launcher.root, ./runs)."),
    executor: str | None = typer.Option(None, "--executor", help="auto | slurm | local | debug (default: the spec's)."),
    n_trials: int | None = typer.Option(None, "--n-trials", min=1, help="Optuna: finished trials to reach (default tune.n_trials)."),
    target: str | None = typer.Option(None, "--train-target", hidden=True, help="module:function trained instead of scalelab.train:train (tests)."),
) -> int:
    """Tune SPEC: each trial is an ordinary run; re-running continues the study."""
    from scalelab.store.atomic import write_text_atomic
    from scalelab.sweep.launch import sweep_dir_for
    from scalelab.sweep.plan import dataset_facts
    from scalelab.sweep.spec import load_spec
    from scalelab.sweep.tune import execute_runner, tune

    loaded = load_spec(spec)
    if loaded.tune is None:
        raise loaded.error("no tune: section (method, objective, space or axes)", None)
    sweep_dir = sweep_dir_for(f"{loaded.name}-tune", root=root, launcher_root=loaded.launcher.root)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(sweep_dir / "spec.yaml", loaded.text)
    runner = execute_runner(sweep_dir, loaded, executor=executor, target=target)
    report = tune(loaded, sweep_dir, runner=runner, datasets=dataset_facts(loaded),
                  n_trials=n_trials)
    typer.echo(f"{sweep_dir}:")
    for line in report.lines():
        typer.echo(line)
    return 0
