"""Several ``train()`` runs on the same gloo ranks, one process per rank (FSDP tests).

Starting a rank costs seconds (torch, scalelab, a process group), so one pair of ranks runs
a list of jobs in order, sharing one process group. A job may be "killed": every rank
raises ``Killed`` when step ``kill_at`` starts (before any collective of that step), the
run is left FAILED with its checkpoints on disk, like a job killed between two
checkpoints; a later job with the same run directory resumes it. A job may also corrupt
one file of the newest checkpoint first (rank 0 does it, the others wait).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch


class Killed(BaseException):
    """Raised on every rank at the start of step ``kill_at``."""


@dataclass(frozen=True)
class Job:
    overrides: tuple[str, ...]
    run_dir: str
    kill_at: int | None = None  # 1-based step at whose start every rank stops
    corrupt: str | None = None  # before the job: flip a byte of this file of the newest checkpoint


def flip_byte(path: Path) -> None:
    """Flip one bit in the middle of ``path`` (size unchanged: only the sha256 can tell)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _newest_checkpoint(run_dir: Path) -> Path:
    return max((run_dir / "checkpoint").glob("step-*"))


def run_jobs(rank: int, world: int, port: int, jobs: list[Job], out: str) -> None:
    """Body of one rank (spawned): torchrun's environment, then each job's ``train()``.
    Writes ``out.<rank>`` with each job's final state name."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    import torch.distributed as dist

    from scalelab.config import load_run_config
    from scalelab.model import memory
    from scalelab.train import loop, train

    memory.PLAIN_LOSS_MAX_LOGITS = 0  # these tiny models take the chunked loss, as at scale

    dist.init_process_group("gloo", rank=rank, world_size=world)
    real = loop.forward_backward
    results = []
    for job in jobs:
        if job.corrupt is not None:
            if rank == 0:
                flip_byte(_newest_checkpoint(Path(job.run_dir)) / job.corrupt)
            dist.barrier()
        calls = {"n": 0}

        def killing(*args, job=job, calls=calls, **kwargs):
            calls["n"] += 1
            if calls["n"] == job.kill_at:
                raise Killed(f"killed at the start of step {job.kill_at}")
            return real(*args, **kwargs)

        loop.forward_backward = killing
        try:
            state = train(load_run_config(None, list(job.overrides)), Path(job.run_dir))
            results.append(state.value)
        except Killed:
            results.append("KILLED")
        finally:
            loop.forward_backward = real
    torch.save(results, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)


def spawn_jobs(world: int, jobs: list[Job], out: Path, timeout: float) -> list[str]:
    """Run ``jobs`` on ``world`` spawned gloo ranks; returns rank 0's final states."""
    from _train_util import spawn_ranks

    spawn_ranks(world, run_jobs, (jobs, str(out)), timeout)
    return torch.load(f"{out}.0", weights_only=True)
