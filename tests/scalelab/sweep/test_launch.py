"""Launch: decide rules, idempotent relaunch, retry, ctrl-C safety, concurrent launches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _waits import CEILING_S, wait_until
from lifecycle_helpers import FAKE, PYTHON, cli, fake_env, fake_progress, plan_of, write_spec

from scalelab.store.status import State, read_status, update_status
from scalelab.sweep.run import observe as observe_mod
from scalelab.sweep.run.backends import Hooks
from scalelab.sweep.run.backends.debug import DebugBackend
from scalelab.sweep.run.launch import decide, execute
from scalelab.sweep.run.lock import CLAIM_FILE, read_claim, try_claim
from scalelab.sweep.spec.sections import LauncherConfig

FAKE_BASE = {"model": {"preset": "cpu-50k"}, "data": {"vocab_size": 256, "unique_tokens": 1024, "seq_len": 16},
             "extra": {"fake_steps": 4}}


def _spec(tmp_path, name="s", extra=None, grid=None, **kw):
    base = json.loads(json.dumps(FAKE_BASE))
    base["extra"].update(extra or {})
    return write_spec(tmp_path / f"{name}.yaml", name, base=base, grid=grid, **kw)


def _invocations(run_dir: Path) -> int:
    log = run_dir / "invocations.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_decide_rules(tmp_path):
    grid = {"optim.lr": [1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3, 8e-3, 9e-3]}
    plan = plan_of(_spec(tmp_path, grid=grid))
    sweep = tmp_path / "sw"
    dirs = [sweep / d for d in plan.table["run_dir"]]
    for d, state in zip(dirs, ["COMPLETED", "DIVERGED", "FAILED", "CANCELLED", "PREEMPTED", "TIMEOUT"]):
        d.mkdir(parents=True)
        update_status(d, State(state))
    dirs[6].mkdir(parents=True)  # RUNNING, claimed by this live process
    update_status(dirs[6], State.RUNNING)
    assert try_claim(dirs[6], backend="local") is not None
    dirs[7].mkdir(parents=True)  # RUNNING, but its claimer is gone: lost, resumable
    update_status(dirs[7], State.RUNNING)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (dirs[7] / CLAIM_FILE).write_text(json.dumps({"token": "x", "host": os.uname().nodename,
                                                  "pid": dead.pid, "backend": "local"}))
    # dirs[8]: never started
    plain = decide(plan, sweep)
    assert plain["state"].to_list() == ["COMPLETED", "DIVERGED", "FAILED", "CANCELLED", "PREEMPTED",
                                        "TIMEOUT", "RUNNING", "PREEMPTED", None]
    assert plain["action"].to_list() == ["skip", "skip", "skip", "skip", "launch", "launch", "skip",
                                         "launch", "launch"]
    assert "lost" in plain["reason"][7] and "claimed by pid" in plain["reason"][6]
    failed = decide(plan, sweep, retry_failed=True)["action"].to_list()
    assert failed == ["skip", "skip", "launch", "launch", "skip", "skip", "skip", "skip", "skip"]
    pre = decide(plan, sweep, retry_preempted=True)["action"].to_list()
    assert pre == ["skip", "skip", "skip", "skip", "launch", "launch", "skip", "launch", "skip"]


def test_debug_runs_each_once_then_relaunch_skips_all(tmp_path):
    plan = plan_of(_spec(tmp_path, seeds=[0, 1]))
    sweep = tmp_path / "sw"
    report = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE)
    assert len(report.launched) == 4 and set(report.results.values()) == {"COMPLETED"}
    again = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE)
    assert again.launched == [] and set(again.decisions["reason"]) == {"completed"}
    for d in plan.table["run_dir"]:
        assert _invocations(sweep / d) == 1
        assert not (sweep / d / CLAIM_FILE).exists()
    assert pl.read_parquet(sweep / "plan.parquet")["run_id"].to_list() == plan.table["run_id"].to_list()


def test_failed_and_diverged_then_retry(tmp_path):
    grid = {"extra.fake_outcome": ["fail", "diverge", "ok"]}
    plan = plan_of(_spec(tmp_path, grid=grid))
    sweep = tmp_path / "sw"
    report = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE)
    assert list(report.results.values()) == ["FAILED", "DIVERGED", "COMPLETED"]
    failed_dir = sweep / plan.table["run_dir"][0]
    assert "fake failure" in read_status(failed_dir)["error"]
    plain = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE)
    assert plain.launched == []
    retry = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE,
                    retry_failed=True, retry_preempted=True)
    assert retry.launched == [plan.table["run_id"][0]]  # never the diverged or completed run
    assert read_status(failed_dir)["attempts"] == 2


def test_scheduler_cancel_verdict_is_persisted(tmp_path, monkeypatch):
    plan = plan_of(_spec(tmp_path))
    sweep = tmp_path / "sw"
    run = sweep / plan.table["run_dir"][0]
    run.mkdir(parents=True)
    update_status(run, State.PREEMPTED, job_ids=["41_0"])
    calls = []

    def fake_poll(ids):
        calls.append(sorted(ids))
        return {"41_0": "CANCELLED"}

    monkeypatch.setattr(observe_mod, "poll_scheduler", fake_poll)
    report = execute(plan, sweep, LauncherConfig(), wait=True, backend=DebugBackend(), target=FAKE)
    assert calls == [["41_0"]]  # one batched poll for the whole sweep
    assert report.decisions["state"][0] == "CANCELLED" and report.decisions["action"][0] == "skip"
    assert read_status(run)["state"] == "CANCELLED"
    assert report.launched == [plan.table["run_id"][1]]


_LAUNCH = """
import sys
from scalelab.sweep.run.launch import execute, plan_from_disk
from scalelab.sweep.spec.sections import LauncherConfig
report = execute(plan_from_disk(sys.argv[1]), sys.argv[1], LauncherConfig(executor="local"), wait=True,
                 target="fake_train:train", progress=False)
