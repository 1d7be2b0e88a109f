"""Approach 2's default on the realistic synthetic study (``analysis.synthetic.isoflop_realistic``:
loss noise 0.005-0.02 nats, off-centre lopsided ladders of 3-12 sizes, 4-8 budgets,
α != β; docs/isoflop.md), and the warning for a budget whose vertex the bootstrap loses."""

import numpy as np
import polars as pl
import pytest

from analysis.errors import AnalysisInputError
from analysis.isoflop.isoflop import LOST_SHARE, fit_isoflops
from analysis.synthetic.isoflop import study_designs, sweep_points
from analysis.synthetic.isoflop_realistic import realistic_points, realistic_study

# The truth: a = β/(α+β) of each drawn Chinchilla law. The default (window 8, parabola,
# two-stage line) over the 72 sweeps of seeds 0-2 (bench/isoflop_study.py, 200
# resamples), measured: median |a - a_true| / a_true 1.03% (the old window 16: 1.16%),
# the worst sweep without a warning 5.07% (16: 6.76%), the truth inside the widened 95%
# CI in 69 of 70 fitted, 2 of 70 beyond 4% (6.28% with a lost-vertex warning, 5.07%;
# the truth inside both CIs),
# 2 refused (fewer than 2 usable budgets: ladders of 3-5 sizes). Tolerances: median
# <= 1.1%, worst unwarned <= 5.5%, coverage >= 90%, at most 3 beyond 4%, at most 2
# refused. The targets (median <= 1%, worst <= 4%) are not met at this noise by
# any candidate (docs/isoflop.md); these hold the measured default and fail on the old
# one (median and worst unwarned). Never loosened to pass.
MEDIAN_DEV, WORST_UNWARNED, MIN_COVERAGE, MAX_OVER_4, MAX_REFUSED = 0.011, 0.055, 0.90, 3, 2


@pytest.fixture(scope="module")
def realistic():
    out = []
    for seed in range(3):
        for sweep in realistic_study(seed):
            try:
                fit = fit_isoflops(realistic_points(sweep), n_boot=200, seed=seed)
            except AnalysisInputError:
                fit = None
            out.append((sweep, fit))
    return out


def test_default_meets_the_realistic_targets(realistic):
    fitted = [(s, f) for s, f in realistic if f is not None]
    assert len(realistic) == 72 and len(realistic) - len(fitted) <= MAX_REFUSED
    dev = np.array([abs(f.a - s.true_a) / s.true_a for s, f in fitted])
    covered = sum(f.a_ci[0] <= s.true_a <= f.a_ci[1] for s, f in fitted)
    unwarned = [d for d, (_, f) in zip(dev, fitted) if not f.warnings]
    assert np.median(dev) <= MEDIAN_DEV, np.round(np.sort(dev), 4)
    assert covered >= MIN_COVERAGE * len(fitted), covered
    assert max(unwarned) <= WORST_UNWARNED, np.round(np.sort(unwarned), 4)
    assert np.sum(dev > 0.04) <= MAX_OVER_4, np.round(np.sort(dev), 4)


def test_realistic_study_is_drawn_within_its_stated_ranges():
    sweeps = realistic_study(0)
    assert len(sweeps) == 24 and realistic_study(0) == sweeps != realistic_study(1)
    for s in sweeps:
        data = realistic_points(s)
        per_budget = data.group_by("C").len()["len"]
        assert 0.2 <= s.alpha <= 0.5 and 0.2 <= s.beta <= 0.5 and 0.005 <= s.noise <= 0.02
        assert len(s.budgets) in (4, 5, 6, 8) and per_budget.min() >= 3 and per_budget.max() <= 12
        assert 2.0 <= np.log10(s.budgets[-1] / s.budgets[0]) <= 3.5
        # the optimum inside every ladder, never at an end
        for C in s.budgets:
            logn = np.log10(data.filter(pl.col("C") == C)["N"].to_numpy())
            assert logn.min() < np.log10(s.n_opt(C)) < logn.max()
    assert any(s.fixed_grid for s in sweeps) and not all(s.fixed_grid for s in sweeps)


def _with_weak_budget(noise_seed: int) -> pl.DataFrame:
    """A clean sweep plus a budget (C = 3e20) of 6 runs over only ±0.3 decades of N at
    0.008 nats of noise: convex with its vertex inside, but barely curved."""
    d = study_designs(0)[0]
    C = 3e20
    N = d.n_opt(C) * 10 ** np.linspace(-0.3, 0.3, 6)
    rng = np.random.default_rng(noise_seed)
    loss = d.loss(N, C / (6 * N)) + 0.008 * rng.standard_normal(6)
    weak = pl.DataFrame({"C": np.full(6, C), "N": N, "D": C / (6 * N), "loss": loss})
    return pl.concat([sweep_points(d), weak])


