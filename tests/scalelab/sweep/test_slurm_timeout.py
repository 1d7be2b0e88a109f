"""A run whose Slurm job ran out of requeues reads TIMEOUT, says how to resume, and
``sweep`` resumes it, counting the attempt.

After ``max_num_timeout`` (3) time limits submitit's USR2 handler stops the trainer
through ``SlurmRun.checkpoint`` and then raises instead of requeueing: the job ends
FAILED in sacct. status.json used to keep PREEMPTED and ``scalelab status`` showed a
requeue that never came. No real Slurm here: submitit's own signal handler runs in
this process, and the scheduler's answers come from the ``fake_slurm`` clients.
"""

from __future__ import annotations

import io
import signal
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
import submitit
from rich.console import Console
from submitit.core.job_environment import SignalHandler
from submitit.core.utils import UncompletedJobError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import FAKE, cli, plan_of, write_spec

from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.status import State, read_status, update_status
from scalelab.sweep.run import job as job_mod
from scalelab.sweep.run.job import JobSpec, SlurmRun
from scalelab.sweep.run.launch import decide
from scalelab.sweep.run.observe import OUT_OF_REQUEUES, observe
from scalelab.sweep.view.status import render_status, sweep_states

# A trainer that writes RUNNING, asks its parent (the Slurm job) for USR2 as Slurm does at
# the time limit, then checkpoints on the USR1 it gets back and ends PREEMPTED.
_TRAINER = textwrap.dedent("""
    import os, signal, sys
    from scalelab.store.status import State, update_status
    run_dir = sys.argv[1]
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])  # waited for below
    update_status(run_dir, State.RUNNING)
    os.kill(os.getppid(), signal.SIGUSR2)
    signal.sigtimedwait([signal.SIGUSR1], 60) or sys.exit(9)  # a ceiling, not a pace
    update_status(run_dir, State.PREEMPTED, steps_done=3)
""")


class _Paths:
    def __init__(self, folder: Path) -> None:
        self.submitted_pickle = folder / "submitted.pkl"


@pytest.fixture
def usr2_restored():
    previous = signal.getsignal(signal.SIGUSR2)
    yield
    signal.signal(signal.SIGUSR2, previous)


def _slurm_run(tmp_path, monkeypatch, countdown: int):
    """A SlurmRun of one run whose trainer asks for the time-limit signal, with submitit's
    own USR2 handler installed for a job ``countdown`` requeues from its limit, an hour
    into its 60 minutes; (run, spec, run directory, requeue countdowns submitit asked for)."""
    run_dir = tmp_path / f"c{countdown}" / "runs" / "r"
    run_dir.mkdir(parents=True)
    update_status(run_dir, State.PREEMPTED, attempts=3, job_ids=["7_0"])  # three limits so far
    monkeypatch.setattr(job_mod, "command", lambda spec, python=None: [sys.executable, "-c", _TRAINER,
                                                                        spec.run_dir])
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setattr(job_mod, "_torch_env", lambda: {})
    spec = JobSpec("r", "r", str(run_dir), FAKE)
    run = SlurmRun(sys.executable, requeue=True)
    delayed = submitit.helpers.DelayedSubmission(run, spec)
    delayed.set_timeout(60, countdown)
    requeued: list[int] = []

    class Env:
        global_rank = 0

        def _requeue(self, left):
            requeued.append(left)

    handler = SignalHandler(Env(), _Paths(tmp_path), delayed)
    handler._start_time -= 3600
    monkeypatch.setattr(handler, "_exit", lambda: (_ for _ in ()).throw(SystemExit(-1)))
    signal.signal(signal.SIGUSR2, handler.checkpoint_and_try_requeue)
    return run, spec, run_dir, requeued


def test_out_of_requeues_job_writes_timeout_with_the_resume_command(tmp_path, monkeypatch, usr2_restored):
    run, spec, run_dir, requeued = _slurm_run(tmp_path, monkeypatch, countdown=0)  # max_num_timeout spent
    with pytest.raises(UncompletedJobError, match="timed-out too many times"):
        run(spec)
    status = read_status(run_dir)
    assert requeued == []
    assert status["state"] == "TIMEOUT" and status["steps_done"] == 3 and status["attempts"] == 4
    assert status["error"].startswith("out of requeues: Slurm job 7 not requeued by submitit")
    assert "`scalelab retry --preempted SWEEP`" in status["error"]
    # the same signal with requeues left: submitit requeues, and the run stays PREEMPTED
    run, spec, run_dir, requeued = _slurm_run(tmp_path, monkeypatch, countdown=3)
    with pytest.raises(SystemExit):
        run(spec)
    assert requeued == [2] and read_status(run_dir)["state"] == "PREEMPTED"


def _sweep_with(tmp_path, disk: str, job: str) -> tuple[Path, Path]:
    spec = write_spec(tmp_path / "s.yaml", "to", grid={"optim.lr": [1e-3]},
                      launcher={"executor": "debug"},
                      base={"model": {"preset": "cpu-50k"}, "data": {"seq_len": 16, "unique_tokens": 2048,
                            "vocab_size": 256, "val_tokens": 4096},
                            "train": {"batch_size": 4, "device": "cpu"}, "extra": {"fake_steps": 4}})
    plan = plan_of(spec)
    sweep = tmp_path / "root" / "to"
    run_dir = sweep / plan.table["run_dir"][0]
    run_dir.mkdir(parents=True)
    update_status(run_dir, State(disk), attempts=3, job_ids=[job])
    write_parquet_atomic(sweep / "plan.parquet", plan.table)
    return spec, run_dir


def test_a_preempted_run_whose_job_ended_failed_reads_timeout(tmp_path, fake_slurm):
    """The scheduler's side: status.json says PREEMPTED, sacct says the job FAILED and
    nothing is queued: nothing will requeue the run."""
    _, run_dir = _sweep_with(tmp_path, "PREEMPTED", "7_0")
    (fake_slurm / "sacct.out").write_text("7_0|FAILED\n")
    (view,) = observe([run_dir])
    assert (view.state, view.live, view.sched) == ("TIMEOUT", False, "FAILED")
    assert view.note == f"scheduler: FAILED, not requeued ({OUT_OF_REQUEUES})"
    frame = sweep_states(run_dir.parent.parent)
    assert frame["state"].to_list() == ["TIMEOUT"]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(render_status(frame, title="SW"))
    text = console.file.getvalue()
    assert "⧗ 1 timeout" in text and "↻" not in text.split("\n")[0]
    assert "⧗ 1 run timed out and not requeued: `scalelab retry --preempted SW`" in text
    row = decide(pl.DataFrame({"run_id": ["x"], "name": ["r"], "run_dir": ["r"]}), run_dir.parent,
                 views=[view]).row(0, named=True)
    assert (row["action"], row["reason"]) == ("launch", f"resume (scheduler: FAILED, not requeued ({OUT_OF_REQUEUES}))")


def test_sweep_resumes_a_timeout_run_and_counts_the_attempt(tmp_path, fake_slurm, monkeypatch):
    spec, run_dir = _sweep_with(tmp_path, "PREEMPTED", "7_0")
    (fake_slurm / "sacct.out").write_text("7_0|FAILED\n")
    monkeypatch.setenv("SCALELAB_ROOT", str(tmp_path / "root"))
    assert cli("sweep", str(spec), "--executor", "debug", "--train-target", FAKE) == 0
    status = read_status(run_dir)
    assert status["state"] == "COMPLETED" and status["attempts"] == 4
    assert status.get("scheduler_state") == "FAILED"  # the verdict persisted before the relaunch
