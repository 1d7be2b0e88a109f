"""What one job executes: train one run directory, whatever the backend.

- ``run_in_process(spec)``: load ``<run_dir>/config-input.yaml`` and call the train
  target (``scalelab.train:train`` unless the spec names another ``module:function``
  taking ``(cfg, run_dir)``); a crash becomes FAILED in status.json, never a lost run.
  A run already COMPLETED or DIVERGED returns at once (requeues are idempotent).
  Before training, the config's identity (``identity.run_id``, the hash of its identity
  fields) must be the run's id: the ``JobSpec``'s, else the one the directory's name ends
  with (``identity.id_in_name``). A ``config-input.yaml`` rewritten between launch and job
  start is refused in one line (stderr and status.json's ``error``), the run is FAILED,
  and ``scalelab retry --failed`` rewrites the file from the spec and trains the planned
  config. Neither id known (a job of another kind): nothing to compare.
- ``python -m scalelab.sweep.run.job RUN_DIR [--target module:function] [--run-id ID]``:
  the same, as the process the local backend and Slurm jobs start (``--run-id``: the
  ``JobSpec``'s). Exit 0 COMPLETED / PREEMPTED / TIMEOUT (a clean stop), 3 DIVERGED,
  1 FAILED. SIGUSR2 (submitit's preemption signal, which Slurm also delivers to child
  processes) is turned into SIGUSR1, the train loop's "checkpoint and stop" signal.
  While the target trains, the job refreshes the run's claim (``lock.heartbeat``).
- ``SlurmRun``: the submitit ``Checkpointable`` a Slurm job runs. It starts the process
  above with the torchrun environment of its task (RANK, WORLD_SIZE, LOCAL_RANK,
  MASTER_ADDR, MASTER_PORT) and waits. On preemption or timeout submitit calls
  ``checkpoint``: the trainer is told to checkpoint (SIGUSR1), we wait until it has
  stopped, and hand submitit the same job to requeue; the requeued job resumes from
  the run's training checkpoint. After ``max_num_timeout`` time limits (submitit's, 3)
  submitit requeues no more and the job ends FAILED in sacct: the run is then TIMEOUT in
  status.json, with the command that resumes it (``not_requeued``). Training in a child
  process keeps the train loop's own signal handling intact and the job's memory clean
  across requeues.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import submitit
from submitit.core.utils import UncompletedJobError

from scalelab.errors import EXIT_DIVERGED, EXIT_FAILURE, EXIT_OK
from scalelab.store.layout import CONFIG_INPUT_FILE
from scalelab.store.status import State, disk_state, set_aside_corrupt, update_status
from scalelab.sweep.run.lock import heartbeat, read_claim, release

__all__ = ["CONFIG_INPUT", "DEFAULT_TARGET", "JobSpec", "SlurmRun", "main", "run_in_process"]

CONFIG_INPUT = CONFIG_INPUT_FILE
"""The RunConfig a job trains, written by the launcher (train writes the resolved config.yaml)."""
DEFAULT_TARGET = "scalelab.train:train"
_STOP_WAIT_S = 120.0
_REQUEUE_SIGNAL_WAIT_S = 15.0


@dataclass(frozen=True)
class JobSpec:
    """One run to execute. Picklable, and the same for every backend."""

    run_id: str
    name: str
    run_dir: str
    """Absolute path of the run directory (holds config-input.yaml)."""
    target: str = DEFAULT_TARGET
    """``module:function`` called as ``function(cfg, run_dir) -> State``."""


def resolve_target(target: str) -> Callable:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr or "train")


def run_in_process(spec: JobSpec) -> State:
    """Train the run in this process; returns its final state (crashes -> FAILED)."""
    from scalelab.config import load_run_config

    run_dir = Path(spec.run_dir)
    status = set_aside_corrupt(run_dir)  # the job owns the run: a corrupt status goes aside
    if status and State(status["state"]).terminal:
        return State(status["state"])
    try:
        cfg = load_run_config(run_dir / CONFIG_INPUT)
        refused = identity_problem(spec, cfg)
        if refused is not None:
            print(refused, file=sys.stderr, flush=True)
            update_status(run_dir, State.FAILED, error=refused)
            return State.FAILED
        with heartbeat(run_dir):  # a long run's claim stays fresh (lock module docstring)
            result = resolve_target(spec.target)(cfg, run_dir)
        return State(result) if result is not None else _state_on_disk(run_dir)
    except _StopRequested:
        if not _state_on_disk(run_dir).terminal:
            update_status(run_dir, State.PREEMPTED, error=None)
        return State.PREEMPTED
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        now_state = disk_state(run_dir)
        if now_state is None or not (now_state.terminal or now_state == State.FAILED):
            update_status(run_dir, State.FAILED, error=_summary(err))
        traceback.print_exc()
        return State.FAILED


def expected_id(spec: JobSpec) -> str | None:
    """The run id the job must train: the spec's when it is a run id, else the one the
    run directory's name ends with; None when neither is (module docstring)."""
    from scalelab.identity import ID_HEX, id_in_name

    if len(spec.run_id) == ID_HEX and all(c in "0123456789abcdef" for c in spec.run_id):
        return spec.run_id
    return id_in_name(Path(spec.run_dir).name)


