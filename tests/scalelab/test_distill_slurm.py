"""On a real Slurm (scripts/local_slurm.sh): teacher generation is its own job that waits
for the teachers (afterok), and the student waits for it; `scalelab sweep` returns at once.

Skipped, with the reason, when no cluster answers here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "sweep"))
from lifecycle_helpers import scalelab, slurm_cluster, wait_for_jobs  # noqa: F401

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm"), pytest.mark.usefixtures("slurm_cluster")]

SPEC = {
    "name": "distill_slurm",
    "base": {
        "model": {"preset": "cpu-50k"},
        "data": {"seq_len": 16, "unique_tokens": 1024, "epochs": 1, "val_tokens": 4096, "subset_seed": 0},
        "train": {"batch_size": 8, "eval_every": 0, "eval_batches": 2, "checkpoint_every": 1000,
                  "norms_every": 0, "device": "cpu"},
    },
    "launcher": {"executor": "slurm", "time_min": 10},
    "blocks": [
        {"name": "teachers", "members": 2},
        {"name": "student", "base": {"distill": {"teacher": {"distill.synthetic_weight": 0.0},
                                                 "synthetic_weight": 0.5, "synthetic_tokens": 340}}},
    ],
}


def _status(path: Path) -> dict:
    try:
        return json.loads((path / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def test_generation_waits_for_teachers_and_student_for_generation(tmp_path):
    spec = tmp_path / "distill.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    root = tmp_path / "root"
    out = scalelab("sweep", str(spec), "--root", str(root))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 launched on slurm" in out.stdout and "finished:" not in out.stdout  # returned at once
    sweep = root / "distill_slurm"
    (gen,) = list((sweep / "generate").iterdir())
    runs = sorted((sweep / "runs").iterdir())
    plan = pl.read_parquet(sweep / "plan.parquet")  # run directories are named by identity
    (student_dir,) = plan.filter(pl.col("block") == "student")["run_dir"].to_list()
    student = next(r for r in runs if r == sweep / student_dir)
    teachers = [r for r in runs if r != student]
    jobs = [p.name for p in (sweep / "jobs").iterdir() if p.name.isdigit()]  # submitit folders
    assert len(jobs) == 3, jobs  # the teachers' array, the generation, the student
    # wait on the scheduler, not the clock: as long as a job is queued or running, its run
    # may still finish; once all three have left the queue, the student's state is final
    wait_for_jobs(lambda: _status(student).get("state") in ("COMPLETED", "FAILED"),
                  "the student run to end", jobs)
    states = {r.name: _status(r).get("state") for r in runs}
    assert set(states.values()) == {"COMPLETED"}, states
    gen_status, student_status = _status(gen), _status(student)
    assert gen_status["state"] == "COMPLETED"
    # The scheduler held each job until its dependencies had ended.
    teacher_jobs = [_status(t)["job_ids"][0] for t in teachers]
    (gen_job,) = gen_status["job_ids"]
    script = next((sweep / "jobs" / gen_job).glob("*submission.sh")).read_text()
    assert f"#SBATCH --dependency=afterok:{':'.join(sorted(teacher_jobs))}" in script
    (student_job,) = student_status["job_ids"]
    script = next((sweep / "jobs" / student_job.split("_")[0]).glob("*submission.sh")).read_text()
    assert f"#SBATCH --dependency=afterok:{gen_job}" in script
    assert max(_status(t)["finished"] for t in teachers) <= gen_status["started"]
    assert gen_status["finished"] <= student_status["started"]
