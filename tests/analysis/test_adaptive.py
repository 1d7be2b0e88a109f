"""The adaptive loop against the fixed grid on synthetic trainers (analysis.adaptive).

Study: ``SyntheticTrainer(seed=s)`` for s = 0..11 (the CPU-twin-like default: E = 1.95,
noise sd 0.01 per run, the tuned optimum moving from 64 epochs / wd 0.3 to 256 epochs /
wd 10 across the ladder); candidate space: the twin's 8 sizes (5.6k..271k parameters) x
epochs {32, 64, 128, 256} x wd {0.3, 1, 3, 10} x 4 seed replicates. Budget: the full
grid's FLOPs (128 runs). Target: a 95% CI on E of full width 0.1 nats. The grid is read
run by run in its launch order and stopped as soon as it reaches the target (flattering
it: a grid is launched whole); where it never does, its 128 runs and full FLOPs are used,
a lower bound on what it needs. The adaptive loop: ``seed_design`` (4 sizes), batches of 4.

Measured (this code, 12 seeds; docs/adaptive.md has random search and other targets):
- the adaptive loop reached the target in 12/12 seeds, the grid in 9/12;
- runs to the target, adaptive / grid per seed: mean 0.61 (sd 0.07), max 0.76;
- FLOPs to the target, adaptive / grid: pooled over seeds 0.53 (sum / sum), per seed
  mean 0.58, max 1.13 (in 1 seed the grid's prefix got there with less compute).
Asserted, with the tolerances written here (never loosened to pass): every seed reaches
the target; adaptive needs fewer runs than the grid in every seed; mean run ratio
<= 0.70 (measured 0.61 + 0.09: about 15% slack for numerical differences between
numpy/scipy versions, which can move a fit's last digits and so a round's choice); pooled
FLOP ratio <= 0.65 (measured 0.53 + 0.12). The loop's bookkeeping is checked on one seed:
no run is ever proposed twice or after it was done, every round's candidate table lists
every pending candidate once with its score, and the budget holds. No clock is read: a
study is a function of its seed. About 15 s of CPU on one thread.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.adaptive import (
    Axis,
    CandidateSpace,
    SyntheticTrainer,
    grid_order,
    plan_next,
    run_adaptive,
    seed_design,
)
from analysis.adaptive.benchmark import design_study
from analysis.errors import AnalysisInputError

SIZES = (5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5, 2.71e5)
SPACE = CandidateSpace(SIZES, (Axis("epochs", (32, 64, 128, 256), start=1),
                               Axis("wd", (0.3, 1, 3, 10), start=1)), replicates=4)
TARGET = 0.1
SEEDS = range(12)


@pytest.fixture(scope="module")
def study() -> pl.DataFrame:
    """One row per (seed, design): reached, runs, flops (fraction of the budget), ..."""
    s = design_study(SPACE, lambda k: SyntheticTrainer(seed=k), SEEDS, TARGET,
                     designs=("grid", "adaptive"))
    return s.pivot(on="design", index="seed", values=["reached", "runs", "flops"]).sort("seed")


def test_adaptive_reaches_the_target_with_fewer_runs_than_the_grid(study):
    """Every seed: the adaptive loop reaches width <= 0.1 within the budget, with fewer
    runs than the grid; mean ratio <= 0.70 (measured 0.61, module docstring)."""
    assert study["reached_adaptive"].all()
    ratio = (study["runs_adaptive"] / study["runs_grid"]).to_numpy()
    assert (ratio < 1).all(), ratio
    assert ratio.mean() <= 0.70, ratio.mean()


def test_adaptive_spends_less_compute_than_the_grid(study):
    """FLOPs to the target pooled over the seeds: adaptive / grid <= 0.65 (measured 0.53)."""
    pooled = study["flops_adaptive"].sum() / study["flops_grid"].sum()
    assert pooled <= 0.65, pooled


@pytest.fixture(scope="module")
def one_loop():
    tr = SyntheticTrainer(seed=3)
    budget = float(grid_order(SPACE, tr.flops)["flops"].sum()) / 2
    return tr, budget, run_adaptive(tr, SPACE, seed_design(SPACE, tr.flops), budget, 0.06)


def test_never_proposes_a_run_already_done(one_loop):
    _, _, res = one_loop
    keys = res.runs["key"].to_list()
    assert len(keys) == len(set(keys))
    for r in res.rounds:
        before = set(res.runs.filter(pl.col("round") < r.index)["key"])
        assert not before & set(r.chosen["key"]), r.index
        assert not before & set(r.table["key"]), r.index  # done runs are not candidates


def test_round_tables_are_complete(one_loop):
    """Each round's table: every pending candidate once, scores filled, the chosen ones
    ranked 0..k-1 and exactly the runs trained in that round."""
    tr, _, res = one_loop
    every = set(SPACE.table(tr.flops)["key"])
    cols = {"key", "N", "epochs", "wd", "replicate", "flops", "action", "action_cost", "gain",
            "score", "selected", "rank"}
    assert res.rounds
    for r in res.rounds:
        before = set(res.runs.filter(pl.col("round") < r.index)["key"])
        assert cols <= set(r.table.columns)
        assert r.table["key"].n_unique() == r.table.height
        assert set(r.table["key"]) == every - before
        for c in ("gain", "score", "selected", "flops"):
            assert r.table[c].null_count() == 0, c
        chosen = r.table.filter(pl.col("selected")).sort("rank")
        assert chosen["rank"].to_list() == list(range(chosen.height))
        assert chosen["action"].null_count() == 0
        assert 0 < chosen.height <= 4 or r is res.rounds[-1]
        trained = res.runs.filter(pl.col("round") == r.index)["key"].to_list()
        assert sorted(trained) == sorted(chosen["key"].to_list())


def test_budget_holds_and_the_stop_is_said(one_loop):
    _, budget, res = one_loop
    assert res.runs["flops"].sum() <= budget
    assert res.stopped in ("target", "budget", "exhausted")
    traj = res.trajectory
    assert traj["runs"].to_list() == sorted(traj["runs"].to_list())
    assert traj["flops"][-1] == pytest.approx(res.runs["flops"].sum())
    if res.stopped == "target":
        assert res.fit.width <= 0.06


def test_a_study_is_a_function_of_its_seed(one_loop):
    tr, budget, res = one_loop
    again = run_adaptive(tr, SPACE, seed_design(SPACE, tr.flops), budget, 0.06)
    assert again.runs.equals(res.runs)
    assert all(a.table.equals(b.table) for a, b in zip(again.rounds, res.rounds))


def test_plan_refuses_done_runs_as_candidates(one_loop):
    tr, _, res = one_loop
    with pytest.raises(AnalysisInputError, match="already done"):
        plan_next(SPACE, res.runs, SPACE.table(tr.flops))


def test_adaptive_ci_covers_the_truth_mostly(one_loop):
    """Not the benchmark's claim, a sanity check: the final interval of this seed holds E."""
    tr, _, res = one_loop
    lo, hi = res.fit.ci
    assert lo <= tr.truth <= hi
    assert np.isfinite(res.fit.width)
