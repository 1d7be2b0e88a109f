"""optim.AdamW: equals torch.optim.AdamW in fp32; SR / master-weight modes for bf16; state_dict."""

import copy

import pytest
import torch

import optim
from optim.stochastic_rounding import stochastic_round_

SHAPES = [(16, 8), (8,), (3, 4, 5)]
STEPS = 25
TOL = 1e-6
"""Max abs difference to torch.optim.AdamW after 25 fp32 steps (same op order: expect ~0)."""


def _params(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in SHAPES]


def _grads(step):
    g = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(s, generator=g) for s in SHAPES]


def _run(opt, params, steps=STEPS, start=0):
    for t in range(start, start + steps):
        for p, g in zip(params, _grads(t)):
            p.grad = g.to(p.dtype)
        opt.step()


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_matches_torch_adamw_fp32(wd):
    ours, ref = _params(), _params()
    kw = {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": wd}
    _run(optim.AdamW([{"params": ours[:2]}, {"params": ours[2:], "lr": 1e-2}], **kw), ours)
    _run(torch.optim.AdamW([{"params": ref[:2]}, {"params": ref[2:], "lr": 1e-2}], foreach=False, **kw), ref)
    diff = max((a - b).abs().max().item() for a, b in zip(ours, ref))
    print(f"max |optim.AdamW - torch.optim.AdamW| after {STEPS} steps (wd={wd}): {diff:.3e}")
    assert diff <= TOL


def test_tensor_lr_and_scheduler():
    a, b = _params(), _params()
    opt_a = optim.AdamW(a, lr=torch.tensor(1e-2))
    opt_b = optim.AdamW(b, lr=1e-2)
    sched_a = torch.optim.lr_scheduler.StepLR(opt_a, step_size=5, gamma=0.5)
    sched_b = torch.optim.lr_scheduler.StepLR(opt_b, step_size=5, gamma=0.5)
    for t in range(12):
        _run(opt_a, a, steps=1, start=t)
        _run(opt_b, b, steps=1, start=t)
        sched_a.step()
        sched_b.step()
    assert torch.is_tensor(opt_a.param_groups[0]["lr"])
    assert abs(float(opt_a.param_groups[0]["lr"]) / (1e-2 * 0.25) - 1) < 1e-6  # fp32 tensor
    assert max((x - y).abs().max().item() for x, y in zip(a, b)) <= 1e-6


def test_sr_adamw_keeps_bf16_params_and_rounds_the_fp32_update():
    params = _params(torch.bfloat16)
    before = [p.detach().clone() for p in params]
    opt = optim.AdamW(params, lr=1e-2, weight_decay=0.1, stochastic_rounding=True, seed=5)
    _run(opt, params, steps=1)
    for i, (p, p0, g) in enumerate(zip(params, before, _grads(0))):
        assert p.dtype == torch.bfloat16
        st = opt.state[p]
        assert st["exp_avg"].dtype == torch.float32 and st["exp_avg_sq"].dtype == torch.float32
        # reference: the fp32 AdamW step from the bf16 value, rounded with the documented key
        w = p0.float() * (1 - 1e-2 * 0.1)
        m, v = 0.1 * g, 0.001 * g * g
        w = w - (1e-2 / 0.1) * m / (v.sqrt() / 0.001**0.5 + 1e-8)
        expect = stochastic_round_(torch.empty_like(p0), w, seed=5, step=1, param_id=i)
        assert torch.equal(p.detach(), expect)


def test_master_weights_track_fp32_adamw_exactly():
    ref = _params()
    params = [torch.nn.Parameter(p.detach().to(torch.bfloat16)) for p in ref]
    ref = [torch.nn.Parameter(p.detach().float()) for p in params]  # same start values
    opt = optim.AdamW(params, lr=1e-3, master_weights=True)
    ref_opt = optim.AdamW(ref, lr=1e-3)
    for t in range(STEPS):
        for p, q, g in zip(params, ref, _grads(t)):
            p.grad, q.grad = g.to(torch.bfloat16), g.to(torch.bfloat16).float()
        opt.step()
        ref_opt.step()
    for p, q in zip(params, ref):
        assert torch.equal(opt.state[p]["master"], q.detach())
        assert torch.equal(p.detach(), q.detach().to(torch.bfloat16))


def test_rtn_without_sr_cancels_small_updates():
    p = torch.nn.Parameter(torch.ones(1000, dtype=torch.bfloat16))
    opt = optim.AdamW([p], lr=1e-3, weight_decay=0.0)  # update 1e-3 < half an ulp (2^-8) at 1.0
    for _ in range(10):
        p.grad = torch.ones_like(p)
        opt.step()
    assert bool((p.detach() == 1.0).all())
    q = torch.nn.Parameter(torch.ones(1000, dtype=torch.bfloat16))
    opt = optim.AdamW([q], lr=1e-3, weight_decay=0.0, stochastic_rounding=True)
    for _ in range(10):
        q.grad = torch.ones_like(q)
        opt.step()
    # SR moves on average by the true 10·1e-3 (sd of the mean over 1000 params ~ 5e-4)
    assert abs(q.detach().float().mean().item() - (1 - 10e-3)) < 2.5e-3


@pytest.mark.parametrize("mode", [{}, {"stochastic_rounding": True}, {"master_weights": True}])
def test_state_dict_round_trip(mode):
    dtype = torch.float32 if not mode else torch.bfloat16
    a = _params(dtype)
    opt_a = optim.AdamW(a, lr=1e-2, **mode)
    _run(opt_a, a, steps=3)
    sd = copy.deepcopy(opt_a.state_dict())
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    opt_b = optim.AdamW(b, lr=1e-2, **mode)
    opt_b.load_state_dict(sd)
    for p in b:  # fp32 moments survive load_state_dict even for bf16 params
        assert opt_b.state[p]["exp_avg"].dtype == torch.float32
    _run(opt_a, a, steps=3, start=3)
    _run(opt_b, b, steps=3, start=3)
    for p, q in zip(a, b):
        assert torch.equal(p.detach(), q.detach())


def test_state_lazy_and_inputs_validated():
    params = _params()
    opt = optim.AdamW(params)
    assert len(opt.state_dict()["state"]) == 0  # lazy, as torch.optim: none before a grad
    with pytest.raises(ValueError):
        optim.AdamW(_params(), lr=-1.0)
    with pytest.raises(ValueError):
        optim.AdamW(_params(), stochastic_rounding=True, master_weights=True)
