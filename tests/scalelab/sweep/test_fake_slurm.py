"""The Slurm backend against fake sbatch/squeue/sacct/scontrol/sinfo/srun on PATH
(the ``fake_slurm`` fixture, conftest.py).

The fakes log every call, so the tests check how often the scheduler is asked (one
batched poll per sweep, never one per job), what is submitted (array splits, the sbatch
script, the pickled Checkpointable job), and how scheduler verdicts reach status.json.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import submitit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import FAKE, cli, plan_of, write_spec
from test_sbatch_golden import CASES, check_golden, normalise

from scalelab.store.status import read_status
from scalelab.sweep.run.backends.slurm import SlurmBackend, scheduler_states
from scalelab.sweep.run.job import JobSpec, SlurmRun
from scalelab.sweep.run.launch import execute
from scalelab.sweep.run.lock import read_claim, refresh


def _calls(state: Path, name: str) -> list[str]:
    log = state / "calls.log"
    return [c for c in (log.read_text().splitlines() if log.exists() else []) if c.split()[0] == name]


def _jobs(tmp_path, n):
    return [JobSpec(f"r{i}", f"run{i}", str(tmp_path / "sw" / "runs" / f"run{i}"), FAKE) for i in range(n)]


def test_one_array_matches_golden_and_pickles_a_checkpointable_job(fake_slurm, tmp_path):
    launcher, n = CASES["array_cpu"]
    backend = SlurmBackend(launcher, tmp_path / "sw", throttle_s=0)
    handles = backend.submit(_jobs(tmp_path, n))
    assert [h.job_id for h in handles] == [f"100_{i}" for i in range(5)]
    assert len(_calls(fake_slurm, "sbatch")) == 1
    script = (fake_slurm / "sbatch_100.sh").read_text()
    script = script.replace(f"scalelab-{(tmp_path / 'sw').name}", "scalelab-sweep")
    check_golden("array_cpu", normalise(script, (tmp_path / "sw").resolve(), sys.executable))
    code = backend.code_dir
    assert code.parent == (tmp_path / "sw" / "code").resolve()
    assert (code / "scalelab" / "sweep" / "run" / "job.py").exists() and (code / "MANIFEST").exists()
    with open(tmp_path / "sw" / "jobs" / "100_3" / "100_3_submitted.pkl", "rb") as fh:
        delayed = pickle.load(fh)
    assert isinstance(delayed.function, SlurmRun)
    assert isinstance(delayed.function, submitit.helpers.Checkpointable)
    assert delayed.args[0].run_id == "r3"
    again = delayed.function.checkpoint(*delayed.args)  # what submitit requeues on preemption
    assert again.function is delayed.function and again.args == delayed.args


def test_arrays_split_at_max_array_size(fake_slurm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MAX_ARRAY_SIZE", "2")
    launcher, _ = CASES["array_cpu"]
    handles = SlurmBackend(launcher, tmp_path / "sw", throttle_s=0).submit(_jobs(tmp_path, 5))
    assert [h.job_id for h in handles] == ["100_0", "100_1", "101_0", "101_1", "102"]
    assert "#SBATCH --array=0-1%2" in (fake_slurm / "sbatch_100.sh").read_text()
    assert "--array" not in (fake_slurm / "sbatch_102.sh").read_text()  # a lone run is a plain job


def test_scheduler_states_one_squeue_one_sacct(fake_slurm):
    (fake_slurm / "squeue.out").write_text("200_[3-5%2]|PENDING\n200_1|RUNNING\n201|RUNNING\n")
    (fake_slurm / "sacct.out").write_text("200_0|COMPLETED\n200_2|CANCELLED by 0\n")
    states = scheduler_states(["200_0", "200_1", "200_2", "200_4", "201", "202"])
    assert states == {"200_0": "COMPLETED", "200_1": "RUNNING", "200_2": "CANCELLED", "200_4": "PENDING",
                      "201": "RUNNING", "202": "UNKNOWN"}
    assert _calls(fake_slurm, "squeue") == ["squeue -h -r -o %i|%T -j 200,201,202"]
    assert _calls(fake_slurm, "sacct") == ["sacct -X -n -P -o JobID,State -j 200,202"]


def test_sweep_returns_at_once_and_relaunch_follows_the_scheduler(fake_slurm, tmp_path):
    spec = write_spec(tmp_path / "s.yaml", "s", grid={"optim.lr": [1e-3, 2e-3, 3e-3, 4e-3]},
                      launcher={"executor": "slurm", "partition": "debug"})
    plan = plan_of(spec)
    sweep = tmp_path / "sw"
    first = execute(plan, sweep, plan.spec.launcher, wait=False, backend=SlurmBackend(plan.spec.launcher, sweep),
                    target=FAKE)
    ids = [h.job_id for h in first.handles]
    assert ids == ["100_0", "100_1", "100_2", "100_3"] and not first.results
    dirs = [sweep / d for d in plan.table["run_dir"]]
    assert [read_claim(d).job_id for d in dirs] == ids
    assert all((d / "config-input.yaml").exists() for d in dirs)

    # all queued: a relaunch submits nothing, after one squeue for the whole sweep
    (fake_slurm / "squeue.out").write_text("100_[0-3%256]|PENDING\n")
    n_squeue = len(_calls(fake_slurm, "squeue"))
    again = execute(plan, sweep, plan.spec.launcher, wait=False,
                    backend=SlurmBackend(plan.spec.launcher, sweep), target=FAKE)
    assert again.launched == [] and len(_calls(fake_slurm, "sbatch")) == 1
    assert len(_calls(fake_slurm, "squeue")) == n_squeue + 1
    assert set(again.decisions["reason"]) == {f"pending: claimed by job {j}" for j in ids}

    # the jobs left the queue: verdicts from accounting; cancelled/failed stay, timeout + lost relaunch
    (fake_slurm / "squeue.out").write_text("")
    (fake_slurm / "sacct.out").write_text("100_0|CANCELLED by 0\n100_1|FAILED\n100_2|TIMEOUT\n")
    third = execute(plan, sweep, plan.spec.launcher, wait=False,
                    backend=SlurmBackend(plan.spec.launcher, sweep), target=FAKE)
    assert third.decisions["state"].to_list() == ["CANCELLED", "FAILED", "TIMEOUT", None]
    assert third.decisions["action"].to_list() == ["skip", "skip", "launch", "launch"]
    assert [read_status(d)["state"] for d in dirs[:3]] == ["CANCELLED", "FAILED", "TIMEOUT"]
    assert [h.job_id for h in third.handles] == ["101_0", "101_1"]
    assert read_claim(dirs[0]) is None and read_claim(dirs[2]).job_id == "101_0"


def test_refused_submission_is_one_line_and_keeps_what_was_queued(fake_slurm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_MAX_ARRAY_SIZE", "2")
    (fake_slurm / "refuse_from").write_text("101")  # the second array is refused
    spec = write_spec(tmp_path / "s.yaml", "s", grid={"optim.lr": [1e-3, 2e-3, 3e-3, 4e-3]},
                      launcher={"executor": "slurm", "partition": "nope"})
    assert cli("sweep", str(spec), "--root", str(tmp_path / "root"), "--train-target", FAKE) == 2
    err = capsys.readouterr().err
    assert err == "error: launcher: sbatch refused 2 run(s): sbatch: error: invalid partition specified: nope\n"
    sweep = tmp_path / "root" / "s"
    dirs = [sweep / d for d in plan_of(spec).table["run_dir"]]
    claims = [read_claim(d) for d in dirs]
    assert [c.job_id if c else None for c in claims] == ["100_0", "100_1", None, None]


def test_a_concurrent_launch_submission_is_never_broken(fake_slurm, tmp_path, monkeypatch):
    """Another launch claims and submits run 0 after our one poll: its claim carries a job
    id our poll never saw, and must still stop us (no duplicate submission)."""
    from scalelab.sweep.run import launch as launch_mod

    spec = write_spec(tmp_path / "s.yaml", "s", launcher={"executor": "slurm"})
    plan = plan_of(spec)
    real, planted = launch_mod.try_claim, []

    def racing(run_dir, **kw):
        if not planted:
            other = real(run_dir, backend="slurm")  # the other launch claims ...
            planted.append(refresh(run_dir, other, job_id="555_0"))  # ... and submits
        return real(run_dir, **kw)

    monkeypatch.setattr(launch_mod, "try_claim", racing)
    sweep = tmp_path / "sw"
    report = execute(plan, sweep, plan.spec.launcher, wait=False, backend=SlurmBackend(plan.spec.launcher, sweep),
                     target=FAKE)
    assert report.decisions["reason"][0] == "claimed by a concurrent launch"
    assert report.launched == [plan.table["run_id"][1]]
    assert read_claim(sweep / plan.table["run_dir"][0]).job_id == "555_0"
