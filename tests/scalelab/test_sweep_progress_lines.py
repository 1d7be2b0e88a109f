"""Progress lines of a local sweep in a log (issue 34 item 7): with stderr not a terminal,
one line per finished run (state, run, loss, n/total, elapsed) and a heartbeat when nothing
finished for ``HEARTBEAT_S``; on a terminal the rich bar. Tested without sleeps: a fake
clock drives ``RunLines``; the backend's loop runs trivial processes."""

from __future__ import annotations

import io
import sys

import polars as pl

from scalelab.store.layout import EVALS_FILE
from scalelab.sweep.run.backends import local
from scalelab.sweep.run.backends.local import HEARTBEAT_S, LocalBackend, RunLines, RunProgress
from scalelab.sweep.run.job import JobSpec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_finished_run_and_a_heartbeat():
    clock, out = Clock(), io.StringIO()
    lines = RunLines(3, clock=clock, stream=out)
    clock.now += 5
    lines.poll(running=2)
    assert out.getvalue() == ""  # nothing to say yet
    clock.now += 7
    lines.finished("tuned_twin-26k-abc", "COMPLETED", 2.01344)
    clock.now += HEARTBEAT_S - 1
    lines.poll(running=2)
    assert len(out.getvalue().splitlines()) == 1  # a run finished less than a minute ago
    clock.now += 1
    lines.poll(running=2)
    clock.now += 3
    lines.finished("tuned_twin-80k-def", "FAILED")
    clock.now += 3725 - 3
    lines.finished("data_twin-41k-ghi", "COMPLETED", 1.9)
    assert out.getvalue().splitlines() == [
        "local: 1/3 runs, completed tuned_twin-26k-abc loss 2.0134, 0:00:12",
        "local: 1/3 runs, 2 running, 0:01:12",
        "local: 2/3 runs, failed tuned_twin-80k-def, 0:01:15",
        "local: 3/3 runs, completed data_twin-41k-ghi loss 1.9000, 1:03:17",
    ]


def test_the_event_is_a_progress_event():
    event = RunProgress(2, 5, 61.0, "r", "COMPLETED", float("nan"))
    assert (event.task, event.label, event.final) == ("sweep", "local runs", False)
    assert event.line() == "local: 2/5 runs, completed r, 0:01:01"  # a nan loss is left out
    assert RunProgress(5, 5, 0.0, running=0).final


def test_final_loss_reads_the_last_validation_loss(tmp_path):
    assert local.final_loss(tmp_path) is None  # no evals
    pl.DataFrame({"step": [0, 10, 5], "split": ["val", "val", "val"], "loss": [5.0, 2.5, 3.0]}) \
        .write_parquet(tmp_path / EVALS_FILE)
    assert local.final_loss(tmp_path) == 2.5


def test_local_wait_prints_lines_when_stderr_is_not_a_terminal(tmp_path, monkeypatch, capsys):
    from scalelab.store.status import State

    monkeypatch.setattr(local, "command", lambda job, python=None: [sys.executable, "-c", "pass"])
    monkeypatch.setattr(local, "settle", lambda run_dir, code, stopping=False: State.COMPLETED)
    jobs = []
    for i in range(3):
        run_dir = tmp_path / f"run{i}-{i:032x}"
        run_dir.mkdir()
        jobs.append(JobSpec(run_id=f"{i:032x}", name=run_dir.name, run_dir=str(run_dir)))
    backend = LocalBackend(2, progress=True)
    handles = backend.submit(jobs)
    states = backend.wait(handles)
    assert set(states.values()) == {"COMPLETED"}
    err = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in err] == ["local: 1/3 runs", "local: 2/3 runs", "local: 3/3 runs"]
    assert all(" completed run" in line for line in err)


def test_no_lines_without_progress(tmp_path, monkeypatch, capsys):
    from scalelab.store.status import State

    monkeypatch.setattr(local, "command", lambda job, python=None: [sys.executable, "-c", "pass"])
    monkeypatch.setattr(local, "settle", lambda run_dir, code, stopping=False: State.COMPLETED)
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    backend = LocalBackend(1, progress=False)
    backend.wait(backend.submit([JobSpec(run_id="0" * 32, name="r", run_dir=str(run_dir))]))
    assert capsys.readouterr().err == ""
