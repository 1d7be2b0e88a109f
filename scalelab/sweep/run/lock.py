"""Atomic per-run claims: at most one live execution of a run, across launches and hosts.

A claim is ``<run_dir>/claim.json``, created atomically: the content is written to a
private temporary file first and then hard-linked onto the claim path. ``link(2)`` fails
with EEXIST when the claim exists, on local disks and on NFS alike, so exactly one of
any number of concurrent claimers wins, and nobody ever reads a half-written claim.

A claim records who holds it (host, pid, the Slurm job id once known, a heartbeat) and,
for each pid, the process's start (``process_start``: Linux's boot id and the process's
start time in clock ticks since boot, field 22 of ``/proc/<pid>/stat``; None where there
is no ``/proc``), so that a pid the kernel has since given to another process does not
hold the run. It is *live* while its holder is:

- a Slurm job id: the scheduler decides, by ONE batched poll per sweep (``alive_jobs``;
  no poll: trusted). A queued job can wait for days, so its heartbeat does not count;
- a claim without a job id: its heartbeat must be younger than ``STALE_HEARTBEAT_S``,
  whatever its pids, and on this host one of its pids must be a live process whose start
  is the one recorded (a claim written before starts were recorded: the pid alone).

Heartbeats: the launcher refreshes its claims every few seconds while a blocking backend
executes them (``Hooks.tick``), and the job itself refreshes the claim of the run it
trains every ``HEARTBEAT_EVERY_S`` (``heartbeat``), so that a long healthy run stays live
even when its launcher was killed. Stale claims are broken under a
second, short-lived ``mkdir`` lock so that two breakers cannot both remove a claim and
one of them delete the other's fresh one.

A claim that cannot be parsed (bad JSON, binary, a field of the wrong type, an empty file,
a directory or a device in its place) has no holder: it is stale. A claimer breaks it as
any stale claim, comparing what it judged (the file's inode, size, mtime and bytes)
instead of a token, sets it aside as ``claim.json.corrupt-<time>`` (never deleted) and
says so in one line on stderr.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from scalelab.store.atomic import write_json_atomic
from scalelab.store.small_file import Unreadable, read_small

__all__ = ["CLAIM_FILE", "HEARTBEAT_EVERY_S", "STALE_HEARTBEAT_S", "Claim", "UnreadableClaim", "heartbeat",
           "is_live", "process_start", "read_claim", "refresh", "release", "try_claim"]

CLAIM_FILE = "claim.json"
STALE_HEARTBEAT_S = 900.0
"""A claim with no job id is dead after this long without a heartbeat, whatever its pids
(the launcher and the job refresh it while they run: module docstring)."""
HEARTBEAT_EVERY_S = 60.0
"""How often a job refreshes its run's claim (``heartbeat``): 15 beats per stale limit."""
_BREAK_LOCK_STALE_S = 60.0


@dataclass(frozen=True)
class Claim:
    """Who executes a run right now."""

    token: str
    """Unique per claim; a breaker removes a claim only if the token is still the one it judged."""
    host: str
    pid: int
    """The launcher (local) or submitting (Slurm) process."""
    backend: str
    job_id: str | None = None
    """Scheduler job id ('123' or '123_4'), set once the job is submitted."""
    worker_pid: int | None = None
    """The process that trains (local backend), on ``host``."""
    created: float = 0.0
    heartbeat: float = 0.0
    start: str | None = None
    """``process_start(pid)`` when claimed (None: unknown, or a claim of an older scalelab)."""
    worker_start: str | None = None
    """``process_start(worker_pid)``."""


@dataclass(frozen=True)
class UnreadableClaim(Claim):
    """A claim.json that cannot be parsed: nobody holds it (module docstring)."""

    why: str = ""
    stamp: tuple = ()
    """What was judged (``small_file.SmallFile.stamp``): broken only if still the same."""


_MAX_CLAIM_BYTES = 64 * 1024
_MAX_PID = 2**31 - 1
_REQUIRED = ("token", "host", "pid", "backend")
_TYPES: dict[str, tuple[type, ...]] = {
    "token": (str,), "host": (str,), "pid": (int,), "backend": (str,),
    "job_id": (str, type(None)), "worker_pid": (int, type(None)),
    "created": (int, float), "heartbeat": (int, float),
    "start": (str, type(None)), "worker_start": (str, type(None)),
}


