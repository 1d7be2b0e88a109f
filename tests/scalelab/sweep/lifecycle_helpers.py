"""Shared helpers for the sweep lifecycle tests (specs on disk, the fake trainer, Slurm probes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _waits import CEILING_S, wait_until

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
FAKE = "fake_train:train"
"""The test double for scalelab.train.train (tests/scalelab/sweep/fake_train.py)."""
PYTHON = sys.executable

TINY_BASE = {
    "model": {"preset": "cpu-50k"},
    "data": {"seq_len": 16, "unique_tokens": 2048, "vocab_size": 256, "val_tokens": 4096},
    "train": {"batch_size": 4, "eval_every": 16, "eval_batches": 2, "checkpoint_every": 4,
              "norms_every": 0, "log_every": 1, "device": "cpu"},
}
"""A real training run of 32 steps (cpu-50k, fp32, CPU): ~1 s of training."""


def fake_env() -> dict[str, str]:
    """os.environ with this folder importable (for ``fake_train`` in child processes)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def fake_progress(run_dir: Path) -> int:
    """The last step the fake trainer has done in ``run_dir`` (0 before the first)."""
    try:
        return int((run_dir / "fake_progress").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def write_spec(path: Path, name: str, *, base: dict | None = None, grid: dict | None = None,
               launcher: dict | None = None, seeds: list[int] | None = None) -> Path:
    tree = {"name": name, "base": base or TINY_BASE, "grid": grid or {"optim.lr": [1e-3, 3e-3]}}
    if seeds is not None:
        tree["seeds"] = seeds
    tree["launcher"] = launcher or {"executor": "local", "max_parallel": 2}
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def plan_of(spec_path: Path):
    from scalelab.sweep.plan.datasets import dataset_facts
    from scalelab.sweep.plan.expand import expand
    from scalelab.sweep.spec.load import load_spec

    spec = load_spec(spec_path)
    return expand(spec, datasets=dataset_facts(spec))


_UP = ("idle", "mixed", "alloc", "allocated", "completing")
"""sinfo node states of a node that runs jobs (``completing``: finishing the last one)."""


def _sinfo_states() -> tuple[list[str], str]:
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                             timeout=CEILING_S, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return [], f"sinfo failed: {err}"
    states = [s.strip().rstrip("*~#!%$@^-") for s in out.stdout.splitlines() if s.strip()]
    return states, out.stdout.strip() or out.stderr.strip()


def slurm_reason(settle_s: float = 120.0) -> str | None:
    """None when a real Slurm cluster answers here, else why not (for pytest.skip).

    A node that is only passing through a transient state (e.g. ``completing`` a previous
    test's job, or ``idle`` again after a restart) gets ``settle_s`` to come up: a busy
    machine slows the controller down, and that must not turn into a skipped test."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no Slurm client (sinfo/sbatch) on PATH; CI starts one with scripts/local_slurm.sh"
    deadline = time.monotonic() + settle_s
    while True:
        states, said = _sinfo_states()
        if any(s.startswith(_UP) for s in states):
            return None
        if time.monotonic() > deadline:
            return f"Slurm cluster not up after {settle_s:.0f} s (sinfo: {said})"
        time.sleep(1.0)


def slurm_jobs_queued(job_ids) -> bool:
    """True while any of ``job_ids`` (array ids cover their tasks) is still in Slurm's queue
    (pending, running, completing). A failing squeue counts as 'still queued': the wait
    then ends at its ceiling rather than on a guess."""
    ids = ",".join(str(j).split("_")[0] for j in job_ids)
    try:
        out = subprocess.run(["squeue", "-h", "-j", ids, "-o", "%i"], capture_output=True, text=True,
                             timeout=CEILING_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return True
    if out.returncode != 0:
        return "Invalid job id" not in out.stderr  # squeue refuses ids it has forgotten: gone
    return bool(out.stdout.strip())


SACCT_FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
               "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
"""sacct states after which a job's record no longer changes."""


def slurm_jobs_accounted(job_ids) -> bool:
    """True once sacct reports a final state for each of ``job_ids`` (array ids: each of
    their tasks). The accounting daemon records a job's end after it leaves squeue, by up to
    seconds on a loaded machine, and the sweep's view of a killed run (CANCELLED) reads
    sacct; a failing sacct counts as 'not yet'."""
    ids = ",".join(str(j).split("_")[0] for j in job_ids)
    try:
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", ids, "-o", "State"], capture_output=True,
                             text=True, timeout=CEILING_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    states = [ln.split()[0] for ln in out.stdout.splitlines() if ln.strip()]
    return out.returncode == 0 and bool(states) and all(st in SACCT_FINAL for st in states)


def wait_for_jobs(predicate, what: str, job_ids):
    """``wait_until(predicate)`` while the Slurm jobs ``job_ids`` are queued or running, or
    sacct has not yet recorded how they ended; after that the predicate must hold (their
    status files and their accounting are final)."""
    def alive() -> bool:
        return slurm_jobs_queued(job_ids) or not slurm_jobs_accounted(job_ids)

    return wait_until(predicate, what, alive=alive, every=0.5)


@pytest.fixture
def slurm_cluster(monkeypatch):
    """Skip (with the reason) unless a real Slurm answers; jobs get one thread each.
    A Slurm test module imports it and marks itself ``usefixtures("slurm_cluster")``."""
    reason = slurm_reason()
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def scalelab(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = CEILING_S):
    """Run the CLI in a fresh process; returns the CompletedProcess."""
    return subprocess.run([PYTHON, "-m", "scalelab", *args], capture_output=True, text=True,
                          env=env or fake_env(), cwd=cwd, timeout=timeout, check=False)


def cli(*args: str) -> int:
    """Run the CLI in this process (fast; capture output with capsys); returns the exit code."""
    from scalelab.cli import main

    try:
        main(list(args))
    except SystemExit as done:
        return int(done.code or 0)
    return 0
