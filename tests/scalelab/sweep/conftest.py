"""Fixtures of the sweep tests: ``fake_slurm``, recording Slurm clients on PATH."""

from __future__ import annotations

import os

import pytest

FAKES = {
    "sbatch": """n=$(cat "$D/next_id" 2>/dev/null || echo 100)
if [ -f "$D/refuse_from" ] && [ "$n" -ge "$(cat "$D/refuse_from")" ]; then
  echo "sbatch: error: invalid partition specified: nope" >&2; exit 1; fi
echo $((n + 1)) > "$D/next_id"
cp "${@: -1}" "$D/sbatch_$n.sh"; echo "Submitted batch job $n" """,
    "squeue": 'cat "$D/squeue.out" 2>/dev/null; true',
    "sacct": 'cat "$D/sacct.out" 2>/dev/null; true',
    "scontrol": 'echo "MaxArraySize            = ${FAKE_MAX_ARRAY_SIZE:-1001}"',
    "sinfo": "echo idle",
    "srun": "exit 1",
}


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """Fake sbatch/squeue/sacct/scontrol/sinfo/srun that log every call to ``calls.log`` in
    the returned folder; sbatch keeps each script as ``sbatch_<job id>.sh`` (ids from 100)."""
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in FAKES.items():
        exe = bin_dir / name
        exe.write_text(f'#!/bin/bash\nD="{state}"\necho "{name} $*" >> "$D/calls.log"\n{body}\n')
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return state
