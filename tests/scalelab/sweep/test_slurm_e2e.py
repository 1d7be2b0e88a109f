"""End to end on a real Slurm (scripts/local_slurm.sh start, with accounting), through
sbatch and submitit, with the real train loop on a tiny CPU preset (the array sweep,
the code snapshot and the relaunch that submits nothing are in
test_backends_conformance.py, which shares that sweep):

- one run trained by two Slurm tasks (tasks_per_node=2) through the torchrun environment;
- a run interrupted mid-training the way submitit simulates preemption (SIGTERM, then
  USR2) checkpoints, is requeued by submitit's Checkpointable and resumes: attempts >= 2
  and every training step is recorded exactly once;
- a run cancelled with scancel shows as CANCELLED, and is not relaunched;
- a run that hits its time limit more often than submitit requeues (``max_num_timeout``,
  3) ends TIMEOUT in status.json and ``scalelab status``, which names the command that
  resumes it, while sacct says FAILED.

Skipped, with the reason, when no cluster answers here.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import submitit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import (  # noqa: F401
    FAKE,
    HERE,
    TINY_BASE,
    fake_env,
    plan_of,
    scalelab,
    slurm_cluster,
    wait_for_jobs,
    write_spec,
)

from scalelab.store.status import read_status
from scalelab.sweep.run.launch import execute
from scalelab.sweep.view.status import sweep_states
from scalelab.train.records.records import read_table

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm"), pytest.mark.usefixtures("slurm_cluster")]


def test_two_tasks_train_one_run_with_torchrun_env(tmp_path):
    """tasks_per_node=2: both tasks train the run together (gloo DDP, world size 2)."""
    spec = write_spec(tmp_path / "ddp.yaml", "ddp", grid={"optim.lr": [1e-3]},
                      launcher={"executor": "slurm", "tasks_per_node": 2, "time_min": 60})
    plan = plan_of(spec)
    sweep = tmp_path / "ddp"
    report = execute(plan, sweep, plan.spec.launcher, wait=True)
    assert list(report.results.values()) == ["COMPLETED"]
    run = sweep / plan.table["run_dir"][0]
    assert read_status(run)["world_size"] == 2
    job = report.handles[0].job_id
    for rank in (0, 1):  # each task started a trainer
        assert "[scalelab.sweep.run.job]" in (sweep / "jobs" / job / f"{job}_{rank}_log.out").read_text()
    assert read_table(run, "metrics")["step"].to_list() == list(range(1, 33))


def test_preempted_run_resumes_and_cancelled_run_stays(tmp_path):
    """Run 0 is preempted and run 1 cancelled, each as soon as it is seen RUNNING with a
    checkpoint. Each is caught on its own (the two jobs need not overlap: under a loaded scheduler one may
    start after the other ended), and 1024 steps leave time to catch each mid-training."""
    base = copy.deepcopy(TINY_BASE)
    base["data"]["unique_tokens"] = 65536  # 1024 steps
    base["train"].update(checkpoint_every=8, eval_every=512)
    spec = write_spec(tmp_path / "pre.yaml", "pre", base=base, grid={"optim.lr": [1e-3, 2e-3]},
                      launcher={"executor": "slurm", "time_min": 60, "signal_delay_s": 30})
    # (time_min >= 60: submitit counts any signal within max(0.8 T, T - 10 min) as a timeout)
    plan = plan_of(spec)
    sweep = tmp_path / "pre"
    report = execute(plan, sweep, plan.spec.launcher, wait=False)
    (job0, job1) = [h.job_id for h in report.handles]
    runs = [sweep / d for d in plan.table["run_dir"]]
    jobs = [job0, job1]

    def mid_training(run):
        return bool(list(run.glob("checkpoint/step-*"))) and (read_status(run) or {}).get("state") == "RUNNING"

    caught: set[int] = set()

    def catch() -> bool:  # each run acted on as soon as it is seen mid-training
        for i in {0, 1} - caught:
            if mid_training(runs[i]):
                if i == 0:
                    submitit.SlurmJob(folder=sweep / "jobs" / "%j", job_id=job0)._interrupt()  # TERM, USR2
                else:
                    subprocess.run(["scancel", job1], check=True)
                caught.add(i)
        return len(caught) == 2

    wait_for_jobs(catch, "each run caught mid-training", jobs)

    wait_for_jobs(lambda: (read_status(runs[0]) or {}).get("state") == "COMPLETED",
                  "the preempted run to finish", [job0])
    frame = wait_for_jobs(lambda: f if (f := sweep_states(sweep))["state"][1] == "CANCELLED" else None,
                          "CANCELLED", jobs)
    status = read_status(runs[0])
    assert status["attempts"] >= 2 and status["job_ids"] == [job0]  # requeued as the same job
    steps = read_table(runs[0], "metrics")["step"].to_list()
    assert steps == list(range(1, 1025)), "each step exactly once across the requeue"
    assert frame["state"].to_list() == ["COMPLETED", "CANCELLED"]

    out = scalelab("status", str(sweep))
    assert "⊘" in out.stdout and "cancelled" in out.stdout
    again = execute(plan, sweep, plan.spec.launcher, wait=False)
    assert again.launched == []
    assert again.decisions["reason"].to_list() == ["completed", "cancelled (retry --failed reruns it)"]


def test_a_run_out_of_requeues_reads_timeout_with_the_resume_command(tmp_path):
    base = {**copy.deepcopy(TINY_BASE), "extra": {"fake_steps": 100000, "fake_step_s": 0.05}}
    spec = write_spec(tmp_path / "to.yaml", "to", base=base, grid={"optim.lr": [1e-3]},
                      launcher={"executor": "slurm", "time_min": 1, "signal_delay_s": 30,
                                "env": {"PYTHONPATH": str(HERE)}})
    # (time_min 1: every USR2 counts as a time limit; the fake trainer never ends on its own)
    plan = plan_of(spec)
    sweep = tmp_path / "to"
    (job,) = [h.job_id for h in execute(plan, sweep, plan.spec.launcher, wait=False, target=FAKE).handles]
    run = sweep / plan.table["run_dir"][0]
    wait_for_jobs(lambda: (read_status(run) or {}).get("state") == "TIMEOUT", "TIMEOUT", [job])
    status = read_status(run)
    assert status["attempts"] == 4 and status["job_ids"] == [job]  # 1 + max_num_timeout requeues
    assert status["error"].startswith(f"out of requeues: Slurm job {job} not requeued by submitit")
    out = scalelab("status", str(sweep), env={**fake_env(), "COLUMNS": "400"}).stdout  # no wrapping
    assert "⧗ 1 timeout" in out and f"`scalelab retry --preempted {sweep}`" in out
    frame = sweep_states(sweep)
    assert frame["state"].to_list() == ["TIMEOUT"] and frame["attempts"].to_list() == [4]
