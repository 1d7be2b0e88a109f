"""The local backend: each run in its own process, at most ``max_parallel`` at once.

The processes run ``python -m scalelab.sweep.run.job RUN_DIR`` in a new session, so a
ctrl-C reaches only the launcher, which then asks every running trainer to stop at a
checkpoint (SIGTERM -> PREEMPTED, resumable by the next launch), waits for them, and
re-raises. Each run's output goes to ``<run_dir>/job.log``; its process gets the
launcher's ``env`` over this one's environment (``setup`` lines are for Slurm jobs).

Progress (``progress=True``): on a terminal (stderr a TTY) a rich bar; elsewhere (a pipe, a
log file, where a bar only shows at the end) ``RunLines``: one line on stderr per finished
run (``local: 3/17 runs, completed tuned_twin-26k-... loss 2.0134, 0:04:10``) and a
heartbeat every ``HEARTBEAT_S`` seconds while none finishes. Each line is a
``RunProgress`` event (``analysis.progress.Progress``), worded by ``count_line``.

Threads: a run process gets ``OMP_NUM_THREADS`` = ``launcher.cpus_per_task`` (``THREAD_VARS``),
unless this environment or the launcher's ``env`` sets it. Without it every process would
start one thread per core of the machine, and ``max_parallel`` of them would oversubscribe
the cores (measured on 2 cores, two twin-5.6k runs at once: 466 s each with 2 threads per
process, 108 s with 1). On Slurm the job's CPU allocation bounds the threads instead.
"""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scalelab.store.layout import EVALS_FILE, JOB_LOG
from scalelab.sweep.run.backends.base import Backend, Handle, Hooks, job_env
from scalelab.sweep.run.job import JobSpec, command, settle

__all__ = ["HEARTBEAT_S", "LocalBackend", "RunLines", "RunProgress"]

HEARTBEAT_S = 60.0
"""Seconds without a finished run after which a log gets a heartbeat line."""
_POLL_S = 0.1
_TICK_S = 30.0
_STOP_GRACE_S = 60.0


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Thread counts set per run process (module docstring)."""


def thread_env(launcher: Any) -> dict[str, str]:
    """``cpus_per_task`` threads per run process, unless OMP_NUM_THREADS is set here."""
    if launcher is None or "OMP_NUM_THREADS" in os.environ:
        return {}
    cpus = str(max(1, int(getattr(launcher, "cpus_per_task", 1) or 1)))
    return dict.fromkeys(THREAD_VARS, cpus)


def _clock_text(seconds: float) -> str:
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass(frozen=True)
class RunProgress:
    """A local sweep's progress (``analysis.progress.Progress``): ``done`` of ``total`` runs
    finished after ``elapsed_s``; the run that just finished (``run``, its ``state`` and final
    validation ``loss``), or none (a heartbeat, ``running`` still training)."""

    done: int
    total: int
    elapsed_s: float
    run: str = ""
    state: str = ""
    loss: float | None = None
    running: int = 0
    task: ClassVar[str] = "sweep"
    label: ClassVar[str] = "local runs"

    @property
    def final(self) -> bool:
        return self.done >= self.total

    @property
    def detail(self) -> str:
        elapsed = _clock_text(self.elapsed_s)
        if not self.run:
            return f"{self.running} running, {elapsed}"
        loss = f" loss {self.loss:.4f}" if self.loss is not None and math.isfinite(self.loss) else ""
        return f"{self.state.lower()} {self.run}{loss}, {elapsed}"

    def line(self) -> str:
        from analysis.progress import count_line

        return count_line("local", self.done, self.total, "runs", self.detail)


class RunLines:
    """Progress lines for a log: one per finished run, and a heartbeat when none has
    finished for ``every_s`` seconds of ``clock`` (module docstring). ``stream``: where
    they go (default: sys.stderr at each write)."""

    def __init__(self, total: int, *, clock: Callable[[], float] = time.monotonic,
                 every_s: float = HEARTBEAT_S, stream: IO[str] | None = None) -> None:
        self.total, self.clock, self.every_s, self._stream = total, clock, every_s, stream
        self.start = self.last = clock()
        self.done = 0

    def _emit(self, event: RunProgress) -> None:
        print(event.line(), file=self._stream or sys.stderr, flush=True)
        self.last = self.clock()

    def finished(self, run: str, state: str, loss: float | None = None) -> None:
        self.done += 1
        self._emit(RunProgress(self.done, self.total, self.clock() - self.start, run, state, loss))

    def poll(self, running: int) -> None:
        """A heartbeat when nothing was said for ``every_s`` seconds."""
        if self.clock() - self.last >= self.every_s:
            self._emit(RunProgress(self.done, self.total, self.clock() - self.start, running=running))


def final_loss(run_dir: str | Path) -> float | None:
    """The run's last validation loss (its compacted evals), or None."""
    try:
        import polars as pl

        from analysis.tables.bounded_read import read_bounded

        data = read_bounded(Path(run_dir) / EVALS_FILE).data  # never a FIFO's hang
        evals = pl.read_parquet(io.BytesIO(data), columns=["step", "split", "loss"])
        val = evals.filter(pl.col("split") == "val").sort("step")
        return float(val["loss"][-1]) if val.height else None
    except Exception:  # noqa: BLE001 - a progress line never fails a sweep
        return None


