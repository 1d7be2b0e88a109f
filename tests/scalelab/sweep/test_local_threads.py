"""The local backend gives each run process ``launcher.cpus_per_task`` threads: without a
limit every process starts one thread per core, and ``max_parallel`` of them oversubscribe
the machine (measured: 4x slower on 2 cores). A thread count set in the launching
environment wins. Read back from each run's meta.json (``torch_threads``), written by the
real train loop in the run's own process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import plan_of, write_spec

from scalelab.sweep.run.launch import execute


def _threads(tmp_path: Path, name: str, cpus: int) -> list[int]:
    spec = write_spec(tmp_path / f"{name}.yaml", name, grid={"optim.lr": [1e-3, 3e-3]},
                      launcher={"executor": "local", "max_parallel": 2, "cpus_per_task": cpus})
    plan = plan_of(spec)
    report = execute(plan, tmp_path / name, plan.spec.launcher, wait=True, progress=False)
    assert set(report.results.values()) == {"COMPLETED"}, report.results
    return [json.loads((tmp_path / name / d / "meta.json").read_text())["torch_threads"]
            for d in plan.table["run_dir"]]


@pytest.mark.parametrize("cpus", [1, 2])
def test_each_run_gets_cpus_per_task_threads(tmp_path, monkeypatch, cpus):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    assert _threads(tmp_path, f"t{cpus}", cpus) == [cpus, cpus]


def test_the_launching_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _threads(tmp_path, "env", 2) == [1, 1]
