"""Divergence: a non-finite loss or a loss above train.loss_ceiling ends the run DIVERGED
(exit code 3), distinct from a crash (FAILED, exit code 1)."""

from __future__ import annotations

import math

import polars as pl
import pytest
import torch
from _train_util import make_token_dir, tiny_cfg, write_cfg_yaml

from scalelab.cli import main
from scalelab.errors import EXIT_DIVERGED
from scalelab.store.status import State, read_status
from scalelab.train import step as step_mod
from scalelab.train import train


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


def test_injected_nan_diverges(data, tmp_path, monkeypatch):
    """The 3rd training forward returns NaN (test-only monkeypatch of the loss)."""
    calls = {"n": 0}
    real = step_mod.lm_loss

    def poisoned(model, x, y):
        loss = real(model, x, y)
        if torch.is_grad_enabled():
            calls["n"] += 1
            if calls["n"] == 3:
                return loss * float("nan")
        return loss

    monkeypatch.setattr(step_mod, "lm_loss", poisoned)
    run_dir = tmp_path / "nan"
    assert train(tiny_cfg(data, 8, "train.checkpoint_every=2"), run_dir) == State.DIVERGED
    status = read_status(run_dir)
    assert status["state"] == "DIVERGED" and status["steps_done"] == 3
    assert "non-finite" in status["error"]
    m = pl.read_parquet(run_dir / "metrics.parquet")
    assert m["step"].to_list() == [1, 2, 3] and math.isnan(m["train_loss"][2])
    # terminal: a relaunch does not train again
    monkeypatch.setattr(step_mod, "lm_loss", real)
    assert train(tiny_cfg(data, 8, "train.checkpoint_every=2"), run_dir) == State.DIVERGED
    assert read_status(run_dir)["attempts"] == 1


def test_loss_ceiling_gives_exit_code_3(data, tmp_path):
    # a ceiling no byte-level loss gets under (the ceiling must be > 0: 0 is refused at plan time)
    cfg_yaml = write_cfg_yaml(tmp_path / "c.yaml", tiny_cfg(data, 4, "train.loss_ceiling=0.001"))
    with pytest.raises(SystemExit) as exc:
        main(["train", str(cfg_yaml), "--run-dir", str(tmp_path / "ceil")])
    assert exc.value.code == EXIT_DIVERGED
    status = read_status(tmp_path / "ceil")
    assert status["state"] == "DIVERGED" and "above 0.001" in status["error"]


def test_crash_is_failed_not_diverged(data, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(step_mod, "lm_loss", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        train(tiny_cfg(data, 4), tmp_path / "crash")
    status = read_status(tmp_path / "crash")
    assert status["state"] == "FAILED" and "RuntimeError: disk on fire" in status["error"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["model.preset=cpu-50k", "train.bach_size=4"], "did you mean 'train.batch_size'"),
        (["train.batch_size=four"], "train.batch_size"),
        (["train.batch_size=4", "train.micro_batch_size=3"], "train.micro_batch_size"),
        (["optim.name=adamx"], "did you mean 'adamw'"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, needle, data):
    cfg_yaml = tmp_path / "c.yaml"
    cfg_yaml.write_text(f"data: {{dataset: {data}, seq_len: 32, val_tokens: 4096}}\n")
    with pytest.raises(SystemExit) as exc:
        main(["train", str(cfg_yaml), *args, "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and needle in err and "\n" not in err
    assert "Traceback" not in err


def test_missing_config_file_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", str(tmp_path / "nope.yaml")])
    assert exc.value.code == 2 and "nope.yaml" in capsys.readouterr().err
