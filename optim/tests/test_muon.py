"""optim.Muon against torch.optim.Muon and the update rule of KellerJordan/Muon
and Moonlight (arXiv 2502.16982).

torch.optim.Muon always runs Newton-Schulz in bf16. For the fp32 comparison its NS is
replaced by the same algorithm without the bf16 cast (``_torch_ns_fp32`` below: torch's
code with ``.bfloat16()`` removed), so the oracle checks momentum, Nesterov, weight decay
and the lr adjustment exactly; NS itself is checked against the SVD in
test_newton_schulz.py. Tolerances:
  fp32 vs torch, 20 steps: max|W - W_torch| / max|W_torch| <= 1e-5 (the acceptance bar), and
  the displacement max|ΔW - ΔW_torch| / max|ΔW_torch| <= 1e-4 (measured 1.0e-5: torch's EMA
  momentum is (1-μ) times our sum form and rounds differently before NS's scale removal).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import optim
from optim.muon import shape_scale
from optim.newton_schulz import newton_schulz
from optim.routing import muon_param_groups, route_params

SHAPES = [(16, 32), (48, 16), (24, 24)]


def _torch_ns_fp32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim._muon._zeropower_via_newtonschulz in fp32 (its bf16 cast removed)."""
    a, b, c = ns_coefficients
    x = grad.float()
    if grad.size(0) > grad.size(1):
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if grad.size(0) > grad.size(1) else x


def _problem(seed=0):
    gen = torch.Generator().manual_seed(seed)
    w0 = [torch.randn(*s, generator=gen) * 0.1 for s in SHAPES]
    xs = [torch.randn(s[1], 8, generator=gen) for s in SHAPES]
    ys = [torch.randn(s[0], 8, generator=gen) for s in SHAPES]
    return w0, xs, ys


def _train(make_opt, steps=20, seed=0, scheduler=None):
    w0, xs, ys = _problem(seed)
    params = [nn.Parameter(w.clone()) for w in w0]
    opt = make_opt(params)
    sched = scheduler(opt) if scheduler else None
    for _ in range(steps):
        opt.zero_grad()
        sum(((p @ x - y) ** 2).sum() for p, x, y in zip(params, xs, ys)).backward()
        opt.step()
        if sched:
            sched.step()
    return w0, [p.detach().clone() for p in params], opt


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("scale,adjust", [("jordan", None), ("moonlight", "match_rms_adamw")])
def test_matches_torch_muon_fp32_20_steps(monkeypatch, scale, adjust, nesterov):
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _torch_ns_fp32)
    kw = {"lr": 0.02, "weight_decay": 0.1, "momentum": 0.95, "nesterov": nesterov}
    w0, ref, _ = _train(lambda ps: torch.optim.Muon(ps, adjust_lr_fn=adjust, **kw))
    _, got, _ = _train(lambda ps: optim.Muon(ps, shape_scale=scale, ns_dtype=torch.float32, **kw))
    for w, r, g in zip(w0, ref, got):
        rel = ((g - r).abs().max() / r.abs().max()).item()
        disp = ((g - r).abs().max() / (r - w).abs().max()).item()
        print(f"muon vs torch {scale} nesterov={nesterov} {tuple(w.shape)}: rel {rel:.2e} disp {disp:.2e}")
        assert rel <= 1e-5
        assert disp <= 1e-4


def test_spectral_scale_and_decoupled_weight_decay_single_step():
    gen = torch.Generator().manual_seed(1)
    for shape in [(48, 16), (16, 48)]:
        w0 = torch.randn(*shape, generator=gen)
        g = torch.randn(*shape, generator=gen)
        p = nn.Parameter(w0.clone())
        opt = optim.Muon([p], lr=0.1, weight_decay=0.5, shape_scale="spectral", ns_dtype=torch.float32)
        p.grad = g.clone()
        opt.step()
        # first step: M = G, U = G + μG (Nesterov) -> NS(U) = NS(G) by scale invariance
        o = newton_schulz(g, dtype=torch.float32)
        want = w0 * (1 - 0.1 * 0.5) - 0.1 * math.sqrt(shape[0] / shape[1]) * o
        torch.testing.assert_close(p.detach(), want, rtol=1e-5, atol=1e-6)


