"""Scion (Pethick et al.) LMOs have their defining properties; SCG stays in the ball;
uSCG/SCG = AdamW form."""

import copy
import math

import pytest
import torch
from torch import nn

import optim
from optim import norms
from optim.lmo import Auto, BiasRMS, ColNorm, RowNorm, Sign, Spectral, SpectralConv, resolve_norm
from optim.newton_schulz import band
from optim.stochastic_rounding import stochastic_round_

SHAPES = [(16, 32), (32, 16), (24, 24)]
RHO = 2.5
BF16_SLACK = 2 * 2.0**-8
"""Relative widening of the NS band for the bf16 iteration: two bf16 unit roundoffs (measured ≤ 0.3%)."""


def _g(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _rms_to_rms_svals(s: torch.Tensor) -> torch.Tensor:
    """All singular values of s in RMS→RMS units: σ_i·sqrt(d_in/d_out)."""
    return torch.linalg.svdvals(s.double()) * math.sqrt(s.shape[1] / s.shape[0])


@pytest.mark.parametrize("shape", SHAPES)
def test_spectral_svd_singular_values_equal_scale(shape):
    s = Spectral(method="svd").lmo(_g(shape), RHO)
    err = (_rms_to_rms_svals(s) - RHO).abs().max().item() / RHO
    print(f"Spectral(svd) {shape}: max |σ_rms/ρ - 1| = {err:.2e}")
    assert err < 1e-6
    # it is the LMO: ⟨g, lmo(g)⟩ = -ρ·factor·‖g‖_nuclear
    g = _g(shape)
    inner = (g.double() * s.double()).sum().item()
    nuclear = torch.linalg.svdvals(g.double()).sum().item()
    assert math.isclose(inner, -RHO * math.sqrt(shape[0] / shape[1]) * nuclear, rel_tol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
def test_spectral_newton_schulz_inside_coefficient_band(shape):
    g = _g(shape)
    sv = torch.linalg.svdvals(g.double())
    lo, hi = band("jordan", 5, (sv.min() / sv.norm()).item())
    got = _rms_to_rms_svals(Spectral().lmo(g, RHO)) / RHO
    print(f"Spectral(NS jordan) {shape}: σ/ρ in [{got.min():.4f}, {got.max():.4f}], band [{lo:.4f}, {hi:.4f}]")
    assert got.min() >= lo * (1 - BF16_SLACK) and got.max() <= hi * (1 + BF16_SLACK)


def test_spectral_shape_factors():
    g = _g((8, 32))
    s = Spectral(method="svd", normalized=False).direction(g)
    assert torch.allclose(torch.linalg.svdvals(s), torch.full((8,), math.sqrt(8.0)), rtol=1e-5)
    s = Spectral(method="svd", max=True).direction(g)  # sqrt(8/32) = 0.5 floored at 1
    assert torch.allclose(torch.linalg.svdvals(s), torch.ones(8), rtol=1e-5)
    s = Spectral(method="svd", max=True).direction(_g((32, 8)))  # sqrt(32/8) = 2
    assert torch.allclose(torch.linalg.svdvals(s), torch.full((8,), 2.0), rtol=1e-5)


def test_sign_entries():
    g = _g((12, 20))
    s = Sign().lmo(g, RHO)
    assert torch.equal(s.abs(), torch.full_like(s, RHO / 20)) and torch.equal(torch.sign(s), -torch.sign(g))
    assert torch.equal(Sign(normalized=False).direction(g), torch.sign(g))


def test_colnorm_rownorm_biasrms():
    g = _g((12, 20))
    col = ColNorm().lmo(g, RHO)
    assert torch.allclose(col.pow(2).mean(dim=0).sqrt(), torch.full((20,), RHO), rtol=1e-5)
    tcol = ColNorm(transpose=True).lmo(g, RHO)  # embedding [vocab, dim]: token rows to RMS ρ
    assert torch.allclose(tcol.pow(2).mean(dim=1).sqrt(), torch.full((12,), RHO), rtol=1e-5)
    ncol = ColNorm(normalized=True).lmo(g, RHO)
    assert torch.allclose(ncol.pow(2).mean(dim=0).sqrt(), torch.full((20,), RHO / 20), rtol=1e-5)
    row = RowNorm().lmo(g, RHO)
    assert torch.allclose(row.norm(dim=1), torch.full((12,), RHO / math.sqrt(20)), rtol=1e-5)
    urow = RowNorm(normalized=False).lmo(g, RHO)
    assert torch.allclose(urow.norm(dim=1), torch.full((12,), RHO), rtol=1e-5)
    b = BiasRMS().lmo(_g((33,)), RHO)
    assert math.isclose(b.pow(2).mean().sqrt().item(), RHO, rel_tol=1e-5)
    assert torch.equal(BiasRMS().direction(torch.zeros(5)), torch.zeros(5))  # eps: no NaN


# each LMO with the ``optim.norms`` norm whose unit ball it targets, and that norm's value on s
GEOMETRY = [
    (Spectral(method="svd"), lambda w: norms.rms_to_rms(w)),
    (ColNorm(), lambda w: norms.l1_to_rms(w)),
    (ColNorm(transpose=True), lambda w: norms.l1_to_rms(w, transpose=True)),
    (RowNorm(), lambda w: norms.rms_to_inf(w)),
    (Sign(), lambda w: norms.supremum(w) * w.shape[1]),
]


@pytest.mark.parametrize("lmo,norm", GEOMETRY, ids=lambda x: getattr(x, "name", ""))
def test_lmo_and_init_on_the_unit_sphere_of_their_norm(lmo, norm):
    s = lmo.direction(_g((24, 40)))
    assert math.isclose(norm(s).item(), 1.0, rel_tol=1e-5)
    w = lmo.init_(torch.empty(24, 40), generator=torch.Generator().manual_seed(1))
    assert math.isclose(norm(w).item(), 1.0, rel_tol=1e-5)


def test_auto_dispatch_and_spectral_conv():
    assert Auto().pick(4) == SpectralConv() and Auto().pick(2) == Spectral() and Auto().pick(1) == BiasRMS()
    g = _g((8, 4, 3, 3))
    s = Auto(method="svd").direction(g)
    flat = s.reshape(8, -1)  # polar of [8, 36] times sqrt(8/4)/3²
    assert torch.allclose(torch.linalg.svdvals(flat), torch.full((8,), math.sqrt(2) / 9), rtol=1e-5)
    assert resolve_norm("colnorm", transpose=True) == ColNorm(transpose=True)
    with pytest.raises(ValueError, match="did you mean 'Spectral'"):
        resolve_norm("Spectrall")


def _scion_reference(w0, grads, *, lr, beta, rho, lmo, lam):
    """AdamW-form reference: d ← (1-α)d + αg; W ← W(1 - η·λ) - η·s(d), η = γρ."""
    w, d = w0.clone(), torch.zeros_like(w0)
    eta = lr * rho
    for g in grads:
        d = beta * d + (1 - beta) * g
        w = w * (1 - eta * lam) - eta * lmo.direction(d)
    return w


@pytest.mark.parametrize("constrained", [True, False])
def test_scg_and_uscg_equal_adamw_form(constrained):
    lmo, lr, beta, rho = Spectral(method="svd"), 0.05, 0.9, 3.0
    p = nn.Parameter(_g((16, 8), seed=3))
    w0 = p.detach().clone()
    grads = [_g((16, 8), seed=10 + t) for t in range(20)]
    opt = optim.Scion([p], lr=lr, momentum=beta, norm=lmo, scale=rho, constrained=constrained)
    for g in grads:
        p.grad = g
        opt.step()
    ref = _scion_reference(w0, grads, lr=lr, beta=beta, rho=rho, lmo=lmo, lam=1 / rho if constrained else 0.0)
    assert torch.allclose(p.detach(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("lmo,norm", GEOMETRY, ids=lambda x: getattr(x, "name", ""))
def test_constrained_update_stays_in_ball(lmo, norm):
    p = nn.Parameter(torch.empty(24, 40))
    opt = optim.Scion([p], lr=0.2, momentum=0.5, norm=lmo, scale=RHO)
    opt.init()
    assert norm(p.detach()).item() <= RHO * (1 + 1e-5)
    for t in range(30):
        p.grad = _g((24, 40), seed=t) * (10.0 if t % 2 else 0.1)
        opt.step()
        assert norm(p.detach()).item() <= RHO * (1 + 1e-5), t


def test_ns_constrained_update_stays_in_inflated_ball():
    """With NS5 the LMO output has RMS→RMS norm ≤ band_hi·ρ, so SCG keeps ‖W‖ ≤ band_hi·ρ."""
    p = nn.Parameter(torch.empty(16, 32))
    opt = optim.Scion([p], lr=0.3, momentum=0.0, norm="Spectral", scale=RHO)
    opt.init()
    hi = band("jordan", 5, 1e-3)[1] * (1 + BF16_SLACK)
    for t in range(20):
        p.grad = _g((16, 32), seed=t)
        opt.step()
        assert norms.rms_to_rms(p.detach()).item() <= hi * RHO


def test_momentum_zero_means_raw_gradient_and_state_lazy():
    p = nn.Parameter(torch.zeros(4, 4))
    opt = optim.Scion([p], lr=1.0, momentum=0.0, norm=Sign(), scale=1.0, constrained=False)
    assert p not in opt.state  # before any grad: no state (as torch.optim)
    p.grad = _g((4, 4))
    opt.step()
    assert set(opt.state[p]) == {"step", "momentum_buffer"}
    assert torch.equal(p.detach(), -torch.sign(p.grad) / 4)
    with pytest.raises(ValueError):
        optim.Scion([p], momentum=1.0)
    with pytest.raises(ValueError):
        optim.Scion([{"params": [p], "unconstrained": True}])


def test_state_dict_round_trip_and_tensor_lr():
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4))
    a, b = make(), make()
    groups = lambda m: [{"params": [m[0].weight], "norm": ColNorm(), "scale": 2.0},
                        {"params": [m[1].weight], "norm": "Spectral", "norm_kwargs": {"method": "svd"}},
                        {"params": [m[0].bias, m[1].bias], "norm": BiasRMS(), "constrained": False}]
    opt_a = optim.Scion(groups(a), lr=torch.tensor(0.01))
    x = _g((5, 8))
    for _ in range(3):
        opt_a.zero_grad()
        a(x).square().sum().backward()
        opt_a.step()
    sd = copy.deepcopy(opt_a.state_dict())
    b.load_state_dict(a.state_dict())
    opt_b = optim.Scion(groups(b), lr=torch.tensor(0.01))
    opt_b.load_state_dict(sd)
    assert opt_b.param_groups[1]["norm"] == Spectral(method="svd")
    for m, opt in ((a, opt_a), (b, opt_b)):
        for _ in range(3):
            opt.zero_grad()
            m(x).square().sum().backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_bf16_params_with_stochastic_rounding():
    p = nn.Parameter(_g((8, 8)).to(torch.bfloat16))
    w0 = p.detach().float()
    opt = optim.Scion([p], lr=0.01, momentum=0.0, norm=Sign(), scale=1.0, stochastic_rounding=True, seed=3)
    p.grad = _g((8, 8), seed=1).to(torch.bfloat16)
    opt.step()
    expect_fp32 = w0 * (1 - 0.01) - 0.01 * torch.sign(p.grad.float()) / 8
    expect = stochastic_round_(torch.empty_like(p), expect_fp32, seed=3, step=1, param_id=0)
    assert p.dtype == torch.bfloat16 and torch.equal(p.detach(), expect)


class _TinyLlama(nn.Module):
    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(nn.ModuleDict({"wq": nn.Linear(d, d, bias=False)}) for _ in range(2))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(d))
        self.lm_head = nn.Linear(d, vocab, bias=False)


def test_default_param_groups_and_init():
    model = _TinyLlama()
    groups = optim.scion_param_groups(model)
    by_norm = {type(g["norm"]).__name__: g for g in groups}
    assert by_norm["ColNorm"]["norm"] == ColNorm(transpose=True) and by_norm["ColNorm"]["scale"] == 1.0
    assert by_norm["ColNorm"]["params"] == [model.tok_emb.weight]
    assert by_norm["Spectral"]["scale"] == 3.0 and len(by_norm["Spectral"]["params"]) == 2
    assert by_norm["Sign"]["scale"] == 10.0 and by_norm["Sign"]["params"] == [model.lm_head.weight]
    assert by_norm["BiasRMS"]["params"] == [model.norm.weight]
    assert by_norm["BiasRMS"]["constrained"] is False and by_norm["BiasRMS"]["init"] is False
    opt = optim.Scion(groups, lr=2**-10, momentum=0.9)
    opt.init()
    assert torch.equal(model.norm.weight.detach(), torch.ones(16))  # gains keep their init
    emb = model.tok_emb.weight.detach()
    assert torch.allclose(emb.pow(2).mean(dim=1).sqrt(), torch.ones(32), rtol=1e-5)
    assert torch.allclose(model.lm_head.weight.detach().abs(), torch.full((32, 16), 10.0 / 16))
    assert math.isclose(norms.rms_to_rms(model.layers[0]["wq"].weight).item(), 3.0, rel_tol=1e-5)
    assert [len(g["params"]) for g in optim.scion_param_groups(model, vectors="exclude")] == [1, 2, 1]
