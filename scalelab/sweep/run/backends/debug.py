"""The debug backend: every run in this process, one after another (pdb-friendly).

A run's launcher ``env`` is set in this process's environment while it trains, then
restored (``setup`` lines are for Slurm jobs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from scalelab.sweep.run.backends.base import Backend, Handle, Hooks, job_env
from scalelab.sweep.run.job import JobSpec, run_in_process

__all__ = ["DebugBackend"]


class DebugBackend(Backend):
    name = "debug"

    def __init__(self) -> None:
        self._pending: dict[str, JobSpec] = {}
        self._env: dict[str, dict[str, str]] = {}
        self._done: dict[str, str] = {}

    def submit(self, jobs: Sequence[JobSpec], launcher: Any = None) -> list[Handle]:
        handles = []
        for i, job in enumerate(jobs, start=len(self._pending) + len(self._done)):
            handle = Handle(job.run_id, job.run_dir, f"debug-{i}", self.name)
            self._pending[handle.job_id] = job
            self._env[handle.job_id] = job_env(launcher)
            handles.append(handle)
        return handles

    def poll(self, handles: Sequence[Handle]) -> dict[str, str]:
        return {h.job_id: self._done.get(h.job_id, "PENDING") for h in handles}

    def wait(self, handles: Sequence[Handle], hooks: Hooks | None = None) -> dict[str, str]:
        hooks = hooks or Hooks()
        results = {}
        for handle in handles:
            job = self._pending.pop(handle.job_id, None)
            if job is not None:
                hooks.started(handle, None)
                with _environment(self._env.pop(handle.job_id, {})):
                    state = run_in_process(job).value
                self._done[handle.job_id] = state
                hooks.finished(handle, state)
            results[handle.run_id] = self._done[handle.job_id]
        return results


@contextlib.contextmanager
def _environment(extra: dict[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``extra`` inside the block, as it was after it."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
