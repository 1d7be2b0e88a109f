"""A run's sweep, block and tags, read from the sweep's plan.parquet next to its run dir."""

from __future__ import annotations

import polars as pl

from scalelab.store.atomic import write_parquet_atomic
from scalelab.train.console.sweep_context import SweepContext, context_from_plan, sweep_context, tags


def _plan() -> pl.DataFrame:
    """Block 'lr' varies optim.lr and the seed (model fixed); block 'size' varies the
    preset, data.epochs and optim.weight_decay (its optim.lr column is null)."""
    rows = []

    def add(block, preset, lr, wd, epochs, seed):
        i = len(rows)
        rows.append({"run_id": f"{i:08x}", "name": f"r{i}", "run_dir": f"runs/r{i}-{i:08x}",
                     "block": block, "model.preset": preset, "optim.lr": lr,
                     "optim.weight_decay": wd, "data.epochs": epochs, "seed": seed,
                     "member": 0, "N": 1000, "D_total": 2000, "epochs": epochs, "steps": 10})

    for lr in (1e-3, 3e-3):
        for seed in (0, 1):
            add("lr", "cpu-50k", lr, None, 1.0, seed)
    add("size", "twin-26k", None, 0.1, 16.0, 0)
    add("size", "twin-52k", None, 0.0, 4.0, 0)
    return pl.DataFrame(rows)


def test_context_of_a_run_in_a_block():
    ctx = context_from_plan(_plan(), "00000001", "study")
    assert ctx == SweepContext(sweep="study", block="lr",
                               axes=(("optim.lr", 1e-3), ("seed", 1)))
    assert tags(ctx) == ("lr=0.001", "seed=1")
    other = context_from_plan(_plan(), "00000004", "study")
    assert other.block == "size"
    # only this block's varying axes (not optim.lr: null here), and no table columns
    assert [k for k, _ in other.axes] == ["model.preset", "optim.weight_decay", "data.epochs"]
    assert tags(other) == ("model=twin-26k", "wd=0.1", "epochs=16")


def test_plan_without_blocks_and_unknown_runs():
    plan = _plan().drop("block").filter(pl.col("optim.lr").is_not_null())
    ctx = context_from_plan(plan, "00000002", "plain")
    assert ctx.sweep == "plain" and ctx.block is None
    assert tags(ctx) == ("lr=0.003", "seed=0")
    assert context_from_plan(plan, "ffffffff", "plain") == SweepContext()
    assert tags(SweepContext()) == ()


def test_short_names_fall_back_to_the_full_key_when_they_collide():
    ctx = SweepContext("s", None, (("optim.lr", 0.01), ("distill.lr", 0.5), ("extra.recipe", "x" * 80)))
    got = tags(ctx)
    assert got[:2] == ("optim.lr=0.01", "distill.lr=0.5")
    assert got[2].startswith("recipe=xxx") and len(got[2]) == 64  # W&B's limit on a tag


def test_read_from_the_sweep_directory(tmp_path):
    sweep = tmp_path / "my_sweep"
    write_parquet_atomic(sweep / "plan.parquet", _plan())
    run_dir = sweep / "runs" / "r1-00000001"
    assert sweep_context(run_dir, "00000001") == context_from_plan(_plan(), "00000001", "my_sweep")
    assert sweep_context(tmp_path / "elsewhere" / "r1", "00000001") == SweepContext()
    assert sweep_context(sweep / "other" / "r1-00000001", "00000001") == SweepContext()
    (sweep / "plan.parquet").write_bytes(b"not parquet")  # unreadable: standalone, no crash
    assert sweep_context(run_dir, "00000001") == SweepContext()
