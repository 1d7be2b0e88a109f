"""Atomic run claims: one winner among racing claimers, stale-claim detection, token safety."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import subprocess
import time

from _waits import CEILING_S

from scalelab.sweep.run.lock import CLAIM_FILE, Claim, is_live, read_claim, refresh, release, try_claim


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _plant(run_dir, **fields) -> Claim:
    claim = Claim(**{"token": "t0", "host": socket.gethostname(), "pid": os.getpid(), "backend": "local",
                     "created": time.time(), "heartbeat": time.time(), **fields})
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CLAIM_FILE).write_text(json.dumps(claim.__dict__))
    return claim


def test_second_claim_fails_while_first_is_live(tmp_path):
    first = try_claim(tmp_path / "r", backend="local")
    assert first is not None and read_claim(tmp_path / "r").token == first.token
    assert try_claim(tmp_path / "r", backend="local") is None
    release(tmp_path / "r", first)
    assert try_claim(tmp_path / "r", backend="local") is not None


def test_dead_local_pid_is_stale_and_broken(tmp_path):
    _plant(tmp_path / "r", pid=_dead_pid())
    new = try_claim(tmp_path / "r", backend="local")
    assert new is not None and new.token != "t0" and new.pid == os.getpid()


def test_worker_pid_keeps_a_claim_alive(tmp_path):
    held = _plant(tmp_path / "r", pid=_dead_pid(), worker_pid=os.getpid())
    assert is_live(held)
    assert try_claim(tmp_path / "r", backend="local") is None


def test_job_claims_judged_by_one_poll(tmp_path):
    held = _plant(tmp_path / "r", job_id="77_3", pid=_dead_pid())
    assert is_live(held, None)  # no poll: trusted
    assert is_live(held, {"77_3"})
    assert try_claim(tmp_path / "r", backend="slurm", alive_jobs={"77_3", "78"}) is None
    assert not is_live(held, {"78"})
    assert try_claim(tmp_path / "r", backend="slurm", alive_jobs={"78"}) is not None


def test_foreign_host_claim_expires_by_heartbeat(tmp_path):
    fresh = Claim(token="a", host="elsewhere", pid=1, backend="local", heartbeat=time.time())
    old = Claim(token="b", host="elsewhere", pid=1, backend="local", heartbeat=time.time() - 3600)
    assert is_live(fresh) and not is_live(old)


def test_release_and_refresh_touch_only_our_claim(tmp_path):
    ours = try_claim(tmp_path / "r", backend="slurm")
    other = Claim(token="someone-else", host="h", pid=1, backend="slurm")
    release(tmp_path / "r", other)
    assert read_claim(tmp_path / "r").token == ours.token
    ours = refresh(tmp_path / "r", ours, job_id="12_0")
    assert read_claim(tmp_path / "r").job_id == "12_0"
    assert refresh(tmp_path / "r", other, job_id="99").job_id is None
    assert read_claim(tmp_path / "r").job_id == "12_0"


def _race(run_dir, barrier, queue):
    barrier.wait()
    claim = try_claim(run_dir, backend="local")
    queue.put(claim.token if claim else None)
    time.sleep(0.5)  # keep the pid alive while the others look


def test_exactly_one_of_many_racing_processes_wins(tmp_path):
    ctx = mp.get_context("fork")
    n = 8
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(tmp_path / "r", barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=CEILING_S) for _ in range(n)]
    for p in procs:
        p.join()
    winners = [r for r in results if r]
    assert len(winners) == 1
    assert not list(tmp_path.glob("r/.claim.*"))  # no temp files or break guards left
