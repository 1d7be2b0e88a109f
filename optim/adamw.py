"""AdamW with fp32 math for low-precision params: stochastic rounding or fp32 master weights.

Update (Loshchilov & Hutter; the op order of ``torch.optim.AdamW``, single-tensor path),
per parameter p with fp32 working copy w, gradient g (upcast to fp32), step t:

    w ← w·(1 - η·λ)
    m ← lerp(m, g, 1 - β1);   v ← β2·v + (1 - β2)·g²
    w ← w - (η / (1 - β1^t)) · m / (sqrt(v) / sqrt(1 - β2^t) + eps)

m and v are fp32 whatever the param dtype (``torch.optim.AdamW`` keeps them in the
param dtype: late plateaus in bf16). How w is stored back:

- fp32 params: in place, identical to ``torch.optim.AdamW``.
- bf16, ``stochastic_rounding=True`` (pytorch/ao's SR-AdamW recipe): w = p
  upcast; p ← SR(w) keyed by (seed, step, param index, global element index), so DDP
  replicas and FSDP shards round identically (``optim.stochastic_round_``).
- bf16, ``master_weights=True``: the exact alternative. We keep an **fp32 master copy**
  (state ``master``, 4 bytes/param) rather than the 2-byte mantissa buffer: it is
  exact, survives any param dtype, and shards like the param under FSDP2; the bf16
  param is the nearest rounding of the master after every step.
- bf16 with neither: p ← nearest(w). Small updates cancel (the baseline SR fixes).
"""

from __future__ import annotations

import torch

from ._param_io import local, restore_fp32_state, write_param_

__all__ = ["AdamW"]


class AdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay) for fp32 or bf16 params; see the module docstring.

    Args:
        params: iterable of params or param-group dicts.
        lr: η (float or 0-D tensor; a tensor avoids torch.compile recompiles, pytorch #130467).
        betas: (β1, β2).
        eps: added to the bias-corrected sqrt(v).
        weight_decay: λ, decoupled: w ← w(1 - ηλ).
        stochastic_rounding: write bf16 params with SR (keyword-only).
        master_weights: keep an fp32 master for non-fp32 params; exact (keyword-only).
        seed: global SR seed; use the same on every rank.
    Defaults are torchao's ``_AdamW`` (lr 1e-3, (0.9, 0.999), 1e-8, wd 1e-2).
    """

    def __init__(
        self,
        params,
        lr: float | torch.Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        *,
        stochastic_rounding: bool = False,
        master_weights: bool = False,
        seed: int = 0,
    ):
        if not (float(lr) >= 0.0):
            raise ValueError(f"AdamW: invalid lr {lr}")
        if not all(0.0 <= float(b) < 1.0 for b in betas):
            raise ValueError(f"AdamW: betas must be in [0, 1), got {betas}")
        if not float(eps) >= 0.0 or not float(weight_decay) >= 0.0:
            raise ValueError(f"AdamW: eps and weight_decay must be >= 0, got {eps}, {weight_decay}")
        if stochastic_rounding and master_weights:
            raise ValueError("AdamW: choose stochastic_rounding or master_weights, not both")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)
        self.stochastic_rounding = bool(stochastic_rounding)
        self.master_weights = bool(master_weights)
        self.seed = int(seed)
        for p in self._params():  # pre-populated: identical state keys on every rank (DCP)
            self._init_state(p)

    def _params(self):
        for group in self.param_groups:
            yield from group["params"]

    def _init_state(self, p: torch.Tensor) -> None:
        st = self.state[p]
        if st:
            return
        st["step"] = torch.tensor(0.0, dtype=torch.float32)
        st["exp_avg"] = torch.zeros_like(p, dtype=torch.float32, memory_format=torch.preserve_format)
        st["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32, memory_format=torch.preserve_format)
        if self.master_weights and p.dtype != torch.float32:
            st["master"] = p.detach().to(torch.float32).clone()

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        restore_fp32_state(self, state_dict)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        param_id = 0  # position over all groups: the SR key, stable across ranks and resumes
        for group in self.param_groups:
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                pid, param_id = param_id, param_id + 1
                if p.grad is None:
                    continue
                st = self.state[p]
                self._init_state(p)
                st["step"] += 1
                t = int(st["step"].item())
                m, v = local(st["exp_avg"]), local(st["exp_avg_sq"])
                g = local(p.grad).to(torch.float32)
                if "master" in st:
                    w = local(st["master"])
                elif p.dtype == torch.float32:
                    w = local(p)
                else:
                    w = local(p).to(torch.float32)
                w.mul_(1 - lr * wd)
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                bias_correction1 = 1 - beta1**t
                bias_correction2_sqrt = (1 - beta2**t) ** 0.5
                step_size = lr / bias_correction1
                denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
                if torch.is_tensor(step_size):
                    w.addcdiv_(m * step_size, denom, value=-1.0)
                else:
                    w.addcdiv_(m, denom, value=-step_size)
                write_param_(
                    p,
                    w,
                    stochastic_rounding=self.stochastic_rounding,
                    seed=self.seed,
                    step=t,
                    param_id=pid,
                )
        return loss
