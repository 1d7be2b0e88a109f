"""The training loop: ``train(cfg, run_dir) -> State``.

    from scalelab.config import load_run_config
    from scalelab.train import train
    state = train(load_run_config("sweeps/examples/train_cpu.yaml"), "runs/demo")

At the top, the loop and what it calls each step: ``loop`` (``train``), ``step``
(forward/backward, eval), ``schedules`` (pure lr multipliers), ``optimizers`` (name ->
builder registry), ``divergence`` (the pure DIVERGED rule), ``precision``, ``seeds``,
``signals``, ``meta``. Below them, folders by concept, in import order (a folder imports
only those before it, never the top; ``tests/test_architecture.py`` holds it):

1. ``parallel/``: ``distributed`` (torchrun/srun detection, DDP sharding), ``fsdp`` (FSDP2).
2. ``checkpoint/``: ``directory`` (the atomic, verified ``step-N`` directories),
   ``training_state`` (which rank writes what, and loading back into model and
   optimizer), ``dcp`` (sharded checkpoint files), ``manifest`` (sizes and sha256), ``rng``.
3. ``records/``: ``records`` (tidy parquet), ``norms`` (per-layer norm records),
   ``record_files`` / ``record_gaps`` / ``records_check`` (corrupt record files: detection,
   lost steps, the quick look of status and collect), ``records_manifest``.
4. ``console/``: the run's printed lines, ``progress_log`` (pure formatting, text or JSON),
   ``progress_meter`` (tokens/s, ETA), ``mfu`` (peak FLOP/s table), ``console`` (printing,
   quiet or not); ``tracker`` (optional wandb) and ``sweep_context`` (a run's sweep, block
   and axes, for W&B).
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
