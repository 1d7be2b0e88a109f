"""Backends behind one interface (``base.Backend``): debug, local, slurm.

``choose_executor(name)`` says which backend a launch uses, and why: the ``executor``
argument (CLI ``--executor``) wins over ``launcher.executor``; ``auto`` means Slurm when
``sbatch`` and ``srun`` are on PATH and a controller answers ``sinfo``, else local. A sweep
whose runs all train on CPU still goes to Slurm when one answers (a login node is no place
to train), and the launch says so: every launch with ``auto`` prints
``ExecutorChoice.line`` ("executor auto -> slurm (...)"). ``make_backend`` builds the
backend chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalelab.errors import UserError, did_you_mean
from scalelab.sweep.run.backends.base import ALIVE_STATES, Backend, Handle, Hooks, SubmitError

__all__ = ["ALIVE_STATES", "EXECUTORS", "Backend", "ExecutorChoice", "Handle", "Hooks", "SubmitError",
           "backend_for", "check_executor", "choose_executor", "make_backend", "resolve_executor"]

EXECUTORS = ("auto", "slurm", "local", "debug")

_CPU_ONLY = ("a CPU-only sweep (train.device cpu in every run) goes to Slurm all the same; "
             "--executor local runs it on this machine")
"""Said when ``auto`` sends a CPU-only sweep to Slurm (README.md, "Common commands")."""


@dataclass(frozen=True)
class ExecutorChoice:
    """The backend a launch uses (``name``: slurm | local | debug), the executor asked for
    (``requested``: one of ``EXECUTORS``) and, when ``auto`` chose, why."""

    name: str
    requested: str
    why: str = ""

    def line(self, *, cpu_only: bool = False) -> str | None:
        """``executor auto -> slurm (`sbatch` found at /usr/bin/sbatch)``, what a launch
        prints; None when the executor was named, not chosen. ``cpu_only``: every run
        trains on CPU, said when such a sweep goes to Slurm."""
        if self.requested != "auto":
            return None
        why = f"{self.why}; {_CPU_ONLY}" if cpu_only and self.name == "slurm" else self.why
        return f"executor auto -> {self.name} ({why})"


def check_executor(name: str | None) -> None:
    """A UserError unless ``name`` is None or one of ``EXECUTORS``."""
    if name is not None and name not in EXECUTORS:
        raise UserError(f"unknown executor {name!r}{did_you_mean(name, EXECUTORS)}", key="--executor")


def choose_executor(name: str | None) -> ExecutorChoice:
    """The backend for executor ``name`` (None = auto), and why. A one-line UserError for
    an unknown name, or for ``slurm`` on a machine that cannot submit to Slurm."""
    name = name or "auto"
    check_executor(name)
    if name not in ("auto", "slurm"):
        return ExecutorChoice(name, name)
    from scalelab.sweep.run.backends.slurm import ELSEWHERE, probe_cluster

    found, why = probe_cluster()
    if name == "slurm" and not found:
        raise UserError(f"executor slurm: {why}; {ELSEWHERE}")
    return ExecutorChoice("slurm" if found else "local", name, why)


def resolve_executor(name: str | None) -> str:
    """'auto' -> 'slurm' or 'local'; validates the name."""
    return choose_executor(name).name


def backend_for(choice: ExecutorChoice, launcher: Any, sweep_dir: str | Path, *,
                progress: bool = True) -> Backend:
    """The backend ``choice`` names, set up from ``launcher``."""
    if choice.name == "debug":
        from scalelab.sweep.run.backends.debug import DebugBackend

        return DebugBackend()
    if choice.name == "local":
        import os

        from scalelab.sweep.run.backends.local import LocalBackend

        parallel = launcher.max_parallel or max(1, (os.cpu_count() or 1) // max(1, launcher.cpus_per_task))
        return LocalBackend(parallel, progress=progress)
    from scalelab.sweep.run.backends.slurm import SlurmBackend

    return SlurmBackend(launcher, sweep_dir)


def make_backend(launcher: Any, sweep_dir: str | Path, executor: str | None = None, *,
                 progress: bool = True) -> Backend:
    """The backend for ``executor``, else ``launcher.executor`` (``choose_executor``)."""
    return backend_for(choose_executor(executor or launcher.executor), launcher, sweep_dir,
                       progress=progress)
