"""A test double for ``scalelab.train.train`` in the lifecycle tests (never shipped).

It honours the run-dir contract the lifecycle depends on: status.json transitions
(RUNNING -> COMPLETED | DIVERGED | PREEMPTED, FAILED on a crash), an atomic checkpoint it
resumes from, metrics/evals parquet with each step exactly once across resumes, and
SIGUSR1/SIGTERM -> checkpoint -> PREEMPTED. Every call appends a line to
``invocations.log`` so tests can count executions. Behaviour comes from ``cfg.extra``:
``fake_steps`` (default 5), ``fake_step_s`` (sleep per step), ``fake_outcome``
('ok' | 'fail' | 'diverge' | 'kill'). After each step it writes the step to ``fake_progress``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import polars as pl

from scalelab.store.atomic import write_json_atomic, write_parquet_atomic
from scalelab.store.status import State, read_status, update_status

PROGRESS_FILE = "fake_progress"
"""The last step this attempt has done (plain text), for tests that wait on progress."""


def loss_at(cfg, step: int) -> float:
    """A deterministic 'loss' of the config and the step."""
    return 3.0 / math.sqrt(1.0 + 1e3 * cfg.optim.lr * step) + 0.01 * cfg.train.init_seed + 0.001 * cfg.member


def train(cfg, run_dir) -> State:
    run_dir = Path(run_dir)
    with open(run_dir / "invocations.log", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    status = read_status(run_dir)
    if status and State(status["state"]).terminal:
        return State(status["state"])
    extra = cfg.extra
    steps = int(extra.get("fake_steps", 5))
    step_s = float(extra.get("fake_step_s", 0.0))
    outcome = extra.get("fake_outcome", "ok")
    ckpt = run_dir / "checkpoint" / "state.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    metrics = run_dir / "metrics.parquet"
    rows = pl.read_parquet(metrics).filter(pl.col("step") <= start).to_dicts() if metrics.exists() else []
    stop: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _f: stop.append(signum))
                for s in (signal.SIGUSR1, signal.SIGTERM)}
    update_status(run_dir, State.RUNNING)
    t0 = time.time()

    def save(step: int) -> None:
        write_parquet_atomic(metrics, pl.DataFrame(rows, schema={"step": pl.Int64, "train_loss": pl.Float64}))
        write_json_atomic(ckpt, {"step": step})

    try:
        for step in range(start + 1, steps + 1):
            if stop:
                save(step - 1)
                update_status(run_dir, State.PREEMPTED, steps_done=step - 1)
                return State.PREEMPTED
            time.sleep(step_s)
            rows.append({"step": step, "train_loss": loss_at(cfg, step)})
            (run_dir / PROGRESS_FILE).write_text(str(step))  # a state tests can wait on
            if outcome == "kill" and step == 2:  # dies without a word, like the OOM killer
                os.kill(os.getpid(), signal.SIGKILL)
            if outcome == "fail" and step == 2:
                raise RuntimeError("fake failure at step 2")
            if outcome == "diverge" and step == 2:
                save(step)
                update_status(run_dir, State.DIVERGED, steps_done=step, error="loss is nan")
                return State.DIVERGED
        save(steps)
        evals = pl.DataFrame({"run_id": [""] * 2, "step": [steps // 2, steps], "split": ["val"] * 2,
                              "loss": [loss_at(cfg, steps // 2), loss_at(cfg, steps)]})
        write_parquet_atomic(run_dir / "evals.parquet", evals)
        update_status(run_dir, State.COMPLETED, steps_done=steps, wall_time_s=time.time() - t0)
        return State.COMPLETED
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
