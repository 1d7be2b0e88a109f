"""The batch-size law with the lr tuned per batch: ``fit_transfer(..., best_over="optim.lr")``
(analysis.transfer.profile) on synthetic joint sweeps with a known B* (JointTruth: B* =
0.5 · N^0.3, lr* ∝ N^-0.4 · B^0.35, each (N, B) cell tries lr values a factor 2 apart around
the square-root guess ∝ B^0.5).

Measured over 100 studies of 6 sizes, 7 batch sizes, 5 lr values per cell: the exponent's
error mean -0.0012, sd 0.0046, its 95% CI covering the truth in 98%; the best observed lr
per cell instead of the quadratic's bottom: mean +0.008 (83%); 3 lr values per cell:
+0.005 (93%, about half the cells at an edge). Tolerances are written from those numbers.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis import fit_transfer
from analysis.errors import AnalysisInputError
from analysis.synthetic.transfer import JointTruth, synthetic_joint_sweep
from analysis.transfer.holdout import holdout_check
from analysis.transfer.profile import profile_cells

SIZES = np.geomspace(5e3, 3e5, 6)
TRUTH = JointTruth()


def test_profiled_batch_law_recovers_the_exponent_and_covers_it():
    errs, covered = [], 0
    for s in range(40):
        runs = synthetic_joint_sweep(TRUTH, SIZES, lr_points=5, rng=s)
        fit = fit_transfer(runs, ("N",), "train.batch_size", best_over="optim.lr")
        _, a, lo, hi = fit.law.params()[1]
        errs.append(a - TRUTH.a_b)
        covered += lo <= TRUTH.a_b <= hi
    # mean error: 100 studies gave -0.0012 with sd 0.0046, so the mean of 40 has sd 0.0007
    assert abs(np.mean(errs)) < 0.003
    assert 0.002 < np.std(errs) < 0.008
    # 95% CIs: 98% measured; at a true 95% rate, fewer than 34 of 40 has probability 1.5%
    assert covered >= 34


def test_profile_is_the_quadratics_bottom_and_edges_are_flagged():
    # one (N, B) cell with an exact valley in ln lr around lr* = 0.01, one at the lowest lr
    lrs = 0.01 * 2.0 ** np.arange(-2, 3)  # [5]
    valley = 3.0 + 0.05 * np.log(lrs / 0.01 / 1.3) ** 2  # bottom 3.0 at 0.013
    falling = 3.0 + 0.05 * np.log(lrs / 0.001) ** 2  # bottom below the grid
    sub = pl.DataFrame({
        "N": [1e4] * 10, "train.batch_size": [8.0] * 5 + [16.0] * 5, "optim.lr": [*lrs, *lrs],
        "loss": [*valley, *falling], "n": [1] * 10, "ss": [0.0] * 10,
        "run_ids": [[f"a{i}"] for i in range(5)] + [[f"b{i}"] for i in range(5)],
        "seeds": [1] * 10})
    out = profile_cells(sub, ["N", "train.batch_size"], "optim.lr").sort("train.batch_size")
    a, b = out.row(0, named=True), out.row(1, named=True)
    assert a["loss"] == pytest.approx(3.0, abs=1e-12) and a["over"] == pytest.approx(0.013, rel=1e-9)
    assert a["over_edge"] is None and a["run_ids"] == ["a2"] and a["over_tried"] == 5
    assert b["over_edge"] == "lowest" and b["loss"] == pytest.approx(falling[0])
    assert b["over"] == pytest.approx(lrs[0]) and b["run_ids"] == ["b0"]


def test_edge_cells_are_named_in_a_note_and_holdout_keeps_the_profile():
    runs = synthetic_joint_sweep(TRUTH, SIZES, lr_points=3, rng=3)
    fit = fit_transfer(runs, ("N",), "train.batch_size", best_over="optim.lr")
    assert fit.best_over == "optim.lr" and fit.cells["over_tried"].to_list() == [3] * fit.cells.height
    n_edge = fit.cells["over_edge"].is_not_null().sum()
    assert n_edge > 0
    assert any(note.startswith(f"{n_edge} of {fit.cells.height} cells have no valley in optim.lr")
               for note in fit.notes)
    train, held = holdout_check(runs, ("N",), "train.batch_size", 1, full=fit)
    assert train.best_over == "optim.lr" and held[0].x == {"N": SIZES[-1]}


def test_without_best_over_the_lr_values_are_averaged_and_a_note_says_so():
    runs = synthetic_joint_sweep(TRUTH, SIZES, lr_points=5, rng=1)
    fit = fit_transfer(runs, ("N",), "train.batch_size")
    assert any("average runs that differ in optim.lr" in note and "--best-over" in note
               for note in fit.notes)
    assert fit.best_over is None and "over" not in fit.cells.columns


def test_best_over_must_be_another_numeric_column():
    runs = synthetic_joint_sweep(TRUTH, SIZES, rng=1)
    with pytest.raises(AnalysisInputError, match=r"no best-over column 'optim.lrr' \(did you mean 'optim.lr'\?\)"):
        fit_transfer(runs, ("N",), "train.batch_size", best_over="optim.lrr")
    with pytest.raises(AnalysisInputError, match="the law's own hp or x"):
        fit_transfer(runs, ("N",), "train.batch_size", best_over="train.batch_size")
    with pytest.raises(AnalysisInputError, match="holds String values, not numbers"):
        fit_transfer(runs, ("N",), "train.batch_size", best_over="state")
    with pytest.raises(AnalysisInputError, match="every cell ran one value of it, so there is nothing"):
        fit_transfer(runs, ("N",), "train.batch_size", best_over="D_total")


def test_runs_from_two_token_budgets_in_one_cell_are_named_not_silently_averaged():
    """A law in N alone over runs at two D: each cell would average the budgets' losses.
    The note names the columns that differ; the law in (N, D) keeps them apart."""
    one = synthetic_joint_sweep(TRUTH, SIZES, lr_points=5, rng=1)
    two = one.with_columns((pl.col("D_total") * 4).alias("D_total"), (pl.col("D_unique") * 4).alias("D_unique"),
                           (pl.col("final_loss") - 0.2).alias("final_loss"), pl.col("run_id") + "-4x")
    runs = pl.concat([one, two])
    fit = fit_transfer(runs, ("N",), "train.batch_size", best_over="optim.lr")
    assert any(n.startswith(f"{fit.cells.height * 5} cell(s) average runs that differ in D_unique, D_total")
               for n in fit.notes)
    fit = fit_transfer(runs, ("N", "D"), "train.batch_size", best_over="optim.lr")
    assert not any("average runs" in n for n in fit.notes) and fit.table.height == 2 * len(SIZES)
