"""Training with quantized GEMMs (issue 40): fp8, mxfp8, mxfp4 and nvfp4 train (the loss
falls, and differs from fp32's), meta.json says which GEMM path ran, and a run killed with
SIGKILL resumes bit-identically (the SR bits are keyed by seed, step, layer and call).

CPU, one thread in the subprocesses; "bit-identical" as tests/scalelab/test_resume.py."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest
from _train_util import (
    REPO,
    assert_tensors_equal,
    cli_env,
    final_state,
    kill_9_and_resume,
    make_token_dir,
    tiny_cfg,
    tiny_overrides,
)
from _waits import CEILING_S

from scalelab.identity import run_id
from scalelab.store.status import State
from scalelab.train import train

STEPS = 40
EXTRA = ("train.eval_every=10", "train.norms_every=10", "train.checkpoint_every=4")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


@pytest.fixture(scope="module")
def fp32_loss(data, tmp_path_factory):
    run = tmp_path_factory.mktemp("fp32") / "r"
    assert train(tiny_cfg(data, STEPS, *EXTRA), run) == State.COMPLETED
    assert json.loads((run / "meta.json").read_text())["gemm_path"] is None
    return pl.read_parquet(run / "metrics.parquet")["train_loss"].to_list()


def _check_trained(run, fp32_loss):
    loss = pl.read_parquet(run / "metrics.parquet")["train_loss"].to_list()
    assert len(loss) == STEPS
    assert sum(loss[-5:]) / 5 < loss[0] - 1.0, loss  # ln 256 = 5.5 at the start
    assert max(abs(a - b) for a, b in zip(loss, fp32_loss)) > 1e-3  # not fp32 under another name
    assert json.loads((run / "meta.json").read_text())["gemm_path"] == "emulated"


@pytest.mark.parametrize("precision", ["fp8", "mxfp8", "nvfp4"])
def test_quantized_precisions_train(data, tmp_path, fp32_loss, precision):
    cfg = tiny_cfg(data, STEPS, *EXTRA, f"train.precision={precision}")
    assert run_id(cfg) != run_id(tiny_cfg(data, STEPS, *EXTRA))  # precision is identity
    assert train(cfg, tmp_path / "r") == State.COMPLETED
    _check_trained(tmp_path / "r", fp32_loss)


def test_cli_train_mxfp4(data, tmp_path, fp32_loss):
    """``scalelab train sweeps/examples/train_cpu.yaml train.precision=mxfp4`` (tiny overrides)."""
    run = tmp_path / "r"
    args = [sys.executable, "-m", "scalelab", "train", str(REPO / "sweeps/examples/train_cpu.yaml"),
            *tiny_overrides(data, STEPS), *EXTRA, "train.precision=mxfp4", "--run-dir", str(run)]
    done = subprocess.run(args, env=cli_env(), capture_output=True, text=True, timeout=CEILING_S)
    assert done.returncode == 0, done.stdout + done.stderr
    _check_trained(run, fp32_loss)


def test_kill_9_resume_is_bit_identical_nvfp4(data, tmp_path):
    cfg = tiny_cfg(data, STEPS, *EXTRA, "train.precision=nvfp4", "train.micro_batch_size=2")
    ref, run_dir = kill_9_and_resume(cfg, tmp_path)
    got, want = final_state(run_dir), final_state(ref)
    assert_tensors_equal(got["model"], want["model"], "model")
    assert_tensors_equal(got["optimizer"]["state"], want["optimizer"]["state"], "optimizer")
    cols = ["step", "train_loss", "grad_norm"]
    m, r = (pl.read_parquet(d / "metrics.parquet").select(cols) for d in (run_dir, ref))
    assert m.equals(r)


def test_ensemble_scores_a_quantized_member_with_its_own_gemms(data, tmp_path):
    """``scalelab ensemble`` loads an nvfp4 member with its QuantLinear layers: the member
    alone re-scored equals its run's own final eval (1e-5, the summation order)."""
    from scalelab.ensemble.evaluate import EnsembleGroup, evaluate_group
    from scalelab.ensemble.load import load_trained

    dirs = []
    for member in (0, 1):
        cfg = tiny_cfg(data, 12, "train.eval_every=0", "train.precision=nvfp4", f"member={member}")
        dirs.append(tmp_path / f"m{member}")
        assert train(cfg, dirs[-1]) == State.COMPLETED
    rows = evaluate_group(EnsembleGroup("g", "g", tuple(dirs), (0, 1)), device="cpu")
    alone = rows.filter(pl.col("method") == "member").sort("member")["loss"].to_list()
    own = [pl.read_parquet(d / "evals.parquet").sort("step")["loss"][-1] for d in dirs]
    assert alone == pytest.approx(own, rel=1e-5)
    assert type(load_trained(dirs[0]).model.layers[0].attn.wq).__name__ == "QuantLinear"
