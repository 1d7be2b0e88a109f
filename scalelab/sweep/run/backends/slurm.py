"""The Slurm backend, through submitit.

- Job arrays, split at the cluster's MaxArraySize, at most ``array_parallelism`` tasks
  of an array running at once (``%N``), and a pause between array submissions.
- Multi-GPU / multi-node: ``nodes`` x ``tasks_per_node`` tasks per run; each task trains
  with the torchrun environment of its rank (``scalelab.sweep.run.job.SlurmRun``).
- Preemption and timeout: submitit signals USR2, ``SlurmRun.checkpoint`` stops the
  trainer at a checkpoint and requeues the same job, which resumes the run.
- Resources per call: ``submit(jobs, launcher)`` sends the jobs of one launcher as their
  own array(s), so runs with different resources never share an array.
- The sbatch script's setup lines: the launcher's ``setup`` (module load, conda, ...),
  then its ``env`` exported, then the code snapshot (``scalelab.sweep.run.snapshot``, taken
  at the first submit), which jobs import first through ``PYTHONPATH``.
- ``poll``: one ``squeue`` over all job ids (the controller's view of live jobs), then
  one ``sacct`` for the ids squeue no longer lists (their final state). Never per job.
- Errors: a missing Slurm client (``sbatch``, ``srun``: submitit needs both), a refused
  submission or another submitit failure is one line that says what to do (a
  ``SubmitError``: exit 2), never a submitit traceback (``slurm_error``).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from submitit.core.utils import FailedJobError, FailedSubmissionError

from scalelab.store.status import disk_state
from scalelab.sweep.run.backends.base import ALIVE_STATES, Backend, Handle, Hooks, SubmitError, job_env
from scalelab.sweep.run.job import JobSpec, SlurmRun
from scalelab.sweep.run.snapshot import snapshot_code

__all__ = [
    "DEFAULT_MAX_ARRAY_SIZE",
    "ELSEWHERE",
    "SlurmBackend",
    "alive",
    "cluster_answers",
    "max_array_size",
    "missing_client",
    "probe_cluster",
    "render_sbatch",
    "require_clients",
    "sbatch_parameters",
    "scheduler_states",
    "slurm_error",
]

DEFAULT_MAX_ARRAY_SIZE = 1000
_CMD_TIMEOUT_S = 60
_ACCOUNTING_LAG_S = 30.0
_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
          "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def _run(argv: list[str]) -> str | None:
    """stdout of a Slurm client command, or None when it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


ELSEWHERE = "run on a Slurm login node or use --executor local"
"""What to do when this machine cannot submit to Slurm."""

_CLIENTS = ("sbatch", "srun")
"""The Slurm clients submitit needs on the submitting machine (it refuses to start without srun)."""


def missing_client() -> str | None:
    """The first of ``sbatch``, ``srun`` that is not on PATH (None: both are)."""
    return next((name for name in _CLIENTS if shutil.which(name) is None), None)


def require_clients() -> None:
    """A one-line ``SubmitError`` unless ``sbatch`` and ``srun`` are on PATH."""
    if missing := missing_client():
        raise SubmitError(f"slurm: `{missing}` not found on PATH; {ELSEWHERE}", [], key=None)


def probe_cluster() -> tuple[bool, str]:
    """Whether this machine can submit to Slurm, and why: ``sbatch`` and ``srun`` on PATH
    and a controller that answers ``sinfo``. The reason reads after "slurm" or "local"."""
    missing = missing_client()
    sbatch = shutil.which("sbatch")
    if missing == "sbatch":
        return False, "no `sbatch` on PATH"
    if missing:
        return False, f"`sbatch` at {sbatch} but no `{missing}` on PATH"
    if _run(["sinfo", "-h", "-o", "%a"]) is None:
        return False, f"`sbatch` at {sbatch} but no Slurm controller answers `sinfo`"
    return True, f"`sbatch` found at {sbatch}"


def cluster_answers() -> bool:
    """``sbatch`` and ``srun`` are on PATH and a controller answers ``sinfo``."""
    return probe_cluster()[0]


def slurm_error(err: BaseException, n_runs: int, handles: Sequence[Handle] = ()) -> SubmitError | None:
    """A submitit/Slurm failure while submitting ``n_runs`` runs (``handles``: queued
    before it) as a one-line error that says what to do; None when ``err`` is none of
    those (a bug: let it raise)."""
    first = _first_line(err)
    if isinstance(err, FailedJobError):
        return SubmitError(f"sbatch refused {n_runs} run(s): {first}", list(handles))
    if isinstance(err, FailedSubmissionError):
        message = (f"slurm: sbatch answered without a job id ({first}); check that `sbatch` "
                   f"on PATH is Slurm's, or use --executor local")
    elif isinstance(err, FileNotFoundError) and err.filename in _CLIENTS:
        message = f"slurm: `{err.filename}` not found on PATH; {ELSEWHERE}"
    elif isinstance(err, RuntimeError) and "srun" in first:  # 'Could not detect "srun"'
        message = f"slurm: `srun` not found on PATH; {ELSEWHERE}"
    elif isinstance(err, OSError):
        message = f"slurm: could not submit ({first}); check that the sweep directory is writable"
    else:
        return None
    return SubmitError(message, list(handles), key=None)


