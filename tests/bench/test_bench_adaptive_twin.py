"""bench/adaptive_twin.py on a synthetic reference grid (a known law plus noise, two seeds
per cell, in the columns ``scalelab collect`` writes): every design runs on every arm for
both targets (E and the light-vs-heavy ranking), the tables and the figure are written, the
truth is the whole cache's fit, and a grid with a missing run is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis.adaptive import Axis, CandidateSpace, SyntheticTrainer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import adaptive_twin  # noqa: E402

SIZES = (5.6e3, 9.7e3, 1.45e4, 2.6e4, 4.1e4, 8e4)
EPOCHS, WD = (32.0, 64.0, 128.0), (0.1, 1.0, 3.0, 10.0)


def _reference(path: Path, drop: int = 0) -> Path:
    space = CandidateSpace(SIZES, (Axis("epochs", EPOCHS), Axis("wd", WD)), replicates=2)
    law = SyntheticTrainer(E=1.95, noise_sd=0.005, grid={"epochs": EPOCHS, "wd": WD},
                           opt_lo={"epochs": 64.0, "wd": 0.1}, opt_hi={"epochs": 128.0, "wd": 3.0},
                           x_range=(SIZES[0] / 1e6, SIZES[-1] / 1e6))
    runs = law.train(space.table(law.flops))  # replicate r: the seed's own noise
    frame = pl.DataFrame({
        "N": runs["N"].cast(pl.Int64), "data.epochs": runs["epochs"].cast(pl.Int64),
        "optim.weight_decay": runs["wd"], "seed": runs["replicate"], "final_loss": runs["loss"],
        "wall_time_s": runs["N"] * runs["epochs"] / 1e4, "state": ["COMPLETED"] * runs.height,
    })
    path.mkdir(parents=True, exist_ok=True)
    frame[drop:].write_parquet(path / "runs.parquet")
    return path


def test_every_design_on_every_arm_tables_and_figure(tmp_path, capsys):
    sweep = _reference(tmp_path / "ref")
    assert adaptive_twin.main([str(sweep), "--arms", "3", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "(2 seed(s) per cell)" in out and "Truth: E = 1.9" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    e_rows = [r.split("|")[1].strip() for r in rows[:5]]
    assert e_rows == ["design", "grid", "random", "adaptive", "adaptive (ridge)"]
    assert [r.split("|")[1].strip() for r in rows[5:]] == ["design", "grid", "random", "adaptive (ridge)"]
    assert "| random | 3 |" in out
    assert (tmp_path / "out" / "adaptive_twin.png").stat().st_size > 10_000
    traj = pl.read_parquet(tmp_path / "out" / "adaptive_twin.parquet")
    assert set(traj["design"]) == {"grid", "random", "adaptive", "adaptive (ridge)"}
    assert set(traj["arm"]) == {0, 1, 2} and set(traj["target"]) == {"E", "ranking"}
    budget = traj["budget_hours"][0]
    assert (traj["cpu_hours"] <= budget * (1 + 1e-9)).all()  # nobody spends past the budget
    e = traj.filter(pl.col("target") == "E")
    full = e.filter(pl.col("design") == "grid")["cpu_hours"].max()
    assert full == pytest.approx(budget)  # the grid, read to its end, is the budget
    assert np.isfinite(e.filter(pl.col("design") == "adaptive (ridge)")["width"][-1])
    # arms differ only in which seed a cell shows first: arm 0 keeps seed 0 first
    a0, a1 = adaptive_twin.arm(adaptive_twin.load(sweep), 0), adaptive_twin.arm(adaptive_twin.load(sweep), 1)
    space = adaptive_twin.load(sweep).space
    grid0 = space.table(a0.flops).filter(pl.col("replicate") == 0)
    assert not a0.train(grid0)["loss"].equals(a1.train(grid0)["loss"])
    both = space.table(a0.flops)
    assert sorted(a0.train(both)["loss"]) == sorted(a1.train(both)["loss"])  # the same runs


def test_a_grid_with_a_missing_run_is_refused(tmp_path):
    sweep = _reference(tmp_path / "ref", drop=1)
    with pytest.raises(SystemExit, match="incomplete"):
        adaptive_twin.main([str(sweep), "--out", str(tmp_path / "out")])
