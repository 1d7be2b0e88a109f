"""What state is each run of a sweep in? status.json + claim + ONE scheduler poll.

The run's own ``status.json`` is the truth while its trainer lives. When the trainer was
killed before it could write (``scancel``, a node failure, a launcher killed with -9),
the scheduler's verdict and the run's claim fill the gap:

- COMPLETED / DIVERGED on disk are final, whatever else says.
- A live claim (a queued or running job; a claim with a fresh heartbeat whose process on
  this host is the one that claimed: ``lock.is_live``), or a live scheduler job
  that last ran it, means the run is taken:
  RUNNING when it trains, PREEMPTED/TIMEOUT while requeued, else PENDING.
- Otherwise the scheduler's final state for the run's last job wins over a stale
  RUNNING/PREEMPTED on disk (CANCELLED, FAILED, TIMEOUT, PREEMPTED), and a RUNNING run
  that nobody executes any more is PREEMPTED ("lost"): resumable from its checkpoint.
  A PREEMPTED run whose job ended FAILED or TIMEOUT was not requeued (submitit stops
  requeueing after ``max_num_timeout`` time limits, and its job then ends FAILED): it
  reads TIMEOUT, with ``OUT_OF_REQUEUES`` in its note; ``sweep`` resumes it.
- A corrupt or damaged status.json (``store.status.CorruptStatus``: no run status, or
  one whose digest, run id or records disagree with it) counts as FAILED, with the file
  and why in ``RunView.corrupt`` and ``note`` (said once per file on stderr): ``sweep``
  skips the run, ``retry --failed`` sets the file aside and reruns it, ``status`` and
  ``collect`` show it. An unreadable claim holds nothing (``lock.UnreadableClaim``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalelab.store.status import STATUS_FILE, CorruptStatus, State, parse_status
from scalelab.sweep.run.lock import Claim, is_live, read_claim

__all__ = ["OUT_OF_REQUEUES", "RunView", "observe", "poll_scheduler"]

OUT_OF_REQUEUES = "out of requeues; `scalelab retry --preempted` resumes it"
"""The note of a PREEMPTED run whose job ended without requeueing it (read TIMEOUT)."""

_SCHED_VERDICT = {
    "CANCELLED": State.CANCELLED,
    "FAILED": State.FAILED,
    "NODE_FAIL": State.FAILED,
    "OUT_OF_MEMORY": State.FAILED,
    "BOOT_FAIL": State.FAILED,
    "TIMEOUT": State.TIMEOUT,
    "DEADLINE": State.TIMEOUT,
    "PREEMPTED": State.PREEMPTED,
}


@dataclass(frozen=True)
class RunView:
    """One run as seen now."""

    run_dir: str | Path
    status: dict[str, Any] | None
    claim: Claim | None
    live: bool
    """A live claim holds the run: do not launch it."""
    state: str | None
    """Effective state (a ``State`` value, or None for a run never started)."""
    job_id: str | None
    sched: str | None
    """The scheduler's state for ``job_id`` (None when not polled)."""
    note: str = ""
    corrupt: str | None = None
    """``<path>: corrupt run status (why)`` when status.json is corrupt (``state`` FAILED)."""

    @property
    def disk_state(self) -> str | None:
        return self.status.get("state") if self.status else None


def _last_job(status: dict | None, claim: Claim | None) -> str | None:
    if claim is not None and claim.job_id:
        return claim.job_id
    ids = (status or {}).get("job_ids") or []
    return str(ids[-1]) if ids else None


def poll_scheduler(job_ids: Iterable[str]) -> dict[str, str] | None:
    """One batched scheduler poll, or None when there is no Slurm client here."""
    ids = [j for j in job_ids if j]
    if not ids or shutil.which("squeue") is None:
        return None
    from scalelab.sweep.run.backends.slurm import scheduler_states

    return scheduler_states(ids)


_SAID: set[str] = set()
"""Corrupt status files said on stderr by this process (each once)."""


