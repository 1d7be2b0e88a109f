"""``status.json``: a run's lifecycle state.

PENDING -> RUNNING -> COMPLETED | FAILED | PREEMPTED | TIMEOUT | DIVERGED | CANCELLED.
DIVERGED is terminal and never retried; PREEMPTED/TIMEOUT are requeued and resume.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from enum import Enum
from pathlib import Path
from typing import Any

from scalelab.store.atomic import write_json_atomic

STATUS_FILE = "status.json"


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


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """The parsed status.json, or None when the run has none yet."""
    path = Path(run_dir) / STATUS_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError:  # cannot happen with atomic writes; treat as unknown
        return None


def update_status(run_dir: str | Path, state: State, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into status.json, set ``state`` and its timestamp, atomically."""
    status = read_status(run_dir) or {"attempts": 0, "job_ids": [], "created": now()}
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
            if jid not in status["job_ids"]:
                status["job_ids"].append(jid)
    if state.terminal or state in (State.FAILED, State.CANCELLED):
        status["finished"] = status["updated"]
    write_json_atomic(Path(run_dir) / STATUS_FILE, status)
    return status