def test_per_group_newton_schulz_schedules():
    gen = torch.Generator().manual_seed(7)
    w = [torch.randn(12, 20, generator=gen) for _ in range(3)]
    g = [torch.randn(12, 20, generator=gen) for _ in range(3)]
    ps = [nn.Parameter(x.clone()) for x in w]
    opt = optim.Muon(
        [{"params": ps[:1]}, {"params": ps[1:2], "coefficients": "polar_express"},
         {"params": ps[2:], "coefficients": "polar_express_original", "ns_steps": 8}],
        lr=0.1, ns_dtype=torch.float32,
    )
    for p, gi in zip(ps, g):
        p.grad = gi.clone()
    opt.step()
    for p, x, gi, (preset, steps) in zip(
        ps, w, g, [("jordan", 5), ("polar_express", 5), ("polar_express_original", 8)]
    ):
        want = x - 0.1 * newton_schulz(gi, steps, preset, dtype=torch.float32)
        torch.testing.assert_close(p.detach(), want, rtol=1e-5, atol=1e-6)


def test_shape_scale_formulas():
    assert shape_scale("jordan", 48, 16) == math.sqrt(3) and shape_scale("jordan", 16, 48) == 1.0
    assert shape_scale("spectral", 16, 64) == 0.5
    assert shape_scale("moonlight", 16, 64) == pytest.approx(0.2 * 8)
    with pytest.raises(ValueError, match="shape_scale"):
        shape_scale("rms", 2, 2)


def test_zero_grad_applies_only_weight_decay():
    p = nn.Parameter(torch.randn(8, 12))
    w0 = p.detach().clone()
    opt = optim.Muon([p], lr=0.05, weight_decay=0.2)
    p.grad = torch.zeros_like(p)
    opt.step()
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p.detach(), w0 * (1 - 0.05 * 0.2), rtol=0, atol=0)


def test_state_lazy_and_state_dict_round_trip():
    _, _, opt = _train(lambda ps: optim.Muon(ps, ns_dtype=torch.float32), steps=3)
    _w0, xs, ys = _problem()
    extra = nn.Parameter(torch.randn(4, 4))  # never gets a grad: no state (as torch.optim)
    fresh = optim.Muon([extra], ns_dtype=torch.float32)
    assert extra not in fresh.state

    def continue_from(state_dict, params):
        opt2 = optim.Muon(params, ns_dtype=torch.float32)
        opt2.load_state_dict(state_dict)
        for _ in range(3):
            opt2.zero_grad()
            sum(((p @ x - y) ** 2).sum() for p, x, y in zip(params, xs, ys)).backward()
            opt2.step()
        return [p.detach() for p in params]

    params_now = [p.detach().clone() for g in opt.param_groups for p in g["params"]]
    sd = opt.state_dict()
    a = continue_from(sd, [nn.Parameter(w.clone()) for w in params_now])
    b = continue_from(sd, [nn.Parameter(w.clone()) for w in params_now])
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    # and the same as 6 uninterrupted steps
    _, six, _ = _train(lambda ps: optim.Muon(ps, ns_dtype=torch.float32), steps=6)
    for x, y in zip(a, six):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-7)


def test_add_param_group_state_at_first_grad():
    a, b, c = (nn.Parameter(torch.randn(4, 6)) for _ in range(3))
    opt = optim.Muon([a])
    opt.add_param_group({"params": [b], "use_muon": False, "lr": 1e-3})
    opt.add_param_group({"params": [c]})
    assert b not in opt.state and c not in opt.state
    for p in (a, b, c):
        p.grad = torch.ones_like(p)
    before = b.detach().clone()
    opt.step()
    assert set(opt.state[b]) == {"step", "exp_avg", "exp_avg_sq"}
    assert set(opt.state[c]) == {"step", "momentum_buffer"}
    assert opt.state[b]["step"].item() == 1 and not torch.equal(before, b.detach())


def test_tensor_hyperparameters_match_floats():
    kw = {"ns_dtype": torch.float32}
    _, floats, _ = _train(lambda ps: optim.Muon(ps, lr=0.02, momentum=0.9, weight_decay=0.1, **kw), steps=5)
    _, tensors, opt = _train(
        lambda ps: optim.Muon(
            ps, lr=torch.tensor(0.02), momentum=torch.tensor(0.9), weight_decay=torch.tensor(0.1), **kw
        ),
        steps=5,
    )
    assert torch.is_tensor(opt.param_groups[0]["lr"])
    for a, b in zip(floats, tensors):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


