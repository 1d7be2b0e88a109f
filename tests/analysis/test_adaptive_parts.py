"""The parts of analysis.adaptive: space, trainer, target, posterior, planner, baselines."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analysis.adaptive import (
    Axis,
    CandidateSpace,
    SyntheticTrainer,
    fit_target,
    grid_order,
    plan_next,
    random_order,
    run_fixed,
    run_key,
    size_points,
)
from analysis.adaptive.law import fit_points
from analysis.adaptive.posterior import Design, planning_posterior
from analysis.errors import AnalysisInputError
from analysis.fit.power_law import jacobian

SIZES = (5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5, 2.71e5)
SPACE = CandidateSpace(SIZES, (Axis("epochs", (32, 64, 128, 256), start=1),
                               Axis("wd", (0.3, 1, 3, 10), start=1)), replicates=3)


def test_space_enumerates_unique_keyed_runs():
    tr = SyntheticTrainer()
    t = SPACE.table(tr.flops)
    assert t.height == 8 * 16 * 3 and t["key"].n_unique() == t.height
    assert t["key"][0] == run_key(5.6e3, (32, 0.3), ("epochs", "wd"), 0) == "N=5600|epochs=32|wd=0.3|rep=0"
    assert SPACE.neighbours((0, 0)) == [(1, 0), (0, 1)]
    assert sorted(SPACE.neighbours((1, 2))) == [(0, 2), (1, 1), (1, 3), (2, 2)]
    with pytest.raises(AnalysisInputError):
        Axis("wd", (1, 0.3))
    with pytest.raises(AnalysisInputError):
        CandidateSpace((2e4, 1e4), SPACE.axes)


def test_trainer_loss_depends_on_the_run_only():
    """A run's loss is the same whichever frame it is trained in (common random numbers);
    at every size the best grid cell's mean loss is the law (the optimum snaps to the grid);
    FLOPs are 6 N U epochs; the noise has sd ~ noise_sd."""
    tr = SyntheticTrainer(seed=7)
    t = SPACE.table(tr.flops)
    full = tr.train(t)
    part = tr.train(t[::-1].head(50))
    joined = part.join(full.select("key", pl.col("loss").alias("again")), on="key")
    assert np.array_equal(joined["loss"].to_numpy(), joined["again"].to_numpy())
    means = t.with_columns(pl.Series("mean", tr.mean_loss(t)))
    best = means.group_by("N").agg(pl.col("mean").min()).sort("N")
    assert np.allclose(best["mean"].to_numpy(), tr.law(best["N"].to_numpy()))
    assert np.allclose(t["flops"].to_numpy(), 6 * t["N"].to_numpy() * 32768 * t["epochs"].to_numpy())
    z = (full["loss"] - pl.Series(tr.mean_loss(t))).to_numpy()
    assert abs(z.std() / tr.noise_sd - 1) < 0.15


def _done(rows) -> pl.DataFrame:
    """A finished-runs frame from (N, epochs, wd, replicate, loss) rows."""
    frame = pl.DataFrame(rows, schema=["N", "epochs", "wd", "replicate", "loss"], orient="row")
    keys = [run_key(n, (e, w), ("epochs", "wd"), r) for n, e, w, r, _ in rows]
    return frame.with_columns(pl.Series("key", keys), pl.lit(1.0).alias("flops"))


def test_size_points_choose_on_the_mean_over_seeds_and_settle_on_neighbours():
    """The best cell is the lowest mean loss over its seeds (the report's rule,
    analysis.tables.cells), not the lowest replicate 0; a size is settled once every
    in-grid neighbour of that cell has a run and none is a rival (a less replicated
    neighbour within one standard error of the best's mean)."""
    n = 1e4
    rows = [(n, 64, 1, 0, 2.10), (n, 64, 1, 1, 2.20), (n, 64, 1, 2, 2.18),  # mean 2.16
            (n, 32, 1, 0, 2.15), (n, 128, 1, 0, 2.30), (n, 64, 0.3, 0, 2.40)]
    p = size_points(_done(rows), SPACE)
    row = p.frame.row(0, named=True)
    assert (row["epochs"], row["wd"], row["m"]) == (32, 1, 1)  # 2.15 < 2.16
    assert row["loss"] == pytest.approx(2.15)
    assert not row["settled"]  # (32, 3) not run yet
    assert p.within_dof == 2 and p.within_ss == pytest.approx(0.0056)
    p2 = size_points(_done(rows + [(n, 64, 1, 3, 2.00)]), SPACE)  # mean 2.12 now
    row = p2.frame.row(0, named=True)
    assert (row["epochs"], row["wd"], row["m"]) == (64, 1, 4) and row["loss"] == pytest.approx(2.12)
    assert p2.frame["settled"].to_list() == [False]  # (64, 3) not run yet
    p3 = size_points(_done(rows + [(n, 64, 1, 3, 2.00), (n, 64, 3, 0, 2.5)]), SPACE)
    # every neighbour has run, but (32, 1)'s one run (2.15) lies 0.03 above the best's mean,
    # within RIVAL_Z = 1 standard error of the difference (sd 0.091 from (64, 1)'s 4 seeds:
    # 0.091 * sqrt(1/1 + 1/4) = 0.10): a rival, so the size waits for its second seed
    assert p3.frame["settled"].to_list() == [False]
    assert p3.rivals[n] == ((SPACE.axes[0].values.index(32), SPACE.axes[1].values.index(1)),)
    p4 = size_points(_done(rows + [(n, 64, 1, 3, 2.00), (n, 64, 3, 0, 2.5), (n, 32, 1, 1, 2.35)]),
                     SPACE)  # (32, 1): mean 2.25, 0.13 above; 1 SE is 0.091 * sqrt(1/2 + 1/4) = 0.079
    assert p4.frame["settled"].to_list() == [True] and p4.rivals[n] == ()


def test_target_needs_five_settled_sizes_and_gives_the_reports_interval():
    """Fewer than MIN_SIZES settled sizes: no interval. Otherwise E and its interval are
    recipe_asymptote's on the settled points (n - 3 residual dof; the replicate scatter
    never enters), and they hold the truth."""
    from analysis.recipes.recipe_asymptote import recipe_asymptote

    tr = SyntheticTrainer(seed=1, noise_sd=0.002)
    t = tr.train(SPACE.table(tr.flops).filter(pl.col("replicate") < 2))
    few = t.filter(pl.col("N") <= 1.5e4)
    assert math.isinf(fit_target(size_points(few, SPACE)).width)
    points = size_points(t, SPACE)
    fit = fit_target(points)
    report = recipe_asymptote(points.settled_points())
    assert fit.n_sizes == 8 and fit.dof == 5  # law residuals only
    assert fit.ci == (report.lo, report.hi) and fit.E == report.E
    lo, hi = fit.ci
    assert lo <= tr.truth <= hi and fit.width < 0.05


def test_sherman_morrison_update_matches_the_direct_inverse():
    """Var(E) after adding weight w at x (posterior.var_after) equals the (E, E) entry of the
    covariance of the design with that point, inverted directly."""
    tr = SyntheticTrainer(seed=2)
    t = tr.train(SPACE.table(tr.flops).filter(pl.col("replicate") == 0))
    post = planning_posterior(size_points(t, SPACE))
    design = Design(np.array([5.6e-3, 1.5e-2, 4.1e-2, 0.132]), np.array([1.0, 2.0, 1.0, 1.0]))
    V = post.cov(design)
    for x, w in ((0.271, 1.0), (0.041, 1.0), (0.01, 3.0)):
        direct = post.cov(design.add(x, w))[2, 2]
        assert post.var_after(V, np.array([x]), np.array([w]))[0] == pytest.approx(direct, rel=1e-9)
    assert jacobian(1.0, 0.5, np.array([4.0])).tolist() == [[0.5, -0.5 * math.log(4.0), 1.0]]


def test_fit_points_matches_the_multistart_grid_fit():
    """The profiled start reaches the optimum fit_law's 336-start grid reaches."""
    from analysis.fit.fit import fit_law
    from analysis.laws.laws import PowerLaw

    rng = np.random.default_rng(0)
    x = np.array(SIZES) / 1e6
    y = 0.0193 / x**0.56 + 1.95 + rng.normal(0, 0.01, x.size)
    w = rng.integers(1, 4, x.size).astype(float)
    A, B, E = fit_points(x, y, w)
    g = fit_law(PowerLaw(), {"N": x, "loss": y}, loss="mse", space="linear", weights=w, warn=False)
    sse = lambda a, b, e: float(np.sum(w * (a * x**-b + e - y) ** 2))
    assert sse(A, B, E) <= sse(g.params["A"], g.params["alpha"], g.params["E"]) * (1 + 1e-9)


def test_planner_respects_batch_and_budget():
    tr = SyntheticTrainer(seed=4)
    table = SPACE.table(tr.flops)
    done = tr.train(table.filter(pl.col("key").str.contains(r"\|epochs=64\|wd=1\|rep=0")))
    pending = table.filter(~pl.col("key").is_in(done["key"].to_list()))
    plan = plan_next(SPACE, done, pending, batch=5)
    assert 0 < plan.chosen.height <= 5
    assert set(plan.chosen["key"]) <= set(pending["key"])
    small = float(pending["flops"].min()) * 2.5
    tight = plan_next(SPACE, done, pending, batch=5, budget_left=small)
    assert tight.chosen["flops"].sum() <= small


def test_baselines_cover_the_grid_and_stop_on_budget():
    tr = SyntheticTrainer(seed=5)
    g = grid_order(SPACE, tr.flops)
    assert g.height == 128 and g["replicate"].max() == 0
    assert g["N"].to_list() == sorted(g["N"].to_list())
    r = random_order(SPACE, tr.flops, seed=1)
    assert sorted(r["key"]) == sorted(g["key"]) and r["key"].to_list() != g["key"].to_list()
    half = float(g["flops"].sum()) / 2
    res = run_fixed(tr, SPACE, g, half, 0.0)
    assert res.stopped == "budget" and res.runs["flops"].sum() <= half
    assert res.trajectory.height == res.runs.height


def test_ridge_neighbours_add_the_all_up_and_all_down_cells():
    plain = CandidateSpace((1e4,), (Axis("epochs", (32, 64, 128)), Axis("wd", (0.1, 1, 3, 10))))
    ridge = CandidateSpace(plain.sizes, plain.axes, ridge=True)
    assert plain.neighbours((0, 1)) == [(1, 1), (0, 0), (0, 2)]
    assert ridge.neighbours((0, 1)) == [(1, 1), (0, 0), (0, 2), (1, 2)]  # (-1, 0) is off the grid
    assert ridge.neighbours((1, 1))[-2:] == [(0, 0), (2, 2)]
    assert ridge.neighbours((2, 3)) == [(1, 3), (2, 2), (1, 2)]
