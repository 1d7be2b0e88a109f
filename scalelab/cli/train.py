"""``scalelab train CONFIG.yaml [dotted.key=value ...]``: one run (also what sweep jobs run).

Exit codes: 0 COMPLETED, 3 DIVERGED, 75 PREEMPTED (checkpointed; relaunch resumes),
1 crash (traceback printed, status FAILED), 2 bad input (one line). A relaunch on a run
directory that had already ended trains nothing and says so in one line: exit 0 when it
was COMPLETED, 2 when it was DIVERGED (never relaunched; remove the directory).

Output (``scalelab.train.console.progress_log``): a progress line every ``train.log_every`` steps
(step/total, loss, tokens/s, MFU on a known GPU, elapsed, ETA) and a line per eval.
``-q``/``--quiet`` drops those two kinds (one-off messages and errors remain);
``--log-format json`` prints every line as one JSON object (for cluster logs). Without the
flags the environment decides: ``SCALELAB_LOG_FORMAT=text|json`` and ``SCALELAB_QUIET=1``,
which is how runs that a sweep launches get these settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from scalelab.cli.app import app
from scalelab.errors import EXIT_DIVERGED, EXIT_FAILURE, EXIT_OK, EXIT_PREEMPTED, UserError
from scalelab.store.status import STATUS_FILE, State, read_status

EXIT_CODES = {
    "COMPLETED": EXIT_OK,
    "DIVERGED": EXIT_DIVERGED,
    "PREEMPTED": EXIT_PREEMPTED,
}


@app.command("train")
def train_cmd(
    config: Path = typer.Argument(..., help="Run YAML (a RunConfig tree) or a run dir's config.yaml."),
    overrides: list[str] = typer.Argument(
        None, metavar="KEY=VALUE", help="dotted.key=value overrides, e.g. optim.lr=1e-3"
    ),
    run_dir: Path | None = typer.Option(None, "--run-dir", help=(
        "Run directory (default <root>/<label>-<run id>: the model and optimizer, the run id 32 hex digits; "
        "an existing <anything>-<run id> of this config is reused).")),
    root: Path | None = typer.Option(
        None, "--root", help="Parent of the default run directory (default $SCALELAB_ROOT or ./runs)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=(
        "No progress or eval lines (messages and errors still show; default $SCALELAB_QUIET).")),
    log_format: str | None = typer.Option(None, "--log-format", metavar="[text|json]", help=(
        "text (default) or json: one JSON object per line, for cluster logs (default $SCALELAB_LOG_FORMAT).")),
) -> int:
    """Train one run; a relaunch on the same run directory resumes from its checkpoint."""
    from scalelab.config import load_run_config
    from scalelab.identity import adopted_dirs, full_id, run_dir_name
    from scalelab.train.console.progress_log import LogSettings

    log = LogSettings.from_env().overridden(fmt=log_format, quiet=quiet or None)
    cfg = load_run_config(config, list(overrides or []))
    if run_dir is None:
        from scalelab.store.layout import DEFAULT_ROOT

        base = root or Path(os.environ.get("SCALELAB_ROOT") or DEFAULT_ROOT)
        run_dir = base / adopted_dirs(base, [run_dir_name(cfg)], lambda _: full_id(cfg))[0]  # or an old-named one
    from scalelab.train import train  # torch: imported once the input is known to be good

    before = read_status(run_dir)  # tells "had already ended" from "ended in this call"
    state = train(cfg, run_dir, log=log)  # also refuses a run dir that holds another config
    if state.terminal and isinstance(before, dict) and before.get("state") == state.value:
        return _already_ended(run_dir, state, before)
    return EXIT_CODES.get(state.value, EXIT_FAILURE)


def _already_ended(run_dir: Path, state: State, status: dict[str, Any]) -> int:
    """A relaunch of a finished run trains nothing: say so in one line. COMPLETED is
    success (exit 0); DIVERGED is bad input (exit 2), as nothing can be done with it: the
    launcher never relaunches a DIVERGED run (``scalelab retry`` skips it too), so the
    only way to train it again is a new run directory."""
    steps = status.get("steps_done")
    at = f" at step {steps}" if steps is not None else ""
    if state == State.COMPLETED:
        print(f"{run_dir}: run already COMPLETED{at}; nothing to train", flush=True)
        return EXIT_OK
    error = " ".join(str(status.get("error") or "").split())
    raise UserError(
        f"run already ended {state.value}{at}{f' ({error})' if error else ''}; it is never "
        f"relaunched (nor by 'scalelab retry'): remove the run directory to train it again",
        file=str(run_dir / STATUS_FILE),
    )