def identity_problem(spec: JobSpec, cfg) -> str | None:
    """One line when ``cfg`` (the run's config-input.yaml) is not the run ``spec`` names."""
    from scalelab.identity import run_id

    expected = expected_id(spec)
    if expected is None or (found := run_id(cfg)) == expected:
        return None
    return (f"{Path(spec.run_dir) / CONFIG_INPUT}: holds run {found}, not this run {expected} "
            f"(rewritten since launch): refusing to train it; `scalelab retry --failed SWEEP` "
            f"rewrites it from the spec")


def _state_on_disk(run_dir: Path) -> State:
    return disk_state(run_dir) or State.FAILED


def settle(run_dir: str | Path, returncode: int | None, *, stopping: bool = False) -> State:
    """The run's state once its trainer process has exited. A trainer that died without
    writing a final state (killed by the OOM killer, a segfault) is FAILED, so that it
    is not relaunched forever; PREEMPTED instead when we were stopping it ourselves."""
    state = disk_state(run_dir)  # None also when corrupt: update_status sets it aside
    if state in (None, State.RUNNING, State.PENDING):
        if stopping:
            return State(update_status(run_dir, State.PREEMPTED)["state"])
        error = f"trainer exited with code {returncode} before writing a final state"
        return State(update_status(run_dir, State.FAILED, error=error)["state"])
    return state


def _summary(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0][:500]


def exit_code(state: State) -> int:
    if state == State.DIVERGED:
        return EXIT_DIVERGED
    if state in (State.COMPLETED, State.PREEMPTED, State.TIMEOUT):
        return EXIT_OK
    return EXIT_FAILURE


def command(spec: JobSpec, python: str | None = None) -> list[str]:
    """The argv that executes ``spec`` in a fresh process."""
    argv = [python or sys.executable, "-m", "scalelab.sweep.run.job", spec.run_dir, "--target", spec.target]
    return argv + (["--run-id", spec.run_id] if spec.run_id else [])


