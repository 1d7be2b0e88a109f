"""A small real sweep for the report and notebook tests, trained with the debug backend
(in-process): five model sizes (n_layers 1..5 of cpu-50k) x two weight decays tagged as two
recipes (extra.recipe: standard, regularized), plus the standard recipe at three more
unique-token budgets (block ``data``); per-layer norms logged (norms_every > 0); a few
steps per run. Built once per session, then collected with ``scalelab collect``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from _waits import CEILING_S

SPEC = {
    "name": "tiny_report",
    "base": {
        "model": {"preset": "cpu-50k"},
        "data": {"dataset": "default", "seq_len": 16, "unique_tokens": 512, "epochs": 2, "val_tokens": 2048,
                 "subset_seed": 0},
        "optim": {"name": "adamw", "lr": 3.0e-3, "weight_decay": 0.1},
        "train": {"batch_size": 8, "eval_every": 4, "eval_batches": 2, "norms_every": 4,
                  "checkpoint_every": 1000, "device": "cpu"},
    },
    "launcher": {"executor": "debug"},
    "blocks": [
        {"name": "tuned", "grid": {"model.n_layers": [1, 2, 3, 4, 5]},
         "zip": [{"optim.weight_decay": [0.1, 0.8], "extra.recipe": ["standard", "regularized"]}]},
        {"name": "data", "base": {"model": {"n_layers": 2}, "optim": {"weight_decay": 0.1}},
         "grid": {"data.unique_tokens": [256, 1024, 2048]}},
    ],
}


def scalelab(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh process, one thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "scalelab", *args], capture_output=True, text=True,
                          env=env, timeout=CEILING_S, check=False)


def build(root: Path) -> Path:
    """Train and collect the sweep under ``root``; returns its directory."""
    spec = root / "tiny_report.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    done = scalelab("sweep", str(spec), "--root", str(root))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    sweep = root / SPEC["name"]
    done = scalelab("collect", str(sweep))
    assert done.returncode == 0, done.stderr[-2000:]
    return sweep
