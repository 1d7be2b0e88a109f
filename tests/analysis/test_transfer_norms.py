"""The norm check (analysis.transfer.norms) on synthetic sweeps whose optimal runs end at a
known output-layer norm: 30 at every size (norm transfer), or growing as N^0.3."""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.synthetic.transfer import TransferTruth, synthetic_sweep
from analysis.transfer.holdout import holdout_check
from analysis.transfer.norms import cell_log_norms, norm_check, output_norms
from analysis.transfer.transfer import fit_transfer

SIZES = np.geomspace(5e3, 3e5, 6)


def test_constant_norm_is_found_and_predicts_the_held_out_optimum():
    truth = TransferTruth()
    runs, norms = synthetic_sweep(truth, SIZES, rng=1)
    train, held = holdout_check(runs, ("N",), "optim.lr", 1)
    run_norms, layer = output_norms(norms)
    check = norm_check(train, run_norms, layer=layer)
    assert layer == "lm_head" and check.constant is True
    assert abs(np.exp(check.log_mean) / 30.0 - 1) < 0.02  # norm noise 1% per run
    full = fit_transfer(runs)
    g = cell_log_norms(full.cells, run_norms).filter(pl.col("N") == SIZES[-1])
    value, lo, hi, why = check.predict_hp(g, "optim.lr")
    star = truth.hp_star(np.array([[SIZES[-1]]]))[0]
    # ln hp error = (ln norm error) / slope 0.8: ~0.01 / 0.8; 0.05 is ~4 sd
    assert why is None and lo <= star <= hi and abs(np.log(value / star)) < 0.05


def test_a_norm_growing_with_size_is_not_constant():
    runs, norms = synthetic_sweep(TransferTruth(), SIZES, norm_size_slope=0.3, rng=2)
    check = norm_check(fit_transfer(runs), output_norms(norms)[0])
    assert check.constant is False
    (_, slope, lo, hi), = check.slopes
    assert lo <= 0.3 <= hi and abs(slope - 0.3) < 0.05


def test_tied_head_falls_back_to_tok_emb_and_unknown_norm_says_what_is_recorded():
    _, norms = synthetic_sweep(TransferTruth(), SIZES[:3], rng=3)
    tied = norms.with_columns(pl.lit("tok_emb").alias("layer"))
    assert output_norms(tied)[1] == "tok_emb"
    import pytest

    from analysis.errors import AnalysisInputError

    with pytest.raises(AnalysisInputError, match=r"no 'rms_to_im' norms recorded \(did you mean 'rms_to_inf'\?\)"):
        output_norms(norms, "rms_to_im")


def test_a_band_that_leaves_the_grid_or_folds_back_gives_no_interval():
    """The band's ends must each cross once, on both sides of hp*: the twin's batch-size
    check once printed hp* 3.29 with the interval (31.5, nan)."""
    truth = TransferTruth()
    runs, norms = synthetic_sweep(truth, SIZES, rng=1)
    check = norm_check(fit_transfer(runs), output_norms(norms)[0])
    nu = check.log_mean
    u = np.log([1.0, 2.0, 4.0, 8.0])
    rising = pl.DataFrame({"u": u, "log_norm": nu + np.array([-0.5, -0.1, 0.1, 0.5])})
    value, lo, hi, why = check.predict_hp(rising, "optim.lr")
    assert why is None and lo < value < hi  # a monotone norm through the band: an interval
    narrow = pl.DataFrame({"u": u, "log_norm": nu + np.array([-0.5, -0.001, 0.001, 0.5]) * check.half_width()})
    value, lo, hi, why = check.predict_hp(narrow, "optim.lr")  # band ends beyond the last cells
    assert why is None and value == value and np.isnan(lo) and np.isnan(hi)
    folded = pl.DataFrame({"u": u, "log_norm": nu + np.array([-2.0, 0.5, 2.0, 0.5]) * check.half_width()})
    value, lo, hi, why = check.predict_hp(folded, "optim.lr")  # crosses ν̄ once, its upper end twice
    assert why is None and 1.0 < value < 2.0 and np.isnan(lo) and np.isnan(hi)
