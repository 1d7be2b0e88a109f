"""Synthetic recovery: data drawn from known parameters (log-normal noise, seeded) are
fitted back. Tolerances are written per parameter below; they are several noise SEs wide
and were not tuned to pass."""

import numpy as np
import polars as pl
import pytest

from analysis import (
    Chinchilla,
    DataConstrained,
    IdentifiabilityWarning,
    PowerLaw,
    fit_data_constrained,
    fit_law,
)
from analysis.tables.published import MUENNIGHOFF


def _noisy(loss, sigma, seed):
    return loss * np.exp(np.random.default_rng(seed).normal(0.0, sigma, loss.size))


def test_powerlaw_recovery():
    true = {"A": 0.3, "alpha": 0.6, "E": 2.5}
    N = np.geomspace(0.05, 5.0, 12)  # billions
    loss = _noisy(PowerLaw().predict(true, {"N": N}), 0.002, 0)
    fit = fit_law(PowerLaw(x="N"), pl.DataFrame({"N": N, "loss": loss}))
    assert fit.params["E"] == pytest.approx(true["E"], rel=0.01)
    assert fit.params["alpha"] == pytest.approx(true["alpha"], rel=0.10)
    assert fit.params["A"] == pytest.approx(true["A"], rel=0.10)
    assert not fit.warnings


def test_chinchilla_recovery():
    true = {"A": 400.0, "B": 1800.0, "E": 1.8, "alpha": 0.34, "beta": 0.36}
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(1e7, 1e10, 8), np.geomspace(1e9, 1e12, 8)))
    loss = _noisy(Chinchilla().predict(true, {"N": N, "D": D}), 0.003, 1)
    fit = fit_law(Chinchilla(), pl.DataFrame({"N": N, "D": D, "loss": loss}), warn=False)
    assert fit.params["E"] == pytest.approx(true["E"], rel=0.02)
    assert fit.params["alpha"] == pytest.approx(true["alpha"], abs=0.02)
    assert fit.params["beta"] == pytest.approx(true["beta"], abs=0.02)
    for p in ("A", "B"):
        assert fit.params[p] == pytest.approx(true[p], rel=0.35), p  # flat valley
    np.testing.assert_allclose(
        fit.predict({"N": N, "D": D}), Chinchilla().predict(true, {"N": N, "D": D}), rtol=2e-3
    )


def _constrained_runs(seed=0, sigma=0.002):
    law = DataConstrained()
    rows = []
    for U in np.geomspace(1e9, 1e12, 7):  # single epoch, N <= N_opt(U): base-law runs
        for N in np.geomspace(1e7, 0.9 * float(law.n_opt(MUENNIGHOFF, U)), 5):
            rows.append((N, U, U))
    for U in (1e9, 4e9):  # repeated data, sizes below and above N_opt(U)
        for N in np.geomspace(2e7, 2e9, 6):
            for ep in (2, 4, 8, 16, 32, 64):
                rows.append((N, U * ep, U))
    N, D, U = (np.array(c) for c in zip(*rows))
    loss = _noisy(law.predict(MUENNIGHOFF, {"N": N, "D": D, "U": U}), sigma, seed)
    return pl.DataFrame({"N": N, "D": D, "U": U, "loss": loss})


def test_data_constrained_two_stage_recovers_r_d_and_r_n():
    data = _constrained_runs()
    fit = fit_data_constrained(data, warn=False)
    assert fit.base is not None and set(fit.fixed) == {"A", "B", "E", "alpha", "beta"}
    assert fit.free == ("R_D", "R_N")
    assert fit.params["R_D"] == pytest.approx(MUENNIGHOFF["R_D"], rel=0.10)
    assert fit.params["R_N"] == pytest.approx(MUENNIGHOFF["R_N"], rel=0.10)
    assert fit.params["E"] == pytest.approx(MUENNIGHOFF["E"], rel=0.02)
    # With the published base law given, stage 2 alone recovers them too.
    given = fit_data_constrained(data, base=MUENNIGHOFF, warn=False)
    assert given.base is None
    assert given.params["R_D"] == pytest.approx(MUENNIGHOFF["R_D"], rel=0.10)
    assert given.params["R_N"] == pytest.approx(MUENNIGHOFF["R_N"], rel=0.10)
    boot = given.bootstrap(50, seed=0, workers=1)
    lo, hi = boot.ci()["R_D"]
    assert lo <= given.params["R_D"] <= hi
    assert boot.se["A"] <= 1e-9 * given.params["A"]  # base held fixed (exp(log A) round-off)


def test_mse_loss_recovers_noise_free_parameters_exactly():
    true = {"A": 0.3, "alpha": 0.6, "E": 2.5}
    N = np.geomspace(0.05, 5.0, 12)
    data = pl.DataFrame({"N": N, "loss": PowerLaw().predict(true, {"N": N})})
    fit = fit_law("powerlaw", data, loss="mse")
    for p, v in true.items():
        assert fit.params[p] == pytest.approx(v, rel=1e-6), p
    assert fit.objective < 1e-20


def test_fixed_and_bounds():
    true = {"A": 0.3, "alpha": 0.6, "E": 2.5}
    N = np.geomspace(0.05, 5.0, 12)
    data = pl.DataFrame({"N": N, "loss": _noisy(PowerLaw().predict(true, {"N": N}), 0.002, 2)})
    fixed = fit_law("powerlaw", data, fixed={"E": 2.5})
    assert fixed.params["E"] == 2.5 and fixed.free == ("A", "alpha")
    assert fixed.params["alpha"] == pytest.approx(0.6, rel=0.05)
    bounded = fit_law("powerlaw", data, bounds={"E": (None, 2.4)}, warn=False)
    assert bounded.params["E"] <= 2.4 + 1e-12
    assert bounded.objective > fixed.objective  # the bound binds: a worse fit


def test_random_and_explicit_starts_reach_the_same_optimum():
    true = {"A": 0.3, "alpha": 0.6, "E": 2.5}
    N = np.geomspace(0.05, 5.0, 12)
    data = pl.DataFrame({"N": N, "loss": _noisy(PowerLaw().predict(true, {"N": N}), 0.002, 3)})
    grid = fit_law("powerlaw", data)
    rand = fit_law("powerlaw", data, starts=40)
    one = fit_law("powerlaw", data, starts={"A": 1.0, "alpha": 0.5, "E": 2.0})
    assert rand.n_starts == 40 and one.n_starts == 1 and grid.n_starts == 8 * 7 * 6
    for other in (rand, one):
        assert other.objective == pytest.approx(grid.objective, rel=1e-9)
        assert other.params["E"] == pytest.approx(grid.params["E"], rel=1e-6)


def test_too_few_points_per_parameter_warns():
    N = np.array([0.15, 0.3, 0.6, 1.4])
    data = pl.DataFrame({"N": N, "loss": [3.4949, 3.2730, 3.2122, 3.1740]})
    with pytest.warns(IdentifiabilityWarning, match="4 points for 3 free parameters"):
        fit_law(PowerLaw(), data)
