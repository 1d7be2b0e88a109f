"""``meta.json``: what ran this attempt — code version, packages, machine."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

import scalelab
from scalelab.quant.select import gemm_path
from scalelab.store.status import now
from scalelab.train.parallel.distributed import DistEnv

__all__ = ["collect_meta", "git_info"]


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_info(code_dir: str | Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the checkout holding ``code_dir`` (default: this package).

    ``{"commit": None, "dirty": None, "note": "not a git checkout"}`` when the code is not
    in a git work tree (an installed wheel, a sweep's code snapshot).
    """
    code_dir = Path(code_dir or Path(scalelab.__file__).resolve().parent)
    top = _git(["rev-parse", "--show-toplevel"], code_dir)
    if not top:
        return {"commit": None, "dirty": None, "note": "not a git checkout", "path": str(code_dir)}
    commit = _git(["rev-parse", "HEAD"], code_dir)
    status = _git(["status", "--porcelain", "--untracked-files=no"], code_dir)
    return {"commit": commit, "dirty": bool(status), "path": top}


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def collect_meta(device: torch.device, env: DistEnv, precision: str | None = None) -> dict[str, Any]:
    """The meta.json of one attempt (rank 0 writes it at every start). ``gemm_path``: which
    GEMMs a quantized ``precision`` ran ('emulated', ``scalelab.quant.select``), else None."""
    return {
        "git": git_info(),
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "numpy": np.__version__,
            "polars": pl.__version__,
            "scalelab": scalelab.__version__,
            "cuda": torch.version.cuda,
        },
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "device": {"type": device.type, "name": _device_name(device)},
        "world_size": env.world_size,
        "launcher": env.launcher,
        "torch_threads": torch.get_num_threads(),
        "gemm_path": None if precision is None else gemm_path(precision, device.type),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "argv": sys.argv,
        "started": now(),
    }
