"""Targets of an adaptive study other than one E (analysis.adaptive.targets): recipe
slices of a grid, the ranking of recipes by E, and the data multiplier of E.

The references: closed forms (Welch-Satterthwaite, the multiplier's gradient against
central finite differences), the single-E planner (a one-recipe target must plan exactly as
before), and synthetic recipes with known asymptotes (trainer.RecipeTrainer: a known order
and a known multiplier), over 12 seeds.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from analysis.adaptive import Axis, CandidateSpace, SyntheticTrainer, run_adaptive, seed_design
from analysis.adaptive.benchmark import decision_study, summarise_decisions
from analysis.adaptive.multiplier import Multiplier
from analysis.adaptive.planner import plan_next
from analysis.adaptive.targets import Asymptote, Estimate, Ranking, satterthwaite
from analysis.adaptive.trainer import RecipeTrainer
from analysis.recipes.data_multiplier import choose_data_law, data_multiplier

SIZES = (5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5, 2.71e5)
EPOCHS = (32.0, 64.0, 128.0, 256.0)
SPACE = CandidateSpace(SIZES, (Axis("epochs", EPOCHS, start=1), Axis("wd", (0.3, 1, 3, 10), start=1)),
                       replicates=4)
LIGHT = SPACE.restrict({"wd": [0.3, 1]})
HEAVY = SPACE.restrict({"wd": [3, 10]})
DELTA = 0.05  # E_light - E_heavy: heavy weight decay is better at infinite compute


def recipes(seed: int) -> RecipeTrainer:
    """Two recipes on disjoint weight-decay slices, the same law but E 0.05 apart; each has
    its own optimum inside its slice (so each slice's best cell per size is its law)."""
    def law(E, wd, lo, hi):
        return SyntheticTrainer(E=E, seed=seed, grid={"epochs": EPOCHS, "wd": wd},
                                opt_lo={"epochs": 64.0, "wd": lo}, opt_hi={"epochs": 192.0, "wd": hi})
    return RecipeTrainer({"light": (LIGHT, law(1.95 + DELTA, (0.3, 1.0), 0.3, 1.0)),
                          "heavy": (HEAVY, law(1.95, (3.0, 10.0), 3.0, 10.0))})


def test_restrict_keeps_keys_and_moves_the_start():
    assert LIGHT.names == SPACE.names and LIGHT.axes[1].values == (0.3, 1.0)
    assert HEAVY.axes[1].values[HEAVY.axes[1].start_index] == 3.0  # nearest to the start, 1
    table = SPACE.table(lambda f: np.ones(f.height))
    inside = table.filter(LIGHT.contains(table))
    assert inside.height == 8 * 4 * 2 * 4 and set(inside["wd"].unique()) == {0.3, 1.0}
    assert LIGHT.key(2.6e4, (1, 1), 2) == SPACE.key(2.6e4, (1, 1), 2)  # one run, one key
    with pytest.raises(Exception, match="not on its grid"):
        SPACE.restrict({"wd": [2.0]})


def test_satterthwaite():
    assert satterthwaite([(1.0, 4.0), (1.0, 4.0)]) == pytest.approx(8.0, rel=1e-12)
    v1, d1, v2, d2 = 0.3, 3.0, 0.05, 10.0
    want = (v1 + v2) ** 2 / (v1**2 / d1 + v2**2 / d2)
    assert satterthwaite([(v1, d1), (v2, d2)]) == pytest.approx(want, rel=1e-12)
    assert satterthwaite([(0.3, 0.0), (0.05, 10.0)]) == 0.0  # a part with no dof


def test_ranking_summary_decides_only_when_every_adjacent_ci_excludes_zero():
    r = Ranking({"a": LIGHT, "b": HEAVY, "c": SPACE})
    est = {"a": Estimate(2.0, 1e-4, 20, 8), "b": Estimate(2.1, 1e-4, 20, 8), "c": Estimate(2.5, 1e-4, 20, 8)}
    s = r.summary(est)
    assert s.decided and s.order == ("a", "b", "c") and r.focus(est) == ("a", "b")
    assert s.value == pytest.approx(0.1) and s.lo > 0
    close = dict(est, b=Estimate(2.01, 1e-4, 20, 8))  # a vs b within noise
    assert not r.summary(close).decided and r.focus(close) == ("a", "b")
    few = dict(est, c=Estimate(2.5, 1e-4, 20, 4))  # 4 sizes: never decided (min_sizes 5)
    assert not r.summary(few).decided


U = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])  # unique tokens / 1e6
DATA = (0.8, 0.35, 1.6)  # the reference's data law A / U^B + C
L_REF = 2.4


def data_law(noise: float, seed: int = 0):
    """The report's choice of data law on the reference's losses at U (``choose_data_law``)."""
    A, B, C = DATA
    rng = np.random.default_rng(seed)
    return choose_data_law(U, A * U**-B + C + noise * rng.standard_normal(U.size))


def test_multiplier_gradient_matches_finite_differences():
    law = data_law(0.005)
    assert law.floor  # the F test keeps C on these points
    target = Multiplier("x", SPACE, law, L_REF)
    E, h = 1.95, 1e-6
    g_e, data_var = target.parts(E)
    fd = (target._log_m(E + h) - target._log_m(E - h)) / (2 * h)
    assert g_e == pytest.approx(fd, rel=1e-6)
    # the data part: g' Cov g with g from finite differences in (A, B, C)
    fit = law.fit

    def lm(B, C):
        return (math.log(L_REF - C) - math.log(E - C)) / B
    g = np.array([0.0, (lm(fit.B + h, fit.E) - lm(fit.B - h, fit.E)) / (2 * h),
                  (lm(fit.B, fit.E + h) - lm(fit.B, fit.E - h)) / (2 * h)])
    assert data_var == pytest.approx(float(g @ fit.cov @ g), rel=1e-6)
    # E at or below C: beyond the reference recipe's reach, no multiplier
    assert math.isinf(target._log_m(law.E - 0.01))


