"""Approach 2's window, interpolate-then-argmin method, derived-C grouping, < 3-budget
warning and choice-widened CI, on synthetic sweeps with a known exponent
(``analysis.synthetic.isoflop``: Chinchilla-form losses, a = β/(α+β))."""

import numpy as np
import polars as pl
import pytest

from analysis.isoflop.interp import fit_budget_interp
from analysis.isoflop.isoflop import fit_isoflops
from analysis.isoflop.window import DEFAULT_WINDOW, window_mask
from analysis.synthetic.isoflop import SweepDesign, study_designs, sweep_points

# Targets set for approach 2 on Porian et al. 2024's 15 configurations, here on 15
# synthetic sweeps built to resemble them: median |a - a_true|/a_true < 1.5%, worst < 6%,
# truth inside the 95% CI in >= 14 of 15. Never loosened to pass.
MEDIAN_DEV, WORST_DEV, MIN_COVERED = 0.015, 0.06, 14


@pytest.fixture(scope="module")
def study():
    out = []
    for d in study_designs(0):
        fit = fit_isoflops(sweep_points(d), n_boot=200, seed=0)
        out.append((d, fit))
    return out


def test_study_meets_the_accuracy_and_coverage_targets(study):
    dev = np.array([abs(f.a - d.true_a) / d.true_a for d, f in study])
    covered = sum(f.a_ci[0] <= d.true_a <= f.a_ci[1] for d, f in study)
    assert np.median(dev) < MEDIAN_DEV, np.round(dev, 4)
    assert dev.max() < WORST_DEV, np.round(dev, 4)
    assert covered >= MIN_COVERED


def test_window_beats_all_points_on_one_model_grid():
    # one model grid at every budget: the optimum walks across it; a parabola over all
    # 3 decades is pulled by the far side (measured, seed 0: 10.9% off vs 3.8% windowed)
    d = study_designs(0)[1]
    data = sweep_points(d)
    whole = fit_isoflops(data, window=None, n_boot=0)
    windowed = fit_isoflops(data, n_boot=0)
    assert abs(windowed.a - d.true_a) < 0.5 * abs(whole.a - d.true_a)


def test_widened_ci_contains_bootstrap_ci_and_alternatives(study):
    _, fit = study[0]
    assert fit.a_ci[0] <= fit.a_ci_boot[0] and fit.a_ci_boot[1] <= fit.a_ci[1]
    alts = fit.alternatives
    assert alts.height == 6 and set(alts["method"]) == {"parabola", "interp"}
    assert sorted(set(alts["window"])) == [DEFAULT_WINDOW / 2, DEFAULT_WINDOW, 2 * DEFAULT_WINDOW]
    ok = alts.filter(pl.col("a").is_finite())["a"]
    assert fit.a_ci[0] <= ok.min() and ok.max() <= fit.a_ci[1]
    assert fit.n_coef_ci[0] < fit.n_coef < fit.n_coef_ci[1]


def test_window_mask_keeps_factor_and_min_side():
    N = np.logspace(6, 9, 13)  # 0.25-decade steps
    loss = (np.log10(N) - 7.5) ** 2
    m = window_mask(N, loss, 4.0)  # 0.6 decades each side: 2 steps
    assert m.sum() == 5 and N[m].min() == pytest.approx(10**7)
    assert N[m].max() == pytest.approx(10**8)
    m = window_mask(N, loss, 1.2)  # narrower than a step: widened to 2 distinct each side
    assert m.sum() == 5
    assert window_mask(N, loss, None).all()


def test_interp_recovers_a_noiseless_minimum():
    d = SweepDesign("t", 0.34, 0.28, (1e19,), points=13, noise=0.0, jitter=0.0)
    pts = sweep_points(d)
    f = fit_budget_interp(pts["N"].to_numpy(), pts["loss"].to_numpy(), log_loss=False,
                          min_points=3, min_side=2)  # fmt: skip
    assert f.reason == "" and abs(f.log_n_opt - np.log(d.n_opt(1e19))) < 0.02  # 2% in N


def test_interp_method_is_close_to_truth_on_a_clean_sweep():
    d = study_designs(0)[0]
    fit = fit_isoflops(sweep_points(d), method="interp", n_boot=50)
    assert fit.method == "interp" and abs(fit.a - d.true_a) / d.true_a < 0.05
    assert fit.a_ci[0] <= fit.a <= fit.a_ci[1]


def test_derived_compute_groups_scattered_budgets():
    # N and D off their nominal values by up to 8%: 6ND scatters by up to ~17% peak to peak
    d = SweepDesign("r", 0.34, 0.28, (1e17, 1e18, 1e19, 1e20), round_sizes=0.08, seed=3)
    data = sweep_points(d).drop("C")
    fit = fit_isoflops(data, n_boot=0)
    assert fit.optima.height == 4 and fit.kept.height == 4
    assert any("C = 6ND derived" in n and "4 budget(s)" in n for n in fit.notes)
    assert abs(fit.a - d.true_a) / d.true_a < 0.06
    shattered = fit_isoflops(data, rtol=0.05, n_boot=0)  # the old tolerance splits them
    assert shattered.optima.height > 4


def test_fewer_than_three_budgets_warns_in_one_line():
    d = SweepDesign("two", 0.34, 0.28, (1e18, 1e20), seed=1)
    fit = fit_isoflops(sweep_points(d), n_boot=50)
    assert len(fit.warnings) == 1 and "only 2 budget(s) kept of 2" in fit.warnings[0]
    assert "\n" not in fit.warnings[0]
    assert fit_isoflops(sweep_points(study_designs(0)[0]), n_boot=0).warnings == ()


@pytest.mark.parametrize("kw, message", [({"method": "spline"}, "method must be one of"),
                                         ({"window": 1.0}, "window must be > 1")])
def test_bad_options_are_refused(kw, message):
    from analysis import AnalysisInputError

    with pytest.raises(AnalysisInputError, match=message):
        fit_isoflops(sweep_points(study_designs(0)[0]), n_boot=0, **kw)
