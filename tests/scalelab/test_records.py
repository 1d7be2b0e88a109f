"""Records: part files at checkpoints, truncation on resume, compaction, fixed schemas;
the checkpoint store (atomic dirs, keep-last); norm records (update = applied step)."""

from __future__ import annotations

import polars as pl
import pytest
import torch
from torch import nn

from scalelab.train.checkpoint import directory as ckpt
from scalelab.train.records.norms import NormRecorder
from scalelab.train.records.records import SCHEMAS, Records, read_table


def _log(rec: Records, steps) -> None:
    for s in steps:
        rec.add("metrics", step=s, tokens=s * 10, epoch=s / 100, lr=1e-3, train_loss=5.0 - s / 10,
                grad_norm=1.0, step_time_s=0.01)
        if s % 5 == 0:
            rec.add("evals", step=s, tokens=s * 10, split="val", loss=4.0)


def test_flush_truncate_compact_each_step_once(tmp_path):
    rec = Records(tmp_path, "abcd1234")
    _log(rec, range(1, 6))
    rec.flush(5)
    _log(rec, range(6, 11))
    rec.flush(10)  # parts written, then "the process died before checkpoint 10"
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == [
        "part-000000005.parquet", "part-000000010.parquet"]
    resumed = Records(tmp_path, "abcd1234")
    resumed.truncate(5)  # the latest checkpoint is step 5
    assert read_table(tmp_path, "metrics")["step"].to_list() == [1, 2, 3, 4, 5]
    _log(resumed, range(6, 13))
    resumed.flush(12)
    resumed.compact()
    assert not (tmp_path / "metrics").exists()
    m = pl.read_parquet(tmp_path / "metrics.parquet")
    assert m["step"].to_list() == list(range(1, 13))
    assert dict(m.schema) == SCHEMAS["metrics"]
    assert pl.read_parquet(tmp_path / "evals.parquet")["step"].to_list() == [5, 10]
    norms = pl.read_parquet(tmp_path / "norms.parquet")  # never logged: empty, typed
    assert norms.height == 0 and dict(norms.schema) == SCHEMAS["norms"]


def test_truncate_straddling_part_and_no_checkpoint(tmp_path):
    rec = Records(tmp_path, "r")
    _log(rec, range(8))
    rec.flush(7)
    Records(tmp_path, "r").truncate(3)  # rewrites the part, keeping steps <= 3
    assert read_table(tmp_path, "metrics")["step"].to_list() == [0, 1, 2, 3]
    Records(tmp_path, "r").truncate(-1)  # no checkpoint: nothing survives (step 0 re-logged)
    assert read_table(tmp_path, "metrics").height == 0


def test_compaction_interrupted_reads_rows_once(tmp_path):
    rec = Records(tmp_path, "r")
    _log(rec, range(1, 4))
    rec.flush(3)
    frame = read_table(tmp_path, "metrics")
    frame.write_parquet(tmp_path / "metrics.parquet")  # compacted, parts not yet removed
    assert read_table(tmp_path, "metrics")["step"].to_list() == [1, 2, 3]


def test_disabled_records_write_nothing(tmp_path):
    rec = Records(tmp_path, "r", enabled=False)
    _log(rec, range(1, 4))
    rec.flush(3)
    rec.compact()
    assert list(tmp_path.iterdir()) == []


def test_checkpoint_atomic_keep_last_and_rng(tmp_path):
    torch.manual_seed(0)
    for step in (3, 6, 9):
        ckpt.save_checkpoint(tmp_path, step, {"step": step, "rng": ckpt.rng_state()}, keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert names == ["step-000000006", "step-000000009"]
    (tmp_path / "checkpoint" / ".tmp-step-000000012-1").mkdir()  # a write killed midway
    (tmp_path / "checkpoint" / "step-000000015").mkdir()  # no state.pt: incomplete
    assert ckpt.latest_step(tmp_path) == 9
    state = ckpt.load_checkpoint(tmp_path)
    assert state["step"] == 9
    assert not (tmp_path / "checkpoint" / ".tmp-step-000000012-1").exists()
    want = torch.rand(3)
    ckpt.set_rng_state(state["rng"])
    assert torch.equal(torch.rand(3), want)
    assert ckpt.load_checkpoint(tmp_path / "nothing") is None


def test_update_norms_exclude_decoupled_weight_decay(tmp_path):
    """SGD with decoupled-style decay: p <- p - lr*wd*p - lr*g, so the recorded update
    is exactly -lr*g: frobenius = lr*||g||, supremum = lr*max|g| (rel 1e-6)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4, bias=False))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.0)
    opt.param_groups[0]["weight_decay"] = 0.5  # read by the recorder
    rec = Records(tmp_path, "r")
    norms = NormRecorder(model, rec)
    model(torch.randn(5, 6)).square().sum().backward()
    g = model[0].weight.grad.clone()
    norms.snapshot()
    with torch.no_grad():  # the decoupled step, by hand
        w = model[0].weight
        w.sub_(0.1 * 0.5 * w + 0.1 * g)
    norms.updates(1, opt)
    norms.grads(1)
    rows = rec.buffered("norms")
    upd = {r["norm"]: r["value"] for r in rows.filter(pl.col("kind") == "update").to_dicts()}
    assert upd["frobenius"] == pytest.approx(0.1 * g.norm().item(), rel=1e-6)
    assert upd["supremum"] == pytest.approx(0.1 * g.abs().max().item(), rel=1e-6)
    grd = {r["norm"]: r["value"] for r in rows.filter(pl.col("kind") == "grad").to_dicts()}
    assert grd["frobenius"] == pytest.approx(g.norm().item(), rel=1e-6)
    assert set(rows["layer"]) == {"0"} and set(rows["param"]) == {"weight"}
