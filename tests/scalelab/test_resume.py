"""Resume: kill -9 at a random step, inside a checkpoint write (plus a corrupted newest
checkpoint) or SIGTERM, relaunch -> bit-identical to an uninterrupted run.

CPU, fp32, one thread everywhere. "Bit-identical": every tensor of the final checkpoint
(model, optimizer state) is ``torch.equal`` to the uninterrupted run's, and the metrics
hold steps 1..T exactly once with the same train_loss/grad_norm/lr floats.
"""

from __future__ import annotations

import random
import signal
import time

import polars as pl
import pytest
from _train_util import (
    assert_tensors_equal,
    final_state,
    make_token_dir,
    popen_train,
    signal_at_step,
    tiny_cfg,
    write_cfg_yaml,
    write_malicious_checkpoint,
)
from _waits import CEILING_S, wait_until

from scalelab.errors import EXIT_PREEMPTED
from scalelab.identity import run_id
from scalelab.store.status import State, read_status
from scalelab.train import train
from scalelab.train.checkpoint import directory as ckpt

STEPS = 60
EXTRA = ("train.checkpoint_every=4", "train.eval_every=10", "train.norms_every=10",
         "train.schedule=wsd")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


@pytest.fixture(scope="module")
def setup(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("resume")
    cfg = tiny_cfg(data, STEPS, *EXTRA)
    ref = root / "reference"
    assert train(cfg, ref) == State.COMPLETED  # uninterrupted, in-process
    return cfg, write_cfg_yaml(root / "cfg.yaml", cfg), ref


def _wait_for_checkpoint(run_dir, at_least: int, proc) -> int:
    """The newest checkpoint step once it is >= ``at_least`` (the trainer must still be alive)."""
    def reached():
        step = ckpt.latest_step(run_dir)
        return step if step is not None and step >= at_least else None

    return wait_until(reached, f"a checkpoint at step >= {at_least}", alive=lambda: proc.poll() is None,
                      every=0.005)


def _wait_for_file(path, proc) -> None:
    """Wait for ``path`` to appear (a state, not a duration), while the trainer lives."""
    wait_until(path.exists, str(path), alive=lambda: proc.poll() is None, every=0.01)


def _assert_same_as_reference(run_dir, ref):
    got, want = final_state(run_dir), final_state(ref)
    assert got["step"] == want["step"] == STEPS
    assert_tensors_equal(got["model"], want["model"], "model")
    assert_tensors_equal(got["optimizer"]["state"], want["optimizer"]["state"], "optimizer")
    cols = ["step", "tokens", "epoch", "lr", "train_loss", "grad_norm"]
    m, r = (pl.read_parquet(d / "metrics.parquet") for d in (run_dir, ref))
    assert m["step"].to_list() == list(range(1, STEPS + 1))  # each step exactly once
    assert m.select(cols).equals(r.select(cols))
    for table, key in (("evals", ["step", "split", "loss"]),
                       ("norms", ["step", "layer", "param", "kind", "norm", "value"])):
        a = pl.read_parquet(run_dir / f"{table}.parquet").select(key)
        b = pl.read_parquet(ref / f"{table}.parquet").select(key)
        assert a.equals(b), table


def test_kill_9_at_a_random_step_then_relaunch(setup, tmp_path):
    _, cfg_yaml, ref = setup
    run_dir = tmp_path / "killed"
    proc = popen_train(cfg_yaml, run_dir)
    seen = _wait_for_checkpoint(run_dir, 8, proc)
    time.sleep(random.Random().uniform(0.0, 0.15))  # somewhere past that checkpoint
    proc.kill()  # SIGKILL: no handler runs
    proc.wait()
    status = read_status(run_dir)
    assert status["state"] == "RUNNING"  # it really died mid-run
    killed_at = ckpt.latest_step(run_dir)
    assert seen <= killed_at < STEPS
    again = popen_train(cfg_yaml, run_dir)
    out, _ = again.communicate(timeout=CEILING_S)
    assert again.returncode == 0, out
    assert f"resumed from checkpoint at step {killed_at}" in out
    assert read_status(run_dir)["attempts"] == 2
    _assert_same_as_reference(run_dir, ref)


def test_kill_9_inside_a_checkpoint_write_and_a_corrupt_newest_checkpoint(setup, tmp_path):
    """SIGKILL while save_checkpoint(12) is writing state.pt (the TEST_PAUSE_ENV hook holds the
    writer there and says so with a marker file), then truncate the newest complete checkpoint
    (step 8) to 1,000 bytes: the relaunch says so in one line, resumes from step 4, sets step 8
    aside (not deleted) and ends bit-identical to the uninterrupted run, each step once."""
    cfg, cfg_yaml, ref = setup
    run_dir, marker = tmp_path / "torn", tmp_path / "inside-save-12"
    proc = popen_train(cfg_yaml, run_dir, env={ckpt.TEST_PAUSE_ENV: f"12:{marker}"})
    try:
        _wait_for_file(marker, proc)
        root = run_dir / "checkpoint"
        (tmp,) = root.glob(".tmp-step-000000012-*")  # mid-write: part of state.pt, no manifest
        assert (tmp / "state.pt").stat().st_size > 0 and not (tmp / "manifest.json").exists()
        proc.kill()  # SIGKILL inside save_checkpoint
        proc.wait(timeout=CEILING_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert read_status(run_dir)["state"] == "RUNNING"  # it really died mid-run
    assert ckpt.latest_step(run_dir) == 8
    newest = root / "step-000000008" / "state.pt"
    size = newest.stat().st_size
    with open(newest, "r+b") as fh:
        fh.truncate(1000)
    again = popen_train(cfg_yaml, run_dir)
    out, _ = again.communicate(timeout=CEILING_S)
    assert again.returncode == 0, out
    assert "Traceback" not in out
    said = [line for line in out.splitlines() if "corrupt" in line]
    assert said == [(f"[{run_id(cfg)}] checkpoint step-000000008 is corrupt (state.pt: 1000 bytes, "
                     f"manifest says {size}); resuming from step-000000004")], out
    assert "resumed from checkpoint at step 4/" in out
    assert read_status(run_dir)["attempts"] == 2
    assert (root / "corrupt-step-000000008" / "state.pt").stat().st_size == 1000  # kept aside
    assert not list(root.glob(".tmp-*"))
    _assert_same_as_reference(run_dir, ref)


def test_code_running_pickle_in_a_checkpoint_is_refused_in_one_line(data, tmp_path):
    """A state.pt whose pickle calls os.system (with a matching manifest) through the real CLI:
    refused by weights_only=True, one line naming it, no traceback, the code never runs; the
    run starts from scratch and completes, each step once."""
    steps = 8
    cfg = tiny_cfg(data, steps, "train.checkpoint_every=4")
    cfg_yaml = write_cfg_yaml(tmp_path / "cfg.yaml", cfg)
    run_dir, marker = tmp_path / "run", tmp_path / "code-ran"
    write_malicious_checkpoint(run_dir, 4, marker)
    proc = popen_train(cfg_yaml, run_dir)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert not marker.exists()
    assert "Traceback" not in out
    said = [line for line in out.splitlines() if "step-000000004" in line]
    assert len(said) == 1, out
    assert said[0].startswith(f"[{run_id(cfg)}] checkpoint step-000000004 is corrupt (state.pt: "
                              "pickle refused by weights_only=True: ")
    assert said[0].endswith("no intact checkpoint: starting from scratch")
    assert "posix.system" in said[0] or "os.system" in said[0]
    assert proc.returncode == 0, out
    assert (run_dir / "checkpoint" / "corrupt-step-000000004" / "state.pt").is_file()
    m = pl.read_parquet(run_dir / "metrics.parquet")
    assert m["step"].to_list() == list(range(1, steps + 1))


def test_sigterm_checkpoints_exits_preempted_and_resumes(setup, tmp_path):
    cfg, cfg_yaml, ref = setup
    run_dir = tmp_path / "preempted"
    proc = popen_train(cfg_yaml, run_dir)
    _wait_for_checkpoint(run_dir, 4, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == EXIT_PREEMPTED, out
    status = read_status(run_dir)
    assert status["state"] == "PREEMPTED"
    stopped = status["steps_done"]
    assert ckpt.latest_step(run_dir) == stopped < STEPS  # checkpointed where it stopped
    parts = sorted((run_dir / "metrics").glob("part-*.parquet"))
    steps = pl.concat([pl.read_parquet(p) for p in parts])["step"].to_list()
    assert steps == list(range(1, stopped + 1))
    # the in-process relaunch resumes (a different process, same numerics)
    assert train(cfg, run_dir) == State.COMPLETED
    _assert_same_as_reference(run_dir, ref)


@pytest.mark.parametrize("name,extra", [
    ("sr-adamw", ["train.precision=bf16-pure"]),
    ("muon", ["optim.lr=0.02"]),
    ("scion", ["optim.lr=0.01"]),
])
def test_in_process_preemption_resume_per_optimizer(data, tmp_path, monkeypatch, name, extra):
    """SIGTERM to this very process during step 3 -> PREEMPTED at 3 -> resume -> bitwise equal
    to an uninterrupted run (covers fp32 state of bf16 params, Muon's AdamW groups, Scion)."""

    from scalelab.train import step as step_mod

    cfg = tiny_cfg(data, 6, f"optim.name={name}", "train.checkpoint_every=100",
                   "train.norms_every=2", *extra)
    assert train(cfg, tmp_path / "ref") == State.COMPLETED
    real = step_mod.lm_loss
    monkeypatch.setattr(step_mod, "lm_loss", signal_at_step(3))
    assert train(cfg, tmp_path / "run") == State.PREEMPTED
    assert ckpt.latest_step(tmp_path / "run") == 3
    monkeypatch.setattr(step_mod, "lm_loss", real)
    assert train(cfg, tmp_path / "run") == State.COMPLETED
    got, want = final_state(tmp_path / "run"), final_state(tmp_path / "ref")
    assert_tensors_equal(got["model"], want["model"], "model")
    assert_tensors_equal(got["optimizer"]["state"], want["optimizer"]["state"], "optimizer")
    m = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    r = pl.read_parquet(tmp_path / "ref" / "metrics.parquet")
    assert m["step"].to_list() == list(range(1, 7))
    assert m["train_loss"].equals(r["train_loss"])
