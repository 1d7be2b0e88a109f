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
    ("torch.optim.AdamW(foreach=True)", "fp32", "all 12 tensors"),
    ("optim.AdamW(foreach=True)", "fp32", "all 12 tensors"),
    ("optim.AdamW(foreach=False)", "fp32", "all 12 tensors"),
    ("optim.AdamW bf16 SR", "bf16", "all 12 tensors"),
    ("optim.AdamW bf16 SR, bf16 moments", "bf16", "all 12 tensors"),
    ("torch.optim.Muon", "fp32", "7 hidden matrices"),
    ("optim.Muon(foreach=True)", "fp32", "7 hidden matrices"),
    ("optim.Muon(foreach=False)", "fp32", "7 hidden matrices"),
]
"""The rows without torchao (its bf16 SR-AdamW row is added only where torchao imports)."""


def test_toy_run_prints_the_table():
    args = ["--d-model", "16", "--layers", "1", "--vocab", "32", "--steps", "1", "--reps", "2", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "optim_step.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=CEILING_S, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| optimizer"))
    cells = [c.strip() for c in lines[head].strip("|").split("|")]
    assert cells == ["optimizer", "params", "covers", "ms/step", "vs torch", "state MB"]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[head + 2:]
            if line.startswith("|")]
    rows = [r for r in rows if not r[0].startswith("torchao")]
    assert len(rows) == len(ROWS), rows
    for row, (name, dtype, covers) in zip(rows, ROWS):
        assert row[0] == name and row[1] == dtype and row[2].startswith(covers), row
        ms, ratio, mb = row[3:]
        assert float(ms) >= 0 and ratio.endswith("x") and float(ratio[:-1]) >= 0 and float(mb) > 0, row
    assert rows[0][4] == "1.00x" and rows[5][4] == "1.00x"  # each block's reference
    assert "hidden matrices only on both sides" in proc.stdout