def _path(run_dir: str | Path) -> Path:
    return Path(run_dir) / CLAIM_FILE


def _problem(data) -> str | None:
    """Why parsed JSON is no claim, or None when it is one."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        return f"no {missing[0]}"
    for key, types in _TYPES.items():
        value = data.get(key)
        if key in data and (not isinstance(value, types) or isinstance(value, bool)):
            return f"{key}: a {type(value).__name__}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{key}: {value}"
    if not 0 < data["pid"] <= _MAX_PID or not 0 < (data.get("worker_pid") or 1) <= _MAX_PID:
        return "pid out of range"
    return None


def read_claim(run_dir: str | Path) -> Claim | None:
    """The current claim; an ``UnreadableClaim`` when it cannot be parsed; None when
    there is none."""
    path = os.path.join(run_dir, CLAIM_FILE)
    try:
        found = read_small(path, _MAX_CLAIM_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except Unreadable as err:
        return _unreadable(str(err), err.stamp)
    try:
        data = json.loads(found.data)
    except (ValueError, RecursionError):
        return _unreadable("empty" if not found.data.strip() else "not JSON", found.stamp)
    problem = _problem(data)
    if problem is not None:
        return _unreadable(problem, found.stamp)
    return Claim(**{k: data[k] for k in Claim.__dataclass_fields__ if k in data})


def _unreadable(why: str, stamp: tuple) -> UnreadableClaim:
    return UnreadableClaim(token="", host="", pid=0, backend="", why=why, stamp=stamp)


def _same(held: Claim, judged: Claim) -> bool:
    """Whether ``held`` (read now) is the claim ``judged`` (read before)."""
    if isinstance(judged, UnreadableClaim):
        return isinstance(held, UnreadableClaim) and bool(judged.stamp) and held.stamp == judged.stamp
    return not isinstance(held, UnreadableClaim) and held.token == judged.token


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def process_start(pid: int | None) -> str | None:
    """``<boot id>:<start time in clock ticks since boot>`` of process ``pid`` (Linux,
    ``proc(5)``: field 22 of ``/proc/<pid>/stat``), which no other process of this boot
    shares; None where it cannot be read (no such process, no ``/proc``)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except (OSError, ValueError):
        return None
    # field 2, the command name, is in parentheses and may hold spaces and ')'
    fields = stat[stat.rfind(")") + 1:].split()
    boot = _boot_id()
    if boot is None or len(fields) < 20 or not fields[19].isdigit():
        return None
    return f"{boot}:{fields[19]}"  # fields[0] is field 3 (state): field 22 is fields[19]


def _holder_alive(pid: int | None, start: str | None) -> bool:
    """Whether ``pid`` is a live process that started at ``start`` (a claim without a
    recorded start, or a system without ``/proc``: the pid alone)."""
    if not _pid_alive(pid):
        return False
    if start is None:
        return True
    now = process_start(pid)
    return now is None or now == start


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def is_live(claim: Claim, alive_jobs: Collection[str] | None = None, *, now: float | None = None) -> bool:
    """Whether the claim's holder may still be executing the run.

    ``alive_jobs`` is the set of scheduler job ids that are pending or running, from one
    batched poll; None means "no poll was made", and job-id claims are then trusted.
    """
    now = time.time() if now is None else now
    if isinstance(claim, UnreadableClaim):
        return False
    if claim.job_id is not None:
        if alive_jobs is None:
            return True
        return claim.job_id in alive_jobs or claim.job_id.split("_")[0] in alive_jobs
    if not now - claim.heartbeat < STALE_HEARTBEAT_S:
        return False
    if claim.host == socket.gethostname():
        return _holder_alive(claim.pid, claim.start) or _holder_alive(claim.worker_pid, claim.worker_start)
    return True


