"""bench/optim_step.py at toy sizes: it runs and prints its table, one row per optimizer with
what it covers, ms/step and the ratio to its torch reference. The timings are never asserted:
they describe the machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _waits import CEILING_S

ROOT = Path(__file__).resolve().parents[2]
ROWS = [
    ("torch.optim.AdamW(foreach=True)", "all 12 tensors"),
    ("optim.AdamW(foreach=True)", "all 12 tensors"),
    ("optim.AdamW(foreach=False)", "all 12 tensors"),
    ("torch.optim.Muon", "7 hidden matrices"),
    ("optim.Muon(foreach=True)", "7 hidden matrices"),
    ("optim.Muon(foreach=False)", "7 hidden matrices"),
]


def test_toy_run_prints_the_table():
    args = ["--d-model", "16", "--layers", "1", "--vocab", "32", "--steps", "1", "--reps", "2", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "optim_step.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=CEILING_S, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("optimizer"))
    assert lines[head].split() == ["optimizer", "covers", "ms/step", "vs", "torch"]
    rows = lines[head + 1 :]
    assert len(rows) == len(ROWS)
    for row, (name, covers) in zip(rows, ROWS):
        assert row.startswith(name + " ") and covers in row, row
        ms, ratio = row.split()[-2:]
        assert float(ms) >= 0 and ratio.endswith("x") and float(ratio[:-1]) >= 0, row
    assert rows[0].endswith(" 1.00x") and rows[3].endswith(" 1.00x")  # each block's reference
    assert "hidden matrices only on both sides" in proc.stdout