print(report.results)
"""


def test_ctrl_c_checkpoints_local_runs_and_relaunch_resumes(tmp_path):
    # the launcher process is started from the plan on disk (no spec planning: fast)
    spec = _spec(tmp_path, extra={"fake_steps": 20, "fake_step_s": 0.25}, grid={"optim.lr": [1e-3, 2e-3]})
    plan = plan_of(spec)
    sweep = tmp_path / "sw"
    execute(plan, sweep, plan.spec.launcher, wait=True, backend=_NoRun(), target=FAKE)
    runs = [sweep / d for d in plan.table["run_dir"]]
    launcher = subprocess.Popen([PYTHON, "-c", _LAUNCH, str(sweep)], env=fake_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # interrupt once every run has done a step (a state the fake trainer writes), not after a guess
    wait_until(lambda: all(fake_progress(r) >= 1 for r in runs), "both runs past step 1",
               alive=lambda: launcher.poll() is None)
    launcher.send_signal(signal.SIGINT)
    launcher.wait(timeout=CEILING_S)
    for run in runs:
        status = read_status(run)
        assert status["state"] == "PREEMPTED" and 0 < status["steps_done"] < 20
        assert not (run / CLAIM_FILE).exists()
    out = subprocess.run([PYTHON, "-c", _LAUNCH, str(sweep)], env=fake_env(), capture_output=True, text=True,
                         timeout=CEILING_S, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    for run in runs:
        status = read_status(run)
        assert status["state"] == "COMPLETED" and status["attempts"] == 2
        steps = pl.read_parquet(run / "metrics.parquet")["step"].to_list()
        assert steps == list(range(1, 21))  # every step exactly once across the resume


class _NoRun(DebugBackend):
    """Writes the sweep's plan and run inputs, executes nothing (claims are released)."""

    def wait(self, handles, hooks=None):
        for h in handles:
            (hooks or Hooks()).finished(h, "PENDING")
        return {}


def test_two_concurrent_launches_execute_each_run_once(tmp_path):
    spec = _spec(tmp_path, extra={"fake_steps": 5, "fake_step_s": 0.05}, seeds=[0, 1, 2],
                 launcher={"executor": "local", "max_parallel": 2})
    args = [PYTHON, "-m", "scalelab", "sweep", str(spec), "--root", str(tmp_path / "root"),
            "--train-target", FAKE]
    procs = [subprocess.Popen(args, env=fake_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=CEILING_S)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sweep = tmp_path / "root" / "s"
    plan = pl.read_parquet(sweep / "plan.parquet")
    assert plan.height == 6
    for d in plan["run_dir"]:
        assert _invocations(sweep / d) == 1, d
        assert read_status(sweep / d)["state"] == "COMPLETED"
        assert read_claim(sweep / d) is None
    launched = sum(int(o.split(" launched")[0].rsplit(" ", 1)[-1]) for o in outs)
    assert launched == 6, outs


def test_bad_executor_is_one_line_exit_2(tmp_path, capsys):
    spec = _spec(tmp_path)
    assert cli("sweep", str(spec), "--root", str(tmp_path), "--executor", "lokal") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'local'" in err and "Traceback" not in err


def test_sweep_and_retry_verbs(tmp_path, capsys):
    spec = _spec(tmp_path, grid={"extra.fake_outcome": ["fail", "ok"]})
    root = tmp_path / "root"
    assert cli("sweep", str(spec), "--root", str(root), "--executor", "debug", "--train-target", FAKE) == 1
    out = capsys.readouterr().out
    assert "2 launched on debug" in out and "1 completed, 1 failed" in out
    sweep = root / "s"
    assert (sweep / "spec.yaml").read_text() == spec.read_text()
    assert cli("retry", str(sweep), "--preempted", "--executor", "debug", "--train-target", FAKE) == 0
    assert "0 launched" in capsys.readouterr().out
    assert cli("retry", str(spec), "--root", str(root), "--failed", "--executor", "debug",
               "--train-target", FAKE) == 1
    assert "1 launched on debug" in capsys.readouterr().out
    failed = sweep / pl.read_parquet(sweep / "plan.parquet")["run_dir"][0]
    assert read_status(failed)["attempts"] == 2 and _invocations(failed) == 2


def test_local_trainer_killed_without_a_word_is_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", fake_env()["PYTHONPATH"])
    plan = plan_of(_spec(tmp_path, grid={"extra.fake_outcome": ["kill", "ok"]}))
    report = execute(plan, tmp_path / "sw", plan.spec.launcher, wait=True, executor="local", target=FAKE,
                     progress=False)
    assert list(report.results.values()) == ["FAILED", "COMPLETED"]
    status = read_status(tmp_path / "sw" / plan.table["run_dir"][0])
    assert status["error"] == "trainer exited with code -9 before writing a final state"
    assert execute(plan, tmp_path / "sw", plan.spec.launcher, wait=True, executor="local").launched == []
