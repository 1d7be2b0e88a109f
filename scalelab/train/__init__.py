"""The training loop: ``train(cfg, run_dir) -> State`` (issue 2).

    from scalelab.config import load_run_config
    from scalelab.train import train
    state = train(load_run_config("sweeps/examples/train_cpu.yaml"), "runs/demo")

Pieces, one concept per module: ``optimizers`` (name -> builder registry), ``schedules``
(pure lr multipliers), ``step`` (forward/backward, eval), ``records`` (tidy parquet),
``record_files`` / ``record_gaps`` / ``records_check`` (corrupt record files: detection,
lost steps, the quick look of status and collect), ``divergence`` (the pure DIVERGED
rule), ``checkpoint`` (atomic, resumable), ``run_checkpoint`` (which rank writes what, and
loading back), ``dcp`` (sharded checkpoint files), ``fsdp`` (FSDP2 sharding), ``norms``
(per-layer norm records), ``distributed`` (torchrun/srun detection, DDP sharding),
``precision``, ``seeds``, ``signals``, ``meta``, ``tracker`` (optional wandb),
``sweep_context`` (a run's sweep, block and axes, for W&B), and the run's printed lines:
``progress_log`` (pure formatting, text or JSON), ``progress_meter`` (tokens/s, ETA),
``mfu`` (peak FLOP/s table), ``console`` (printing, quiet or not).
"""

from importlib import import_module
from typing import Any

__all__ = ["REGISTRY", "build_optimizer", "lr_at", "register", "train"]

# Lazy: ``scalelab.train.schedules`` (pure) must import without torch, data or model.
_HOME = {
    "train": "scalelab.train.loop",
    "REGISTRY": "scalelab.train.optimizers",
    "register": "scalelab.train.optimizers",
    "build_optimizer": "scalelab.train.optimizers",
    "lr_at": "scalelab.train.schedules",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(_HOME[name]), name)
    raise AttributeError(f"module 'scalelab.train' has no attribute {name!r}")
