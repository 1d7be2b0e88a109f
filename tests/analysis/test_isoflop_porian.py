"""Approach 2 on real published isoFLOP curves: Porian et al. 2024's 15 configurations
(arXiv 2406.19146; ``analysis.tables.published.load_porian_isoflops``, 11-12 budgets of 5-16
sizes each), against the exponent the authors fitted to each (``PORIAN_EXPONENTS``: per
budget the argmin of an Akima interpolation, then a line). The truth is unknown here; the
authors' value is another estimator's, so this is agreement, not accuracy:

- the default (window 8, parabola, two-stage line), measured: median |a - a_auth| / a_auth
  1.90%, worst 5.31% (owt2-base-long-kaplan-kaplan-train: 0.824 against 0.870), the
  authors' value inside the default's widened 95% CI in 15 of 15. The old default (window
  16) measured 2.30%, 6.50%, 14 of 15. Held: median <= 2.0%, worst <= 5.5%, 15 of 15.
- ``method="interp"`` (interpolate, then take the argmin: the authors' procedure with our
  smoothing spline in place of their Akima interpolant), window 8, measured: median 0.63%,
  worst 3.12%, 15 of 15. Held: median <= 0.7%, worst <= 3.3%.

200 resamples, seed 0. Tolerances are the measured values rounded up, never loosened.

The noise of these curves, against which the realistic synthetic study's 0.005-0.02 nats is
set (docs/isoflop.md): the robust SD (1.4826 MAD) of the 4th differences of loss along each
budget's ladder, within a decade of its lowest loss, scaled by sqrt(70) (so a cubic trend
cancels and white noise of SD s reads s), pooled per configuration; measured 0.0081 to
0.0230 nats, median 0.0126.
"""

import warnings

import numpy as np
import polars as pl
import pytest

from analysis.isoflop.isoflop import fit_isoflops
from analysis.tables.published import PORIAN_EXPONENTS, load_porian_isoflops


def _agreement(method: str, window: float | None):
    data = load_porian_isoflops()
    devs, covered = [], 0
    for config, a_auth in PORIAN_EXPONENTS.items():
        points = data.filter(pl.col("config") == config).select("C", "N", "D", "loss")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_isoflops(points, window=window, method=method, n_boot=200, seed=0)
        devs.append(abs(fit.a - a_auth) / a_auth)
        covered += fit.a_ci[0] <= a_auth <= fit.a_ci[1]
    return np.array(devs), covered


def test_data_are_the_15_configurations():
    data = load_porian_isoflops()
    assert data.height == 1745 and set(data["config"].unique()) == set(PORIAN_EXPONENTS)
    per = data.group_by("config").agg(pl.col("C").n_unique().alias("budgets"), pl.len().alias("runs"))
    assert per["budgets"].min() == 11 and per["budgets"].max() == 12
    np.testing.assert_allclose(data["D"] * 6 * data["N"], data["C"], rtol=1e-12)


@pytest.mark.parametrize(("method", "median", "worst"), [("parabola", 0.020, 0.055), ("interp", 0.007, 0.033)])
def test_default_and_interp_agree_with_the_authors(method, median, worst):
    devs, covered = _agreement(method, 8.0)
    print(f"{method}: median {100 * np.median(devs):.2f}% worst {100 * devs.max():.2f}% covered {covered}/15")
    assert np.median(devs) <= median and devs.max() <= worst
    assert covered == 15


def test_noise_of_the_published_curves():
    data = load_porian_isoflops()
    sds = []
    for config in PORIAN_EXPONENTS:
        d4 = []
        for _, g in data.filter(pl.col("config") == config).group_by("C"):
            g = g.sort("N")
            x, y = np.log10(g["N"].to_numpy()), g["loss"].to_numpy()
            y = y[np.abs(x - x[np.argmin(y)]) <= 1.0]
            if y.size >= 5:
                d4.extend(np.diff(y, 4) / np.sqrt(70))
        sds.append(1.4826 * np.median(np.abs(d4)))
    print("noise SD per configuration:", np.round(sds, 4))
    assert 0.008 <= min(sds) and max(sds) <= 0.024 and 0.012 <= np.median(sds) <= 0.013