class SlurmRun(submitit.helpers.Checkpointable):
    """The callable a Slurm job runs (picklable; requeued by submitit on preemption)."""

    def __init__(self, python: str | None = None, requeue: bool = True) -> None:
        self.python = python
        self.requeue = requeue
        self._proc: subprocess.Popen | None = None

    def __getstate__(self):  # the child process never travels with the pickle
        return {"python": self.python, "requeue": self.requeue, "_proc": None}

    def __call__(self, spec: JobSpec) -> str:
        env = dict(os.environ, **_torch_env())
        previous = signal.getsignal(signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, self._forward_then(previous))
        try:
            self._proc = subprocess.Popen(command(spec, self.python), env=env)
            self._reap(timeout=None)
            state = settle(spec.run_dir, self._proc.returncode) if _rank() == 0 else _state_on_disk(Path(spec.run_dir))
            if state in (State.PREEMPTED, State.TIMEOUT) and self.requeue:
                # The trainer stopped on a signal that reached it first (a preemption sends
                # SIGTERM, then submitit's USR2): give the USR2 time to arrive, so that
                # submitit requeues this job (its handler exits the process). A plain
                # scancel kills us meanwhile; the run then shows as CANCELLED.
                time.sleep(_REQUEUE_SIGNAL_WAIT_S)
        except UncompletedJobError as err:  # raised by submitit's USR2 handler: no requeue
            if _rank() == 0:
                not_requeued(spec.run_dir, _first_line(err))
            raise
        if state not in (State.PREEMPTED, State.TIMEOUT, State.RUNNING) and _rank() == 0:
            claim = read_claim(spec.run_dir)
            if claim is not None and claim.job_id in _my_job_ids():
                release(spec.run_dir, claim)
        return state.value

    def _forward_then(self, previous):
        def handler(signum, frame):
            self._stop_child(wait=False)
            if callable(previous):
                previous(signum, frame)

        return handler

    def _reap(self, timeout: float | None) -> bool:
        """Wait for the trainer to exit. Reaps with ``os.waitpid`` rather than
        ``Popen.wait``: this also runs inside signal handlers that interrupt the main
        loop, where Popen's internal wait lock may be held by the interrupted frame."""
        proc = self._proc
        deadline = None if timeout is None else time.monotonic() + timeout
        while proc.returncode is None:
            try:
                pid, status = os.waitpid(proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (the handler, or the main loop)
                proc.returncode = proc.returncode if proc.returncode is not None else 0
                break
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def _stop_child(self, wait: bool) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        try:
            proc.send_signal(signal.SIGUSR1)
        except ProcessLookupError:
            return
        if wait and not self._reap(timeout=_STOP_WAIT_S):
            proc.kill()
            self._reap(timeout=10)

    def checkpoint(self, spec: JobSpec):
        """Called by submitit on preemption/timeout (rank 0): stop the trainer at a
        checkpoint, then requeue this same job."""
        self._stop_child(wait=True)
        if not self.requeue:
            return None  # submitit then ends the job without requeueing it
        return submitit.helpers.DelayedSubmission(self, spec)


def not_requeued(run_dir: str | Path, why: str) -> State | None:
    """Record that submitit will not requeue this job (``why``: its reason). Out of
    requeues (a Slurm time limit hit once more than ``max_num_timeout`` allows: "timed-out
    too many times") the run is TIMEOUT, with the command that resumes it in ``error``;
    otherwise (requeue disabled) it stays as the trainer left it. None: nothing written."""
    if "timed-out" not in why or _state_on_disk(Path(run_dir)).terminal:
        return None
    job = ",".join(sorted(_my_job_ids())) or "?"
    error = (f"out of requeues: Slurm job {job} not requeued by submitit ({why}); "
             f"`scalelab retry --preempted SWEEP` (or `scalelab sweep SPEC`) resumes it from its checkpoint")
    return State(update_status(run_dir, State.TIMEOUT, error=error)["state"])


def _first_line(err: BaseException) -> str:
    return next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)


def _torch_env() -> dict[str, str]:
    """torchrun-style variables for this Slurm task (D2's ``distributed.detect`` reads them)."""
    if not os.environ.get("SLURM_JOB_ID"):
        return {}
    dist = submitit.helpers.TorchDistributedEnvironment()
    return {
        "MASTER_ADDR": str(dist.master_addr),
        "MASTER_PORT": str(dist.master_port),
        "RANK": str(dist.rank),
        "WORLD_SIZE": str(dist.world_size),
        "LOCAL_RANK": str(dist.local_rank),
        "LOCAL_WORLD_SIZE": str(dist.local_world_size),
    }


def _rank() -> int:
    return int(os.environ.get("SLURM_PROCID", "0"))


def _my_job_ids() -> set[str]:
    ids = {os.environ.get("SLURM_JOB_ID", "")}
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        ids.add(f"{array}_{task}")
    return ids - {""}


class _StopRequested(Exception):
    """A stop signal arrived before the train loop took over signal handling."""


def _stop_before_training(signum, frame):
    raise _StopRequested(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalelab.sweep.run.job", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--target", default=DEFAULT_TARGET)
    parser.add_argument("--run-id", default="", help="the run id the config must have (module docstring)")
    args = parser.parse_args(argv)
    # Slurm delivers the preemption signal (USR2) to every process of the step; the
    # train loop listens to USR1 for "checkpoint and stop", so translate.
    signal.signal(signal.SIGUSR2, lambda *_: os.kill(os.getpid(), signal.SIGUSR1))
    # until the train loop installs its own handlers, a stop request ends the job cleanly
    signal.signal(signal.SIGUSR1, _stop_before_training)
    signal.signal(signal.SIGTERM, _stop_before_training)
    spec = JobSpec(run_id=args.run_id, name="", run_dir=str(Path(args.run_dir).resolve()), target=args.target)
    import scalelab

    # provenance in the job log: which code tree (a submit-time snapshot on Slurm) runs
    print(f"[scalelab.sweep.run.job] {spec.run_dir}: code {Path(scalelab.__file__).parent}", flush=True)
    return exit_code(run_in_process(spec))


if __name__ == "__main__":
    sys.exit(main())