def _first_line(err: BaseException) -> str:
    """The first non-blank line of an error's message (submitit's run to many lines)."""
    return next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "no reason given")


@contextlib.contextmanager
def _one_line_errors(n_runs: int, handles: Sequence[Handle] = ()) -> Iterator[None]:
    """Raise submitit's failures inside the block as ``slurm_error``'s one-line errors."""
    try:
        yield
    except Exception as err:
        one_line = slurm_error(err, n_runs, handles)
        if one_line is None:
            raise
        raise one_line from None


def max_array_size() -> int | None:
    """MaxArraySize from ``scontrol show config`` (None when no cluster answers)."""
    out = _run(["scontrol", "show", "config"])
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out or "", re.MULTILINE)
    return int(match.group(1)) if match else None


def sbatch_parameters(launcher: Any, *, job_name: str, setup: list[str]) -> dict[str, Any]:
    """submitit ``SlurmExecutor`` parameters (sbatch names) from a ``LauncherConfig``."""
    extra = dict(launcher.slurm_additional or {})
    if launcher.mem_gb:
        extra.setdefault("mem", f"{launcher.mem_gb:g}G")
    params = {
        "job_name": job_name,
        "partition": launcher.partition,
        "account": launcher.account,
        "qos": launcher.qos,
        "time": int(launcher.time_min),
        "nodes": int(launcher.nodes or 1),
        "ntasks_per_node": int(launcher.tasks_per_node or 1),
        "cpus_per_task": launcher.cpus_per_task,
        "gpus_per_node": launcher.gpus_per_node or None,
        "signal_delay_s": int(launcher.signal_delay_s),
        "array_parallelism": int(launcher.array_parallelism),
        "setup": list(setup),
        "additional_parameters": extra or None,
        "stderr_to_stdout": True,
    }
    return {k: v for k, v in params.items() if v is not None}


def _setup_lines(launcher: Any, code_dir: Path | None) -> list[str]:
    """The launcher's setup lines, its env exported (values literal), then the snapshot's."""
    lines = list(launcher.setup)
    lines += [f"export {k}={shlex.quote(v)}" for k, v in job_env(launcher).items()]
    if code_dir is None:
        return lines
    # PYTHONSAFEPATH: `python -m` must not put the job's working directory (often the
    # checkout itself) ahead of the snapshot on sys.path
    return lines + [f"export PYTHONPATH={shlex.quote(str(code_dir))}${{PYTHONPATH:+:$PYTHONPATH}}",
                    "export PYTHONSAFEPATH=1",
                    f"export SCALELAB_CODE={code_dir.name}"]


