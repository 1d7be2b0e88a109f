"""The one interface every backend implements.

``submit`` hands jobs to the backend, with the launcher they run under (resources, setup
lines, environment), and returns one ``Handle`` per job; ``poll`` reports
the backend's view of many handles in ONE batched call; ``wait`` blocks until the jobs
end. Lazy backends (debug, local) do their work in ``wait``; Slurm does it in ``submit``
and ``sweep`` returns at once. ``Hooks`` lets the launcher follow execution (to keep
run claims up to date) without backends knowing about claims. One conformance suite,
``tests/scalelab/sweep/test_backends_conformance.py``, runs against every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from scalelab.errors import UserError
from scalelab.sweep.run.job import JobSpec

__all__ = ["ALIVE_STATES", "Backend", "Handle", "Hooks", "job_env"]

ALIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED",
     "CONFIGURING", "COMPLETING", "SIGNALING", "STAGE_OUT", "QUEUED"}
)
"""Scheduler states in which a job may still execute its run."""


@dataclass(frozen=True)
class Handle:
    """A submitted job: which run, and the backend's id for it."""

    run_id: str
    run_dir: str
    job_id: str
    backend: str


class SubmitError(UserError):
    """The scheduler refused a submission (bad partition, account, limits...), or this
    machine cannot submit (a Slurm client missing): one line, exit 2. ``handles`` are the
    jobs that were queued before the failure; ``key``: what to fix (None: the machine)."""

    def __init__(self, message: str, handles: list[Handle], *, key: str | None = "launcher") -> None:
        super().__init__(message, key=key)
        self.handles = handles


class Hooks:
    """Callbacks a backend makes while it executes (no-ops by default)."""

    def started(self, handle: Handle, pid: int | None) -> None:
        """The job began executing (``pid``: the training process, when local)."""

    def finished(self, handle: Handle, state: str) -> None:
        """The job ended; ``state`` is the run's final state on disk."""

    def tick(self) -> None:
        """Called every few seconds while a blocking backend waits (heartbeats)."""


def job_env(launcher: Any) -> dict[str, str]:
    """``launcher.env`` as the strings a process environment holds ({} for None)."""
    return {str(k): str(v) for k, v in (getattr(launcher, "env", None) or {}).items()}


class Backend(ABC):
    """Executes ``JobSpec``s. Subclasses: debug (in-process), local, slurm."""

    name: ClassVar[str]
    returns_at_once: ClassVar[bool] = False
    """True when jobs run on their own after ``submit`` (a cluster): ``sweep`` need not wait."""

    @abstractmethod
    def submit(self, jobs: Sequence[JobSpec], launcher: Any = None) -> list[Handle]:
        """Hand ``jobs`` to the backend; one handle each, in order. ``launcher`` (a
        ``LauncherConfig``; None = the backend's own) is how they all run: on Slurm one
        job array (or more, split at MaxArraySize) per call."""

    @abstractmethod
    def poll(self, handles: Sequence[Handle]) -> dict[str, str]:
        """``job_id -> state`` (scheduler vocabulary: PENDING, RUNNING, COMPLETED, FAILED,
        CANCELLED, TIMEOUT, PREEMPTED, ..., UNKNOWN) for all handles in one batched call."""

    @abstractmethod
    def wait(self, handles: Sequence[Handle], hooks: Hooks | None = None) -> dict[str, str]:
        """Block until the jobs end; returns ``run_id -> final run state``."""