@pytest.mark.parametrize("tensor_lr", [False, True])
def test_lr_scheduler_drives_muon_and_adamw_groups(tensor_lr):
    def lam(step):
        return 0.5**step

    def make(ps, lr=0.02):
        def val():  # one tensor per group: the scheduler fill_s each
            return torch.tensor(lr) if tensor_lr else lr

        return optim.Muon(
            [{"params": ps[:2]}, {"params": ps[2:], "use_muon": False, "lr": val()}], lr=val(), ns_dtype=torch.float32
        )

    _, sched_run, opt = _train(make, steps=4, scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lam))
    assert [float(g["lr"]) for g in opt.param_groups] == pytest.approx([0.02 * 0.5**4] * 2, rel=1e-6)

    class Manual:  # the same schedule set by hand
        def __init__(self, o):
            self.o, self.t = o, 0

        def step(self):
            self.t += 1
            for g in self.o.param_groups:
                if tensor_lr:
                    g["lr"].fill_(0.02 * lam(self.t))
                else:
                    g["lr"] = 0.02 * lam(self.t)

    _, manual_run, _ = _train(make, steps=4, scheduler=Manual)
    for a, b in zip(sched_run, manual_run):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_hybrid_adamw_group_matches_torch_adamw(monkeypatch):
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _torch_ns_fp32)
    adam_kw = {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.05}

    def ours(ps):
        return optim.Muon(
            [{"params": ps[:2]}, {"params": ps[2:], "use_muon": False, **adam_kw}],
            lr=0.02, weight_decay=0.1, ns_dtype=torch.float32,
        )

    class Pair:  # torch.optim.Muon + torch.optim.AdamW side by side
        def __init__(self, ps):
            self.opts = [torch.optim.Muon(ps[:2], lr=0.02, weight_decay=0.1), torch.optim.AdamW(ps[2:], **adam_kw)]

        def zero_grad(self):
            for o in self.opts:
                o.zero_grad()

        def step(self):
            for o in self.opts:
                o.step()

    _, got, opt = _train(ours, steps=10)
    _, ref, _ = _train(Pair, steps=10)
    for r, g in zip(ref, got):
        assert ((g - r).abs().max() / r.abs().max()).item() <= 1e-5
    assert set(opt.state_dict()["state"][2]) == {"step", "exp_avg", "exp_avg_sq"}


def test_conv_filters_are_flattened():
    gen = torch.Generator().manual_seed(5)
    w0 = torch.randn(8, 3, 3, 3, generator=gen)
    g = torch.randn(8, 3, 3, 3, generator=gen)
    p = nn.Parameter(w0.clone())
    opt = optim.Muon([p], lr=0.1, ns_dtype=torch.float32)
    p.grad = g.clone()
    opt.step()
    o = newton_schulz(g.reshape(8, 27), dtype=torch.float32).reshape_as(g)
    torch.testing.assert_close(p.detach(), w0 - 0.1 * o, rtol=1e-5, atol=1e-6)  # jordan: max(1, 8/27) = 1


def test_bf16_params_stochastic_rounding_is_unbiased():
    """Updates of a fraction of a bf16 ulp: nearest rounding loses them (a bias of -|update|
    along the update's sign), SR keeps them on average (Zamirai et al., arXiv 2010.06192).
    Statistic: mean((p_bf16 - w)·sign(w - 1)) with w the fp32 result; for SR it is 0 within 4 SE,
    SE <= (2^-7/2)/sqrt(128²) = 3.1e-5 (ulp 2^-7 above 1, 2^-8 below)."""
    gen = torch.Generator().manual_seed(6)
    g = torch.randn(128, 128, generator=gen).to(torch.bfloat16)
    lr = 0.01  # |update| ~ lr/sqrt(128) = 8.8e-4 RMS: ~0.2 ulp
    w = 1.0 - lr * newton_schulz(g.float(), dtype=torch.float32)  # what fp32 math produces
    direction = torch.sign(w - 1.0)
    stats = {}
    for sr in (False, True):
        p = nn.Parameter(torch.ones(128, 128, dtype=torch.bfloat16))
        opt = optim.Muon([p], lr=lr, ns_dtype=torch.float32, stochastic_rounding=sr, seed=3)
        p.grad = g.clone()
        opt.step()
        assert opt.state[p]["momentum_buffer"].dtype == torch.float32  # created by the step
        assert p.dtype == torch.bfloat16
        got = p.detach().float()
        stats[sr] = ((got - w) * direction).mean().item()
        if sr:  # every entry is one of w's two bf16 neighbours (w > 0: truncation = floor)
            down = (w.view(torch.int32) & -65536).view(torch.float32)
            up = ((w.view(torch.int32) & -65536) + 65536).view(torch.float32)
            assert ((got == down) | (got == up)).all()
    se = 2.0**-8 / 128
    print(f"bias along the update: nearest {stats[False]:.2e}, SR {stats[True]:.2e}, 4 SE {4 * se:.1e}")
    assert abs(stats[True]) <= 4 * se
    assert stats[False] < -8 * se  # the case SR exists for: nearest loses the update


def test_bf16_state_stays_fp32_after_load():
    p = nn.Parameter(torch.ones(8, 8, dtype=torch.bfloat16))
    opt = optim.Muon([p])
    p.grad = torch.randn(8, 8).to(torch.bfloat16)
    opt.step()
    opt2 = optim.Muon([p])
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[p]["momentum_buffer"].dtype == torch.float32
    assert torch.equal(opt2.state[p]["momentum_buffer"], opt.state[p]["momentum_buffer"])


