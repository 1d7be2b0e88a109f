"""``status.json``: a run's lifecycle state.

PENDING -> RUNNING -> COMPLETED | FAILED | PREEMPTED | TIMEOUT | DIVERGED | CANCELLED.
DIVERGED is terminal and never retried; PREEMPTED/TIMEOUT are requeued and resume.

A status.json that is no run status (not JSON, not an object, an unknown state, a field
of the wrong type, a directory, a device, over 1 MiB) is corrupt: ``read_status`` raises
``CorruptStatus``, one line naming the file (exit 2 where a command cannot go on).
Sweep-wide readers (``scalelab.sweep.run.observe``) count such a run as FAILED with a
note instead, so that ``retry --failed`` reruns it. A writer (``update_status``, a
relaunch) first sets the corrupt file aside as ``status.json.corrupt-<time>`` (never
deleted) and says so in one line on stderr.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import socket
import sys
from enum import Enum
from pathlib import Path
from typing import Any

from scalelab.errors import UserError
from scalelab.store import layout
from scalelab.store.atomic import write_json_atomic
from scalelab.store.small_file import Unreadable, read_small

STATUS_FILE = layout.STATUS_FILE


class State(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    PREEMPTED = "PREEMPTED"
    TIMEOUT = "TIMEOUT"
    DIVERGED = "DIVERGED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """Never launched again by a plain relaunch."""
        return self in (State.COMPLETED, State.DIVERGED)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class CorruptStatus(UserError):
    """status.json is there but holds no run status (module docstring)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"corrupt run status ({why}); rename it to train the run again "
                         "(`scalelab retry --failed` sets it aside and reruns the run)", file=path)
        self.why = why


_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "attempts": (int,),
    "steps_done": (int, type(None)),
    "total_steps": (int, type(None)),
    "wall_time_s": (*_NUMBER, type(None)),
    "error": (str, type(None)),
    "job_ids": (list,),
}
"""Fields readers rely on, and their JSON types (absent is fine)."""
_STATES = frozenset(s.value for s in State)


def _problem(status: Any) -> str | None:
    """Why a parsed status.json is no run status, or None when it is one."""
    if not isinstance(status, dict):
        return f"a JSON {type(status).__name__}, not an object"
    state = status.get("state")
    if not isinstance(state, str) or state not in _STATES:
        return f"unknown state {str(state)[:40]!r}"
    for key, types in _FIELD_TYPES.items():
        value = status.get(key)
        if key in status and (not isinstance(value, types) or isinstance(value, bool)):
            return f"{key}: a {type(value).__name__}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{key}: {value}"
    if any(not isinstance(j, str) for j in status.get("job_ids", ())):
        return "job_ids: not all strings"
    if status.get("attempts", 0) < 0:
        return "attempts: negative"
    return None


def parse_status(path: str) -> dict[str, Any] | None:
    """status.json at ``path`` (a string: ``observe`` reads 10,000 of them), checked; None
    when there is none; ``CorruptStatus`` when it holds no run status."""
    try:
        data = read_small(path).data
    except (FileNotFoundError, NotADirectoryError):
        return None
    except Unreadable as err:
        raise CorruptStatus(path, str(err)) from None
    try:
        status = json.loads(data)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, too deep
        raise CorruptStatus(path, "not JSON") from None
    problem = _problem(status)
    if problem is not None:
        raise CorruptStatus(path, problem)
    return status


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """The parsed status.json, or None when the run has none yet; ``CorruptStatus`` (a
    one-line UserError naming the file) when it holds no run status."""
    return parse_status(os.path.join(run_dir, STATUS_FILE))


def disk_state(run_dir: str | Path) -> State | None:
    """The state status.json records; None when there is none or it is corrupt."""
    try:
        status = read_status(run_dir)
    except CorruptStatus:
        return None
    return State(status["state"]) if status else None


def set_aside_corrupt(run_dir: str | Path) -> dict[str, Any] | None:
    """The status, after setting a corrupt status.json aside (``<name>.corrupt-<time>``,
    one line on stderr saying so); None when there is none (any more)."""
    try:
        return read_status(run_dir)
    except CorruptStatus as err:
        from scalelab.train.records.record_files import set_aside

        moved = set_aside(Path(run_dir) / STATUS_FILE)
        print(f"{err.file}: corrupt run status ({err.why}); set aside as {moved.name}",
              file=sys.stderr, flush=True)
        return None


def update_status(run_dir: str | Path, state: State, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into status.json, set ``state`` and its timestamp, atomically (a
    corrupt status.json is set aside first: ``set_aside_corrupt``)."""
    status = set_aside_corrupt(run_dir) or {"attempts": 0, "job_ids": [], "created": now()}
    status.update(fields)
    status["state"] = State(state).value
    status["updated"] = now()
    status["host"] = socket.gethostname()
    status["pid"] = os.getpid()
    if state == State.RUNNING:
        status["attempts"] = int(status.get("attempts", 0)) + 1
        status.setdefault("started", status["updated"])
        job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID")
        if job:
            task = os.environ.get("SLURM_ARRAY_TASK_ID")
            jid = f"{job}_{task}" if task and os.environ.get("SLURM_ARRAY_JOB_ID") else job
            if jid not in status.setdefault("job_ids", []):
                status["job_ids"].append(jid)
    if state.terminal or state in (State.FAILED, State.CANCELLED):
        status["finished"] = status["updated"]
    write_json_atomic(Path(run_dir) / STATUS_FILE, status)
    return status
