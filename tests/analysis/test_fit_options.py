"""Options of fit_law and fit_data_constrained: tied parameters, per-point
weights, the residual's space and loss, the stage-1 run selection. Synthetic data with
known truth; every tolerance is written where it is used."""

import numpy as np
import polars as pl
import pytest

from analysis import (
    AnalysisInputError,
    Chinchilla,
    DataConstrained,
    PowerLaw,
    fit_data_constrained,
    fit_law,
)
from analysis.laws.fit_objective import Objective
from analysis.tables.published import MUENNIGHOFF

TIED = {"A": 400.0, "B": 1800.0, "E": 1.8, "alpha": 0.34, "beta": 0.34}
POWER = {"A": 0.3, "alpha": 0.6, "E": 2.5}
TIED_START = {"A": 300.0, "B": 1000.0, "E": 2.0, "alpha": 0.3, "beta": 0.3}  # not the truth


def _noisy(loss, sigma, seed):
    return loss * np.exp(np.random.default_rng(seed).normal(0.0, sigma, loss.size))


def _chinchilla_data(true, seed=1, sigma=0.003):
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(1e7, 1e10, 8), np.geomspace(1e9, 1e12, 8)))
    loss = _noisy(Chinchilla().predict(true, {"N": N, "D": D}), sigma, seed)
    return pl.DataFrame({"N": N, "D": D, "loss": loss})


# ---- tie -----------------------------------------------------------------------------


def test_tie_recovers_a_tied_truth():
    data = _chinchilla_data(TIED)
    fit = fit_law(Chinchilla(), data, tie={"beta": "alpha"}, warn=False)
    assert fit.free == ("A", "B", "E", "alpha") and fit.tied == {"beta": "alpha"}
    assert fit.n_starts == 8  # variable projection's starts on the alpha = beta diagonal
    grid = fit_law(Chinchilla(), data, tie={"beta": "alpha"}, starts="grid", warn=False)
    assert grid.n_starts == 6 * 6 * 5 * 5  # the grid over the free coordinates only
    assert fit.objective <= grid.objective * (1 + 1e-9)  # test_varpro.py's tolerance
    assert fit.params["beta"] == fit.params["alpha"]  # one coordinate, reported twice
    # The untied fit's tolerances (test_recovery.py): 2% on E, 0.02 on the exponents.
    assert fit.params["alpha"] == pytest.approx(TIED["alpha"], abs=0.02)
    assert fit.params["E"] == pytest.approx(TIED["E"], rel=0.02)
    # A constraint cannot fit better than the free fit, and on tied truth barely worse
    # (measured +0.1% objective).
    free = fit_law(Chinchilla(), data, starts=[fit.params, TIED_START], warn=False)
    assert free.objective <= fit.objective <= 1.01 * free.objective
    assert fit.profile("beta").ci == fit.profile("alpha").ci
    boot = fit.bootstrap(20, seed=0, workers=1)
    np.testing.assert_array_equal(boot.column("alpha"), boot.column("beta"))


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


# A start away from the truth, for both stages: keeps these two-stage fits cheap.
START = {"A": 300.0, "B": 1000.0, "E": 2.0, "alpha": 0.3, "beta": 0.3, "R_D": 5.0, "R_N": 5.0}


def test_tie_in_fit_data_constrained_goes_to_stage_1():
    # Muennighoff et al. fit alpha = beta; their constants have alpha = beta = 0.3527.
    fit = fit_data_constrained(_constrained_runs(), tie={"beta": "alpha"}, starts=START, warn=False)
    assert fit.base.tied == {"beta": "alpha"} and fit.tied == {}
    assert fit.params["alpha"] == fit.params["beta"] == fit.base.params["alpha"]
    # Tolerances of the untied two-stage test (test_recovery.py): 10% on R_D*, R_N*.
    assert fit.params["alpha"] == pytest.approx(MUENNIGHOFF["alpha"], rel=0.05)
    assert fit.params["R_D"] == pytest.approx(MUENNIGHOFF["R_D"], rel=0.10)
    assert fit.params["R_N"] == pytest.approx(MUENNIGHOFF["R_N"], rel=0.10)