def _read_status(run_dir: str | Path) -> tuple[dict[str, Any] | None, str | None]:
    """(status, None), or (None, what is wrong) when status.json is corrupt (said once on
    stderr). Strings, not pathlib: 10,000 runs."""
    try:
        return parse_status(os.path.join(run_dir, STATUS_FILE)), None
    except CorruptStatus as err:
        line = f"{err.file}: corrupt run status ({err.why})"
        if line not in _SAID:
            _SAID.add(line)
            print(f"{line}; counted as FAILED (retry --failed sets it aside and reruns the run)",
                  file=sys.stderr, flush=True)
        return None, line


def observe(run_dirs: Iterable[str | Path], *, sched: dict[str, str] | None = None,
            poll: bool = True) -> list[RunView]:
    """Views of many runs; polls the scheduler once (unless ``sched`` is given).
    ``run_dirs`` may be strings (fastest) or paths; views keep what was given."""
    raw = []
    for run_dir in run_dirs:
        status, corrupt = _read_status(run_dir)
        state = status.get("state") if status else None
        claim = None if state in (State.COMPLETED.value, State.DIVERGED.value) else read_claim(run_dir)
        raw.append((run_dir, status, claim, corrupt))
    if sched is None and poll:
        wanted = [_last_job(s, c) for _, s, c, _ in raw
                  if not (s and State(s["state"]).terminal)]
        sched = poll_scheduler(j for j in wanted if j)
    alive_set = None if sched is None else {j for j, s in sched.items() if s not in _SCHED_VERDICT
                                            and s not in ("COMPLETED", "UNKNOWN")}
    return [_corrupt_view(run_dir, claim, corrupt, alive_set) if corrupt else
            _view(run_dir, status, claim, sched, alive_set)
            for run_dir, status, claim, corrupt in raw]


def _corrupt_view(run_dir, claim, corrupt: str, alive_set) -> RunView:
    """A run whose status.json is corrupt: FAILED, unless a live claim holds it."""
    job = _last_job(None, claim)
    live = claim is not None and is_live(claim, alive_set if claim.job_id else None)
    state = State.PENDING.value if live else State.FAILED.value
    return RunView(run_dir, None, claim, live, state, job, None, corrupt, corrupt)


def _view(run_dir, status, claim, sched, alive_set) -> RunView:
    disk = status.get("state") if status else None
    job = _last_job(status, claim)
    sched_state = (sched or {}).get(job) if job else None
    if disk in (State.COMPLETED.value, State.DIVERGED.value):
        return RunView(run_dir, status, claim, False, disk, job, sched_state)
    live_claim = claim is not None and is_live(claim, alive_set if claim.job_id else None)
    live_job = job is not None and alive_set is not None and job in alive_set
    if live_claim or live_job:
        if disk in (State.RUNNING.value, State.PREEMPTED.value, State.TIMEOUT.value):
            state = disk
        else:
            state = State.PENDING.value
        return RunView(run_dir, status, claim, True, state, job, sched_state,
                       "claimed" if live_claim else f"job {job} is {sched_state}")
    verdict = _SCHED_VERDICT.get(sched_state or "")
    never_ended = (None, State.PENDING.value, State.RUNNING.value)
    stopped = (State.PREEMPTED.value, State.TIMEOUT.value)
    # a cancel wins over a requeue in progress; other verdicts only fill a silent gap
    if verdict is not None and (disk in never_ended or (verdict == State.CANCELLED and disk in stopped)):
        return RunView(run_dir, status, claim, False, verdict.value, job, sched_state,
                           f"scheduler: {sched_state}")
    if disk == State.PREEMPTED.value and verdict in (State.FAILED, State.TIMEOUT):
        # its job ended without requeueing it (submitit's requeues spent): nobody resumes it
        return RunView(run_dir, status, claim, False, State.TIMEOUT.value, job, sched_state,
                       f"scheduler: {sched_state}, not requeued ({OUT_OF_REQUEUES})")
    if disk == State.RUNNING.value:
        return RunView(run_dir, status, claim, False, State.PREEMPTED.value, job, sched_state,
                       "lost: nobody executes it any more")
    return RunView(run_dir, status, claim, False, disk, job, sched_state)
