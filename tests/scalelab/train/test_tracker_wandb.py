"""W&B, offline: a run's W&B record holds the resolved config, the sweep as group, the block
as job type, the block's varying axes as tags, val/loss and per-layer norms as tables; two
sweeps that train the same config are two W&B runs; a preempted run resumes its own.

Real tiny trainings (cpu-50k, 12 steps) with ``wandb: true``; the W&B files are read back
from the run directory (``_wandb_offline``). Skipped where wandb is not installed (it is an
optional extra: ``pip install 'scalelab[wandb]'``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/scalelab: _train_util
sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest.importorskip("wandb", reason="wandb is an optional extra (scalelab[wandb])")

from _train_util import make_token_dir, signal_at_step, tiny_cfg
from _wandb_offline import offline_runs

from scalelab.identity import run_dir_name, run_id
from scalelab.store.status import State
from scalelab.train import train
from scalelab.train.console.tracker import NORMS_COLUMNS, WANDB_ID_FILE, wandb_run_id

STEPS = 12
EXTRA = ("train.eval_every=5", "train.norms_every=5", "train.log_every=4",
         "train.checkpoint_every=100", "wandb=true")
ALLOWED_HISTORY = {"_step", "_runtime", "_timestamp", "train/loss", "lr", "grad_norm", "tokens",
                   "epoch", "perf/tokens_per_s", "val/loss"}
"""History keys besides the ``norms/...`` of the table: never one metric per layer."""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


@pytest.fixture(autouse=True)
def offline_wandb(tmp_path, monkeypatch):
    """Offline W&B whose caches and settings live in this test's folder."""
    home = tmp_path / "wandb-home"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(home / var.lower()))
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    for var in ("SCALELAB_LOG_FORMAT", "SCALELAB_QUIET"):
        monkeypatch.delenv(var, raising=False)


def _spec(path: Path, name: str, data: Path, body: dict) -> Path:
    cfg = tiny_cfg(data, STEPS, *EXTRA)
    base = {"model": {"preset": "cpu-50k"},
            "data": {"dataset": str(data), "seq_len": cfg.data.seq_len,
                     "unique_tokens": cfg.data.unique_tokens, "epochs": 1,
                     "val_tokens": cfg.data.val_tokens},
            "optim": {"lr": cfg.optim.lr},
            "train": {"batch_size": cfg.train.batch_size, "eval_batches": 2, "warmup": 2,
                      "eval_every": 5, "norms_every": 5, "log_every": 4,
                      "checkpoint_every": 100, "device": "cpu"},
            "wandb": True}
    path.write_text(yaml.safe_dump({"name": name, "base": base,
                                    "launcher": {"executor": "debug"}, **body}, sort_keys=False))
    return path


def _sweep(spec: Path, root: Path) -> None:
    from scalelab.cli import main

    with pytest.raises(SystemExit) as done:
        main(["sweep", str(spec), "--root", str(root)])
    assert done.value.code in (0, None)


def _run_dir(sweep_dir: Path, data: Path, *extra: str) -> tuple[Path, str]:
    """The run directory and run id of the tiny config with ``extra`` overrides in a sweep."""
    cfg = tiny_cfg(data, STEPS, *EXTRA, *extra)
    (found,) = (sweep_dir / "runs").glob(f"*-{run_id(cfg)}")
    return found, run_id(cfg)


