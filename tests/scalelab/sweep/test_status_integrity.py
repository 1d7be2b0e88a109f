"""status.json proves its integrity: a digest of its content, its run id against the
directory, states against the allowed transitions and the run's records.

Before, a flipped ``attempts`` or ``wall_time_s``, COMPLETED turned into DIVERGED, or a
wrong ``run_id`` in status.json was taken as it was written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalelab.store.status import (
    ALLOWED,
    DIGEST_KEY,
    CorruptStatus,
    IllegalTransition,
    State,
    read_status,
    status_digest,
    update_status,
)
from scalelab.sweep.run.observe import observe

RID = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def _trained(tmp_path: Path, name: str = f"twin_adamw-{RID}", *, state: State = State.COMPLETED) -> Path:
    """A run directory as the trainer leaves it: RUNNING (header), then the final state
    with its records and records manifest."""
    run = tmp_path / "runs" / name
    run.mkdir(parents=True)
    update_status(run, State.RUNNING, run_id=RID, world_size=1, total_steps=20, error=None)
    (run / "metrics.parquet").write_bytes(b"PAR1")
    (run / "manifest.json").write_text(json.dumps({"format": 1, "step": 20 if state == State.COMPLETED else 7,
                                                   "run_id": RID, "files": {}}))
    error = "train loss nan non-finite at step 7" if state == State.DIVERGED else None
    update_status(run, state, steps_done=20 if state == State.COMPLETED else 7, wall_time_s=0.0,
                  error=error, records_manifest="manifest.json")
    return run


def _edit(run: Path, *, keep_digest: bool = True, **fields) -> None:
    """Change fields of status.json in place (the digest kept as written, or dropped)."""
    status = json.loads((run / "status.json").read_text())
    status.update(fields)
    if not keep_digest:
        status.pop(DIGEST_KEY)
    (run / "status.json").write_text(json.dumps(status))


def _why(run: Path) -> str:
    with pytest.raises(CorruptStatus) as caught:
        read_status(run)
    return caught.value.why


def test_a_written_status_carries_its_digest(tmp_path):
    run = _trained(tmp_path)
    status = read_status(run)
    assert status["state"] == "COMPLETED" and status["attempts"] == 1
    assert status[DIGEST_KEY] == status_digest(status) and len(status[DIGEST_KEY]) == 64


@pytest.mark.parametrize("fields", [{"attempts": 3}, {"wall_time_s": 1.5e300}, {"state": "DIVERGED"},
                                    {"run_id": OTHER}, {"steps_done": 19}, {"error": "x"}])
def test_a_changed_field_is_damaged(tmp_path, fields):
    run = _trained(tmp_path)
    _edit(run, **fields)
    assert _why(run).startswith("damaged: its sha256 does not match its content")
    (view,) = observe([run], poll=False)
    assert view.state == "FAILED" and "damaged" in view.note  # retry --failed reruns it


@pytest.mark.parametrize(("fields", "why"), [
    ({"state": "DIVERGED"}, "damaged: DIVERGED with no reason (error)"),
    ({"steps_done": 19}, "damaged: COMPLETED at step 19 of 20"),
    ({"error": "boom"}, "damaged: COMPLETED with an error"),
    ({"run_id": OTHER}, f"damaged: run_id '{OTHER}', not this directory's run {RID}"),
    ({"attempts": 0}, "damaged: attempts 0, but 0 job(s) ran it"),
    ({"attempts": 1, "job_ids": ["7", "8"]}, "damaged: attempts 1, but 2 job(s) ran it"),
    ({"wall_time_s": -3.0}, "damaged: wall_time_s -3, below 0"),
])
def test_without_a_digest_the_directory_and_the_records_decide(tmp_path, fields, why):
    """A status written before digests (or by hand) is checked against its directory's
    name and the trainer's own invariants."""
    run = _trained(tmp_path)
    _edit(run, keep_digest=False, **fields)
    assert _why(run).startswith(why)


def test_a_finished_run_without_records_or_at_another_step_is_damaged(tmp_path):
    run = _trained(tmp_path)
    (run / "metrics.parquet").unlink()
    assert _why(run) == "damaged: COMPLETED with no records (metrics, evals)"
    diverged = _trained(tmp_path, f"twin_adamw-{OTHER}x", state=State.DIVERGED)
    assert read_status(diverged)["state"] == "DIVERGED"
    (diverged / "manifest.json").write_text(json.dumps({"format": 1, "step": 9, "run_id": RID, "files": {}}))
    assert _why(diverged) == "damaged: DIVERGED at step 7, its records manifest at 9"


def test_statuses_of_others_are_read_as_written(tmp_path):
    """No total_steps (a test double, a generation job) and no run id in the name: only
    the digest."""
    test_a_written_status_carries_its_digest(tmp_path / "trained")
    run = tmp_path / "generate" / "abc"
    run.mkdir(parents=True)
    update_status(run, State.RUNNING, kind="generate")
    assert update_status(run, State.COMPLETED)["state"] == "COMPLETED"
    assert read_status(run)["state"] == "COMPLETED"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "status.json").write_text(json.dumps({"state": "COMPLETED", "attempts": 1}))
    assert read_status(tmp_path / "old") == {"state": "COMPLETED", "attempts": 1}


def test_every_single_bit_flip_is_caught_or_changes_nothing(tmp_path):
    """A census: each bit of a finished run's status.json flipped in turn. Parsed, the
    status is either refused (corrupt or damaged) or the very same; 0 silent changes."""
    run = _trained(tmp_path)
    path = run / "status.json"
    good = path.read_bytes()
    truth = read_status(run)
    outcome = {"refused": 0, "same": 0, "silent": 0}
    for i in range(len(good)):
        for bit in range(8):
            flipped = bytearray(good)
            flipped[i] ^= 1 << bit
            path.write_bytes(bytes(flipped))
            try:
                found = read_status(run)
            except CorruptStatus:
                outcome["refused"] += 1
                continue
            outcome["same" if found == truth else "silent"] += 1
    assert outcome["silent"] == 0, outcome
    assert outcome["refused"] + outcome["same"] == 8 * len(good) and outcome["refused"] > 0.9 * 8 * len(good)


def test_transitions_follow_the_writers(tmp_path):
    finished = {State.COMPLETED, State.DIVERGED}
    assert ALLOWED[None] == set(State) and ALLOWED[State.RUNNING] == set(State)
    for state in finished:
        assert ALLOWED[state] == set()
    for state in set(State) - finished - {State.RUNNING}:
        assert ALLOWED[state] == set(State) - finished, state  # a relaunch goes through RUNNING
    run = _trained(tmp_path)
    before = (run / "status.json").read_bytes()
    for state in State:
        with pytest.raises(IllegalTransition, match=f"COMPLETED -> {state.value} is no allowed move"):
            update_status(run, state, error="late")
    assert (run / "status.json").read_bytes() == before  # nothing written
    other = tmp_path / "p"
    other.mkdir()
    update_status(other, State.PREEMPTED)
    with pytest.raises(IllegalTransition, match="PREEMPTED -> COMPLETED"):
        update_status(other, State.COMPLETED)
    for state in (State.RUNNING, State.RUNNING, State.FAILED, State.RUNNING, State.TIMEOUT, State.RUNNING,
                  State.DIVERGED):
        update_status(other, state)
    assert read_status(other)["attempts"] == 4
