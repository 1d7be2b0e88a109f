"""collect: one row per run, losses from the val evals, written atomically to runs.parquet."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import cli

from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.status import State, update_status
from scalelab.sweep.view.collect import collect

CONTRACT = ["run_id", "name", "state", "N", "N_non_embedding", "D_unique", "D_total", "epochs", "flops",
            "final_loss", "best_loss", "steps_done", "wall_time_s", "member"]


def make_sweep(root: Path, recipe: str | None = "regularized") -> Path:
    rows = []
    for i, lr in enumerate([1e-3, 3e-3, 1e-2]):
        rows.append({"run_id": f"id{i}", "name": f"lr{lr}", "run_dir": f"runs/lr{lr}-id{i}", "optim.lr": lr,
                     "member": i % 2, "N": 1000, "N_non_embedding": 500, "D_unique": 100, "D_total": 400,
                     "epochs": 4.0, "steps": 20, "flops": 2.4e6, "gpu_hours": None})
    write_parquet_atomic(root / "plan.parquet", pl.DataFrame(rows))
    a, b = (root / rows[0]["run_dir"]), (root / rows[1]["run_dir"])
    a.mkdir(parents=True)
    update_status(a, State.RUNNING)
    update_status(a, State.COMPLETED, steps_done=20, wall_time_s=12.5)
    # rows out of step order, and train-split rows that must not count
    write_parquet_atomic(a / "evals.parquet", pl.DataFrame({
        "run_id": ["id0"] * 5, "step": [20, 0, 10, 10, 20], "tokens": [0] * 5,
        "split": ["val", "val", "val", "train", "train"], "loss": [3.1, 5.5, 2.9, 1.0, 0.5]}))
    b.mkdir(parents=True)
    update_status(b, State.FAILED, error="boom")
    if recipe is not None:
        (root / "spec.yaml").write_text(f"name: x\nbase:\n  extra: {{recipe: {recipe}}}\n")
    return root


def test_collect_rows_and_losses(tmp_path):
    sweep = make_sweep(tmp_path / "sw")
    frame = collect(sweep)
    assert set(CONTRACT + ["optim.lr", "recipe"]) <= set(frame.columns)
    assert frame["run_id"].to_list() == ["id0", "id1", "id2"]
    assert frame["state"].to_list() == ["COMPLETED", "FAILED", None]
    assert frame["final_loss"].to_list() == [3.1, None, None]  # the val eval at the last step
    assert frame["best_loss"].to_list() == [2.9, None, None]  # the minimum val eval
    assert frame["steps_done"].to_list() == [20, None, None]
    assert frame["wall_time_s"].to_list() == [12.5, None, None]
    assert frame["member"].to_list() == [0, 1, 0]
    assert frame["recipe"].to_list() == ["regularized"] * 3
    on_disk = pl.read_parquet(sweep / "runs.parquet")
    assert on_disk.equals(frame)
    assert not list(sweep.glob(".runs.parquet.*"))  # atomic: no temporary left behind


def test_collect_cli_and_no_recipe(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "sw", recipe=None)
    assert cli("collect", str(sweep)) == 0
    out = capsys.readouterr().out
    assert "3 runs" in out and "1 completed" in out
    assert "recipe" not in pl.read_parquet(sweep / "runs.parquet").columns


@pytest.mark.parametrize("bad", ["missing", "file"])
def test_collect_bad_input_is_one_line(tmp_path, bad, capsys):
    target = tmp_path / "nope"
    if bad == "file":
        target.write_text("not a spec: [")
    assert cli("collect", str(target)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unfinished_runs_read_eval_part_files(tmp_path):
    sweep = make_sweep(tmp_path / "sw")
    run = sweep / "runs/lr0.01-id2"
    run.mkdir(parents=True)
    update_status(run, State.PREEMPTED, steps_done=10)
    (run / "evals").mkdir()
    for step, loss in ((0, 5.0), (5, 4.0), (10, 4.5)):
        write_parquet_atomic(run / "evals" / f"part-{step:09d}.parquet", pl.DataFrame(
            {"run_id": ["id2"], "step": [step], "tokens": [0], "split": ["val"], "loss": [loss]}))
    frame = collect(sweep)
    assert frame.filter(pl.col("run_id") == "id2").select("state", "final_loss", "best_loss").row(0) == \
        ("PREEMPTED", 4.5, 4.0)


def _tiny_spec(path: Path, weight_decays: list[float]) -> Path:
    spec = {
        "name": "respec",
        "base": {"model": {"preset": "cpu-2.2k"},
                 "data": {"dataset": "default", "seq_len": 16, "unique_tokens": 256, "epochs": 1,
                          "val_tokens": 512},
                 "optim": {"name": "adamw", "lr": 3.0e-3},
                 "train": {"batch_size": 8, "eval_every": 0, "eval_batches": 1, "device": "cpu"}},
        "launcher": {"executor": "debug"},
        "blocks": [{"name": "a", "grid": {"optim.weight_decay": weight_decays}}],
    }
    import yaml

    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_collect_marks_runs_of_an_earlier_spec(tmp_path):
    """A sweep re-launched with an edited spec keeps the old runs (plan.parquet merges), but
    collect marks them in_spec False and the analyses leave them out with a note."""
    from analysis.tables.runs import drop_stale, prepare_runs

    root = tmp_path / "runs"
    assert cli("sweep", str(_tiny_spec(tmp_path / "a.yaml", [0.1, 1.0])), "--root", str(root)) == 0
    assert cli("sweep", str(_tiny_spec(tmp_path / "b.yaml", [0.1, 3.0])), "--root", str(root)) == 0
    frame = collect(root / "respec").sort("optim.weight_decay")
    assert frame["optim.weight_decay"].to_list() == [0.1, 1.0, 3.0]
    assert frame["state"].to_list() == ["COMPLETED"] * 3
    assert frame["in_spec"].to_list() == [True, False, True]
    kept, note = drop_stale(frame)
    assert kept["optim.weight_decay"].to_list() == [0.1, 3.0]
    assert note is not None and "1 run(s) of earlier specs" in note
    assert note in prepare_runs(frame).notes
    again, none = drop_stale(kept)
    assert again.equals(kept) and none is None
