"""The fast fitter: Gauss-Newton normal equations, the batched
Levenberg-Marquardt solver, the float32 screen, progress reports and the time budget.
Timings are bench/fit_speed.py's job; these check results only."""

import warnings

import numpy as np
import polars as pl
import pytest

from analysis import (
    AnalysisInputError,
    Chinchilla,
    FitBudgetWarning,
    FitProgress,
    PowerLaw,
    fit_law,
    load_epoch_chinchilla,
)
from analysis.errors import IdentifiabilityWarning
from analysis.laws.fit_objective import Objective
from analysis.solvers.levenberg import lm_batched
from analysis.tables.published import EPOCH

POWER = {"A": 0.3, "alpha": 0.6, "E": 2.5}


def _epoch_objective(**options) -> tuple[Objective, np.ndarray]:
    data = load_epoch_chinchilla()
    law = Chinchilla()
    obj = Objective(
        law, law.inputs(data), np.log(data["loss"].to_numpy()), np.zeros(5), np.arange(5), **options
    )
    z = law.to_internal(EPOCH)[None, :] + np.random.default_rng(1).normal(0, 0.05, (6, 5))
    return obj, z


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"loss": "mse"},
        {"space": "linear"},
        {"space": "linear", "loss": "mse"},
        {"point_weights": np.linspace(0.5, 2.0, 240)},
        {"coords": np.array([0, 1, 2, 3, 3])},  # beta tied to alpha
    ],
    ids=["huber", "mse", "linear", "linear-mse", "weights", "tie"],
)
def test_normal_equations_agree_with_value_and_grad(options):
    obj, z = _epoch_objective(**options)
    z = z[:, : obj.n_free]
    f, g = obj.value_and_grad(z)
    f2, g2, H = obj.normal_equations(z)
    np.testing.assert_allclose(f2, f, rtol=1e-13)
    np.testing.assert_allclose(g2, g, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(H, np.transpose(H, (0, 2, 1)), rtol=1e-12, atol=1e-15)
    assert np.all(np.linalg.eigvalsh(H) > -1e-12 * np.abs(H).max())  # IRLS: PSD


def test_mse_gauss_newton_matrix_is_jtj():
    obj, z = _epoch_objective(loss="mse")
    _, _, H = obj.normal_equations(z[:1])
    h = 1e-6  # central differences of the residuals give J (n, P)
    J = np.stack(
        [
            (obj.residuals(z[:1] + h * e)[0] - obj.residuals(z[:1] - h * e)[0]) / (2 * h)
            for e in np.eye(5)
        ],
        axis=1,
    )
    np.testing.assert_allclose(H[0], J.T @ J, rtol=1e-5)


def test_float32_objective_is_close():
    obj, z = _epoch_objective()
    f64 = obj.value_and_grad(z, grad=False)[0]
    f32 = obj.astype(np.float32).value_and_grad(z, grad=False)[0]
    assert obj.astype(np.float32).X["N"].dtype == np.float32
    np.testing.assert_allclose(f32, f64, rtol=1e-4)


def test_lm_reaches_an_exact_fit_and_stops_at_a_bound():
    N = np.geomspace(0.05, 5.0, 12)
    law = PowerLaw()
    y = law.predict(POWER, {"N": N})
    obj = Objective(law, {"N": N}, np.log(y), np.zeros(3), np.arange(3), loss="mse")
    lo, hi = np.array([-30.0, 0.0, -20.0]), np.array([60.0, 10.0, 5.0])
    starts = np.array([[0.0, 0.25, 0.0], [5.0, 1.5, 1.0], [-5.0, 2.0, -1.0]])
    res = lm_batched(lambda z, rows: obj.normal_equations(z), starts, lo, hi, gtol=0, ftol=1e-15)
    truth = law.to_internal(POWER)
    np.testing.assert_allclose(res.x, np.repeat(truth[None, :], 3, axis=0), rtol=1e-7)
    assert np.all(res.f < 1e-20)
    # The same data with alpha boxed below its truth: the fit ends on that bound.
    hi[1] = 0.4
    res = lm_batched(lambda z, rows: obj.normal_equations(z), starts, lo, hi, gtol=0, ftol=1e-15)
    assert np.all(res.x[:, 1] == 0.4)


def test_successive_halving_keeps_the_better_half():
    obj, z = _epoch_objective()
    z = np.concatenate([z, z + 0.5, z - 0.5, z + 1.0])  # 24 rows
    seen = []

    def monitor(it, f, active):
        seen.append(active)
        return False

    lm_batched(
        lambda x, rows: obj.normal_equations(x),
        z,
        np.full(5, -30.0),
        np.full(5, 60.0),
        maxiter=6,
        gtol=0,
        ftol=0,
        halve_every=2,
        min_active=5,
        monitor=monitor,
    )
    assert seen == [24, 12, 12, 6, 6, 5]


def test_progress_reports_every_stage():
    """The grid's starts go through all three stages; the default variable-projection
    starts (8, already near the optimum) skip the float32 screen."""
    reports: list[FitProgress] = []
    fit_law(Chinchilla(), load_epoch_chinchilla(), progress=reports.append, warn=False,
            starts="grid")
    stages = [p.stage for p in reports]
    assert stages[0] == "screen" and "continue" in stages and stages[-1] == "polish"
    screen = [p for p in reports if p.stage == "screen"]
    assert screen[0].rows == 4500 and [p.iteration for p in screen] == list(range(1, 13))
    assert np.all(np.diff([p.best for p in screen]) <= 0)
    assert "fit chinchilla: screen 1/12, 4,500 starts" in screen[0].line()
    default: list[FitProgress] = []
    fit_law(Chinchilla(), load_epoch_chinchilla(), progress=default.append, warn=False)
    stages = [p.stage for p in default]
    assert "screen" not in stages and stages[0] == "continue" and stages[-1] == "polish"


def test_progress_true_prints_to_stderr(capsys):
    N = np.geomspace(0.05, 5.0, 12)
    data = pl.DataFrame({"N": N, "loss": PowerLaw().predict(POWER, {"N": N}) * 1.001})
    fit_law(PowerLaw(), data, progress=True, warn=False)
    err = capsys.readouterr().err
    assert "fit powerlaw: screen" in err and "polish" in err


def test_time_budget_keeps_the_best_so_far_and_says_so():
    data = load_epoch_chinchilla()
    with pytest.warns(FitBudgetWarning, match="time budget of 1e-06 s ran out at screen"):
        cut = fit_law(Chinchilla(), data, time_budget_s=1e-6, starts="grid")
    assert cut.warnings[0].startswith("time budget of 1e-06 s ran out at screen iteration 1")
    assert not cut.converged and np.isfinite(cut.objective)
    with pytest.warns(FitBudgetWarning, match="time budget of 1e-06 s ran out at continue"):
        with warnings.catch_warnings():  # a cut fit sits in a flat valley: says so, not here
            warnings.simplefilter("ignore", IdentifiabilityWarning)
            short = fit_law(Chinchilla(), data, time_budget_s=1e-6)  # variable-projection starts
    assert not short.converged and np.isfinite(short.objective)
    full = fit_law(Chinchilla(), data, time_budget_s=600, warn=False)
    assert not any("time budget" in w for w in full.warnings)
    assert full.objective <= cut.objective


def test_bad_progress_and_budget_are_refused():
    data = load_epoch_chinchilla()
    with pytest.raises(AnalysisInputError, match="time_budget_s must be > 0"):
        fit_law(Chinchilla(), data, time_budget_s=0)
    with pytest.raises(AnalysisInputError, match="progress must be"):
        fit_law(Chinchilla(), data, progress="yes")


def _fit_speed_bench():
    """bench/fit_speed.py as a module (bench/ is not a package)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "fit_speed.py"
    spec = importlib.util.spec_from_file_location("fit_speed_bench", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_fit_speed_baseline_is_capped_and_scaled(monkeypatch):
    """The scipy baseline of bench/fit_speed.py runs at most BASELINE_CAP = 400 seeded starts
    by default (Chinchilla's 4,500 uncapped took 14+ minutes) and scales their time to
    every start; no clock is read: each start 'takes' 0.5 s wall, 0.25 s CPU."""
    bench = _fit_speed_bench()
    assert bench.BASELINE_CAP == 400
    s = bench.baseline_sample(4500, 400)
    assert s.capped and s.rows.size == 400 and s.scale == 4500 / 400
    assert np.all(np.diff(s.rows) > 0) and 0 <= s.rows[0] and s.rows[-1] < 4500
    assert np.array_equal(s.rows, bench.baseline_sample(4500, 400).rows)  # seeded
    assert "400 of 4,500 starts, seeded sample, time x11.25" == s.describe()
    for cap in (0, 4500, 10_000):
        every = bench.baseline_sample(4500, cap)
        assert not every.capped and every.rows.size == 4500 and every.scale == 1.0

    # The loop runs the sampled starts only and scales their (constant) time exactly.
    N = np.geomspace(0.05, 5.0, 12)
    data = pl.DataFrame({"N": N, "loss": PowerLaw().predict(POWER, {"N": N}) * 1.001})
    fit = fit_law(PowerLaw(), data, starts="grid", warn=False)
    calls = []

    def fake_polish(problem, z, lo, hi):
        calls.append(z)
        return z, float(len(calls))

    monkeypatch.setattr(bench, "polish_one", fake_polish)
    monkeypatch.setattr(bench, "_timed", lambda fn: (fn(), 0.5, 0.25))
    loop = bench.scipy_loop(fit, 10)
    n = fit.n_starts
    assert n > 10 and len(calls) == 10 and loop.sample.rows.size == 10
    assert loop.wall == pytest.approx(0.5 * n) and loop.cpu == pytest.approx(0.25 * n)
    assert loop.wall_half == 0.0 and loop.objective == 1.0
    assert loop.label.startswith(f"10 of {n:,} starts, seeded sample, time x")
    # A spread of per-start times gives the sample total's 95% range (finite-population).
    t = np.array([0.1, 0.3] * 5)
    est = bench.scale_times(loop.sample, t, t, np.ones(10))
    sd = np.std(t, ddof=1)
    assert est.wall == pytest.approx(t.sum() * n / 10)
    assert est.wall_half == pytest.approx(1.96 * n * sd / np.sqrt(10) * np.sqrt(1 - 10 / n))


def test_fit_speed_main_caps_both_loops_by_default(monkeypatch, capsys):
    bench = _fit_speed_bench()
    caps = []
    monkeypatch.setattr(bench, "compare", lambda name, fn, repeats, cap: caps.append(cap))
    monkeypatch.setattr("sys.argv", ["fit_speed.py", "--no-bootstrap"])
    bench.main()
    assert caps == [400, 400]
    monkeypatch.setattr("sys.argv", ["fit_speed.py", "--no-bootstrap", "--baseline-cap", "50",
                                     "--dc-sample", "0"])
    bench.main()
    assert caps[2:] == [50, 0]
