"""What ``scalelab train`` prints: a progress line every ``log_every`` steps and one per eval,
as text or JSON lines (``--log-format json``, or ``SCALELAB_LOG_FORMAT`` for the runs a sweep
launches), nothing of either with ``-q``. Real tiny runs (cpu-50k, 12 steps) in this process."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/scalelab: _train_util

from _train_util import make_token_dir, tiny_cfg, write_cfg_yaml

from scalelab.store.status import State
from scalelab.train import train

STEPS = 12
EXTRA = ("train.eval_every=5", "train.norms_every=0", "train.log_every=4")
PROGRESS_KEYS = {"event", "run_id", "step", "total_steps", "loss", "tokens_per_s", "mfu",
                 "eta_s", "elapsed_s"}
TEXT_PROGRESS = re.compile(r"^\[(\w{32})\] step (\d+)/12 loss (\d+\.\d{4}) \| \S+ tok/s "
                           r"\| elapsed \S+ \| eta \S+$")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


@pytest.fixture
def cfg_yaml(data, tmp_path):
    return write_cfg_yaml(tmp_path / "cfg.yaml", tiny_cfg(data, STEPS, *EXTRA))


@pytest.fixture(autouse=True)
def no_log_env(monkeypatch):
    for var in ("SCALELAB_LOG_FORMAT", "SCALELAB_QUIET"):
        monkeypatch.delenv(var, raising=False)


def _train_cli(capsys, *argv: str) -> list[str]:
    from scalelab.cli import main

    with pytest.raises(SystemExit) as done:
        main(["train", *argv])
    out, err = capsys.readouterr()
    assert done.value.code in (0, None), (out, err)
    return out.splitlines()


def _check_json(lines: list[str], run_dir: Path) -> None:
    docs = [json.loads(line) for line in lines]  # every line is one JSON object
    progress = [d for d in docs if d["event"] == "progress"]
    evals = [d for d in docs if d["event"] == "eval"]
    assert len(progress) + len(evals) == len(docs)
    assert [d["step"] for d in progress] == [4, 8, 12]  # every log_every steps, and the last
    assert [d["step"] for d in evals] == [0, 5, 10, 12]
    metrics = pl.read_parquet(run_dir / "metrics.parquet")
    losses = dict(zip(metrics["step"], metrics["train_loss"]))
    for d in progress:
        assert set(d) == PROGRESS_KEYS and d["total_steps"] == STEPS
        assert d["loss"] == losses[d["step"]]
        assert d["mfu"] is None  # CPU: never an MFU
        assert d["tokens_per_s"] > 0 and d["eta_s"] >= 0 and d["elapsed_s"] > 0
    assert progress[-1]["eta_s"] == 0.0
    assert [d["elapsed_s"] for d in docs] == sorted(d["elapsed_s"] for d in docs)


def test_json_lines(cfg_yaml, tmp_path, capsys):
    run_dir = tmp_path / "run"
    _check_json(_train_cli(capsys, str(cfg_yaml), "--run-dir", str(run_dir), "--log-format", "json"),
                run_dir)


def test_text_lines(cfg_yaml, tmp_path, capsys):
    lines = _train_cli(capsys, str(cfg_yaml), "--run-dir", str(tmp_path / "run"))
    progress = [m for line in lines if (m := TEXT_PROGRESS.match(line))]
    assert [int(m[2]) for m in progress] == [4, 8, 12]
    assert "mfu" not in "\n".join(lines)
    evals = [line for line in lines if " val " in line]
    assert len(evals) == 4 and evals[0].endswith(")") and " step 0/12 val " in evals[0]
    assert len(progress) + len(evals) == len(lines)


def test_quiet_prints_no_progress(cfg_yaml, tmp_path, capsys):
    assert _train_cli(capsys, str(cfg_yaml), "--run-dir", str(tmp_path / "run"), "-q") == []
    assert pl.read_parquet(tmp_path / "run" / "metrics.parquet")["step"].to_list() == [4, 8, 12]


def test_sweep_jobs_take_the_environment(data, tmp_path, capsys, monkeypatch):
    """``train(cfg, run_dir)`` without settings, as a sweep job calls it."""
    monkeypatch.setenv("SCALELAB_LOG_FORMAT", "json")
    run_dir = tmp_path / "run"
    assert train(tiny_cfg(data, STEPS, *EXTRA), run_dir) == State.COMPLETED
    _check_json(capsys.readouterr().out.splitlines(), run_dir)
    monkeypatch.setenv("SCALELAB_QUIET", "1")
    assert train(tiny_cfg(data, STEPS, *EXTRA), tmp_path / "quiet") == State.COMPLETED
    assert capsys.readouterr().out == ""
    # the flags win over the environment
    lines = _train_cli(capsys, str(write_cfg_yaml(tmp_path / "c.yaml", tiny_cfg(data, STEPS, *EXTRA))),
                       "--run-dir", str(tmp_path / "flags"), "--log-format", "text")
    assert lines == []  # still quiet (from the environment), now text
    monkeypatch.setenv("SCALELAB_QUIET", "0")
    lines = _train_cli(capsys, str(tmp_path / "c.yaml"), "--run-dir", str(tmp_path / "flags2"),
                       "--log-format", "text")
    assert lines and all(line.startswith("[") for line in lines)