def try_claim(
    run_dir: str | Path,
    *,
    backend: str,
    alive_jobs: Collection[str] | None = None,
    break_stale: bool = True,
) -> Claim | None:
    """Claim ``run_dir`` for this process. Returns the claim, or None when a live one exists.

    A stale claim (see ``is_live``; an unreadable one always is) is broken and the claim
    retried once.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    claim = Claim(
        token=uuid.uuid4().hex,
        host=socket.gethostname(),
        pid=os.getpid(),
        backend=backend,
        created=now,
        heartbeat=now,
        start=process_start(os.getpid()),
    )
    for _ in range(2):
        if _link_new(run_dir, claim):
            return claim
        held = read_claim(run_dir)
        if held is None:  # released between our attempt and the read
            continue
        if not break_stale or is_live(held, alive_jobs):
            return None
        _break(run_dir, held)
    return None


def _link_new(run_dir: Path, claim: Claim) -> bool:
    tmp = run_dir / f".claim.{claim.token}.tmp"
    tmp.write_text(json.dumps(asdict(claim)))
    try:
        os.link(tmp, _path(run_dir))
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _break(run_dir: Path, judged: Claim) -> None:
    """Remove the claim ``judged`` if it is still there (``_same``), serialised by a mkdir
    lock; an unreadable one is set aside, with one line on stderr."""
    guard = run_dir / ".claim.breaking"
    try:
        guard.mkdir()
    except FileExistsError:
        try:  # a breaker that died mid-way leaves its guard behind
            if time.time() - guard.stat().st_mtime > _BREAK_LOCK_STALE_S:
                guard.rmdir()
        except FileNotFoundError:
            pass
        return
    try:
        held = read_claim(run_dir)
        if held is None or not _same(held, judged):
            return
        if isinstance(held, UnreadableClaim):
            _set_aside(run_dir, held)
        else:
            _path(run_dir).unlink(missing_ok=True)
    finally:
        guard.rmdir()


def _set_aside(run_dir: Path, held: UnreadableClaim) -> None:
    from scalelab.train.records.record_files import set_aside

    moved = set_aside(_path(run_dir))
    print(f"{_path(run_dir)}: unreadable claim ({held.why}), held by nobody: set aside as "
          f"{moved.name}; taking the run over", file=sys.stderr, flush=True)


def refresh(run_dir: str | Path, claim: Claim, **fields) -> Claim:
    """Rewrite our claim with a new heartbeat (and e.g. ``job_id``/``worker_pid``).

    The rename keeps the claim path present throughout, so the claim is never free.
    A claim that is no longer ours (broken as stale, then retaken) is left alone.
    """
    held = read_claim(run_dir)
    if held is None or not _same(held, claim):
        return claim
    if fields.get("worker_pid") and "worker_start" not in fields:
        fields["worker_start"] = process_start(fields["worker_pid"])
    new = replace(claim, heartbeat=time.time(), **fields)
    write_json_atomic(_path(run_dir), asdict(new))
    return new


def release(run_dir: str | Path, claim: Claim | None = None) -> None:
    """Remove the claim (only ``claim`` when given: ours, or an unreadable one judged
    stale, which is set aside instead)."""
    if claim is not None:
        held = read_claim(run_dir)
        if held is None or not _same(held, claim):
            return
        if isinstance(held, UnreadableClaim):
            _break(Path(run_dir), held)
            return
    _path(run_dir).unlink(missing_ok=True)


@contextlib.contextmanager
def heartbeat(run_dir: str | Path, every_s: float = HEARTBEAT_EVERY_S) -> Iterator[None]:
    """While the block runs (a job training ``run_dir``), refresh the run's claim every
    ``every_s`` seconds when this process holds it (its ``pid`` or ``worker_pid`` on this
    host): a
    long run stays live even when the launcher that claimed it is gone."""
    done = threading.Event()
    host = socket.gethostname()

    def beat() -> None:
        while not done.wait(every_s):
            held = read_claim(run_dir)
            if held is not None and not isinstance(held, UnreadableClaim) and \
                    held.host == host and os.getpid() in (held.pid, held.worker_pid):
                try:
                    refresh(run_dir, held)
                except OSError:  # a full disk: the next beat tries again
                    pass

    thread = threading.Thread(target=beat, name="scalelab-claim-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5.0)
