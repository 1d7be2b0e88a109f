"""The norm check (analysis.transfer.norms) on synthetic sweeps whose optimal runs end at a
known output-layer norm: 30 at every size (norm transfer), or growing as N^0.3."""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.transfer.holdout import holdout_check
from analysis.transfer.norms import cell_log_norms, norm_check, output_norms
from analysis.transfer.synthetic import TransferTruth, synthetic_sweep
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
