"""Pure-bf16 training: SR-AdamW lands near fp32 AdamW, round-to-nearest measurably worse.

Task: a 16-32-4 tanh MLP student regresses a fixed random teacher of the same shape on
256 Gaussian inputs (MSE, full batch), 300 AdamW steps at lr 1e-3, no weight decay. The
student's weights start at 4× the default init, so most have |w| ≥ 0.5, where a bf16 ulp
is ≥ 2^-8 and an Adam step (≈ lr = 1e-3) is below half an ulp: nearest rounding cancels it
(Zamirai et al., arXiv 2010.06192), stochastic rounding keeps it in expectation.
The three arms share data, init and everything but the parameter precision and rounding;
bf16-RTN is ``optim.AdamW`` without SR (fp32 moments), so only the final rounding differs.
"""

from _regression import final_mse

import optim

STEPS, LR = 300, 1e-3
SR_TOL = 0.10
"""|loss_SR / loss_fp32 - 1| allowed. Measured over SR seeds 0-4: 0.7%, 1.9%, 2.9%, 1.7%, 2.1%
(lowbias32 bits; the former Philox bits: within 3%)."""
RTN_FACTOR = 2.0
"""loss_RTN / loss_fp32 required at least. Measured: about 4.4."""


def _train(mode: str) -> float:
    return final_mse(lambda ps: optim.AdamW(ps, lr=LR, weight_decay=0.0, stochastic_rounding=mode == "sr", seed=0),
                     bf16=mode != "fp32", steps=STEPS)


def test_sr_near_fp32_and_rtn_worse():
    fp32, sr, rtn = _train("fp32"), _train("sr"), _train("rtn")
    print(f"final MSE after {STEPS} steps: fp32 {fp32:.5f}  bf16+SR {sr:.5f}  bf16+RTN {rtn:.5f}")
    assert abs(sr / fp32 - 1) <= SR_TOL
    assert rtn >= RTN_FACTOR * fp32
