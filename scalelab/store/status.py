"""``status.json``: a run's lifecycle state.

PENDING -> RUNNING -> COMPLETED | FAILED | PREEMPTED | TIMEOUT | DIVERGED | CANCELLED.
DIVERGED is terminal and never retried; PREEMPTED/TIMEOUT are requeued and resume.

Transitions (``ALLOWED``, read off the writers: the trainer, the job, the launcher's
scheduler verdicts): a run's first status may be any state; COMPLETED and DIVERGED are
reached from RUNNING only and never left; every other state may move to any state but
those two (a relaunch, a stop before training, a scheduler verdict, a crash). A writer
asked for another move (``update_status``) raises ``IllegalTransition``, one line, and
writes nothing.

Integrity: ``update_status`` stores ``sha256``, the digest of the rest of the status
(canonical JSON), so that a changed field (a flipped ``attempts`` or ``wall_time_s``,
COMPLETED turned into DIVERGED, another ``run_id``) is caught wherever it is. A status
with the wrong digest, or one at odds with its directory or its records, is *damaged*
and read as corrupt (below), with what is wrong in the note:

- ``run_id`` must be the id the run directory's name ends with (``<label>-<32 hex>``);
- a status the trainer wrote (it has ``total_steps``): COMPLETED at ``total_steps`` with
  no error, DIVERGED with its reason; a finished run has record files (metrics, evals)
  and, when its status names a records manifest, that manifest is at ``steps_done``;
  ``attempts`` is at least 1 and at least the number of Slurm jobs that ran it, and
  ``wall_time_s`` is not negative.

Not verified: a status.json written without a digest (before digests, or by hand) gets
the checks of its directory and records alone. The records hold neither the number of
attempts nor the wall time (metrics keep per-step times, meta.json the last attempt
only, and the wall time runs on across a status set aside and written anew), so without
a digest a value inside the bounds above is taken from the status as written.

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
import hashlib
import json
import math
import os
import re
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


_RESUMABLE = frozenset({State.PENDING, State.RUNNING, State.FAILED, State.PREEMPTED, State.TIMEOUT,
                        State.CANCELLED})
ALLOWED: dict[State | None, frozenset[State]] = {
    None: frozenset(State),
    State.RUNNING: frozenset(State),
    **{s: _RESUMABLE for s in _RESUMABLE - {State.RUNNING}},
    State.COMPLETED: frozenset(),
    State.DIVERGED: frozenset(),
}
"""state -> the states a writer may move it to (module docstring); None: no status yet."""
DIGEST_KEY = "sha256"
"""status.json's key holding the digest of the rest of it (``status_digest``)."""


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class CorruptStatus(UserError):
    """status.json is there but holds no run status (module docstring)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"corrupt run status ({why}); rename it to train the run again "
                         "(`scalelab retry --failed` sets it aside and reruns the run)", file=path)
        self.why = why


class IllegalTransition(UserError):
    """A writer asked to move a run's state along no allowed transition (``ALLOWED``)."""

    def __init__(self, path: str, old: str, new: str) -> None:
        super().__init__(f"{old} -> {new} is no allowed move of a run's state (a run that ended {old} "
                         "is never rewritten); set status.json aside to train the run again", file=path)


