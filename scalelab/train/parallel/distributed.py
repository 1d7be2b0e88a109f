"""Process topology for ``train()``: single process, torchrun, or srun — detected, not configured.

- torchrun (and any launcher that sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``) wins.
- srun: ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS`` (or ``SLURM_NTASKS``), ``SLURM_LOCALID``;
  ``MASTER_ADDR`` = the first host of ``SLURM_STEP_NODELIST``/``SLURM_NODELIST``,
  ``MASTER_PORT`` = ``20000 + job_id % 20000`` (same on every task of the job, distinct
  across concurrent jobs sharing a node) unless already set.
- otherwise: one process, no process group.

Backend: NCCL on CUDA, gloo on CPU. Batch sharding: rank ``r`` of ``W`` takes the
*contiguous* rows ``[r * B/W, (r + 1) * B/W)`` of the global batch of ``B`` sequences
(B % W == 0 is required), so the concatenation over ranks is the single-process batch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from scalelab.errors import UserError

__all__ = [
    "DistEnv",
    "all_mean",
    "any_rank",
    "detect",
    "first_host",
    "pick_device",
    "port_from_job",
    "setup",
    "shard_slice",
    "teardown",
]


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits. ``launcher`` is 'single', 'torchrun' or 'slurm'."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    launcher: str = "single"
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def first_host(nodelist: str) -> str:
    """First host of a Slurm hostlist: ``'gpu[003-004,9],cpu1'`` -> ``'gpu003'``."""
    depth, item = 0, []
    for ch in nodelist.strip():
        if ch == "," and depth == 0:
            break
        depth += {"[": 1, "]": -1}.get(ch, 0)
        item.append(ch)
    host = "".join(item)
    # each bracket group contributes its first element: '01-04,07' -> '01'
    return re.sub(r"\[([^\]]*)\]", lambda m: re.split(r"[,-]", m.group(1))[0], host)


def port_from_job(job_id: str | int | None) -> int:
    """A rendezvous port derived from the Slurm job id (29500 when there is none)."""
    digits = re.sub(r"\D", "", str(job_id or ""))
    return 20000 + int(digits) % 20000 if digits else 29500


def detect(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Read the launcher's environment (pure: pass ``environ`` to test)."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return DistEnv(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env.get("LOCAL_RANK", 0)),
            launcher="torchrun",
            master_addr=env.get("MASTER_ADDR"),
            master_port=int(env["MASTER_PORT"]) if env.get("MASTER_PORT") else None,
        )
    ntasks = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS")
    if "SLURM_PROCID" in env and ntasks and int(ntasks) > 1:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST") or "localhost"
        job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
        return DistEnv(
            rank=int(env["SLURM_PROCID"]),
            world_size=int(ntasks),
            local_rank=int(env.get("SLURM_LOCALID", 0)),
            launcher="slurm",
            master_addr=env.get("MASTER_ADDR") or first_host(nodelist),
            master_port=int(env["MASTER_PORT"]) if env.get("MASTER_PORT") else port_from_job(job),
        )
    return DistEnv()


def pick_device(requested: str, env: DistEnv) -> torch.device:
    """'auto' -> cuda:<local_rank> when CUDA exists, else cpu."""
    if requested not in ("auto", "cpu", "cuda") and not requested.startswith("cuda:"):
        raise UserError(f"unknown device {requested!r} (auto, cpu, cuda)", key="train.device")
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError("device 'cuda' requested but CUDA is not available", key="train.device")
    if requested.startswith("cuda:"):
        return torch.device(requested)
    return torch.device("cuda", env.local_rank % torch.cuda.device_count())


def setup(env: DistEnv, device: torch.device) -> None:
    """Initialise the default process group (no-op for one process)."""
    if not env.distributed or dist.is_initialized():
        return
    if env.master_addr:
        os.environ.setdefault("MASTER_ADDR", env.master_addr)
    if env.master_port:
        os.environ.setdefault("MASTER_PORT", str(env.master_port))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=env.rank, world_size=env.world_size)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def shard_slice(global_batch: int, env: DistEnv) -> slice:
    """The contiguous rows of the global batch that this rank trains on."""
    if global_batch % env.world_size:
        raise UserError(
            f"batch_size {global_batch} is not divisible by world size {env.world_size}",
            key="train.batch_size",
        )
    per = global_batch // env.world_size
    return slice(env.rank * per, (env.rank + 1) * per)


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when ``flag`` is True on any rank (a collective; all must call)."""
    if not dist.is_initialized():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def all_mean(value: torch.Tensor) -> torch.Tensor:
    """Mean of ``value`` over ranks (a collective; identity for one process)."""
    if not dist.is_initialized():
        return value
    value = value.detach().clone()
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value / dist.get_world_size()
