"""train(): run directory (README.md, "Concepts"), tidy schemas, schedule, accumulation, seeds."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
import torch
import yaml
from _train_util import make_token_dir, tiny_cfg

from scalelab.store.status import State, read_status
from scalelab.train import train
from scalelab.train.checkpoint import directory as ckpt
from scalelab.train.records.records import SCHEMAS
from scalelab.train.schedules import lr_at
from scalelab.train.seeds import MEMBER_STRIDE, run_seeds

STEPS = 12


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


@pytest.fixture(scope="module")
def done(data, tmp_path_factory):
    """One finished 12-step run (evals/norms/checkpoints every 5 steps)."""
    cfg = tiny_cfg(data, STEPS, "train.eval_every=5", "train.norms_every=5",
                   "train.checkpoint_every=5", "train.schedule=cosine")
    run_dir = tmp_path_factory.mktemp("runs") / "a"
    assert train(cfg, run_dir) == State.COMPLETED
    return cfg, run_dir


def test_run_dir_holds_every_file(done):
    _, run_dir = done
    for name in ("config.yaml", "meta.json", "status.json", "metrics.parquet", "evals.parquet",
                 "norms.parquet", "checkpoint"):
        assert (run_dir / name).exists(), name
    assert not (run_dir / "metrics").exists()  # parts compacted away
    doc = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert len(doc["run_id"]) == 32 and run_dir.name != doc["run_id"]
    assert doc["run_id_full"].startswith(doc["run_id"]) and len(doc["run_id_full"]) == 64
    assert doc["derived"]["steps"] == STEPS
    assert doc["derived"]["total_tokens"] == STEPS * 4 * 32
    assert doc["derived"]["n_params"] > 40_000 and doc["derived"]["flops"] > 0
    assert doc["config"]["model"]["preset"] == "cpu-50k"
    meta = json.loads((run_dir / "meta.json").read_text())
    assert set(meta["versions"]) >= {"torch", "numpy", "polars", "scalelab", "python"}
    assert meta["world_size"] == 1 and meta["device"]["type"] == "cpu"
    assert "commit" in meta["git"] and "dirty" in meta["git"]
    status = read_status(run_dir)
    assert status["state"] == "COMPLETED" and status["attempts"] == 1
    assert status["steps_done"] == STEPS and status["run_id"] == doc["run_id"]
    assert ckpt.latest_step(run_dir) == STEPS
    assert sorted(p.name for p in (run_dir / "checkpoint").iterdir()) == [
        "step-000000010", "step-000000012"]  # the newest two kept


def test_tidy_tables(done):
    _, run_dir = done
    rid = yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]
    for table, schema in SCHEMAS.items():
        frame = pl.read_parquet(run_dir / f"{table}.parquet")
        assert dict(frame.schema) == schema, table
        assert frame["run_id"].unique().to_list() == [rid]
    m = pl.read_parquet(run_dir / "metrics.parquet")
    assert m["step"].to_list() == list(range(1, STEPS + 1))
    assert m["tokens"].to_list() == [s * 128 for s in range(1, STEPS + 1)]
    assert m["epoch"][-1] == pytest.approx(1.0)
    assert m["train_loss"].is_finite().all() and (m["step_time_s"] > 0).all()
    # the lr column is the schedule: peak 0.01 x cosine multiplier, warmup 2
    want = [0.01 * lr_at(s - 1, STEPS, "cosine", 2) for s in range(1, STEPS + 1)]
    assert m["lr"].to_list() == pytest.approx(want, rel=1e-12)
    e = pl.read_parquet(run_dir / "evals.parquet")
    assert e["step"].to_list() == [0, 5, 10, 12] and set(e["split"]) == {"val"}
    assert e["loss"][0] == pytest.approx(math.log(256), abs=0.1)  # init: near uniform
    n = pl.read_parquet(run_dir / "norms.parquet")
    assert sorted(n["step"].unique().to_list()) == [0, 5, 10, 12]
    assert set(n.filter(pl.col("step") == 0)["kind"]) == {"weight"}
    assert set(n.filter(pl.col("step") == 5)["kind"]) == {"weight", "update", "grad"}
    assert set(n["norm"]) == {"rms_to_rms", "l1_to_rms", "rms_to_inf", "supremum", "frobenius"}
    assert {"tok_emb", "lm_head", "layers.0.attn.wq"} <= set(n["layer"])
    # weight norms at the last step are those of the final checkpoint's weights
    w = ckpt.load_checkpoint(run_dir)["model"]["layers.0.attn.wq.weight"]
    got = n.filter((pl.col("step") == STEPS) & (pl.col("layer") == "layers.0.attn.wq")
                   & (pl.col("kind") == "weight") & (pl.col("norm") == "frobenius"))["value"]
    assert got.item() == pytest.approx(w.norm().item(), rel=1e-6)


def test_scan_over_a_sweep_and_completed_returns_at_once(done, data):
    cfg, run_dir = done
    other = run_dir.parent / "b"
    cfg_b = tiny_cfg(data, 3, "member=1", "train.norms_every=0")
    assert train(cfg_b, other) == State.COMPLETED
    for table in SCHEMAS:  # b has an empty norms table: same schema, scans fine
        frame = pl.scan_parquet(str(run_dir.parent / "*" / f"{table}.parquet")).collect()
        assert frame["run_id"].n_unique() == (1 if table == "norms" else 2)
    assert pl.read_parquet(other / "metrics.parquet")["step"].to_list() == [1, 2, 3]
    # a COMPLETED run is not trained again
    before = read_status(run_dir)
    assert train(cfg, run_dir) == State.COMPLETED
    assert read_status(run_dir)["attempts"] == before["attempts"] == 1


def test_member_seeds_and_different_run_dir_refused(done, data):
    _, run_dir = done
    s = run_seeds(tiny_cfg(data, 3, "member=2", "train.init_seed=5", "data.seed=7"))
    assert s == (5 + 2 * MEMBER_STRIDE, 7 + 2 * MEMBER_STRIDE)
    from scalelab.errors import UserError

    with pytest.raises(UserError, match="holds run"):
        train(tiny_cfg(data, 3, "optim.lr=0.02"), run_dir)


def test_grad_accumulation_matches_full_batch(data, tmp_path):
    """micro_batch_size=1 (4 micro-batches) vs one batch of 4: same run up to fp32 summation
    order. Tolerance: final weights max |diff| <= 1e-5 (AdamW after 4 steps, lr 1e-2)."""
    full = tiny_cfg(data, 4, "train.norms_every=0")
    accum = tiny_cfg(data, 4, "train.norms_every=0", "train.micro_batch_size=1")
    train(full, tmp_path / "full")
    train(accum, tmp_path / "accum")
    a, b = ckpt.load_checkpoint(tmp_path / "full"), ckpt.load_checkpoint(tmp_path / "accum")
    diff = max((a["model"][k] - b["model"][k]).abs().max().item() for k in a["model"])
    assert diff <= 1e-5
    la = pl.read_parquet(tmp_path / "full" / "metrics.parquet")["train_loss"]
    lb = pl.read_parquet(tmp_path / "accum" / "metrics.parquet")["train_loss"]
    assert (la - lb).abs().max() <= 1e-5


@pytest.mark.parametrize("precision,optimizer", [("bf16-autocast", "adamw"),
                                                 ("bf16-pure", "sr-adamw")])
def test_precisions(data, tmp_path, precision, optimizer):
    cfg = tiny_cfg(data, 3, f"train.precision={precision}", f"optim.name={optimizer}",
                   "train.norms_every=0")
    assert train(cfg, tmp_path / "r") == State.COMPLETED
    w = ckpt.load_checkpoint(tmp_path / "r")["model"]["layers.0.attn.wq.weight"]
    assert w.dtype == (torch.bfloat16 if precision == "bf16-pure" else torch.float32)
    assert pl.read_parquet(tmp_path / "r" / "metrics.parquet")["train_loss"].is_finite().all()