def status_digest(status: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``status`` without its ``DIGEST_KEY``."""
    body = {k: v for k, v in status.items() if k != DIGEST_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "attempts": (int,),
    "steps_done": (int, type(None)),
    "total_steps": (int, type(None)),
    "wall_time_s": (*_NUMBER, type(None)),
    "error": (str, type(None)),
    "job_ids": (list,),
    "run_id": (str,),
    "created": (str,),
    "updated": (str,),
    DIGEST_KEY: (str,),
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
    problem = _problem(status) or _damage(status, path)
    if problem is not None:
        raise CorruptStatus(path, problem)
    return status


_ID_SUFFIX = re.compile(r"-([0-9a-f]{32})$")
_DIGEST = re.compile(r"[0-9a-f]{64}")
"""A run directory's name ends with its run id (``identity.run_dir_name``)."""
_RECORDS = ("metrics.parquet", "evals.parquet", "metrics", "evals")
"""A finished run's record files: compacted, or still as part folders."""


def _damage(status: dict[str, Any], path: str) -> str | None:
    """Why a well-formed status is damaged (module docstring), or None."""
    run_dir = os.path.dirname(path)
    digest = status.get(DIGEST_KEY)
    if digest is not None and digest != status_digest(status):
        return "damaged: its sha256 does not match its content (a field changed after it was written)"
    if digest is None:  # written before digests, or the digest's own key changed
        renamed = next((k for k, v in status.items() if isinstance(v, str) and _DIGEST.fullmatch(v)), None)
        if renamed is not None:
            return f"damaged: a digest under {renamed[:40]!r}, not {DIGEST_KEY!r}"
    rid, named = status.get("run_id"), _ID_SUFFIX.search(os.path.basename(run_dir))
    if rid is not None and named is not None and rid != named.group(1):
        return f"damaged: run_id {rid[:40]!r}, not this directory's run {named.group(1)}"
    if not isinstance(status.get("total_steps"), int):
        return None  # not the trainer's status: nothing more to compare
    return _trainer_damage(status, run_dir)


def _trainer_damage(status: dict[str, Any], run_dir: str) -> str | None:
    state, steps, total = status["state"], status.get("steps_done"), status["total_steps"]
    error, attempts = status.get("error"), status.get("attempts", 0)
    if state == State.COMPLETED.value and (steps != total or error is not None):
        return (f"damaged: COMPLETED at step {steps} of {total}" if steps != total
                else "damaged: COMPLETED with an error")
    if state == State.DIVERGED.value and not error:
        return "damaged: DIVERGED with no reason (error)"
    if attempts < max(1, len(status.get("job_ids", ()))):
        return f"damaged: attempts {attempts}, but {len(status.get('job_ids', ()))} job(s) ran it"
    wall = status.get("wall_time_s")
    if wall is not None and wall < 0:
        return f"damaged: wall_time_s {wall:g}, below 0"
    if state in (State.COMPLETED.value, State.DIVERGED.value):
        if not any(os.path.exists(os.path.join(run_dir, name)) for name in _RECORDS):
            return f"damaged: {state} with no records (metrics, evals)"
        return _manifest_damage(status, run_dir)
    return None


def _manifest_damage(status: dict[str, Any], run_dir: str) -> str | None:
    """A finished run whose status names its records manifest: the manifest's step must be
    its ``steps_done`` (a missing or unreadable manifest is ``collect``'s to report)."""
    from scalelab.train.records.records_manifest import MARK

    name = status.get(MARK)
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        return None
    try:
        doc = json.loads(read_small(os.path.join(run_dir, name), 1 << 20).data)
    except (OSError, Unreadable, ValueError, RecursionError):
        return None
    step = doc.get("step") if isinstance(doc, dict) else None
    if isinstance(step, int) and step != status.get("steps_done"):
        return f"damaged: {status['state']} at step {status.get('steps_done')}, its records manifest at {step}"
    return None


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
    """Merge ``fields`` into status.json, set ``state`` and its timestamp, and its digest,
    atomically (a corrupt or damaged status.json is set aside first: ``set_aside_corrupt``).
    ``IllegalTransition`` when the run may not move to ``state`` (``ALLOWED``)."""
    status = set_aside_corrupt(run_dir) or {"attempts": 0, "job_ids": [], "created": now()}
    old = State(status["state"]) if "state" in status else None
    if State(state) not in ALLOWED[old]:
        raise IllegalTransition(str(Path(run_dir) / STATUS_FILE), old.value, State(state).value)
    status.pop(DIGEST_KEY, None)
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
    if State(state).terminal or state in (State.FAILED, State.CANCELLED):
        status["finished"] = status["updated"]
    status = json.loads(json.dumps(status, default=str))  # as read back (paths: strings)
    status[DIGEST_KEY] = status_digest(status)
    write_json_atomic(Path(run_dir) / STATUS_FILE, status)
    return status
