"""Recipes against Kim et al. 2025 (arXiv 2509.14786) and the Chinchilla allocation
(Hoffmann et al. 2022, arXiv 2203.15556)."""

import numpy as np
import pytest
from scipy.optimize import brentq

from analysis.fit.power_law import PowerLawFit, ensemble_asymptote, fit_asymptote, joint_asymptote
from analysis.laws.allocation import compute_optimal
from analysis.recipes.data_multiplier import data_efficiency, effective_data
from analysis.recipes.infinite_compute import compare_asymptotes
from analysis.tables.published import EPOCH, HOFFMANN_UNROUNDED, KIM


def test_joint_n_k_asymptote_matches_kim():
    # Per-size K -> inf asymptotes at 209.7M tokens vs N in billions: 0.016/N^1.59 + 3.169.
    fit = joint_asymptote(KIM["model_sizes_b"], KIM["ensemble_asymptotes_200m"])
    assert fit.E == pytest.approx(3.169, abs=0.002)
    assert round(fit.E, 2) == KIM["joint_asymptote"]
    assert fit.A == pytest.approx(0.016, rel=0.05)
    assert fit.B == pytest.approx(1.59, abs=0.02)
    lo, hi = fit.ci()
    assert lo < fit.E < hi


def test_ensemble_law_over_k_recovers_its_asymptote():
    K = np.arange(1, 6)
    fit = ensemble_asymptote(K, 0.4 / K + 3.27)  # A/K + C: B held at 1
    assert fit.E == pytest.approx(3.27, abs=1e-6) and fit.A == pytest.approx(0.4, rel=1e-6)
    assert fit.B == 1.0 and fit.n_free == 2 and fit.dof == 3
    # 5 members with 0.005-nat scatter: B = 1 pins C to within 0.05 nats (95%); a free B
    # leaves C's interval several times wider (the reason the ensemble law fixes it).
    noisy = 0.4 / K + 3.27 + np.array([0.004, -0.005, 0.003, 0.002, -0.004])
    lo, hi = ensemble_asymptote(K, noisy).ci()
    assert lo < 3.27 < hi and hi - lo < 0.05
    free_lo, free_hi = fit_asymptote(K, noisy).ci()
    assert free_hi - free_lo > 5 * (hi - lo)


def test_effective_data_inverts_the_data_scaling_law():
    D = np.array([0.2097152, 0.4194304, 0.8388608, 1.6777216])  # billions
    true = PowerLawFit(2.0, 0.23, 1.9, np.zeros((3, 3)), D, 2.0 / D**0.23 + 1.9)
    fit = fit_asymptote(D, true(D))
    np.testing.assert_allclose(effective_data(fit, true(D)), D, rtol=1e-4)
    assert data_efficiency(fit, true(D[3]), true(D[0])) == pytest.approx(8.0, rel=1e-4)
    assert np.isnan(effective_data(fit, 1.0))  # below the asymptote: unreachable


def test_published_multipliers_are_consistent_under_our_definition():
    # The standard recipe's best losses at 419M..1.68B tokens are not published as numbers,
    # so 5.17x cannot be recomputed from losses. Instead: the two published multipliers
    # (2.29x for 3.43, 5.17x for 3.17, both relative to 3.74974) determine the data law's
    # exponent B and asymptote C under multiplier = D_eff(L)/D_eff(L_ref); the paper reports
    # exponents ~0.23-0.24 and asymptotes ~1.89-1.96 for these fits [secondary source].
    ref = KIM["standard_reference"]

    def gap(C):
        return np.log((ref - C) / (3.17 - C)) / np.log((ref - C) / (3.43 - C)) - np.log(
            5.17
        ) / np.log(2.29)

    C = brentq(gap, 0.5, 3.1)
    B = np.log((ref - C) / (3.43 - C)) / np.log(2.29)
    assert 0.225 <= B <= 0.245 and 1.88 <= C <= 1.97
    law = PowerLawFit((ref - C) * 0.2097152**B, B, C, np.zeros((3, 3)), np.ones(1), np.ones(1))
    joint = joint_asymptote(KIM["model_sizes_b"], KIM["ensemble_asymptotes_200m"]).E
    assert float(data_efficiency(law, joint, ref)) == pytest.approx(5.17, rel=0.01)


def test_compute_optimal_allocation():
    C = np.array([1e21, 5.76e23])
    for params, a_pub in ((HOFFMANN_UNROUNDED, 0.46), (EPOCH, 0.513)):
        n, d = compute_optimal(params, C)
        np.testing.assert_allclose(6 * n * d, C, rtol=1e-12)
        a = np.log(n[1] / n[0]) / np.log(C[1] / C[0])
        assert a == pytest.approx(a_pub, abs=0.005)


def test_compare_asymptotes_table():
    joint = joint_asymptote(KIM["model_sizes_b"], KIM["ensemble_asymptotes_200m"])
    table = compare_asymptotes(
        {"standard": KIM["standard_reference"], "regularized": 3.43, "ensembles": joint}
    )
    assert table["recipe"].to_list() == ["ensembles", "regularized", "standard"]
    row = table.row(0, named=True)
    assert row["lo"] < row["asymptote"] < row["hi"] and row["method"] == "Gauss-Newton covariance"
