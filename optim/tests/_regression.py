"""The pure-bf16 regression task of optim's SR tests (test_sr_training.py, test_bf16_moments.py).

A 16-32-4 tanh MLP student regresses a fixed random teacher of the same shape on 256 Gaussian
inputs (MSE, full batch), 300 steps. The student's weights start at 4x the default init, so
most have |w| >= 0.5, where a bf16 ulp is >= 2^-8 and an Adam step (~ lr = 1e-3) is below half
an ulp: nearest rounding cancels it (Zamirai et al., arXiv 2010.06192), stochastic rounding
keeps it in expectation.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

STEPS = 300


def final_mse(make_opt: Callable, *, bf16: bool, steps: int = STEPS) -> float:
    """Final MSE after ``steps`` full-batch steps of ``make_opt(params)`` (bf16 params if ``bf16``)."""
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = torch.randn(256, 16)
    y = teacher(x).detach()
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    if bf16:
        model = model.to(torch.bfloat16)
    opt = make_opt(model.parameters())
    xin = x.to(next(model.parameters()).dtype)
    for _ in range(steps):
        opt.zero_grad()
        loss = (model(xin).float() - y).square().mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return (model(xin).float() - y).square().mean().item()
