"""Laws: published check values, gradients, reductions, names (Hoffmann et al. 2022, Besiroglu
et al. 2024, Muennighoff et al. 2023)."""

import numpy as np
import pytest

from analysis import (
    AnalysisInputError,
    Chinchilla,
    DataConstrained,
    PowerLaw,
    get_law,
    load_epoch_chinchilla,
)
from analysis.laws.allocation import compute_optimal_constrained
from analysis.laws.fit_objective import Objective, huber
from analysis.tables.published import EPOCH, HOFFMANN_UNROUNDED, MUENNIGHOFF, MUENNIGHOFF_CHECKS


@pytest.mark.parametrize("N, D, U, published", MUENNIGHOFF_CHECKS)
def test_muennighoff_readme_check_values(N, D, U, published):
    pred = DataConstrained().predict(MUENNIGHOFF, {"N": [N], "D": [D], "U": [U]})[0]
    assert round(pred, 4) == round(published, 4)
    assert abs(pred - published) < 1e-5  # in fact to the 5 published decimals


def test_muennighoff_compute_optimal_at_1e22_flops_and_25b_unique_tokens():
    # Our recomputation from Muennighoff et al.'s constants (arXiv 2305.16264): a 1-D search
    # over N with D = C/(6N) gives about 7.02e9 params and 237e9 tokens (9.5 epochs).
    n, d = compute_optimal_constrained(MUENNIGHOFF, 1e22, 25e9)
    assert n == pytest.approx(7.02e9, rel=5e-3)
    assert d == pytest.approx(237e9, rel=5e-3)
    assert d / 25e9 == pytest.approx(9.5, abs=0.05)


LAWS = [
    (PowerLaw(x="N"), {"A": 0.05, "alpha": 1.02, "E": 3.43}),
    (Chinchilla(), EPOCH),
    (DataConstrained(), MUENNIGHOFF),
]


@pytest.mark.parametrize("law, params", LAWS, ids=lambda v: getattr(v, "name", ""))
def test_analytic_gradient_matches_central_differences(law, params):
    rng = np.random.default_rng(0)
    n = 64
    N = 10 ** rng.uniform(6, 10, n)
    X = {"N": N, "D": 10 ** rng.uniform(8, 12, n)}
    X["U"] = X["D"] / 10 ** rng.uniform(0, 1.8, n)  # up to ~60 epochs
    X["N"][:8] = 1e11  # far beyond N_opt(U): exercises the excess-parameter branch
    theta = law.to_internal(params)[None, :] + rng.normal(0, 0.03, (4, law.n_params))
    _, jac = law.log_predict(theta, X, grad=True)
    for i in range(law.n_params):
        W, v = jac[i]
        analytic = W if v is None else W * v[None, :]
        step = np.zeros_like(theta)
        step[:, i] = 1e-6
        numeric = (law.log_predict(theta + step, X) - law.log_predict(theta - step, X)) / 2e-6
        np.testing.assert_allclose(analytic, numeric, atol=1e-7, err_msg=law.param_names[i])


def test_objective_gradient_matches_central_differences():
    data = load_epoch_chinchilla()
    law = Chinchilla()
    obj = Objective(
        law, law.inputs(data), np.log(data["loss"].to_numpy()), np.zeros(5), np.arange(5)
    )
    z = law.to_internal(EPOCH)[None, :] + np.random.default_rng(1).normal(0, 0.02, (3, 5))
    _, g = obj.value_and_grad(z)
    for i in range(5):
        step = np.zeros_like(z)
        step[:, i] = 1e-7
        fd = (
            obj.value_and_grad(z + step, grad=False)[0]
            - obj.value_and_grad(z - step, grad=False)[0]
        ) / 2e-7
        np.testing.assert_allclose(g[:, i], fd, rtol=1e-5, atol=1e-10)


def test_hoffmann_unrounded_scores_anchor_objective():
    # Hoffmann's (unrounded) values score 0.0012312 on Epoch's 240 points (our recomputation).
    data = load_epoch_chinchilla()
    law = Chinchilla()
    obj = Objective(
        law, law.inputs(data), np.log(data["loss"].to_numpy()), np.zeros(5), np.arange(5)
    )
    f, _ = obj.value_and_grad(law.to_internal(HOFFMANN_UNROUNDED)[None, :], grad=False)
    assert f[0] == pytest.approx(0.0012312, abs=1e-7)


def test_huber_matches_definition():
    r = np.array([-0.01, -1e-3, -1e-4, 0.0, 5e-4, 2e-3])
    d = 1e-3
    expect = np.where(np.abs(r) <= d, 0.5 * r**2, d * (np.abs(r) - d / 2))
    np.testing.assert_allclose(huber(r, d), expect, rtol=0, atol=1e-18)


def test_data_constrained_reduces_to_chinchilla_without_repetition_or_excess():
    base = {k: MUENNIGHOFF[k] for k in ("A", "B", "E", "alpha", "beta")}
    U = np.array([1e9, 1e10, 1e11])
    N = 0.5 * DataConstrained().n_opt(MUENNIGHOFF, U)  # below N_opt: no excess parameters
    D = 0.7 * U  # less than one epoch
    dc = DataConstrained().predict(MUENNIGHOFF, {"N": N, "D": D, "U": U})
    ch = Chinchilla().predict(base, {"N": N, "D": D})
    np.testing.assert_allclose(dc, ch, rtol=1e-12)
    # Repetition only ever helps less than fresh data: D' < D when D > U.
    rep = DataConstrained().predict(MUENNIGHOFF, {"N": N, "D": 8 * U, "U": U})
    fresh = Chinchilla().predict(base, {"N": N, "D": 8 * U})
    assert np.all(rep > fresh)


def test_law_names_and_errors():
    assert get_law("Chinchilla").name == "chinchilla"
    assert get_law("data-constrained").param_names == ("A", "B", "E", "alpha", "beta", "R_D", "R_N")
    assert PowerLaw().param_names == ("A", "alpha", "E")
    with pytest.raises(AnalysisInputError, match="did you mean 'chinchilla'"):
        get_law("chinchila")
    with pytest.raises(AnalysisInputError, match="did you mean 'alpha'"):
        Chinchilla().to_internal({**EPOCH, "alpah": 0.3})
    with pytest.raises(AnalysisInputError, match="needs column 'D'"):
        Chinchilla().predict(EPOCH, {"N": [1e9]})