def render_sbatch(launcher: Any, folder: str | Path, n_runs: int, *, python: str,
                  job_name: str, code_dir: Path | None) -> str:
    """The sbatch script submitit writes for an array of ``n_runs`` runs (1 = no array)."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = sbatch_parameters(launcher, job_name=job_name, setup=_setup_lines(launcher, code_dir))
    cmd = " ".join([python, "-u -m submitit.core._submit", shlex.quote(str(folder))])
    return _make_sbatch_string(command=cmd, folder=folder, map_count=n_runs if n_runs > 1 else None,
                               **params)


def _parse(out: str | None) -> dict[str, str]:
    """``JOBID|STATE`` lines -> {job id: state}; array ranges like ``12_[3-5%2]`` expanded."""
    states: dict[str, str] = {}
    for line in (out or "").splitlines():
        if "|" not in line:
            continue
        job, state = (s.strip() for s in line.split("|", 1))
        state = state.split()[0] if state else "UNKNOWN"  # 'CANCELLED by 0'
        match = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job)
        if match is None:
            states.setdefault(job, state)
            continue
        for part in match.group(2).split("%")[0].split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                states.setdefault(f"{match.group(1)}_{i}", state)
    return states


def scheduler_states(job_ids: Iterable[str]) -> dict[str, str]:
    """``job id -> state`` for many jobs: one squeue (+ one sacct for the finished ones)."""
    ids = sorted({str(j) for j in job_ids if j})
    if not ids:
        return {}
    mains = sorted({j.split("_")[0] for j in ids})
    queue = _run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(mains)])
    if queue is None:  # squeue -j fails when every id has left the controller
        queue = _run(["squeue", "-h", "-r", "-o", "%i|%T"])
    live = _parse(queue)
    missing = sorted({j.split("_")[0] for j in ids if j not in live})
    done = {}
    if missing:
        done = _parse(_run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(missing)]))
    out = {}
    for j in ids:
        if j in live:
            out[j] = live[j] if live[j] in ALIVE_STATES or live[j] in _FINAL else "RUNNING"
        else:
            state = done.get(j, "UNKNOWN")
            out[j] = "UNKNOWN" if state in ALIVE_STATES else state  # accounting lags the controller
    return out


def alive(states: dict[str, str]) -> set[str]:
    """The job ids whose state means they may still execute."""
    return {j for j, s in states.items() if s in ALIVE_STATES}


class SlurmBackend(Backend):
    name = "slurm"
    returns_at_once = True

    def __init__(self, launcher: Any, sweep_dir: str | Path, *, python: str | None = None,
                 snapshot: bool = True, throttle_s: float = 1.0, poll_s: float = 2.0) -> None:
        self.launcher = launcher
        self.sweep_dir = Path(sweep_dir).resolve()
        self.python = python or sys.executable
        self.snapshot = snapshot
        self.throttle_s = throttle_s
        self.poll_s = poll_s
        self.code_dir: Path | None = None
        self._arrays = 0
        self._cluster_max: int | None = None

    def _array_size(self, launcher: Any) -> int:
        """launcher.max_array_size, else the cluster's MaxArraySize (asked once), else 1000."""
        if not launcher.max_array_size and self._cluster_max is None:
            self._cluster_max = max_array_size() or DEFAULT_MAX_ARRAY_SIZE
        return max(1, int(launcher.max_array_size or self._cluster_max))

    def executor(self, launcher: Any = None):
        """A submitit ``SlurmExecutor`` for ``launcher``'s jobs; a one-line ``SubmitError``
        when a Slurm client is missing or submitit refuses the parameters."""
        import submitit

        require_clients()
        launcher = launcher or self.launcher
        with _one_line_errors(0):
            ex = submitit.SlurmExecutor(folder=self.sweep_dir / "jobs" / "%j", python=shlex.quote(self.python))
        try:
            ex.update_parameters(**sbatch_parameters(
                launcher, job_name=f"scalelab-{self.sweep_dir.name}", setup=_setup_lines(launcher, self.code_dir)))
        except ValueError as err:  # submitit's check of the sbatch parameters
            raise SubmitError(f"submitit refused the sbatch parameters ({_first_line(err)}); fix the spec's "
                              f"launcher section", []) from None
        return ex

    def submit(self, jobs: Sequence[JobSpec], launcher: Any = None) -> list[Handle]:
        if not jobs:
            return []
        launcher = launcher or self.launcher
        require_clients()  # before the code snapshot
        if self.snapshot and self.code_dir is None:
            self.code_dir = snapshot_code(self.sweep_dir / "code")
        ex = self.executor(launcher)
        fn = SlurmRun(self.python, requeue=bool(launcher.requeue))
        size = self._array_size(launcher)
        handles: list[Handle] = []
        for start in range(0, len(jobs), size):
            if self._arrays:
                time.sleep(self.throttle_s)  # throttled submission: one array per pause
            self._arrays += 1
            chunk = list(jobs[start:start + size])
            with _one_line_errors(len(chunk), handles), contextlib.redirect_stderr(io.StringIO()), \
                    ex.batch():  # submitit echoes sbatch's stderr
                submitted = [ex.submit(fn, spec) for spec in chunk]
            handles += [Handle(s.run_id, s.run_dir, str(j.job_id), self.name)
                        for s, j in zip(chunk, submitted)]
        return handles

    def poll(self, handles: Sequence[Handle]) -> dict[str, str]:
        return scheduler_states(h.job_id for h in handles)

    def wait(self, handles: Sequence[Handle], hooks: Hooks | None = None) -> dict[str, str]:
        hooks = hooks or Hooks()
        pending = {h.job_id: h for h in handles}
        unknown_since: dict[str, float] = {}
        while pending:
            states = self.poll(list(pending.values()))
            for job_id, state in states.items():
                if state == "UNKNOWN":  # left the queue, not yet in accounting
                    unknown_since.setdefault(job_id, time.monotonic())
                    if time.monotonic() - unknown_since[job_id] < _ACCOUNTING_LAG_S:
                        continue
                if state not in ALIVE_STATES:
                    handle = pending.pop(job_id)
                    hooks.finished(handle, _disk_state(handle.run_dir, state))
            if pending:
                hooks.tick()
                time.sleep(self.poll_s)
        return {h.run_id: _disk_state(h.run_dir, "UNKNOWN") for h in handles}


def _disk_state(run_dir: str, fallback: str) -> str:
    state = disk_state(run_dir)
    return state.value if state else fallback
