"""SR-AdamW's loss against fp32 AdamW and torchao's bf16 SR AdamW, over seeds, on the
pure-bf16 regression of optim's SR tests (``optim/tests/_regression.py``: a 16-32-4 tanh MLP
regressing a random teacher, weights at 4x init so most Adam steps are below half a bf16 ulp;
300 full-batch steps, lr 1e-3, no weight decay).

    python bench/sr_adamw_loss.py [--seeds 24]

Rows (final MSE, mean and SD over seeds; deterministic rows once):
  fp32 torch.optim.AdamW, fp32 weights            the target
  torch.optim.AdamW on bf16 weights               round to nearest: the steps vanish
  optim.AdamW SR, fp32 / bf16 moments             ``stochastic_rounding=True, seed=s``
  torchao _AdamW(bf16_stochastic_round=True)      only where torchao imports (not a
                                                  dependency); its rounding draws from torch's
                                                  global generator, seeded 1000 + s
  the same hand-written AdamW update, rounded by  isolates the random bits: same math, only
  optim's stochastic_round_ / torchao's function  the rounding function differs (torchao's
                                                  row only where it imports)

Nothing is asserted: optim/tests/test_bf16_moments.py holds the loss bound; this prints the
comparison optim/README.md quotes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "optim" / "tests"))

from _regression import final_mse  # noqa: E402

import optim  # noqa: E402
from optim.stochastic_rounding import stochastic_round_  # noqa: E402

LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8


class HandAdamW(torch.optim.Optimizer):
    """AdamW (no weight decay) on bf16 weights: fp32 moments and update, then ``rounder``
    writes the new fp32 weight into the bf16 param (``rounder(param, new, step, param_id)``)."""

    def __init__(self, params, rounder):
        super().__init__(params, {"lr": LR})
        self.rounder, self.t = rounder, 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = BETAS
        for pid, p in enumerate(self.param_groups[0]["params"]):
            st = self.state[p]
            if not st:
                st["m"] = torch.zeros_like(p, dtype=torch.float32)
                st["v"] = torch.zeros_like(p, dtype=torch.float32)
            g = p.grad.float()
            st["m"].lerp_(g, 1 - b1)
            st["v"].lerp_(g * g, 1 - b2)
            m_hat, v_hat = st["m"] / (1 - b1**self.t), st["v"] / (1 - b2**self.t)
            self.rounder(p, p.float() - LR * m_hat / (v_hat.sqrt() + EPS), self.t, pid)


def _stats(values: list[float]) -> str:
    return f"{statistics.mean(values):.4f} (SD {statistics.stdev(values):.4f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=24)
    n = ap.parse_args().seeds
    try:
        from torchao.optim import _AdamW  # type: ignore[import-not-found]
        from torchao.optim.quant_utils import _fp32_to_bf16_sr  # type: ignore[import-not-found]
    except ImportError:
        _AdamW = _fp32_to_bf16_sr = None

    def seeded(make, s):
        def build(ps):
            torch.manual_seed(1000 + s)  # after the model's init: only the optimizer's draws
            return make(ps, s)
        return build

    def torch_adamw(ps):
        return torch.optim.AdamW(ps, lr=LR, weight_decay=0.0)

    def over_seeds(make) -> str:
        return _stats([final_mse(seeded(make, s), bf16=True) for s in range(n)])

    rows = {
        "fp32 torch.optim.AdamW, fp32 weights": f"{final_mse(torch_adamw, bf16=False):.4f}",
        "torch.optim.AdamW on bf16 weights (nearest)": f"{final_mse(torch_adamw, bf16=True):.4f}",
    }
    for label, moments in (("fp32 moments", torch.float32), ("bf16 moments", torch.bfloat16)):
        rows[f"optim.AdamW SR, {label}"] = over_seeds(
            lambda ps, s, m=moments: optim.AdamW(ps, lr=LR, weight_decay=0.0, stochastic_rounding=True,
                                                 seed=s, moment_dtype=m))
    if _AdamW is not None:
        rows["torchao _AdamW(bf16_stochastic_round=True)"] = over_seeds(
            lambda ps, s: _AdamW(ps, lr=LR, weight_decay=0.0, bf16_stochastic_round=True))

    def ours(s):
        return lambda p, new, t, pid: stochastic_round_(p, new, seed=s, step=t, param_id=pid)

    rows["hand-written AdamW, optim's rounding"] = over_seeds(lambda ps, s: HandAdamW(ps, ours(s)))
    if _fp32_to_bf16_sr is not None:
        rows["hand-written AdamW, torchao's rounding"] = over_seeds(
            lambda ps, s: HandAdamW(ps, lambda p, new, t, pid: p.copy_(_fp32_to_bf16_sr(new))))
    print(f"final MSE after 300 steps, {n} seeds (torch {torch.__version__}"
          + ("" if _AdamW is None else ", torchao present") + ")")
    print("| optimizer | final MSE |\n|---|---|")
    for name, value in rows.items():
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
