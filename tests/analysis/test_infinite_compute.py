"""analysis.recipes.infinite_compute on runs synthesised from known laws: recovered asymptotes,
ensemble limits and data-efficiency multipliers against closed forms."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analysis.recipes.infinite_compute import analyze
from analysis.recipes.names import JOINT
from analysis.report.infinite_compute_md import write_infinite_compute_report

N = np.array([5e4, 1e5, 2.5e5, 5e5, 1e6])  # identified.MIN_SIZES = 5 sizes
U0 = 32768.0


def _law(x, A, B, C):
    return A / np.asarray(x, float) ** B + C


def _runs() -> pl.DataFrame:
    rows = []
    for n in N:
        m = n / 1e6
        best_std = _law(m, 0.4, 0.5, 2.6)  # standard recipe: best at wd 0.1
        best_reg = _law(m, 0.3, 0.6, 2.3)  # regularized: best at wd 0.8
        for ep, pen in ((4, 0.05), (8, 0.0), (16, 0.08)):
            rows.append(dict(block="tuned", N=n, D_unique=U0, state="COMPLETED", name=f"n{n}_e{ep}_wd0.1",
                             final_loss=best_std + pen, **{"optim.weight_decay": 0.1, "data.epochs": ep}))
            rows.append(dict(block="tuned", N=n, D_unique=U0, state="COMPLETED", name=f"n{n}_e{ep}_wd0.8",
                             final_loss=best_reg + pen, **{"optim.weight_decay": 0.8, "data.epochs": ep}))
    # Standard recipe's data scaling: best loss vs U = 0.05/(U/1e6)^0.7 + 2.4 (U0 point above
    # must lie on it too: it is the minimum over N at U0).
    data_law = (0.05, 0.7, 2.4)
    ref = min(_law(n / 1e6, 0.4, 0.5, 2.6) for n in N)
    shift = ref - _law(U0 / 1e6, *data_law)
    for u in (16384.0, 65536.0, 131072.0):
        rows.append(dict(block="data", N=5e5, D_unique=u, state="COMPLETED", name=f"u{u}",
                         final_loss=_law(u / 1e6, *data_law) + shift,
                         **{"optim.weight_decay": None, "data.epochs": None}))
    rows.append(dict(block="tuned", N=5e5, D_unique=U0, state="DIVERGED", name="bad", final_loss=float("nan"),
                     **{"optim.weight_decay": 0.8, "data.epochs": 8}))
    rows.append(dict(block="distill-ensemble", N=1e5, D_unique=U0, state="COMPLETED", name="student",
                     final_loss=2.9, **{"optim.weight_decay": 0.1, "data.epochs": 8}))
    return pl.DataFrame(rows), data_law, shift, ref


def _ensembles() -> pl.DataFrame:
    rows = []
    for n in N:
        c_k = _law(n / 1e6, 0.2, 0.8, 2.1)  # K -> inf asymptote of size n
        for k in (1, 2, 3, 4):
            rows.append(dict(N=int(n), members=k, method="logits", member=None, loss=_law(k, 0.3, 1.0, c_k)))
        for m in range(4):
            rows.append(dict(N=int(n), members=1, method="member", member=m, loss=_law(1, 0.3, 1.0, c_k) + 0.01 * m))
    return pl.DataFrame(rows)


def test_recovers_asymptotes_and_multipliers():
    runs, data_law, shift, ref = _runs()
    res = analyze(runs, _ensembles())
    assert res.U0 == U0
    # Exact synthetic laws: the engine recovers C to 1e-4 (5 points, 3 parameters, no noise).
    assert res.fits["standard"].E == pytest.approx(2.6, abs=1e-4)
    assert res.fits["regularized"].E == pytest.approx(2.3, abs=1e-4)
    for n, fit in res.k_fits.items():
        assert fit.E == pytest.approx(_law(n / 1e6, 0.2, 0.8, 2.1), abs=1e-4)
    assert res.fits[JOINT].E == pytest.approx(2.1, abs=1e-3)
    assert res.ref_loss == pytest.approx(ref)
    assert res.data_fit.E == pytest.approx(data_law[2] + shift, abs=1e-4)
    # Multiplier = D_eff(L)/D_eff(L_ref) with D_eff(L) = (A/(L - C))^(1/B), in closed form.
    A, B, C = data_law[0], data_law[1], data_law[2] + shift
    mult = dict(zip(res.multipliers["recipe"], res.multipliers["data_multiplier"]))
    assert mult["standard, best observed (1x)"] == pytest.approx(1.0)
    want = ((A / (2.9 - C)) ** (1 / B)) / ((A / (ref - C)) ** (1 / B))
    assert mult["distill-ensemble student"] == pytest.approx(want, rel=1e-3)
    # 2.1 is below the data law's floor C: out of the standard recipe's reach at any U, so no
    # number is printed, and the reason names the floor
    assert math.isnan(mult[f"{JOINT} asymptote"])
    why = dict(zip(res.multipliers["recipe"], res.multipliers["why"]))[f"{JOINT} asymptote"]
    assert "floor" in why, why
    assert res.data_law is not None and res.data_law.floor  # exact data with a floor: kept
    assert res.asymptotes["recipe"].to_list()[0] == JOINT  # best first
    assert any("not COMPLETED" in n for n in res.notes)


def test_report_files(tmp_path):
    runs, *_ = _runs()
    runs.write_parquet(tmp_path / "runs.parquet")
    (tmp_path / "ensembles").mkdir()
    _ensembles().write_parquet(tmp_path / "ensembles" / "evals.parquet")
    path, _ = write_infinite_compute_report(tmp_path)
    text = path.read_text()
    assert path == tmp_path / "report" / "infinite_compute.md"
    assert (tmp_path / "report" / "recipes.png").stat().st_size > 10_000
    for heading in ("Asymptotes", "Ensembles", "Distilled students", "Data efficiency"):
        assert heading in text


def test_unidentified_fits_are_flagged_and_left_out_of_the_joint_fit():
    from analysis.fit.power_law import fit_asymptote
    from analysis.recipes.infinite_compute import unidentified

    # A straight line over K = 1..3 does not bend: C runs to its bound 0.
    assert "bound 0" in unidentified(fit_asymptote([1, 2, 3], [2.7, 2.6, 2.5]))
    # Non-monotone in N (the largest model is worst): B -> 0, C is a mean level.
    assert "does not fall" in unidentified(fit_asymptote([0.05, 0.1, 0.25, 0.5], [2.44, 2.41, 2.47, 2.59]))
    assert unidentified(fit_asymptote([1, 2, 3, 4], _law([1, 2, 3, 4], 0.3, 1.0, 2.4))) is None
    # A shallow law (B = 0.15) over 16x with 0.006-nat scatter: C's 95% CI (1.31, 2.72) is
    # wider than the 0.17-nat fall the fit shows across the data: nothing pins C.
    x = np.array([1, 2, 4, 8, 16.0])
    shallow = fit_asymptote(x, _law(x, 0.5, 0.15, 1.9) + np.array([0.004, -0.006, 0.005, -0.003, 0.002]))
    lo, hi = shallow.ci()
    assert (hi - lo) / 2 > shallow(x[0]) - shallow(x[-1])
    assert "CI half-width of C exceeds the fitted fall" in unidentified(shallow)
    # The demo's standard recipe (wd 0.1, U = 32,768; docs/demo_output.txt): the best loss
    # falls to 15k, then rises by 0.10 nats at 80k (overfitting), more than the 0.06 scatter.
    n = np.array([2220, 4760, 9660, 14928, 26232, 51936, 80280, 107856]) / 1e6
    std = np.array([2.5864, 2.3660, 2.2776, 2.2451, 2.3302, 2.2941, 2.3486, 2.1887])
    assert "rises again" in unidentified(fit_asymptote(n, std))
    # The same law, 10x less scatter: the interval shrinks inside the fall, identified.
    tight = fit_asymptote(x, _law(x, 0.5, 0.15, 1.9) + np.array([0.0004, -0.0006, 0.0005, -0.0003, 0.0002]))
    assert unidentified(tight) is None
    runs, *_ = _runs()
    ens = _ensembles()
    n0 = int(N[0])
    ens = ens.with_columns(
        pl.when((pl.col("N") == n0) & (pl.col("method") == "logits"))
        .then(pl.col("members").replace_strict({1: 2.70, 2: 2.62, 3: 2.66, 4: 2.72}, return_dtype=pl.Float64))
        .otherwise(pl.col("loss")).alias("loss"))  # members 3 and 4 broken: the loss rises with K
    res = analyze(runs, ens)
    assert any(f"N={n0:,} vs K" in n and "joint" in n for n in res.notes)
    assert res.fits[JOINT].x.size == N.size - 1  # the other sizes


def test_student_share_of_the_ensembling_gain():
    from analysis.recipes.distill_share import share_lines, student_shares

    runs, *_ = _runs()
    res = analyze(runs, _ensembles())
    n = 1e5  # the student's size (runs above)
    single = _law(n / 1e6, 0.3, 0.6, 2.3)  # the regularized recipe's best at n
    ens4 = _law(4, 0.3, 1.0, _law(n / 1e6, 0.2, 0.8, 2.1))  # its K = 4 ensemble
    row = student_shares(res).row(0, named=True)
    assert row["K"] == 4 and row["why"] is None
    assert row["single"] == pytest.approx(single, abs=1e-12) and row["ensemble"] == pytest.approx(ens4, abs=1e-12)
    assert row["share"] == pytest.approx((single - 2.9) / (single - ens4), rel=1e-12)
    assert f"keeps {100 * row['share']:.0f}% of the ensembling gain" in share_lines(res)[0]
    # Without ensembles there is no gain to share: the reason, not a number.
    lone = student_shares(analyze(runs, None)).row(0, named=True)
    assert lone["share"] is None and "no ensemble of N=100,000" in lone["why"]


def test_seed_mean_of_the_regularized_cell():
    from analysis.recipes.names import SEED_MEAN

    runs, *_ = _runs()
    offsets = [0.0, 0.02, 0.04, -0.01]  # member 0 is the regularized best run itself
    # (re-evaluated by the ensemble evaluator: 2e-6 off the run's own final loss)
    rows = []
    for n in N:
        best_reg = _law(n / 1e6, 0.3, 0.6, 2.3)
        rows += [dict(N=int(n), members=1, method="member", member=m, loss=best_reg + d + 2e-6 * (m == 0))
                 for m, d in enumerate(offsets)]
        rows += [dict(N=int(n), members=k, method="logits", member=None, loss=best_reg - 0.05 * (1 - 1 / k))
                 for k in (1, 2, 3, 4)]
    res = analyze(runs, pl.DataFrame(rows))
    means = res.best_per_n.filter(pl.col("recipe") == SEED_MEAN).sort("N")
    expect = _law(N / 1e6, 0.3, 0.6, 2.3) + np.mean(offsets) + 2e-6 / 4
    np.testing.assert_allclose(means["loss"], expect, rtol=0, atol=1e-12)
    assert set(means["name"]) == {"mean of 4 seeds"}
    assert res.fits[SEED_MEAN].E == pytest.approx(2.3 + np.mean(offsets), abs=1e-5)
    # An ensemble in another cell (member 0 is not the best run): no seed mean is formed.
    other = analyze(runs, pl.DataFrame(rows).with_columns(pl.col("loss") + 0.5))
    assert SEED_MEAN not in other.fits and other.best_per_n.filter(pl.col("recipe") == SEED_MEAN).height == 0


def test_no_reference_run_at_u0_gives_reasons_not_a_crash():
    """A tuned block with no run at the reference weight decay (e.g. a standard recipe set in a
    block's base, read from an old plan with null axis columns): every multiplier row says
    why it has no value; the analysis does not raise."""
    runs, *_ = _runs()
    runs = runs.filter(~((pl.col("block") == "tuned") & (pl.col("optim.weight_decay") == 0.1)))
    res = analyze(runs, _ensembles())
    mult = res.multipliers
    assert mult.height >= 2 and mult["data_multiplier"].is_nan().all()
    assert all("reference recipe at the base budget" in w or "no loss" in w for w in mult["why"])


def test_the_base_budget_is_the_most_shared_and_the_largest_on_a_tie():
    """``names.base_budget``, the one rule of analyze's U0 and the adaptive study's U: the
    unique-token budget most runs share; of two shared by as many runs, the larger."""
    from analysis.recipes.names import base_budget

    assert base_budget(pl.Series([1e6, 2e6, 2e6, 4e6])) == 2e6
    assert base_budget(pl.Series([4e6, 1e6, 1e6, 4e6, 3e6])) == 4e6