@pytest.mark.parametrize(
    "tie, fixed, bounds, message",
    [
        ({"beta": "beta"}, None, None, "'beta' is tied to itself"),
        ({"beta": "alpha", "alpha": "E"}, None, None, "is a chain"),
        ({"beta": "alpha"}, {"alpha": 0.3}, None, "'alpha' is fixed"),
        ({"B": "alpha"}, None, None, "parametrised differently"),
        ({"beta": "alpah"}, None, None, "did you mean 'alpha'"),
        ({"beta": "alpha"}, None, {"beta": (0.1, 1.0)}, "tied to 'alpha': bound that one"),
    ],
)
def test_tie_misuse_is_refused(tie, fixed, bounds, message):
    with pytest.raises(AnalysisInputError, match=message):
        fit_law(Chinchilla(), _chinchilla_data(TIED), tie=tie, fixed=fixed, bounds=bounds)


# ---- weights -------------------------------------------------------------------------


def _two_curves():
    """The same 10 sizes twice: curve a (E = 2.5) with weight 1, curve b (E = 2.6) with
    weight 10 in column ``w``; noise-free."""
    N = np.geomspace(0.05, 20.0, 10)
    la = PowerLaw().predict(POWER, {"N": N})
    lb = PowerLaw().predict({**POWER, "E": 2.6}, {"N": N})
    data = pl.DataFrame(
        {"N": np.r_[N, N], "loss": np.r_[la, lb], "w": np.r_[np.ones(10), np.full(10, 10.0)]}
    )
    return data, N, la, lb


def _share_towards_b(fit, N, la, lb) -> float:
    """Where the fitted curve lies between a (0) and b (1) in log loss, averaged over N."""
    return float(np.mean(np.log(fit.predict({"N": N}) / la) / np.log(lb / la)))


def test_up_weighting_a_subset_pulls_the_fit_toward_it():
    data, N, la, lb = _two_curves()
    # Least squares in log space: the fit is the weighted mean of the two log curves,
    # 1/2 unweighted and 10/11 = 0.909 with weights 1:10 (measured 0.5000 and 0.9091;
    # accepted +-0.01, the power law cannot follow the mixture exactly).
    plain = fit_law(PowerLaw(), data, loss="mse")
    weighted = fit_law(PowerLaw(), data, loss="mse", weights="w")
    assert _share_towards_b(plain, N, la, lb) == pytest.approx(0.5, abs=0.01)
    assert _share_towards_b(weighted, N, la, lb) == pytest.approx(10 / 11, abs=0.01)
    assert weighted.params["E"] == pytest.approx(2.5 + 0.1 * 10 / 11, abs=0.01)
    # Huber with a small delta is close to L1: a weighted median, all the way to b
    # (measured 0.997; accepted >= 0.98).
    huber = fit_law(PowerLaw(), data, weights=data["w"].to_numpy(), warn=False)
    assert _share_towards_b(huber, N, la, lb) >= 0.98
    # A column name and the same array give the same fit.
    same = fit_law(PowerLaw(), data, loss="mse", weights=data["w"].to_numpy())
    assert same.params == weighted.params
    # The bootstrap resamples points with their weights: its median sits at the weighted
    # estimate (accepted within 0.01 of E's 0.1 spread between the curves), not between.
    boot = weighted.bootstrap(100, seed=0, workers=1)
    assert np.median(boot.column("E")) == pytest.approx(weighted.params["E"], abs=0.01)


