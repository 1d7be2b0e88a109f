"""analysis.recipes.replicates: the replicate seeds of a sweep's runs (seeds of one cell,
an ensemble's members joined to their cell) and the pooled SD of one run's loss."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.recipes.replicates import find_replicates


def _runs(rows) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema={"block": pl.String, "N": pl.Float64, "optim.weight_decay": pl.Float64,
                                       "member": pl.Int64, "final_loss": pl.Float64}, orient="row")
    return frame.with_columns(pl.format("r{}", pl.int_range(pl.len())).alias("run_id"),
                              pl.lit("COMPLETED").alias("state"), pl.lit(32768.0).alias("D_unique"))


def _pooled(*groups) -> float:
    ss = sum(((np.asarray(g) - np.mean(g)) ** 2).sum() for g in groups)
    return float(np.sqrt(ss / sum(len(g) - 1 for g in groups)))


def test_seeds_of_one_cell_are_pooled_over_cells():
    runs = _runs([("tuned", 1e4, 1.0, s, v) for s, v in enumerate((2.10, 2.13, 2.08))]
                 + [("tuned", 2e4, 1.0, s, v) for s, v in enumerate((2.00, 2.02))]
                 + [("tuned", 2e4, 0.1, 0, 2.3)])  # a cell of one seed carries nothing
    rep = find_replicates(runs)
    assert (rep.seeds, rep.groups, rep.dof) == (5, 2, 3)
    assert rep.sigma == pytest.approx(_pooled((2.10, 2.13, 2.08), (2.00, 2.02)), abs=1e-12)
    assert rep.source() == "from 5 replicate seeds in 2 cells"


def test_an_ensembles_member_0_is_joined_to_its_members_through_the_evals():
    """Members 1-3 sit in an ``ensemble`` block with the config unset (one cell by rule 1);
    member 0 is the tuned run, joined only through the evals' member_run_ids."""
    runs = _runs([("tuned-best", 2.6e4, 3.0, 0, 2.065), ("tuned", 2.6e4, 0.1, 0, 2.33)]
                 + [("ensemble", 2.6e4, None, k, v) for k, v in ((1, 2.106), (2, 2.101), (3, 2.070))])
    alone = find_replicates(runs)
    assert (alone.seeds, alone.groups) == (3, 1)
    assert alone.sigma == pytest.approx(_pooled((2.106, 2.101, 2.070)), abs=1e-12)
    evals = pl.DataFrame({"member_run_ids": ["r0,r2,r3,r4"]})
    joined = find_replicates(runs, evals)
    assert (joined.seeds, joined.groups) == (4, 1)
    assert joined.sigma == pytest.approx(_pooled((2.065, 2.106, 2.101, 2.070)), abs=1e-12)
    # an "ensemble" of runs at two weight decays is not one cell: not joined
    wrong = find_replicates(runs, pl.DataFrame({"member_run_ids": ["r0,r1"]}))
    assert (wrong.seeds, wrong.groups) == (3, 1)


def test_no_replicates_and_unfinished_runs():
    runs = _runs([("tuned", 1e4, 1.0, 0, 2.1), ("tuned", 2e4, 1.0, 0, 2.0)])
    assert not find_replicates(runs).found and np.isnan(find_replicates(runs).sigma)
    failed = _runs([("tuned", 1e4, 1.0, s, 2.1 + 0.01 * s) for s in range(2)]).with_columns(
        pl.Series("state", ["COMPLETED", "FAILED"]))
    assert not find_replicates(failed).found
