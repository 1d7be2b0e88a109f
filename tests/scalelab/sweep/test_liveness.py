"""Liveness of a claim is pid, process start and heartbeat age together.

A claim naming a live pid of this host (pid 1) with a heartbeat from 2001 used to block
its run forever; a pid reused by another process must not hold a run either; a long
healthy run, whose job refreshes its claim, stays live whatever its age.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict

import pytest

from scalelab.sweep.run import lock
from scalelab.sweep.run.lock import (
    CLAIM_FILE,
    STALE_HEARTBEAT_S,
    Claim,
    heartbeat,
    is_live,
    process_start,
    read_claim,
    try_claim,
)

Y2001 = 978307200.0  # 2001-01-01T00:00:00Z
_HAS_PROC = os.path.exists(f"/proc/{os.getpid()}/stat")


def _plant(run_dir, **fields) -> Claim:
    claim = Claim(**{"token": "t0", "host": socket.gethostname(), "pid": os.getpid(), "backend": "local",
                     "created": time.time(), "heartbeat": time.time(), **fields})
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CLAIM_FILE).write_text(json.dumps(asdict(claim)))
    return claim


def test_pid_1_with_a_2001_heartbeat_is_stale_and_broken(tmp_path):
    """The planted claim of the report: a live pid of this host, an old claim (no start)."""
    planted = _plant(tmp_path / "r", pid=1, created=Y2001, heartbeat=Y2001)
    assert lock._pid_alive(1)  # pid 1 exists on every Unix: the pid alone said "live"
    assert not is_live(planted)
    new = try_claim(tmp_path / "r", backend="local")
    assert new is not None and new.token != "t0" and new.pid == os.getpid()


def test_a_stale_heartbeat_is_stale_whatever_its_pids(tmp_path):
    now = time.time()
    for fields in ({"pid": os.getpid()}, {"pid": 1, "worker_pid": os.getpid()},
                   {"pid": os.getpid(), "start": process_start(os.getpid())}):
        claim = _plant(tmp_path / "r", heartbeat=now - STALE_HEARTBEAT_S - 1, **fields)
        assert not is_live(claim, now=now), fields
        assert is_live(claim, now=claim.heartbeat + STALE_HEARTBEAT_S - 1), fields


@pytest.mark.skipif(not _HAS_PROC, reason="no /proc: starts cannot be read, the pid alone decides")
def test_a_reused_pid_does_not_hold_the_run(tmp_path):
    mine = process_start(os.getpid())
    boot, ticks = mine.rsplit(":", 1)
    assert ticks.isdigit() and len(boot) == 36  # a boot id is a UUID
    assert process_start(os.getpid()) == mine  # stable for one process
    assert process_start(1) != mine
    other = f"{boot}:{int(ticks) + 1}"  # another process that had our pid
    assert not is_live(_plant(tmp_path / "r", start=other))
    assert not is_live(_plant(tmp_path / "r", pid=1, worker_pid=os.getpid(), start=mine, worker_start=other))
    assert is_live(_plant(tmp_path / "r", start=mine))
    assert try_claim(tmp_path / "r", backend="local") is None  # held by us, started when recorded


def test_a_claim_records_its_start_and_its_worker_start(tmp_path):
    claim = try_claim(tmp_path / "r", backend="local")
    assert read_claim(tmp_path / "r").start == process_start(os.getpid())
    held = lock.refresh(tmp_path / "r", claim, worker_pid=os.getpid())
    assert held.worker_start == process_start(os.getpid())
    assert read_claim(tmp_path / "r") == held


def test_without_proc_the_pid_and_heartbeat_decide(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "process_start", lambda pid: None)
    assert is_live(_plant(tmp_path / "r", start="some-boot:123"))
    assert not is_live(_plant(tmp_path / "r", start="some-boot:123", heartbeat=Y2001))


def test_a_healthy_long_run_stays_live(tmp_path, monkeypatch):
    """The job refreshes its claim (``heartbeat``): judged an hour later, it is live; the
    same claim without the job's heartbeats would be stale by then."""
    run = tmp_path / "r"
    claim = try_claim(run, backend="local")
    beats = []
    real_refresh = lock.refresh

    def counted(run_dir, held, **fields):
        beats.append(held.token)
        return real_refresh(run_dir, held, **fields)

    monkeypatch.setattr(lock, "refresh", counted)
    with heartbeat(run, every_s=0.01):
        deadline = time.monotonic() + 30.0  # a ceiling, never reached when beats come
        while len(beats) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert beats[:3] == [claim.token] * 3
    held = read_claim(run)
    assert held.token == claim.token and held.heartbeat > claim.heartbeat
    # an hour of training, a beat every HEARTBEAT_EVERY_S: judged at any moment, live
    assert is_live(held, now=held.heartbeat + lock.HEARTBEAT_EVERY_S)
    assert not is_live(held, now=held.heartbeat + STALE_HEARTBEAT_S + 1)
    assert lock.HEARTBEAT_EVERY_S * 10 <= STALE_HEARTBEAT_S  # missed beats tolerated: 10


def test_heartbeat_leaves_a_claim_of_another_process_alone(tmp_path, monkeypatch):
    planted = _plant(tmp_path / "r", pid=1, heartbeat=Y2001)
    looks = []
    real_read = lock.read_claim
    monkeypatch.setattr(lock, "read_claim", lambda run_dir: looks.append(1) or real_read(run_dir))
    with heartbeat(tmp_path / "r", every_s=0.01):
        deadline = time.monotonic() + 30.0  # a ceiling, never reached when beats come
        while len(looks) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(looks) >= 3  # three beats looked at the claim; none touched it
    assert real_read(tmp_path / "r") == planted