def test_integer_weights_equal_repeated_points_and_zero_weights_drop_points():
    N = np.geomspace(0.05, 20.0, 12)
    loss = _noisy(PowerLaw().predict(POWER, {"N": N}), 0.005, 0)
    w = np.array([1, 2, 3, 1, 1, 2, 1, 3, 1, 1, 2, 1], dtype=float)
    reps = np.repeat(np.arange(12), w.astype(int))
    weighted = fit_law(PowerLaw(), pl.DataFrame({"N": N, "loss": loss}), weights=w, warn=False)
    repeated = fit_law(PowerLaw(), pl.DataFrame({"N": N[reps], "loss": loss[reps]}), warn=False)
    # Same objective function, so the same optimum to the optimiser's precision.
    assert weighted.objective == pytest.approx(repeated.objective, rel=1e-9)
    for p in POWER:
        assert weighted.params[p] == pytest.approx(repeated.params[p], rel=1e-6), p
    # Points of weight 0 are ignored, however wrong (a loss of 100 on 3 extra points).
    extra = pl.DataFrame({"N": np.r_[N, [0.1, 1.0, 10.0]], "loss": np.r_[loss, [100.0] * 3]})
    zero = fit_law(PowerLaw(), extra, weights=np.r_[np.ones(12), np.zeros(3)], warn=False)
    alone = fit_law(PowerLaw(), pl.DataFrame({"N": N, "loss": loss}), warn=False)
    assert zero.objective == pytest.approx(alone.objective, rel=1e-9)
    for p in POWER:
        assert zero.params[p] == pytest.approx(alone.params[p], rel=1e-6), p


@pytest.mark.parametrize(
    "weights, message",
    [
        (np.ones(5), "5 values for 12 points"),
        (np.r_[np.ones(11), -1.0], "finite, >= 0 and not all 0"),
        (np.r_[np.ones(11), np.nan], "finite, >= 0 and not all 0"),
        (np.zeros(12), "finite, >= 0 and not all 0"),
        ("weight", "need a 'weight' column"),
    ],
)
def test_bad_weights_are_refused(weights, message):
    N = np.geomspace(0.05, 20.0, 12)
    data = pl.DataFrame({"N": N, "loss": PowerLaw().predict(POWER, {"N": N})})
    with pytest.raises(AnalysisInputError, match=message):
        fit_law(PowerLaw(), data, weights=weights)


def test_weights_in_fit_data_constrained():
    data = _constrained_runs()
    plain = fit_data_constrained(data, starts=START, warn=False)
    # Constant weights scale the objective and move nothing (accepted rel 1e-6).
    doubled = fit_data_constrained(
        data, weights=np.full(data.height, 2.0), starts=START, warn=False
    )
    assert doubled.objective == pytest.approx(2 * plain.objective, rel=1e-6)
    for p in ("alpha", "beta", "E", "R_D", "R_N"):
        assert doubled.params[p] == pytest.approx(plain.params[p], rel=1e-6), p
    assert doubled.base.weights is not None and doubled.base.weights.size == doubled.base.n_points


# ---- space and loss -------------------------------------------------------------------


@pytest.mark.parametrize("space", ["log", "linear"])
@pytest.mark.parametrize("loss", ["mse", "huber"])
def test_noise_free_data_are_recovered_in_either_space_and_loss(space, loss):
    N = np.geomspace(0.05, 5.0, 12)
    data = pl.DataFrame({"N": N, "loss": PowerLaw().predict(POWER, {"N": N})})
    fit = fit_law(PowerLaw(), data, space=space, loss=loss)
    assert fit.space == space
    for p, v in POWER.items():
        assert fit.params[p] == pytest.approx(v, rel=1e-5), p  # exact data: exact fit
    pred, y = fit.predict(data), data["loss"].to_numpy()
    expect = pred - y if space == "linear" else np.log(pred) - np.log(y)
    np.testing.assert_allclose(fit.residuals, expect, atol=1e-12)


