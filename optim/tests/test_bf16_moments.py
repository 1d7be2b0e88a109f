"""SR-AdamW with bf16 moments (``optim.AdamW(moment_dtype=torch.bfloat16)``).

Before, SR-AdamW kept fp32 moments: no state saved against fp32 AdamW (torchao's bf16 SR AdamW
holds half). Now the moments may be bf16, written from the fp32 update by the same
counter-based stochastic rounding as the params (keys ``optim.adamw.moment_sr_id``).

- Unbiased: over ``N`` seeds, the mean of each SR'd moment is its fp32 update. One draw errs
  by less than one bf16 ulp u with mean 0 and variance <= u²/4, so the mean of N draws has a
  standard deviation <= u/(2·sqrt(N)): each element's |mean error| must be <= ``Z`` = 5 of
  those (for N = 256: 0.16 u; seen: 0.076 u for exp_avg, 0.083 u for exp_avg_sq).
  Round-to-nearest fails that bound on over a quarter of the elements (checked: the test can
  fail).
- State bytes: exp_avg and exp_avg_sq take exactly half of fp32 AdamW's (counted).
- Loss: the tanh-MLP regression of test_sr_training.py (300 steps, lr 1e-3, bf16 weights) lands
  within ``LOSS_TOL`` = 10% of fp32 ``torch.optim.AdamW``'s (torchao is not installed here, so
  its bf16 SR AdamW is not compared; seen: see the printed losses).
- Resume: 3 steps, state_dict through ``torch.load(weights_only=True)``, 3 more steps equal 6
  uninterrupted steps bit for bit (the SR keys take the integer step).
"""

import io
import math

import pytest
import torch
from _regression import final_mse
from torch import nn

import optim

N = 256
Z = 5.0
LOSS_TOL = 0.10
BETAS = (0.9, 0.999)


def _one_step(moment_dtype, seed, m0, v0, g):
    """One AdamW step from moments (m0, v0) with grad g on an fp32 param; its moments."""
    p = nn.Parameter(torch.zeros_like(g))
    opt = optim.AdamW([p], lr=1e-3, betas=BETAS, weight_decay=0.0, seed=seed, moment_dtype=moment_dtype)
    p.grad = torch.zeros_like(g)
    opt.step()  # creates the state (step 1)
    st = opt.state[p]
    st["exp_avg"].copy_(m0)
    st["exp_avg_sq"].copy_(v0)
    p.grad = g
    opt.step()
    return st["exp_avg"].float(), st["exp_avg_sq"].float()


def _ulp(x: torch.Tensor) -> torch.Tensor:
    """The bf16 spacing at |x| (8 significant bits)."""
    return torch.exp2(torch.floor(torch.log2(x.abs())) - 7)


def test_sr_moment_update_is_unbiased():
    gen = torch.Generator().manual_seed(0)
    m0 = torch.randn(32, 16, generator=gen).bfloat16()  # bf16 moments as a previous step left them
    v0 = torch.rand(32, 16, generator=gen).bfloat16() + 0.5
    g = torch.randn(32, 16, generator=gen)
    m_want, v_want = _one_step(torch.float32, 0, m0.float(), v0.float(), g)  # the fp32 update
    draws = [_one_step(torch.bfloat16, s, m0, v0, g) for s in range(N)]
    for k, want in ((0, m_want), (1, v_want)):
        got = torch.stack([d[k] for d in draws])  # [N, 32, 16]
        assert not torch.equal(got[0], got[1])  # the seeds draw different roundings
        ulp = _ulp(want)
        assert ((got - want).abs() < ulp).all()  # each draw: one of the two neighbours
        err = (got.mean(0) - want).abs() / ulp
        bound = Z / (2 * math.sqrt(N))
        print(f"moment {k}: max |mean error| {err.max().item():.3f} ulp (bound {bound:.3f})")
        assert err.max().item() <= bound
        rtn = (want.bfloat16().float() - want).abs() / ulp  # round-to-nearest: biased
        assert (rtn > bound).float().mean().item() > 0.25  # seen: 38% (v) to ~70% (m) of elements


def _state_bytes(opt, keys=("exp_avg", "exp_avg_sq")) -> int:
    return sum(st[k].numel() * st[k].element_size() for st in opt.state.values() for k in keys)


def _step_all(model, opt):
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()


def test_moment_state_bytes_are_half_of_fp32_adamw():
    model = nn.Sequential(nn.Embedding(100, 32), nn.Linear(32, 64), nn.Linear(64, 100)).to(torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    fp32 = optim.AdamW(model.parameters(), stochastic_rounding=True)
    half = optim.AdamW(model.parameters(), stochastic_rounding=True, moment_dtype=torch.bfloat16)
    _step_all(model, fp32)
    _step_all(model, half)
    assert _state_bytes(fp32) == 8 * n and _state_bytes(half) == 4 * n
    assert 2 * _state_bytes(half) == _state_bytes(fp32)


def test_loss_with_bf16_moments_is_close_to_fp32_adamw():
    fp32 = final_mse(lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.0), bf16=False)
    sr32 = final_mse(lambda ps: optim.AdamW(ps, lr=1e-3, weight_decay=0.0, stochastic_rounding=True), bf16=True)
    sr16 = final_mse(lambda ps: optim.AdamW(ps, lr=1e-3, weight_decay=0.0, stochastic_rounding=True,
                                              moment_dtype=torch.bfloat16), bf16=True)
    print(f"final MSE: fp32 torch.optim.AdamW {fp32:.5f}, SR-AdamW fp32 moments {sr32:.5f}, "
          f"bf16 SR moments {sr16:.5f}")
    assert abs(sr16 / fp32 - 1) <= LOSS_TOL


def _run(steps, state=None, moment_dtype=torch.bfloat16):
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4)).to(torch.bfloat16)
    opt = optim.AdamW(model.parameters(), lr=1e-2, stochastic_rounding=True, seed=7, moment_dtype=moment_dtype)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
    start = 0 if state is None else state["done"]
    for t in range(start, start + steps):
        g = torch.Generator().manual_seed(t)
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=g).to(torch.bfloat16)
        opt.step()
    return model, opt


def test_resume_is_bit_identical_through_weights_only_load():
    whole, whole_opt = _run(6)
    half, half_opt = _run(3)
    buf = io.BytesIO()
    torch.save({"model": half.state_dict(), "opt": half_opt.state_dict(), "done": 3}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    resumed, resumed_opt = _run(3, state)
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(whole_opt.state.values(), resumed_opt.state.values()):
        assert a["exp_avg"].dtype == torch.bfloat16 and torch.equal(a["exp_avg"], b["exp_avg"])
        assert torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])


def test_moment_dtype_is_a_checked_saved_setting():
    _, fp32_opt = _run(1, moment_dtype=torch.float32)
    _, bf16_opt = _run(1)
    with pytest.raises(ValueError, match="moment_dtype"):
        bf16_opt.load_state_dict(fp32_opt.state_dict())
    with pytest.raises(ValueError, match="moment_dtype"):
        fp32_opt.load_state_dict(bf16_opt.state_dict())
    assert "moment_dtype" not in fp32_opt.state_dict()["settings"]  # older fp32 checkpoints still load
    with pytest.raises(ValueError, match="moment_dtype must be"):
        optim.AdamW([nn.Parameter(torch.ones(2))], moment_dtype=torch.float16)
