"""The ``launcher:`` and ``tune:`` sections of a sweep spec (typed, frozen, documented).

Neither section enters run ids: the launcher is operational (``scalelab/identity.py``) and tuning
only decides which runs exist. A block may set its own ``launcher`` and ``derive`` rules may
compute its numeric keys per run (``scalelab.sweep.spec.launcher``). Range checks live in
``resources.check_launcher`` and ``spec.load_spec`` so that errors name the exact key and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["KIM_AXES", "LauncherConfig", "TuneConfig", "TuneParam"]


@dataclass(frozen=True, kw_only=True)
class LauncherConfig:
    """Where and how runs execute. Operational: never part of a run id."""

    executor: Literal["auto", "slurm", "local", "debug"] = "auto"
    """'auto' = slurm when ``sbatch`` and ``srun`` are on PATH and a controller answers
    ``sinfo``, else local (every launch prints the choice and why); 'debug' = in-process.
    Sweep-wide: top-level launcher only."""
    partition: str | None = None
    """Slurm partition (``--partition``)."""
    account: str | None = None
    """Slurm account (``--account``)."""
    qos: str | None = None
    """Slurm QOS (``--qos``)."""
    gpus_per_node: int = 0
    """GPUs per node (``--gpus-per-node``); 0 = CPU jobs."""
    nodes: int = 1
    """Nodes per run (multi-node runs use torchrun's environment)."""
    tasks_per_node: int = 1
    """Processes per node (one per GPU for DDP/FSDP)."""
    cpus_per_task: int = 1
    """CPU cores per process (``--cpus-per-task``; local executor: each run's OMP_NUM_THREADS
    unless the environment sets it)."""
    mem_gb: float | None = None
    """Memory per node in GiB (None = the partition default)."""
    gpu_mem_gb: float | None = None
    """Memory of one GPU in GiB (e.g. 80 for an H100), for the plan's memory check
    (``scalelab.model.memory``): 'train.micro_batch_size: auto' takes the largest
    micro-batch that fits 90% of it, and a run that cannot fit is refused. None = no check."""
    time_min: int = 60
    """Wall-clock limit per job in minutes; a run hitting it checkpoints and is requeued, up
    to submitit's 3 time limits; then it reads TIMEOUT and `scalelab retry --preempted`
    resumes it."""
    array_parallelism: int = 256
    """Most array tasks of one sweep running at once (``%N`` of ``--array``)."""
    max_array_size: int | None = None
    """Largest array per sbatch; None = MaxArraySize from ``scontrol show config``, else 1000."""
    max_parallel: int | None = None
    """Local executor: concurrent run processes (None = CPU cores / cpus_per_task).
    Sweep-wide: top-level launcher only."""
    throughput_tokens_per_gpu_s: float | None = None
    """Measured training tokens/s per GPU, for the plan's GPU-hours (one model size only)."""
    flops_per_gpu_s: float | None = None
    """Achieved training FLOP/s per GPU (peak x MFU, e.g. 989e12 x 0.4 for an H100 in
    bf16), for GPU-hours across model sizes: gpu_hours = flops / flops_per_gpu_s / 3600.
    Give this or ``throughput_tokens_per_gpu_s``, not both."""
    slurm_additional: dict[str, Any] = field(default_factory=dict)
    """Extra sbatch options passed through submitit (e.g. {constraint: h100})."""
    setup: tuple[str, ...] = ()
    """Shell lines the Slurm job script runs before the job, in order (e.g. 'module load
    cuda/12.4', 'source ~/venvs/lab/bin/activate'): submitit's ``setup``. Jobs still run
    the Python that submitted them, by its path. Slurm only: the local and debug executors
    run where you launched, set up already."""
    env: dict[str, str | int | float] = field(default_factory=dict)
    """Environment variables of the job, e.g. {NCCL_DEBUG: WARN}: exported after ``setup``
    on Slurm, set in the run's process on the local and debug executors. Values are taken
    literally (no ``$VAR`` expansion)."""
    root: str | None = None
    """Sweep root when neither ``--root`` nor ``$SCALELAB_ROOT`` is given (default ./runs).
    Sweep-wide: top-level launcher only."""
    requeue: bool = True
    """Requeue preempted / timed-out jobs; they resume from the run's checkpoint."""
    signal_delay_s: int = 120
    """Seconds before the time limit that Slurm signals the job to checkpoint."""


@dataclass(frozen=True, kw_only=True)
class TuneParam:
    """One dimension of an Optuna search space: a range (low/high[/log][/step]) or choices."""

    low: float | None = None
    """Lower bound (inclusive)."""
    high: float | None = None
    """Upper bound (inclusive)."""
    log: bool = False
    """Sample log-uniformly (learning rates, weight decay)."""
    step: float | None = None
    """Discretisation step (not with log)."""
    choices: tuple[Any, ...] | None = None
    """Categorical values instead of a range."""


KIM_AXES = ("data.epochs", "optim.lr", "optim.weight_decay")
"""Kim et al. 2025 (arXiv 2509.14786): the certified search is over (epochs, LR, WD)."""


@dataclass(frozen=True, kw_only=True)
class TuneConfig:
    """``scalelab tune``: an Optuna study or Kim et al.'s certified coordinate search."""

    method: Literal["optuna", "coordinate"] = "optuna"
    """'optuna': sample ``space``; 'coordinate': walk the ``grid`` values of ``axes``."""
    objective: Literal["final_loss", "best_loss"] = "final_loss"
    """Per-run metric: last validation eval loss, or the minimum over evals. A trial's
    value is the mean over its runs (seeds x members); a diverged run counts as +inf."""
    direction: Literal["minimize", "maximize"] = "minimize"
    n_trials: int = 20
    """Optuna: completed trials to reach (a re-run continues the same study)."""
    parallel: int = 1
    """Optuna: trials asked and launched together per round (one execute() call)."""
    sampler: Literal["tpe", "random"] = "tpe"
    sampler_seed: int = 0
    """Sampler seed (the study is reproducible given the same told values)."""
    space: dict[str, TuneParam] = field(default_factory=dict)
    """Optuna: dotted config key -> search dimension."""
    axes: tuple[str, ...] = KIM_AXES
    """Coordinate: ordered grid axes searched one step at a time; each must be a
    numeric ``grid`` key. Other grid axes (e.g. model.preset) give independent searches."""
    start: dict[str, Any] = field(default_factory=dict)
    """Coordinate: start value per axis (must be on the grid); default the middle value."""
    max_evals: int | None = None
    """Coordinate: cap on trained points per search (None = the grid size)."""
    ridge: bool = False
    """Coordinate and adaptive studies (``scalelab next``, ``sweep --adaptive``): a point's
    neighbours also include the point one step up on every axis at once and the point one
    step down. On the CPU twin the best (epochs, weight decay) cell moves along that
    diagonal, and one-axis steps stop short of it (docs/adaptive.md, "CPU twin comparison")."""