def test_linear_space_changes_the_fit_and_delta_is_in_its_units():
    data = _chinchilla_data(TIED, seed=2, sigma=0.01)
    # One start (TIED_START) reaches the grid's optimum here (checked: objectives equal to
    # 1e-14), at 1/30 of the cost.
    log_mse = fit_law(Chinchilla(), data, loss="mse", starts=TIED_START, warn=False)
    lin_mse = fit_law(Chinchilla(), data, loss="mse", space="linear", starts=TIED_START, warn=False)
    # A different objective: a different optimum (measured |dE| = 4.9e-4; accepted > 1e-4).
    assert abs(lin_mse.params["E"] - log_mse.params["E"]) > 1e-4
    np.testing.assert_allclose(lin_mse.residuals, lin_mse.predict(data) - data["loss"], atol=1e-12)
    # Huber with delta above every linear residual (losses ~2-4, residuals < 0.2 nats) is
    # half the squared error: the MSE fit again (accepted rel 1e-6).
    wide = fit_law(Chinchilla(), data, space="linear", delta=1.0, starts=TIED_START, warn=False)
    assert wide.objective == pytest.approx(lin_mse.objective, rel=1e-9)
    for p in ("E", "alpha", "beta"):
        assert wide.params[p] == pytest.approx(lin_mse.params[p], rel=1e-6), p
    with pytest.raises(AnalysisInputError, match="space must be one of"):
        fit_law(Chinchilla(), data, space="logit")


def test_objective_gradient_with_every_option():
    # Linear space, Huber, per-point weights and a tie (beta -> alpha, B -> A): the analytic
    # gradient matches central differences (rtol 1e-5, as in test_laws.py).
    data = _chinchilla_data(TIED, seed=3)
    law = Chinchilla()
    X = law.inputs(data)
    w = np.random.default_rng(0).uniform(0.5, 2.0, data.height)
    coords = np.array([0, 0, 1, 2, 2])  # A, B share z[0]; E is z[1]; alpha, beta share z[2]
    obj = Objective(
        law, X, np.log(data["loss"].to_numpy()), np.zeros(5), np.arange(5),
        loss="huber", delta=0.05, space="linear", point_weights=w, coords=coords,
    )  # fmt: skip
    z = np.array([[6.0, 0.6, 0.34], [6.5, 0.5, 0.3]])
    _, g = obj.value_and_grad(z)
    assert g.shape == (2, 3)
    for i in range(3):
        step = np.zeros_like(z)
        step[:, i] = 1e-7
        hi = obj.value_and_grad(z + step, grad=False)[0]
        lo = obj.value_and_grad(z - step, grad=False)[0]
        np.testing.assert_allclose(g[:, i], (hi - lo) / 2e-7, rtol=1e-5, atol=1e-9)


# ---- stage 1 of fit_data_constrained ------------------------------------------------------


def test_stage1_selection():
    data = _constrained_runs()
    default = fit_data_constrained(data, starts=START, warn=False)
    # The published rule written as an expression reproduces the default exactly.
    expr = pl.col("D") <= pl.col("U") * (1 + 1e-9)
    same = fit_data_constrained(data, stage1=expr, starts=START, warn=False)
    assert same.params == default.params and same.base.n_points == default.base.n_points
    # Up to 4 epochs: runs at 2 and 4 epochs join the 35 single-epoch ones (measured: 43
    # after the N <= N_opt(U) rounds). The base law then reads D' as D and is biased, but
    # little (Muennighoff et al.: 4 epochs cost little): measured E +0.1%, alpha +0.9%,
    # R_D* +0.7%; accepted 2%, 10%, 10%.
    four = fit_data_constrained(data, stage1=4, starts=START, warn=False)
    assert four.base.n_points > default.base.n_points
    assert four.params["E"] == pytest.approx(MUENNIGHOFF["E"], rel=0.02)
    assert four.params["alpha"] == pytest.approx(MUENNIGHOFF["alpha"], rel=0.10)
    assert four.params["R_D"] == pytest.approx(MUENNIGHOFF["R_D"], rel=0.10)
    for bad, message in (("two_epochs", "stage1 must be"), (0.5, "max epochs must be >= 1")):
        with pytest.raises(AnalysisInputError, match=message):
            fit_data_constrained(data, stage1=bad)
