"""Golden files for the sbatch scripts the Slurm backend submits (through submitit).

Paths are normalised (<SWEEP>, <PYTHON>, <CODE>) so the goldens hold across machines.
Regenerate after an intended change with SCALELAB_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from scalelab.sweep.run.backends.slurm import render_sbatch
from scalelab.sweep.spec.sections import LauncherConfig

GOLDEN = Path(__file__).resolve().parent / "golden"

CASES = {
    "array_cpu": (LauncherConfig(partition="debug", time_min=30, cpus_per_task=2, array_parallelism=4,
                                 signal_delay_s=60), 5),
    "multinode_gpu": (LauncherConfig(partition="gpu", account="proj", qos="high", nodes=2, tasks_per_node=4,
                                     gpus_per_node=4, cpus_per_task=8, mem_gb=256, time_min=1440,
                                     slurm_additional={"constraint": "h100", "exclusive": True}), 1),
}


def normalise(text: str, sweep_dir: Path, python: str) -> str:
    text = text.replace(str(sweep_dir), "<SWEEP>").replace(python, "<PYTHON>")
    text = re.sub(r"<SWEEP>/code/[0-9a-f]{12,64}", "<SWEEP>/code/<CODE>", text)
    return re.sub(r"SCALELAB_CODE=[0-9a-f]{12,64}", "SCALELAB_CODE=<CODE>", text)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.sh"
    if os.environ.get("SCALELAB_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden {path} (SCALELAB_UPDATE_GOLDEN=1 writes it)"
    assert text == path.read_text(), f"sbatch script differs from {path}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_sbatch_script_matches_golden(case, tmp_path):
    launcher, n = CASES[case]
    sweep = tmp_path / "sweep"
    text = render_sbatch(launcher, sweep / "jobs" / "%j", n, python="/venv/bin/python",
                         job_name="scalelab-sweep", code_dir=sweep / "code" / "0123456789ab")
    check_golden(case, normalise(text, sweep, "/venv/bin/python"))


def test_goldens_say_what_matters():
    array = (GOLDEN / "array_cpu.sh").read_text()
    assert "#SBATCH --array=0-4%4" in array  # 5 runs, at most 4 at once
    assert "#SBATCH --signal=USR2@60" in array  # submitit's checkpoint signal, 60 s before the limit
    assert "#SBATCH --time=30" in array and "#SBATCH --partition=debug" in array
    assert "export PYTHONPATH=<SWEEP>/code/<CODE>${PYTHONPATH:+:$PYTHONPATH}" in array  # code snapshot first
    assert "export PYTHONSAFEPATH=1" in array  # and not the submit directory's checkout
    assert "<PYTHON> -u -m submitit.core._submit" in array
    gpu = (GOLDEN / "multinode_gpu.sh").read_text()
    assert "--array" not in gpu
    for flag in ("--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4", "--cpus-per-task=8",
                 "--mem=256G", "--account=proj", "--qos=high", "--constraint=h100", "--exclusive"):
        assert f"#SBATCH {flag}" in gpu, flag
