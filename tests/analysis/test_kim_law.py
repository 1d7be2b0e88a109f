"""analysis.recipes.kim_law: the profiled least-squares fit of A / x^B + E against fit_law and
scipy, and its Gauss-Newton covariance against curve_fit's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import curve_fit

from analysis import AnalysisInputError, PowerLaw, fit_law
from analysis.fit.power_law import fit_kim, profile_fit

X = np.geomspace(0.271 / 48, 0.271, 8)  # the demo's sizes: N = 5.6k .. 271k


def _study(seed: int):
    rng = np.random.default_rng(seed)
    A, B, E = np.exp(rng.uniform(np.log(0.01), 0.0)), rng.uniform(0.3, 0.9), rng.uniform(1.8, 2.2)
    return A * X**-B + E + 0.01 * rng.standard_normal(X.size)


@pytest.mark.parametrize("seed", range(4))
def test_profiled_fit_reaches_fit_laws_optimum(seed):
    """fit_law from its own 336-start grid finds no lower SSE than the profiled fit (relative
    1e-7: both are converged least squares; the profile's golden section ends at ~1e-12 in
    log B)."""
    y = _study(seed)
    A, B, E, sse = (float(v[0]) for v in profile_fit(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = fit_law(PowerLaw(), {"N": X, "loss": y}, loss="mse", space="linear", warn=False)
    sse_ref = float(np.sum((ref.predict({"N": X}) - y) ** 2))
    assert sse <= sse_ref * (1 + 1e-7)
    assert B == pytest.approx(ref.params["alpha"], rel=1e-4)
    assert E == pytest.approx(ref.params["E"], rel=1e-5)
    fit = fit_kim(X, y)  # polished with fit_law: the same point
    assert fit.sse == pytest.approx(sse, rel=1e-7)


def test_rows_are_fitted_like_single_fits():
    """A (R, n) batch gives each row the fit it gets alone."""
    Y = np.stack([_study(s) for s in range(5)])
    A, B, E, sse = profile_fit(X, Y)
    for r in range(5):
        a, b, e, s = (float(v[0]) for v in profile_fit(X, Y[r]))
        assert (A[r], B[r], E[r], sse[r]) == pytest.approx((a, b, e, s), rel=1e-9)


def test_covariance_is_curve_fits():
    """s^2 (J'J)^-1 equals scipy's curve_fit pcov (absolute_sigma=False: the same
    Gauss-Newton covariance) to 1e-3 relative (curve_fit's own convergence tolerance)."""
    y = _study(7)
    fit = fit_kim(X, y)
    popt, pcov = curve_fit(lambda x, A, B, E: A * x**-B + E, X, y, p0=[fit.A, fit.B, fit.E],
                           ftol=1e-14, xtol=1e-14, gtol=1e-14)
    assert popt == pytest.approx([fit.A, fit.B, fit.E], rel=1e-5)
    assert fit.cov == pytest.approx(pcov, rel=1e-3)


def test_pure_law_matches_curve_fit():
    x = np.array([8192, 16384, 32768, 65536, 131072.0]) / 1e6
    rng = np.random.default_rng(0)
    y = 1.433 * x**-0.126 + 0.005 * rng.standard_normal(5)
    fit = fit_kim(x, y, floor=False)
    popt, pcov = curve_fit(lambda x, A, B: A * x**-B, x, y, p0=[1.4, 0.13], ftol=1e-14,
                           xtol=1e-14, gtol=1e-14)
    assert (fit.A, fit.B, fit.E) == pytest.approx((popt[0], popt[1], 0.0), rel=1e-6)
    assert fit.cov == pytest.approx(pcov, rel=1e-3)
    assert fit.n_free == 2 and fit.dof == 3


def test_floor_stays_non_negative():
    """Losses that fall faster than any floor above 0 allows: E is held at its bound 0, not
    negative (the data law's C >= 0)."""
    x = np.geomspace(0.01, 1, 6)
    y = 2.0 * x**-0.1 - 1.2  # a negative floor in the truth
    fit = fit_kim(x, y)
    assert fit.E == 0.0
    assert fit.sse <= fit_kim(x, y, floor=False).sse * (1 + 1e-9)


def test_bad_input_is_one_line():
    with pytest.raises(AnalysisInputError, match="need >= 4"):
        fit_kim(X[:3], _study(0)[:3])
    with pytest.raises(AnalysisInputError, match="> 0"):
        fit_kim(-X, _study(0))