def test_two_sweeps_with_blocks(data, tmp_path):
    root = tmp_path / "sweeps"
    blocks = {"blocks": [{"name": "lrs", "grid": {"optim.lr": [0.01, 0.003]}},
                         {"name": "wds", "grid": {"optim.weight_decay": [0.0, 0.3]}}]}
    _sweep(_spec(tmp_path / "a.yaml", "wb_a", data, blocks), root)
    _sweep(_spec(tmp_path / "b.yaml", "wb_b", data, {"grid": {"optim.lr": [0.01]}}), root)

    run_dir, rid = _run_dir(root / "wb_a", data, "optim.lr=0.01")
    (wb,) = offline_runs(run_dir)
    assert wb.id == (run_dir / WANDB_ID_FILE).read_text().strip() and wb.id.startswith(rid)
    assert (wb.group, wb.job_type, wb.tags) == ("wb_a", "lrs", ("lr=0.01",))
    assert wb.name == run_dir.name
    # the full resolved config
    c = wb.config
    assert c["model"]["preset"] == "cpu-50k" and c["optim"]["lr"] == 0.01
    assert c["data"]["dataset"] == str(data) and c["wandb"] is True
    assert c["derived"]["steps"] == STEPS and c["derived"]["flops_per_token"] > 0
    assert c["run_id"] == rid and len(c["run_id_full"]) > len(rid) and "init" in c["seeds"]
    assert (c["sweep"], c["block"]) == ("wb_a", "lrs")
    # evals: val/loss at every eval, the values of evals.parquet
    evals = pl.read_parquet(run_dir / "evals.parquet")
    assert wb.series("val/loss") == pytest.approx(dict(zip(evals["step"], evals["loss"])))
    assert sorted(wb.series("val/loss")) == [0, 5, 10, 12]
    assert sorted(wb.series("train/loss")) == [4, 8, 12]
    # norms: one table per norm step at the eval that follows it, never a metric per layer
    keys = {k for row in wb.history for k in row}
    assert {k for k in keys if not k.startswith("norms/")} <= ALLOWED_HISTORY
    assert sorted(wb.series("norms/path")) == [5, 10, 12]
    table = wb.table(wb.series("norms/path")[12])
    assert table["columns"] == list(NORMS_COLUMNS)
    norms = pl.read_parquet(run_dir / "norms.parquet").filter(pl.col("step") == 12)
    want = {tuple(r[:5]): r[5] for r in norms.select(NORMS_COLUMNS).rows()}
    got = {tuple(r[:5]): r[5] for r in table["data"]}
    assert set(got) == set(want) and len(got) > 100  # layer x param x kind x norm
    assert got == pytest.approx(want)
    assert {r[1] for r in table["data"]} == {"weight", "update", "grad"}
    assert wb.summary["norms/path"] == wb.series("norms/path")[12]  # the summary: the latest
    assert wb.summary["val/loss"] == pytest.approx(wb.series("val/loss")[12])

    # the other block: its own job type and axis
    wd_dir, _ = _run_dir(root / "wb_a", data, "optim.weight_decay=0.3")
    (wd,) = offline_runs(wd_dir)
    assert (wd.group, wd.job_type, wd.tags) == ("wb_a", "wds", ("wd=0.3",))

    # the same config in another sweep (no blocks, nothing varies): another W&B run
    other_dir, other_rid = _run_dir(root / "wb_b", data, "optim.lr=0.01")
    assert other_rid == rid and other_dir != run_dir
    (b,) = offline_runs(other_dir)
    assert b.id != wb.id
    assert (b.group, b.job_type, b.tags) == ("wb_b", "train", ())


def test_preempted_run_continues_its_own_wandb_run(data, tmp_path, monkeypatch):
    from scalelab.train import step as step_mod

    cfg = tiny_cfg(data, STEPS, *EXTRA)
    run_dir = tmp_path / run_dir_name(cfg)  # standalone: not in a sweep
    real = step_mod.lm_loss
    monkeypatch.setattr(step_mod, "lm_loss", signal_at_step(7))
    assert train(cfg, run_dir) == State.PREEMPTED
    kept = (run_dir / WANDB_ID_FILE).read_text().strip()
    monkeypatch.setattr(step_mod, "lm_loss", real)
    assert train(cfg, run_dir) == State.COMPLETED

    first, second = offline_runs(run_dir)
    assert first.id == second.id == kept == wandb_run_id(run_dir, "unused")
    for attempt in (first, second):
        assert (attempt.group, attempt.job_type, attempt.tags) == ("", "train", ())
    steps = lambda wb: sorted({row["_step"] for row in wb.history})
    assert steps(first) == [0, 4, 5]  # evals at 0 and 5 (with the norms table), progress at 4
    assert steps(second) == [8, 10, 12]  # resumed after step 7: the same run, going on
    assert sorted(second.series("val/loss")) == [10, 12]


def test_wandb_id_is_kept_and_new_per_directory(tmp_path):
    a = wandb_run_id(tmp_path / "a", "abcd1234")
    assert a.startswith("abcd1234-") and len(a) == len("abcd1234-") + 8
    assert wandb_run_id(tmp_path / "a", "abcd1234") == a  # read back, not made anew
    assert wandb_run_id(tmp_path / "b", "abcd1234") != a  # same config, another directory
    (tmp_path / "a" / WANDB_ID_FILE).write_text("not an id!\n")
    fresh = wandb_run_id(tmp_path / "a", "abcd1234")
    assert fresh != a and (tmp_path / "a" / WANDB_ID_FILE).read_text().strip() == fresh


def test_no_wandb_files_when_off(data, tmp_path):
    cfg = tiny_cfg(data, 4, "train.norms_every=0")
    assert train(cfg, tmp_path / "r") == State.COMPLETED
    assert not (tmp_path / "r" / WANDB_ID_FILE).exists() and not (tmp_path / "r" / "wandb").exists()