def test_multiplier_summary_is_the_reports_multiplier():
    """The value and CI are data_multiplier's (the report's call: its bootstrap, its seed)
    for the recipe's E and its standard error widened for the t-interval of its 5 residual
    dof (``t_scaled_se``, as the report does); a refused one is its reason, no number."""
    law = data_law(0.005)
    target = Multiplier("x", SPACE, law, L_REF)
    s = target.summary({"x": Estimate(1.95, 1e-4, 5, 8)})
    se = 1e-2 * stats.t.ppf(0.975, 5) / stats.norm.ppf(0.975)
    m = data_multiplier(law, 1.95, se, L_REF)
    assert m.identified and (s.value, s.lo, s.hi) == (m.value, m.lo, m.hi)
    assert s.width == pytest.approx(math.log(m.hi / m.lo), rel=1e-12)
    below = target.summary({"x": Estimate(law.E - 0.01, 1e-4, 5, 8)})
    assert math.isnan(below.value) and math.isinf(below.width)
    assert below.note == data_multiplier(law, law.E - 0.01, 1e-2, L_REF).why
    none = target.summary({"x": Estimate(math.nan, math.inf, 0, 8, why="not identified: x")})
    assert math.isnan(none.value) and none.note == "E_x: not identified: x"


def test_a_one_recipe_target_plans_as_the_single_e_planner():
    tr = SyntheticTrainer(seed=3)
    space = CandidateSpace(SIZES, (Axis("epochs", EPOCHS, start=1), Axis("wd", (0.3, 1, 3, 10), start=1)),
                           replicates=2)
    table = space.table(tr.flops)
    done = tr.train(table.filter(pl.col("N") <= 4.1e4).filter(pl.col("replicate") == 0))
    pending = table.filter(~pl.col("key").is_in(done["key"].to_list()))
    a = plan_next(space, done, pending, batch=6)
    b = plan_next(space, done, pending, batch=6, target=Asymptote("x", space))
    assert a.chosen["key"].to_list() == b.chosen["key"].to_list()
    assert a.width == b.width
    # a multiplier with an exact data law (cov 0) is a monotone function of E: same runs
    exact = data_law(0.0)
    assert np.all(np.abs(exact.fit.cov) < 1e-25)  # exact points: s^2 ~ 0
    c = plan_next(space, done, pending, batch=6, target=Multiplier("x", space, exact, L_REF))
    assert set(c.chosen["key"].to_list()) == set(a.chosen["key"].to_list())


def test_ranking_designs_on_synthetic_recipes():
    """12 seeds, budget = the full grid (128 runs): no design ever decides the wrong order,
    and the adaptive loop decides at least as often as the grid. Measured under the
    report's interval (n - 3 residual dof) with decisions on >= 7 settled sizes per recipe
    (targets.MIN_DECISION_SIZES): adaptive 7 right, grid 6, random 3; 0 wrong. The price:
    the adaptive loop decides later than the grid (median 0.88 of the budget vs 0.70), where
    under the old pooled interval it decided earlier (0.43 vs 0.67). Deciding on 5 or 6
    sizes, it decided the wrong order in 1 of 12 seeds; on 4 sizes (one residual dof), in 3.
    The compute bound below is that measurement with room for noise, not a claim of
    efficiency."""
    study = decision_study(SPACE, recipes, range(12), Ranking({"light": LIGHT, "heavy": HEAVY}),
                           ("heavy", "light"))
    s = {r["design"]: r for r in summarise_decisions(study).iter_rows(named=True)}
    assert all(s[d]["wrong"] == 0 for d in s), s
    assert s["adaptive"]["right"] >= s["grid"]["right"] >= 4, s
    assert s["adaptive"]["flops_median"] <= 0.95, s


def test_multiplier_target_reaches_its_width_and_covers_the_truth():
    """The multiplier of E (truth 1.95) against a data law fitted per seed to the
    reference's losses at 7 budgets U (truth A, B, C = 0.8, 0.35, 1.6; noise 0.005), as the
    report chooses and values it: the adaptive loop runs until the bootstrap CI's
    log-width is <= 0.7 or the grid's compute is spent. The interval covers the true
    multiplier (10.6x) in >= 10 of 12 seeds (measured: 11), and >= 11 of 12 reach the width
    within the grid's compute (measured: 11; seed 10 ends at 1.26). Before E's standard
    error was widened for its t-interval (``asymptotes.t_scaled_se``) all 12 reached it:
    the interval was too narrow then, not the loop faster."""
    A, B, C = DATA
    truth = ((L_REF - C) / (1.95 - C)) ** (1 / B)
    covered, widths = 0, []
    for seed in range(12):
        law = data_law(0.005, seed)
        tr = SyntheticTrainer(seed=seed)
        target = Multiplier("grid", SPACE, law, L_REF)
        B_all = float(SPACE.table(tr.flops).filter(pl.col("replicate") == 0)["flops"].sum())
        res = run_adaptive(tr, SPACE, seed_design(SPACE, tr.flops), B_all, 0.7, target=target)
        s = res.summary
        if math.isfinite(s.width):
            widths.append(s.width)
            covered += s.lo <= truth <= s.hi
    assert len(widths) == 12 and sum(w <= 0.7 + 1e-12 for w in widths) >= 11, widths
    assert covered >= 10, covered