class LocalBackend(Backend):
    name = "local"

    def __init__(self, max_parallel: int | None = None, *, python: str | None = None,
                 progress: bool = True) -> None:
        self.max_parallel = max(1, max_parallel or os.cpu_count() or 1)
        self.python = python
        self.progress = progress
        self._queued: dict[str, JobSpec] = {}
        self._env: dict[str, dict[str, str]] = {}
        self._procs: dict[str, subprocess.Popen] = {}
        self._done: dict[str, str] = {}
        self._count = 0

    def submit(self, jobs: Sequence[JobSpec], launcher: Any = None) -> list[Handle]:
        handles = []
        for job in jobs:
            handle = Handle(job.run_id, job.run_dir, f"local-{os.getpid()}-{self._count}", self.name)
            self._count += 1
            self._queued[handle.job_id] = job
            self._env[handle.job_id] = {**thread_env(launcher), **job_env(launcher)}
            handles.append(handle)
        return handles

    def poll(self, handles: Sequence[Handle]) -> dict[str, str]:
        out = {}
        for h in handles:
            proc = self._procs.get(h.job_id)
            if h.job_id in self._done:
                out[h.job_id] = self._done[h.job_id]
            elif proc is not None:
                out[h.job_id] = "RUNNING"
            else:
                out[h.job_id] = "PENDING" if h.job_id in self._queued else "UNKNOWN"
        return out

    def wait(self, handles: Sequence[Handle], hooks: Hooks | None = None) -> dict[str, str]:
        hooks = hooks or Hooks()
        todo = deque(h for h in handles if h.job_id in self._queued)
        if not todo:
            return {h.run_id: self._done.get(h.job_id, "UNKNOWN") for h in handles}
        running: dict[str, Handle] = {}
        terminal = sys.stderr.isatty()
        lines = RunLines(len(todo)) if self.progress and not terminal else None
        bar = Progress(TextColumn("[bold]local[/] {task.description}"), BarColumn(),
                       MofNCompleteColumn(), TimeElapsedColumn(),
                       disable=not (self.progress and terminal))
        last_tick = time.monotonic()
        try:
            with bar:
                task = bar.add_task("runs", total=len(todo))
                while todo or running:
                    while todo and len(running) < self.max_parallel:
                        handle = todo.popleft()
                        self._start(handle, hooks)
                        running[handle.job_id] = handle
                    for job_id in [j for j, p in self._procs.items() if p.poll() is not None]:
                        handle = running.pop(job_id)
                        self._finish(handle, hooks)
                        bar.advance(task)
                        if lines is not None:
                            lines.finished(Path(handle.run_dir).name, self._done[handle.job_id],
                                           final_loss(handle.run_dir))
                    if lines is not None:
                        lines.poll(len(running))
                    if time.monotonic() - last_tick > _TICK_S:
                        hooks.tick()
                        last_tick = time.monotonic()
                    time.sleep(_POLL_S)
        except BaseException:
            self._stop_all(running, hooks)
            raise
        return {h.run_id: self._done.get(h.job_id, "UNKNOWN") for h in handles}

    def _start(self, handle: Handle, hooks: Hooks) -> None:
        job = self._queued.pop(handle.job_id)
        extra = self._env.pop(handle.job_id, {})
        log = open(Path(job.run_dir) / JOB_LOG, "ab")  # noqa: SIM115 - owned by the child
        try:
            proc = subprocess.Popen(command(job, self.python), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, **extra} if extra else None)
        finally:
            log.close()
        self._procs[handle.job_id] = proc
        hooks.started(handle, proc.pid)

    def _finish(self, handle: Handle, hooks: Hooks, stopping: bool = False) -> None:
        proc = self._procs.pop(handle.job_id)
        state = settle(handle.run_dir, proc.returncode, stopping=stopping).value
        self._done[handle.job_id] = state
        hooks.finished(handle, state)

    def _stop_all(self, running: dict[str, Handle], hooks: Hooks) -> None:
        """Ask each trainer to checkpoint and stop; kill the ones that do not in time."""
        for job_id in running:
            proc = self._procs[job_id]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        for job_id, handle in list(running.items()):
            proc = self._procs[job_id]
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._finish(handle, hooks, stopping=True)
