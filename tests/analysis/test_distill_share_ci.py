"""analysis.recipes.distill_share's 95% CI on the share of the ensembling gain a student keeps
(Kim et al. 2025, arXiv 2509.14786), on studies with a known true share: Fieller's interval
covers it at the stated rate; one seed without a replicate sigma gives no interval; a gain
within noise of 0 gives the unbounded line, never a finite one."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl
import pytest

from analysis.recipes.distill_share import share_ci, share_lines, student_shares
from analysis.recipes.infinite_compute import analyze
from analysis.recipes.replicates import Replicates, replicate_sigma

STUDIES = 200
COVERAGE = (0.90, 0.98)
"""Nominal 95%; the binomial SD of a rate from 200 studies is 0.015, so this is -3.3 and +2
SDs around it (measured over 4,000 studies of the first setting: 0.952)."""


def _study(rng, *, mu, sd, single, ensemble, sigma, m, seeds, groups=8, per_group=5):
    """One simulated study: the student's seeds from N(mu, sd); the best single model (a mean
    of m seeds) and the ensemble with the noise the method assumes (sigma/sqrt(m), sigma);
    sigma estimated from ``groups`` replicate cells of ``per_group`` seeds."""
    reps = [rng.normal(0.0, sigma, per_group) for _ in range(groups)]
    return share_ci(rng.normal(mu, sd, seeds), rng.normal(single, sigma / math.sqrt(m)),
                    rng.normal(ensemble, sigma), single_seeds=m, sigma=replicate_sigma(reps),
                    sigma_dof=groups * (per_group - 1))


@pytest.mark.parametrize("setting", [
    # the full twin's numbers (docs/demo_full_output.txt): gain 0.131, true share 0.373
    dict(mu=2.0102, sd=0.015, single=2.0592, ensemble=1.9278, sigma=0.02, m=1),
    # a gain of 0.06 nats, 3 sigma: often unbounded; a noisier student; a 5-seed single model
    dict(mu=2.03, sd=0.03, single=2.06, ensemble=2.00, sigma=0.02, m=5),
])
def test_ci_covers_the_true_share(setting):
    rng = np.random.default_rng(20250917)
    truth = (setting["single"] - setting["mu"]) / (setting["single"] - setting["ensemble"])
    cis = [_study(rng, **setting, seeds=3 + i % 3) for i in range(STUDIES)]  # 3-5 seeds
    rate = np.mean([ci.contains(truth) for ci in cis])
    assert COVERAGE[0] <= rate <= COVERAGE[1], rate
    for ci in cis:  # a bounded interval is Fieller's set itself
        assert ci.no_ci is None
        if not ci.unbounded:
            assert (ci.lo <= truth <= ci.hi) == ci.contains(truth)
            assert ci.lo <= ci.share <= ci.hi


def test_share_ci_no_interval_and_unbounded():
    one = share_ci([2.01], 2.0592, 1.9278)
    assert one.no_ci == "1 seed" and math.isnan(one.lo) and one.share == pytest.approx(0.0492 / 0.1314)
    no_sigma = share_ci([2.01, 2.02, 2.00], 2.0592, 1.9278)
    assert no_sigma.no_ci and "replicate" in no_sigma.no_ci
    # one seed with a replicate sigma: the student is one run of that noise
    borrowed = share_ci([2.01], 2.0592, 1.9278, sigma=0.02, sigma_dof=32)
    assert borrowed.student_sd_from == "replicates" and borrowed.lo < 0.3744 < borrowed.hi
    near_zero = share_ci([2.00, 2.01, 1.99], 2.00, 1.99, sigma=0.02, sigma_dof=32)
    assert near_zero.unbounded and near_zero.contains(1e6)


N = np.array([5e4, 1e5, 2.5e5, 5e5, 1e6])
STUDENT_N = 1e5


def _law(x, A, B, C):
    return A / np.asarray(x, float) ** B + C


def _analysis(student_losses: list[float], *, gain: float = 0.2):
    """A small sweep: the regularized recipe (wd 0.8) at 5 sizes, K = 1..4 ensembles whose
    K = 4 loss is ``gain`` below it, and one distill-ensemble block of N = 1e5 (its best
    single model: 3.4943) with one run per seed."""
    rows = []
    for n in N:
        for wd, law in ((0.1, (0.4, 0.5, 2.6)), (0.8, (0.3, 0.6, 2.3))):
            rows.append({"block": "tuned", "N": n, "D_unique": 32768.0, "state": "COMPLETED",
                         "name": f"n{n}_wd{wd}", "final_loss": float(_law(n / 1e6, *law)),
                         "optim.weight_decay": wd, "train.init_seed": 0})
    for s, loss in enumerate(student_losses):
        rows.append({"block": "distill-ensemble", "N": STUDENT_N, "D_unique": 32768.0,
                     "state": "COMPLETED", "name": f"student_s{s}", "final_loss": loss,
                     "optim.weight_decay": 1.0, "train.init_seed": s})
    ens = []
    for n in N:
        single = float(_law(n / 1e6, 0.3, 0.6, 2.3))
        for k in (1, 2, 3, 4):
            ens.append({"N": int(n), "members": k, "method": "logits", "member": None,
                        "loss": single - gain * (1 - 1 / k) / 0.75})
    return analyze(pl.DataFrame(rows), pl.DataFrame(ens))


def test_three_seeds_give_the_mean_and_a_ci_in_the_line():
    losses = [3.41, 3.43, 3.42]
    res = _analysis(losses)
    assert res.replicates.found  # the student's own seeds are replicates of one cell
    row = student_shares(res).row(0, named=True)
    single = float(_law(STUDENT_N / 1e6, 0.3, 0.6, 2.3))
    assert row["seeds"] == 3 and row["loss"] == pytest.approx(3.42)
    assert row["share"] == pytest.approx((single - 3.42) / (single - row["ensemble"]))
    ci = row["ci"]
    line = share_lines(res)[0]
    assert line.startswith(f"distill-ensemble student (N=100,000, 3 seeds): loss 3.4200 ± {ci.loss_half:.4f}")
    assert line.endswith(f"keeps {100 * row['share']:.0f}% of the ensembling gain "
                         f"(95% CI {100 * ci.lo:.0f}%-{100 * ci.hi:.0f}%)")
    assert student_shares(res).height == 1  # one row per block, not per seed


def test_one_seed_without_replicates_says_no_ci():
    res = _analysis([3.42])
    assert not res.replicates.found
    line = share_lines(res)[0]
    assert "(N=100,000, 1 seed): loss 3.4200," in line
    assert line.endswith("of the ensembling gain; no CI (1 seed)") and "95% CI" not in line


def test_a_gain_within_noise_gives_the_unbounded_line():
    res = _analysis([3.48, 3.49, 3.50], gain=0.01)  # the K=4 ensemble 0.01 below 1 model
    res = dataclasses.replace(res, replicates=Replicates(0.02, 40, 8, 32))
    row = student_shares(res).row(0, named=True)
    assert row["ci"].unbounded
    line = share_lines(res)[0]
    assert "95% CI unbounded: the gain" in line and "is within noise of 0" in line
    assert "inf" not in line and line.count("%") == 2  # the share and "95%", nothing huge
