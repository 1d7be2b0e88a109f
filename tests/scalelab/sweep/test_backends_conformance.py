"""One tiny sweep, the real train loop, every backend: the same run ids and results.

Runs are CPU fp32 with one thread (OMP_NUM_THREADS=1, set before the jobs start), so
training is deterministic across processes: per-run results must be EXACTLY equal
(tolerance 0, every step's train loss bit for bit) between the in-process debug backend,
local subprocesses and Slurm jobs. The Slurm leg goes through the real CLI on a real
cluster (scripts/local_slurm.sh) and also checks the Slurm lifecycle: one job array,
`scalelab sweep` returning at once, jobs importing the code snapshot, and a relaunch
that submits nothing. It is skipped, with the reason, when no cluster answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import plan_of, scalelab, slurm_reason, wait_for_jobs, write_spec

from scalelab.sweep.run.launch import execute
from scalelab.sweep.view.collect import collect
from scalelab.sweep.view.status import sweep_states
from scalelab.train.records.records import read_table

COMPARED = ["run_id", "run_dir", "state", "N", "D_total", "steps_done", "final_loss", "best_loss"]


def _spec(tmp_path, executor: str) -> Path:
    return write_spec(tmp_path / f"conf-{executor}.yaml", "conf", grid={"optim.lr": [1e-3, 3e-3]},
                      launcher={"executor": executor, "max_parallel": 2, "time_min": 60})


def _results(sweep: Path):
    runs = collect(sweep).sort("run_id")
    losses = {r: read_table(sweep / d, "metrics")["train_loss"].to_list()
              for r, d in zip(runs["run_id"], runs["run_dir"])}
    return runs, losses


def _run(tmp_path, executor: str):
    plan = plan_of(_spec(tmp_path, executor))
    sweep = tmp_path / executor
    report = execute(plan, sweep, plan.spec.launcher, wait=True, progress=False)
    assert report.backend == executor
    assert set(report.results.values()) == {"COMPLETED"}, report.results
    assert sorted(report.results) == sorted(plan.table["run_id"])
    return _results(sweep)


def _same(a, b) -> None:
    (runs_a, losses_a), (runs_b, losses_b) = a, b
    assert runs_a["run_id"].to_list() == runs_b["run_id"].to_list()
    assert runs_a.select(COMPARED).equals(runs_b.select(COMPARED))  # exact: tolerance 0
    assert losses_a == losses_b  # every step's train loss, bit for bit
    assert runs_a["final_loss"].null_count() == 0 and len(next(iter(losses_a.values()))) == 32


@pytest.fixture
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_debug_and_local_agree(tmp_path, one_thread):
    _same(_run(tmp_path, "debug"), _run(tmp_path, "local"))


@pytest.mark.slurm
@pytest.mark.xdist_group("slurm")
def test_slurm_array_agrees_with_debug_and_relaunch_submits_nothing(tmp_path, one_thread):
    reason = slurm_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "root"
    sweep = root / "conf"
    spec = _spec(tmp_path, "slurm")
    out = scalelab("sweep", str(spec), "--root", str(root))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 launched on slurm" in out.stdout and "finished:" not in out.stdout  # returned at once
    array = out.stdout.split("queued as job(s) ")[1].split(";")[0].strip()
    assert array.isdigit()  # one array for the whole sweep
    reference = _run(tmp_path, "debug")  # meanwhile, the in-process reference

    frame = wait_for_jobs(
        lambda: f if (f := sweep_states(sweep))["state"].to_list() == ["COMPLETED"] * 2 else None,
        "both array tasks to complete", [array])
    assert sorted(frame["job_id"]) == [f"{array}_0", f"{array}_1"] and frame["attempts"].to_list() == [1, 1]
    code = next((sweep / "code").iterdir())
    for job in frame["job_id"]:  # the jobs imported the submit-time snapshot, not the checkout
        log = (sweep / "jobs" / job / f"{job}_0_log.out").read_text()
        assert f"code {code}/scalelab" in log, log[-2000:]
    _same(reference, _results(sweep))

    again = scalelab("sweep", str(spec), "--root", str(root))
    assert again.returncode == 0, again.stderr
    assert "0 launched" in again.stdout and "skip 2 x completed" in again.stdout
