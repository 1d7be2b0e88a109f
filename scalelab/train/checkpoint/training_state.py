"""A run's checkpoint: which rank writes what, and loading it back into the model and optimizer.

``scalelab.train.checkpoint.directory`` holds the directory protocol (temporary directory, every
file fsynced, the manifest of every file's size and sha256 written last, atomic rename,
pruning, corrupt-checkpoint fallback). Two layouts go through it:

- replicated (one process, DDP): rank 0 writes ``state.pt`` with everything.
- sharded (``train.parallelism: fsdp``): every rank writes its shards of the model and the
  optimizer state through DCP (``scalelab.train.checkpoint.dcp``) into rank 0's temporary directory;
  rank 0 adds ``state.pt`` (step, RNG states, records position, elapsed time, run id),
  hashing it as it is written; then each rank hashes 1/W of the DCP files, rank 0 gathers
  the digests, writes the manifest and renames.

Loading (``restore``): rank 0 picks the newest intact checkpoint (every file hashed;
corrupt ones reported in one line and set aside) and broadcasts its name; every rank then
loads that one, whatever its layout: DCP reshards a sharded checkpoint into any world size,
sharded or not, and a replicated ``state.pt`` is loaded whole on every rank and sharded
like the live model. So ``train.parallelism`` (operational) may change between attempts.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from scalelab.train.checkpoint import directory as ckpt
from scalelab.train.checkpoint.manifest import file_digest
from scalelab.train.parallel.fsdp import is_sharded, load_full_state

__all__ = ["restore", "save"]


def _multi() -> bool:
    return dist.is_initialized() and dist.get_world_size() > 1


def _from_rank0(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (a collective; identity for one process)."""
    if not _multi():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save(run_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
         extras: dict[str, Any]) -> None:
    """Checkpoint ``step`` (a collective: every rank calls it). ``extras``: the rest of
    ``state.pt`` (tensors and primitives)."""
    main = not dist.is_initialized() or dist.get_rank() == 0
    state = {"step": step, **extras}
    if not is_sharded(model):
        if main:
            state.update(model=model.state_dict(), optimizer=optimizer.state_dict())
            ckpt.save_checkpoint(run_dir, step, state)
    else:
        _save_sharded(run_dir, step, model, optimizer, state, main)
    if dist.is_initialized():
        dist.barrier()


def _save_sharded(run_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
                  state: dict[str, Any], main: bool) -> None:
    from scalelab.train.checkpoint import dcp

    tmp = Path(_from_rank0(str(ckpt.begin_checkpoint(run_dir, step)) if main else None))
    try:
        dcp.save(tmp, model, optimizer)
        files = {ckpt.STATE_FILE: ckpt.write_state(tmp, state)} if main else {}
        names = _from_rank0(sorted(p.name for p in tmp.iterdir() if p.name != ckpt.STATE_FILE)
                            if main else None)
        rank, world = dist.get_rank(), dist.get_world_size()
        mine = {name: file_digest(tmp / name) for name in names[rank::world]}
        gathered: list[Any] = [None] * world if main else None
        dist.gather_object(mine, gathered, dst=0)
        if main:
            for part in gathered:
                files.update(part)
            ckpt.commit_checkpoint(run_dir, tmp, step, files)
    except BaseException:
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def restore(run_dir: Path, model: nn.Module, optimizer: torch.optim.Optimizer, *,
            log: Callable[[str], None]) -> dict[str, Any] | None:
    """Load the newest intact checkpoint into ``model`` and ``optimizer`` (a collective);
    returns its ``state.pt`` dict, or None when there is none (nothing loaded)."""
    main = not dist.is_initialized() or dist.get_rank() == 0
    found = ckpt.find_checkpoint(run_dir, log=log, set_aside=True) if main else None
    name = _from_rank0(found[0].name if found else None)
    if name is None:
        return None
    directory = Path(run_dir) / ckpt.CHECKPOINT_DIR / name
    state = found[1] if main else ckpt.read_state(directory)
    if ckpt.is_sharded(directory):
        from scalelab.train.checkpoint import dcp

        dcp.load(directory, model, optimizer)
    elif is_sharded(model):
        load_full_state(model, optimizer, state["model"], state["optimizer"])
    else:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    return state
