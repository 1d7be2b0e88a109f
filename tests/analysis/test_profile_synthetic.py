"""Profile intervals on synthetic fits whose profile is known (analysis/fit/profile.py).

- Linear-Gaussian least squares: the profile interval is the t-interval exactly (Bates &
  Watts 1988, sec. 6.1).
- A Rosenbrock-like curved valley b = a^2 (_profile_problems.banana): a's profile rise is
  k2^2 (a - 1)^2 / 2 exactly; b's is the minimum over a of a quartic, at the roots of a
  cubic, and its interval is far from the quadratic (Hessian) one.
- A Huber fit (delta 1e-3, an almost-L1 fit) whose Hessian at the optimum is singular (not
  positive definite): its profile of b, the minimum over a of a convex function, is
  computed to 1e-12 with a bounded scalar search.

Tolerances: an end within 1e-3 of the exact interval's half-width (Brent stops within
1e-5 of the far bracket end's distance, at most ~10 half-widths away on the first step);
the refitted rise at each end within RISE_OK = [0.5, 2] of the threshold. Every test runs
with warnings as errors.
"""

import warnings

import numpy as np
import pytest
from _profile_problems import banana, banana_profile_b, linear
from scipy.optimize import brentq, minimize_scalar
from scipy.stats import t as t_dist

from analysis.fit.diagnostics import hessian
from analysis.fit.profile import profile_fit
from analysis.fit.profile_walk import RISE_OK
from analysis.laws.fit_objective import huber

pytestmark = pytest.mark.filterwarnings("error")
END_TOL = 1e-3  # of the exact half-width


def _check_ends(prof, exact, rise):
    """Ends against the exact ones, and the exact profile's rise at each over the threshold."""
    half = 0.5 * (exact[1] - exact[0])
    assert prof.ends == ("profile", "profile")
    for got, want in zip(prof.ci, exact):
        assert abs(got - want) <= END_TOL * half, (prof.ci, exact)
    for ratio in (*prof.end_rise, *(rise(t) / prof.threshold for t in prof.ci)):
        assert RISE_OK[0] <= ratio <= RISE_OK[1]


def test_linear_gaussian_profile_is_the_t_interval():
    rng = np.random.default_rng(1)
    x = np.linspace(0.0, 3.0, 15)
    fit = linear(x, 0.5 + 1.5 * x + 0.3 * rng.standard_normal(x.size))
    X = np.column_stack([np.ones_like(x), x])
    r = fit.problem.residuals(fit.z[None, :])[0]
    s2 = float(r @ r) / (x.size - 2)
    cov = s2 * np.linalg.inv(X.T @ X)
    q = t_dist.ppf(0.975, x.size - 2)
    for k, p in enumerate(fit.free):
        prof = profile_fit(fit, p)
        se = np.sqrt(cov[k, k])
        exact_rise = lambda t, k=k: 0.5 * s2 * ((t - fit.z[k]) / np.sqrt(cov[k, k])) ** 2  # noqa: E731
        _check_ends(prof, (fit.z[k] - q * se, fit.z[k] + q * se), exact_rise)


def test_curved_valley_matches_the_exact_profile():
    k1, k2 = 10.0, 1.0
    fit = banana(k1, k2, noise=0.27 * (-1.0) ** np.arange(10))
    pa, pb = profile_fit(fit, "a"), profile_fit(fit, "b")
    thr = pa.threshold
    da = np.sqrt(2 * thr) / k2
    _check_ends(pa, (1 - da, 1 + da), lambda a: 0.5 * k2**2 * (a - 1) ** 2)
    excess = lambda b: banana_profile_b(b, k1, k2) - thr  # noqa: E731
    exact_b = (brentq(excess, 0.0, 1.0, xtol=1e-13), brentq(excess, 1.0, 5.0, xtol=1e-13))
    _check_ends(pb, exact_b, lambda b: banana_profile_b(b, k1, k2))
    # the valley's curvature matters: the quadratic (Hessian) interval misses by far more
    wald = np.sqrt(2 * thr * np.linalg.inv(hessian(fit.problem, fit.z))[1, 1])
    assert abs((1 - wald) - exact_b[0]) > 50 * END_TOL * 0.5 * (exact_b[1] - exact_b[0])


def test_huber_fit_with_a_singular_hessian():
    rng = np.random.default_rng(4)
    x = np.linspace(0.0, 1.0, 20)
    y = 1.0 + 2.0 * x + 0.1 * rng.standard_t(3, x.size)
    fit = linear(x, y, loss="huber", delta=1e-3)
    assert np.linalg.eigvalsh(hessian(fit.problem, fit.z)).min() <= 1e-12  # not PD
    prof = profile_fit(fit, "b")

    def rise(b):
        a = minimize_scalar(
            lambda a: huber(y - a - b * x, 1e-3).sum(),
            bounds=(-50, 50), method="bounded", options={"xatol": 1e-12},
        )
        return a.fun - fit.objective

    b_hat, thr = fit.z[1], prof.threshold
    exact = tuple(brentq(lambda b: rise(b) - thr, *br, xtol=1e-12) for br in ((b_hat - 10, b_hat), (b_hat, b_hat + 10)))
    _check_ends(prof, exact, rise)


def test_a_side_that_never_crosses_ends_at_the_box():
    k1, k2 = 10.0, 1.0
    fit = banana(k1, k2, noise=0.27 * (-1.0) ** np.arange(10))
    wide = type(fit)(fit.free, fit.problem, fit.z, fit.lo, np.array([1.3, 5.0]))
    prof = profile_fit(wide, "a")
    assert prof.ends == ("profile", "box") and prof.flat_upper and not prof.flat_lower
    assert prof.ci[1] == 1.3 and prof.end_rise[1] < 1
    assert "[box]" in prof.describe() and "[profile]" in prof.describe()


def test_describe_names_a_missing_end():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = banana(10.0, 1.0, noise=0.27 * (-1.0) ** np.arange(10))
        prof = profile_fit(fit, "a")
    lost = type(prof)(**{**prof.__dict__, "ci": (np.nan, prof.ci[1]), "ends": ("not found", "profile")})
    assert lost.describe().startswith("a = 1 (not found, ") and not lost.found