def test_a_budget_that_loses_its_vertex_is_a_warning_and_stays_in_the_fit():
    data = _with_weak_budget(4)
    fit = fit_isoflops(data, n_boot=200, seed=0)  # measured: vertex lost in 32% of resamples
    row = fit.optima.filter(pl.col("C") == 3e20).row(0, named=True)
    assert row["kept"] and row["reason"] == ""
    weak = [w for w in fit.warnings if w.startswith("budget C = 3e+20: no usable vertex in")]
    assert len(weak) == 1 and "\n" not in weak[0] and "add runs" in weak[0]
    share = float(weak[0].split("vertex in ")[1].split("%")[0]) / 100
    assert share >= LOST_SHARE
    assert not any(n.startswith("budget C = 3e+20") for n in fit.notes)  # not said twice
    # kept: the point estimate does not depend on the bootstrap
    assert fit_isoflops(data, n_boot=0).a == fit.a
    assert fit_isoflops(data, n_boot=400, seed=1).a == fit.a


def test_a_budget_losing_its_vertex_rarely_is_only_a_note():
    fit = fit_isoflops(_with_weak_budget(0), n_boot=200, seed=0)  # measured: 6%
    assert not any("usable vertex" in w for w in fit.warnings)
    assert any(n.startswith("budget C = 3e+20: no usable vertex in") for n in fit.notes)


def test_joint_line_recovers_a_clean_sweep_and_leaves_the_vertices_alone():
    d = study_designs(0)[0]  # 5 budgets, 0.3% noise
    data = sweep_points(d)
    two, joint = fit_isoflops(data, n_boot=50), fit_isoflops(data, joint=True, n_boot=50)
    assert joint.joint and not two.joint
    assert abs(joint.a - d.true_a) / d.true_a < 0.02 and joint.a != two.a
    assert joint.optima.equals(two.optima)  # each budget's own vertex, as before
    assert joint.a_ci[0] <= joint.a <= joint.a_ci[1]
    assert joint.a + joint.b == pytest.approx(1.0)  # C = 6 N D
    assert fit_isoflops(data, joint=True, n_boot=0).a == joint.a  # deterministic


# The information limit of the study (docs/isoflop.md, "What the data allow"): the law
# that drew each sweep, fitted to all its points (the efficient estimator when the model
# is right), over seeds 0-9 (240 sweeps), measured: median 0.48%, worst 5.45%, 1 sweep
# beyond 4%. Tolerances: median <= 0.6%, worst > 4%: a 4% worst case over these sweeps
# is beyond what their noise leaves to any estimator; what docs/isoflop.md says.
ORACLE_MEDIAN, TARGET_WORST = 0.006, 0.04


def test_the_drawing_law_itself_misses_a_4_percent_worst_case():
    from analysis.fit.fit import fit_law

    dev = []
    for seed in range(10):
        for s in realistic_study(seed):
            p = fit_law("chinchilla", realistic_points(s), loss="mse", space="linear",
                        warn=False).params  # fmt: skip
            dev.append(abs(p["beta"] / (p["alpha"] + p["beta"]) - s.true_a) / s.true_a)
    assert len(dev) == 240
    assert np.median(dev) <= ORACLE_MEDIAN, np.median(dev)
    assert max(dev) > TARGET_WORST, max(dev)


def test_an_exponent_the_fit_does_not_pin_is_a_warning():
    """Seed 29's sweep r29-07 with 8-12 budgets: 3 of 9 budgets kept, a = 0.175 against the
    true 0.345 (49% off, the worst of 1,200 such sweeps), its 95% CI (-0.07, 0.35): before
    ``IMPRECISE`` it carried no warning. The truth stays inside the CI; the number is flagged."""
    from analysis.isoflop.isoflop import IMPRECISE

    sweep = next(s for s in realistic_study(29, budget_counts=(8, 9, 10, 12)) if s.name == "r29-07")
    fit = fit_isoflops(realistic_points(sweep), n_boot=200, seed=29)
    assert abs(fit.a - sweep.true_a) / sweep.true_a > 0.4 and fit.a_ci[0] <= sweep.true_a <= fit.a_ci[1]
    assert fit.a_ci[0] <= 0 and (fit.a_ci[1] - fit.a_ci[0]) / 2 > IMPRECISE * fit.a
    pinned = [w for w in fit.warnings if w.startswith("a is not pinned")]
    assert len(pinned) == 1 and "leaves (0, 1)" in pinned[0] and "3 of 9 budgets kept" in pinned[0], fit.warnings


def test_a_pinned_exponent_has_no_such_warning(realistic):
    """Every fit of seeds 0-2 whose widened CI is within ±25% of a and inside (0, 1) stays
    free of it, and every one outside has it."""
    from analysis.isoflop.isoflop import IMPRECISE

    for sweep, fit in realistic:
        if fit is None:
            continue
        lo, hi = fit.a_ci
        wide = lo <= 0 or hi >= 1 or (hi - lo) / 2 > IMPRECISE * abs(fit.a)
        assert wide == any(w.startswith("a is not pinned") for w in fit.warnings), (sweep.name, fit.a_ci)