class _TinyLlama(nn.Module):
    def __init__(self, tied: bool = False):
        super().__init__()
        self.embed_tokens = nn.Embedding(50, 16)
        self.layers = nn.ModuleList(
            nn.ModuleDict(
                {
                    "q_proj": nn.Linear(16, 16, bias=False), "k_proj": nn.Linear(16, 8, bias=False),
                    "v_proj": nn.Linear(16, 8, bias=False), "o_proj": nn.Linear(16, 16, bias=False),
                    "gate_proj": nn.Linear(16, 40, bias=False), "down_proj": nn.Linear(40, 16, bias=True),
                    "input_layernorm": nn.RMSNorm(16),
                }
            )
            for _ in range(2)
        )
        self.norm = nn.RMSNorm(16)
        self.lm_head = nn.Linear(16, 50, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight


@pytest.mark.parametrize("tied", [False, True])
def test_routing_by_name(tied):
    model = _TinyLlama(tied)
    routes = route_params(model)
    assert all(".proj" not in n for n in routes["adamw"])
    hidden = {f"layers.{i}.{m}.weight" for i in range(2)
              for m in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj")}
    assert set(routes["muon"]) == hidden
    assert "embed_tokens.weight" in routes["adamw"] and "norm.weight" in routes["adamw"]
    assert ("lm_head.weight" in routes["adamw"]) != tied  # a tied head is listed once, by its first name
    assert "layers.0.down_proj.bias" in routes["adamw"]
    groups = muon_param_groups(model, adamw={"lr": 3e-4})
    opt = optim.Muon(groups, lr=0.02)
    assert [g["use_muon"] for g in opt.param_groups] == [True, False]
    assert opt.param_groups[1]["lr"] == 3e-4 and opt.param_groups[0]["lr"] == 0.02
    n_params = len({id(p) for p in model.parameters()})
    assert sum(len(g["params"]) for g in opt.param_groups) == n_params
    x = torch.randint(0, 50, (2, 5))
    h = model.embed_tokens(x)
    for layer in model.layers:
        h = h + layer["o_proj"](layer["q_proj"](layer["input_layernorm"](h)))
        h = h + layer["down_proj"](torch.relu(layer["gate_proj"](h)))
    model.lm_head(model.norm(h)).sum().backward()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    moved = [n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert "embed_tokens.weight" in moved and "layers.0.q_proj.weight" in moved
    assert tied or "lm_head.weight" in moved


def test_bad_input_errors():
    with pytest.raises(ValueError, match="use_muon=False"):
        optim.Muon([nn.Parameter(torch.ones(4))])
    with pytest.raises(ValueError, match="shape_scale"):
        optim.Muon([nn.Parameter(torch.ones(4, 4))], shape_scale="rms")
    with pytest.raises(ValueError, match="distributed_mode"):
        optim.Muon([nn.Parameter(torch.ones(4, 4))], distributed_mode="zero")
    with pytest.raises(ValueError, match="lr"):
        optim.Muon([nn.Parameter(torch.ones(4, 4))], lr=-1.0)
    with pytest.raises(ValueError, match="polar_express"):
        opt = optim.Muon([nn.Parameter(torch.ones(4, 4))], coefficients="polar")
        opt.param_groups[0]["params"][0].grad = torch.ones(4, 4)
        opt.step()


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_has_the_same_bits_for_a_number_and_a_tensor_mu(foreach, nesterov):
    """M <- G + μM and U = G + μM in one pass each (add with alpha for a number, addcmul for a
    0-d tensor, as a compiled step passes it): the same bits either way, and within one fp32
    rounding of G + μM computed in float64."""
    from optim.muon import muon_momentum_

    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(64, 32, generator=gen), torch.randn(16, 8, generator=gen)]
    start = [torch.randn(64, 32, generator=gen), torch.randn(16, 8, generator=gen)]
    outs = []
    for mu in (0.95, torch.tensor(0.95, dtype=torch.float64)):
        bufs = [b.clone() for b in start]
        us = muon_momentum_(bufs, grads, mu, nesterov=nesterov, foreach=foreach)
        outs.append((bufs, us))
    for a, b in zip(outs[0][0] + outs[0][1], outs[1][0] + outs[1][1]):
        assert torch.equal(a, b)
    mu32 = float(torch.tensor(0.95))  # the fp32 μ the kernels multiply by
    for m0, g, m in zip(start, grads, outs[0][0]):
        terms = g.double().abs() + mu32 * m0.double().abs()
        err = (m.double() - (g.double() + mu32 * m0.double())).abs()
        assert torch.all(err <= 2**-23 * terms)  # at most one fp32 rounding of the sum's terms
