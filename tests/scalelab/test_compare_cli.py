"""``scalelab compare SWEEP A B`` on a synthetic runs.parquet whose recipes follow known laws.

Each recipe is a tuned grid: at every size a best cell on the law L = A/x^B + E
(x = N / 1e6) and two worse cells, 3 seeds each (shared seed labels: paired), plus a cell
with one lucky seed and a worse mean (the best cell is chosen by its mean over seeds).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from scalelab.adaptive.recipe_cells import recipe_cells
from scalelab.cli import main

SIZES = (5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5, 2.71e5)
LAWS = {"standard": (0.06, 0.4, 2.25), "regularized": (0.05, 0.45, 1.95)}
"""Recipe -> (A, B, E): the regularized asymptote is 0.30 lower."""


def runs_table(laws: dict, seed: int = 0, noise: float = 0.01) -> pl.DataFrame:
    """One COMPLETED run per (recipe, size, cell, seed), as ``scalelab collect`` writes them."""
    rng = np.random.default_rng(seed)
    rows = []
    for recipe, (A, B, E) in laws.items():
        for n in SIZES:
            law = A / (n / 1e6) ** B + E
            cells = {(64, 1.0): 0.0, (32, 1.0): 0.05, (64, 0.3): 0.08}  # (epochs, wd) -> penalty
            for (epochs, wd), gap in cells.items():
                for s in range(3):
                    rows.append((recipe, n, epochs, wd, s, law + gap + noise * rng.standard_normal()))
            for s, extra in enumerate((-0.02, 0.2, 0.2)):  # one lucky seed, a worse mean
                rows.append((recipe, n, 128, 1.0, s, law + extra))
    frame = pl.DataFrame(rows, schema=["recipe", "N", "data.epochs", "optim.weight_decay", "seed",
                                       "final_loss"], orient="row")
    return frame.with_columns(
        pl.format("r{}", pl.int_range(pl.len())).alias("run_id"),
        pl.format("{}_{}", "recipe", pl.int_range(pl.len())).alias("name"),
        pl.lit("COMPLETED").alias("state"), pl.lit(32768.0).alias("D_unique"),
        (6 * pl.col("N") * 32768 * pl.col("data.epochs")).alias("flops"))


def sweep_dir(tmp_path, frame: pl.DataFrame):
    folder = tmp_path / "sweep"
    folder.mkdir()
    frame.write_parquet(folder / "runs.parquet")
    return folder


def run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def _ci(out: str) -> tuple[float, float]:
    m = re.search(r"CI \(([−+][\d.]+), ([−+][\d.]+)\)", out)
    return tuple(float(v.replace("−", "-")) for v in m.groups())


def test_best_cell_is_chosen_by_its_mean_over_seeds():
    cells = recipe_cells(runs_table(LAWS), ("regularized", "standard"))
    best = cells.cells["regularized"]
    assert best.height == len(SIZES) and cells.U == 32768
    assert (best["data.epochs"] == 64).all() and (best["optim.weight_decay"] == 1.0).all()
    assert (best["seeds"] == 3).all()  # not the cell with the lucky seed (128 epochs)
    rows = cells.rows["regularized"]
    assert rows.columns == ["N", "loss", "seed", "flops"] and rows.height == 3 * len(SIZES)
    assert sorted(rows["seed"].unique().to_list()) == ["0", "1", "2"]


def test_known_difference_names_the_winner_and_the_ci_holds_the_truth(tmp_path, capsys):
    truth = LAWS["regularized"][2] - LAWS["standard"][2]  # -0.30
    folder = sweep_dir(tmp_path, runs_table(LAWS, seed=1))
    code, out, err = run(["compare", str(folder), "regularized", "standard", "--n-boot", "300"], capsys)
    assert code == 0 and err == ""
    assert out.splitlines()[1].startswith("regularized beats standard at infinite compute by at least ")
    assert "paired bootstrap: ΔE (regularized − standard) = −0.3" in out
    lo, hi = _ci(out)
    assert lo < truth < hi < 0
    assert "matched compute" in out and "paired t" in out
    assert "each size's best cell by its mean loss over seeds" in out
    # B first: the same verdict, signs flipped
    code, out, _ = run(["compare", str(folder), "standard", "regularized", "--n-boot", "300",
                        "--resample", "seeds"], capsys)
    assert code == 0 and "regularized beats standard" in out
    lo, hi = _ci(out)
    assert 0 < lo < -truth < hi


def test_equal_asymptotes_name_no_winner(tmp_path, capsys):
    laws = {"standard": (0.06, 0.4, 1.95), "regularized": (0.05, 0.45, 1.95)}
    folder = sweep_dir(tmp_path, runs_table(laws, seed=2))
    code, out, _ = run(["compare", str(folder), "regularized", "standard", "--n-boot", "300"], capsys)
    assert code == 0
    assert out.splitlines()[1].startswith("regularized vs standard: no verdict: ")
    assert "contains 0" in out.splitlines()[1]
    assert "paired bootstrap: ΔE (regularized − standard)" in out
    lo, hi = _ci(out)
    assert lo < 0 < hi


@pytest.mark.parametrize(("argv", "said"), [
    (["regularised", "standard"], "no recipe 'regularised' (did you mean 'regularized'?)"),
    (["regularized", "standard", "--resample", "size"], "--resample: expected one of sizes+seeds, seeds"),
    (["regularized", "standard", "--level", "95"], "--level: must be in (0, 1)"),
    (["regularized", "regularized"], "compare two different recipes"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, said):
    folder = sweep_dir(tmp_path, runs_table(LAWS))
    code, out, err = run(["compare", str(folder), *argv, "--n-boot", "50"], capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and said in err, err


def test_recipe_filters_define_the_recipes(tmp_path, capsys):
    """--recipe NAME=key=value, as ``scalelab report`` takes it."""
    frame = runs_table(LAWS, seed=3).with_columns(
        pl.when(pl.col("recipe") == "regularized").then(pl.lit("r")).otherwise(pl.lit("s")).alias("extra.tag"))
    folder = sweep_dir(tmp_path, frame.drop("recipe"))
    code, out, _ = run(["compare", str(folder), "reg", "std", "--recipe", "reg=extra.tag=r",
                        "--recipe", "std=extra.tag=s", "--n-boot", "200"], capsys)
    assert code == 0 and "reg beats std at infinite compute" in out
